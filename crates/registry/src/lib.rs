//! Resolve which platforms a container image supports, straight from its registry, without pulling
//! layers. This crate knows nothing of Kubernetes.

pub mod auth;
pub mod cache;
pub mod challenge;
pub mod client;
pub mod config;
pub mod credential;
pub mod credentials;
pub mod error;
pub mod manifest;
pub mod metrics;
pub mod platform;
pub mod proxies;
pub mod reference;
pub mod resolver;
pub mod ssrf;
pub mod walk;

pub use config::Config;
pub use credential::{Credential, CredentialCandidate};
pub use error::Error;
pub use platform::Platform;
pub use reference::Reference;
pub use resolver::{Resolution, Resolver};
