//! The names the decision reads and writes: pod labels and annotations of ours, and the node
//! labels of a node's platform.

/// Pod label: `"true"` leaves the pod alone.
pub const SKIP_LABEL: &str = "arch.noe.adevinta.com/skip";
/// Pod label (and namespace label): the preferred architecture.
pub const PREFERRED_LABEL: &str = "arch.noe.adevinta.com/preferred";
/// Pod annotation written on every pod we constrain: the common architectures, comma-separated.
pub const PLATFORMS_ANNOTATION: &str = "arch.noe.adevinta.com/platforms";
/// Pod annotation written when platforms of the pod's images were proven false: each correction
/// applied (image, platform, source, evidence), a JSON array of at most 1 KiB.
pub const CORRECTIONS_ANNOTATION: &str = "arch.noe.adevinta.com/corrections";
/// Pod annotation written in audit mode: what enforcement would have done.
pub const AUDIT_ANNOTATION: &str = "arch.noe.adevinta.com/audit";
/// The node label of the CPU architecture.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
/// The deprecated node label of the CPU architecture.
pub const BETA_ARCH_LABEL: &str = "beta.kubernetes.io/arch";
/// The node label of the operating system.
pub const OS_LABEL: &str = "kubernetes.io/os";
/// The node label of a Windows node's build (`major.minor.build`).
pub const WINDOWS_BUILD_LABEL: &str = "node.kubernetes.io/windows-build";
