//! What the server reports about itself: `noe_build_info{version,revision}` and, on Linux, the
//! `process_*` metrics (resident memory, CPU seconds, open file descriptors, start time), so
//! rollouts and memory can be watched without cAdvisor.

use prometheus::{IntGaugeVec, Opts, Registry};

/// The crate's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The commit the binary was built from (crates/noe/build.rs), or `unknown`.
pub const REVISION: &str = match option_env!("NOE_BUILD_REVISION") {
    Some(revision) => revision,
    None => "unknown",
};

/// Registers both on `registry`.
pub fn register(registry: &Registry) -> Result<(), prometheus::Error> {
    let info = IntGaugeVec::new(
        Opts::new(
            "noe_build_info",
            "Always 1: the version and the source revision of the running binary",
        ),
        &["version", "revision"],
    )?;
    info.with_label_values(&[VERSION, REVISION]).set(1);
    registry.register(Box::new(info))?;
    #[cfg(target_os = "linux")]
    registry.register(Box::new(
        prometheus::process_collector::ProcessCollector::for_self(),
    ))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_info_and_process_metrics_are_exposed() -> Result<(), prometheus::Error> {
        let registry = Registry::new();
        register(&registry)?;
        let names: Vec<String> = registry
            .gather()
            .iter()
            .map(|family| family.name().to_owned())
            .collect();
        assert!(names.iter().any(|n| n == "noe_build_info"), "{names:?}");
        #[cfg(target_os = "linux")]
        for want in [
            "process_resident_memory_bytes",
            "process_cpu_seconds_total",
            "process_open_fds",
            "process_start_time_seconds",
        ] {
            assert!(
                names.iter().any(|n| n == want),
                "{want} missing from {names:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn the_revision_is_a_bounded_label_value() {
        assert!(!REVISION.is_empty() && REVISION.len() <= 64, "{REVISION}");
    }
}
