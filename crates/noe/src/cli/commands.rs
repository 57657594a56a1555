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

/// The commands' exit codes, one per cause (docs/configuration.md gives each command's); a
/// command exits with the first that applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Done, and nothing the command checks for was found: every pod would be admitted
    /// (`explain`), no workload has a `--fail-on` verdict (`report`).
    Passed = 0,
    /// What the command checks for was found: a pod would be denied (`explain`), a workload
    /// has a `--fail-on` verdict for a target architecture (`report`).
    Failed = 1,
    /// The command cannot run: flags, unreadable or unusable files (including a document the
    /// API server would refuse), the registry configuration, no Kubernetes API access.
    Unusable = 2,
    /// Part of the answer is missing: an image's platforms could not be found (`explain`
    /// without `--allow-lookup-errors`), part of the source could not be read (`report`).
    Incomplete = 3,
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        std::process::ExitCode::from(exit as u8)
    }
}

/// The exit code of a command's `result`: its [`Exit`], or the reason it cannot run said on
/// stderr and [`Exit::Unusable`].
pub(crate) fn exit(result: Result<Exit, impl std::fmt::Display>) -> std::process::ExitCode {
    match result {
        Ok(exit) => exit.into(),
        Err(reason) => {
            eprintln!("noe: {reason}");
            Exit::Unusable.into()
        }
    }
}

/// The Kubernetes client `settings` configure; else, the reason said on stderr,
/// [`Exit::Unusable`] (no API access could be configured), which every subcommand that needs the
/// API returns.
async fn kube_client(
    settings: &crate::config::KubeSettings,
) -> Result<kube::Client, std::process::ExitCode> {
    crate::app::kube_client(settings).await.map_err(|error| {
        eprintln!("noe: {}", noe_webhook::resolve::one_line(&error));
        Exit::Unusable.into()
    })
}
