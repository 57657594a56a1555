//! The decision tables (docs/architecture.md, "The decision"): input pod, image platforms, facts
//! and policy → verdict, patch, warnings and signals. Each produced patch is checked to address
//! only the original object (minimal, no op writing into a parent another op creates), applied
//! with the `json-patch` crate, parsed as a `k8s_openapi` Pod, judged by where the scheduler may
//! place it, and decided again (a reinvocation) to need nothing more.
//!
//! `cases_noe` holds noe's behaviour and how noe-rs differs from it (its `noe:` lines feed
//! docs/compatibility.md); `cases_peers` the rules that come from our peers and our own design:
//! pods that pin some or all of their terms, DaemonSet pods, image volumes, the fallback arch,
//! contradictions, the namespace preference, the pod's own preference, per-arch settings and
//! audit mode; `cases_nodes` what the cluster's nodes change (`--watch-nodes`, `auto`).

#[test]
fn noe_cases() {
    super::runner::run(super::cases_noe::cases());
}

#[test]
fn peer_and_design_cases() {
    super::runner::run(super::cases_peers::cases());
}

#[test]
fn node_awareness_cases() {
    super::runner::run(super::cases_nodes::cases());
}
