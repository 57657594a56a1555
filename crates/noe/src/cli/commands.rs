//! The subcommands besides serving (`crate::serve`): each its own flags (`*Args`) and its `run`,
//! with what several share (the progress line, the registry hosts that timed out, the
//! `--target-arch` value, the plain-HTTP hint).

pub mod arch;
pub mod explain;
pub mod hosts;
pub mod inspect;
pub mod learned;
pub mod plain_http;
pub mod progress;
pub mod report;
pub mod ungate;
pub mod untaint;
