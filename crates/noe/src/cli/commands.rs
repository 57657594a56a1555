//! The subcommands besides serving (`crate::serve`): each its own flags (`*Args`) and its `run`,
//! with what two of them share (the progress line, the registry hosts that timed out).

pub mod explain;
pub mod hosts;
pub mod inspect;
pub mod learned;
pub mod progress;
pub mod report;
pub mod ungate;
pub mod untaint;
