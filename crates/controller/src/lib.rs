//! noe-rs controllers (docs/architecture.md, "Controllers"): node awareness, pod remediation,
//! node taints by arch and leader election, on kube-runtime.
