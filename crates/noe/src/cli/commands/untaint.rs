//! `noe untaint`: removes the arch taint (`arch.noe.adevinta.com/arch`, effect `NoSchedule`)
//! the controller keeps on nodes (`--taint-arches`), from every node that carries it. Others'
//! taints, and other effects under our key, are left as they are. A running controller with
//! `--taint-arches` puts its taints back: remove the flag first (docs/configuration.md).

use std::io::Write as _;
use std::process::ExitCode;

use clap::Args;
use noe_controller::taints::{TAINT_EFFECT, TAINT_KEY};
use noe_webhook::resolve::one_line;

use crate::config;

/// The field manager of our writes (as the controllers').
const FIELD_MANAGER: &str = "noe";

#[derive(Clone, Debug, Args)]
pub struct UntaintArgs {}

/// Prints one line per node changed (`node/NAME: removed KEY:EFFECT`) and a summary on stderr.
/// Exit codes: 0 done (also when no node carried the taint), 1 the API could not be reached or
/// a node could not be changed (it is idempotent: run it again), 2 no API access could be
/// configured.
pub async fn run(config: config::Untaint) -> ExitCode {
    let client = match super::kube_client(&config.kube).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    match noe_controller::untaint(client, FIELD_MANAGER).await {
        Ok(nodes) => {
            let mut stdout = std::io::stdout().lock();
            for node in &nodes {
                if writeln!(stdout, "node/{node}: removed {TAINT_KEY}:{TAINT_EFFECT}").is_err() {
                    return ExitCode::FAILURE;
                }
            }
            eprintln!("noe: {} node(s) untainted", nodes.len());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("noe: {}", one_line(&error));
            ExitCode::FAILURE
        }
    }
}
