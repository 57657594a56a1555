//! Credential sources: docker config files, containerd configuration, kubelet credential provider
//! plugins, and kubelet-style image pattern matching. They produce [`crate::CredentialCandidate`]s.

pub mod matching;

pub use matching::image_matches;
pub mod docker_config;
pub mod exec;
pub mod provider;
