//! How to reach the Kubernetes API: the server (pull secrets, controllers) and `noe untaint`.

use std::path::PathBuf;

use clap::Args;

use super::parse::non_empty_path;
use crate::config::KubeSettings;

#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Kubernetes API")]
pub struct KubeArgs {
    /// kubeconfig for out-of-cluster API access; without it, as kubectl: $KUBECONFIG, then
    /// ~/.kube/config, then (in a pod) the in-cluster config.
    #[arg(long, value_parser = super::parse::any_path)]
    pub kubeconfig: Option<PathBuf>,
}

impl KubeArgs {
    /// Where the API client's configuration comes from.
    pub fn settings(&self) -> KubeSettings {
        KubeSettings {
            kubeconfig: non_empty_path(&self.kubeconfig).cloned(),
        }
    }
}
