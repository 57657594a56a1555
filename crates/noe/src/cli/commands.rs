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

/// The Kubernetes client `settings` configure; else, the reason said on stderr, exit code 2 (no
/// API access could be configured), which every subcommand that needs the API returns.
async fn kube_client(
    settings: &crate::config::KubeSettings,
) -> Result<kube::Client, std::process::ExitCode> {
    crate::app::kube_client(settings).await.map_err(|error| {
        eprintln!("noe: {}", noe_webhook::resolve::one_line(&error));
        std::process::ExitCode::from(2)
    })
}
