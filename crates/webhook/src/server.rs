//! The serving process: the HTTPS admission endpoint, metrics and health probes.

use std::process::ExitCode;

use crate::args::{PolicyArgs, RegistryArgs, ServerArgs};

pub async fn run(server: ServerArgs, policy: PolicyArgs, registry: RegistryArgs) -> ExitCode {
    let _ = (server, policy, registry);
    ExitCode::FAILURE
}
