//! The decision of DESIGN.md §2: a pure function from the raw pod, the platforms of its images and
//! the policy to a verdict (unchanged, patch or denial), admission warnings and metric signals.
//!
//! It works on the raw pod JSON so fields newer than our k8s-openapi survive, and it does no I/O:
//! the server looks the images up ([`pod_images`]) unless [`should_skip`] / [`needs_lookups`]
//! say it need not, then calls [`decide`].

mod outcome;
mod platforms;
mod pod;
mod policy;
mod write;

use std::collections::BTreeMap;

use serde_json::Value;

pub use outcome::{selector, Decision, Signal, SkipReason, Verdict};
pub use pod::{pod_images, should_skip};
pub use policy::{parse_arch_tolerations, OnLookupError, Policy, PolicyError, PreferenceMode};

/// Pod label: `"true"` leaves the pod alone.
pub const SKIP_LABEL: &str = "arch.noe.adevinta.com/skip";
/// Pod label: the pod's preferred architecture.
pub const PREFERRED_LABEL: &str = "arch.noe.adevinta.com/preferred";
/// Pod annotation written on every pod we constrain: the common architectures, comma-separated.
pub const PLATFORMS_ANNOTATION: &str = "arch.noe.adevinta.com/platforms";
/// The node label of the CPU architecture.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
/// The deprecated node label of the CPU architecture.
pub const BETA_ARCH_LABEL: &str = "beta.kubernetes.io/arch";
/// The node label of the operating system.
pub const OS_LABEL: &str = "kubernetes.io/os";

/// The HTTP status code of a denial.
pub const DENY_CODE: u16 = 403;

/// The platforms of each image (keyed by the reference as written in the pod), or why they could
/// not be found. An image of [`pod_images`] missing from the map counts as a failed lookup.
pub type Lookups = BTreeMap<String, Result<std::sync::Arc<[noe_registry::Platform]>, String>>;

/// Whether [`decide`] will read the lookups for this pod: false when step 1 skips it, when the
/// pod constrains its architecture itself (step 2, outside the reinvocation exception) or when
/// it has no image. The server can then call `decide` with empty lookups.
pub fn needs_lookups(pod: &Value) -> bool {
    images_to_look_up(pod).is_some()
}

/// The images [`decide`] will read lookups for ([`pod_images`]), or `None` when it reads none
/// (see [`needs_lookups`]).
pub fn images_to_look_up(pod: &Value) -> Option<Vec<String>> {
    if should_skip(pod).is_some() || pod::arch_constraint(pod).is_err() {
        return None;
    }
    Some(pod_images(pod)).filter(|images| !images.is_empty())
}

/// Decides what to do with a pod being created (DESIGN.md §2, steps 1–10).
pub fn decide(pod: &Value, lookups: &Lookups, policy: &Policy) -> Decision {
    let mut decision = Decision {
        verdict: Verdict::Unchanged {
            reason: SkipReason::NodeName,
        },
        warnings: Vec::new(),
        signals: Vec::new(),
    };
    if let Some(reason) = should_skip(pod) {
        decision.signals.push(Signal::Skipped { reason });
        decision.verdict = Verdict::Unchanged { reason };
        return decision;
    }
    let ours = match pod::arch_constraint(pod) {
        Ok(ours) => ours,
        Err(reason) => return write::labels_only(pod, policy, reason, decision),
    };
    let images = pod_images(pod);
    if images.is_empty() {
        return write::labels_only(pod, policy, SkipReason::NoImages, decision);
    }
    let os = pod::pod_os(pod, &policy.system_os);
    let common = match platforms::common_archs(&images, lookups, policy, &os, &mut decision) {
        Some(common) => common,
        None => return decision,
    };
    write::constrain(pod, policy, common, ours, decision)
}
