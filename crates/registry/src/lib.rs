//! Resolve which platforms a container image supports, straight from its registry, without pulling
//! layers. This crate knows nothing of Kubernetes.

pub mod credential;
pub mod credentials;
pub mod platform;

pub use credential::{Credential, CredentialCandidate};
pub use platform::Platform;
