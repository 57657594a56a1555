//! The flag groups, each a clap `Args` flattened into [`super::Args`], and what they turn into
//! ([`crate::config`]): one file per group, the value parsers they share ([`parse`]), the Go
//! spellings normalised before clap parses ([`go_flags`]).

pub mod controller;
pub mod go_flags;
pub mod kube;
pub mod logging;
pub mod parse;
pub mod policy;
pub mod registry;
pub mod server;

pub use controller::{ControllerArgs, TaintArgs};
pub use kube::KubeArgs;
pub use logging::{LogArgs, LogFormat};
pub use parse::ConfigError;
pub use policy::PolicyArgs;
pub use registry::RegistryArgs;
pub use server::ServerArgs;
