//! The decision (docs/architecture.md, "The decision"): a pure function from the raw pod, the
//! platforms of its images, what the admission found out about its surroundings and the policy
//! to a verdict (unchanged, patch or denial), admission warnings and metric signals.
//!
//! It works on the raw pod JSON so fields newer than our k8s-openapi survive, and it does no I/O.
//! The admission reads the pod once with [`plan`], looks up [`Plan::images`], gathers [`Facts`],
//! then calls [`decide`]. Debug containers added to a running pod are checked by
//! [`check_ephemeral`].

mod architectures;
mod audit;
mod cluster;
mod constrain;
mod ephemeral;
mod facts;
mod outcome;
mod pod;
mod policy;
mod read;
mod support;
mod terms;
mod text;
mod tolerations;
mod windows;

use std::collections::BTreeSet;

pub use crate::images::ephemeral as ephemeral_images;
pub use architectures::{ArchSettings, Architectures};
pub use ephemeral::check_ephemeral;
pub use facts::{Facts, NodeFacts};
pub use outcome::{selector, Decision, DenyReason, Signal, SkipReason, Verdict};
pub use policy::{
    Mode, OnContradiction, OnLookupError, Policy, PolicyError, PreferenceMode, Weight,
};
pub use read::{plan, Plan};
pub use text::{MAX_MESSAGE_CHARS, MAX_WARNINGS_CHARS, MAX_WARNING_CHARS};

use read::{Analysis, Arch, Pins};
use support::Resolution;

/// Pod label: `"true"` leaves the pod alone.
pub const SKIP_LABEL: &str = "arch.noe.adevinta.com/skip";
/// Pod label (and namespace label): the preferred architecture.
pub const PREFERRED_LABEL: &str = "arch.noe.adevinta.com/preferred";
/// Pod annotation written on every pod we constrain: the common architectures, comma-separated.
pub const PLATFORMS_ANNOTATION: &str = "arch.noe.adevinta.com/platforms";
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

/// The HTTP status code of a denial.
pub const DENY_CODE: u16 = 403;

/// The platforms of each image (keyed by the reference as written in the pod), or why they could
/// not be found. An image of [`Plan::images`] missing from the map counts as a failed lookup.
pub type Lookups =
    std::collections::BTreeMap<String, Result<std::sync::Arc<[crate::Platform]>, String>>;

/// Decides what to do with a pod being created (steps 1–10 in docs/architecture.md), then, in
/// audit mode, turns that into its report.
pub fn decide(plan: &Plan<'_>, lookups: &Lookups, facts: &Facts, policy: &Policy) -> Decision {
    let policy = cluster::effective(policy, facts);
    let policy = policy.as_ref();
    let mut decision = enforce(plan, lookups, facts, policy);
    if policy.mode == Mode::Audit {
        decision = audit::audit(plan.pod, decision);
    }
    decision.warnings = text::bound_warnings(std::mem::take(&mut decision.warnings));
    decision
}

fn unchanged(reason: SkipReason) -> Decision {
    Decision {
        verdict: Verdict::Unchanged { reason },
        warnings: Vec::new(),
        signals: vec![Signal::Skipped { reason }],
    }
}

fn deny(mut decision: Decision, reason: DenyReason, message: String) -> Decision {
    decision.verdict = Verdict::Deny {
        code: DENY_CODE,
        reason,
        message: text::message(message),
    };
    decision
}

fn enforce(plan: &Plan<'_>, lookups: &Lookups, facts: &Facts, policy: &Policy) -> Decision {
    if let Some(reason) = plan.skip {
        return unchanged(reason);
    }
    let decision = Decision {
        verdict: Verdict::Unchanged {
            reason: SkipReason::NoImages,
        },
        warnings: Vec::new(),
        signals: Vec::new(),
    };
    match &plan.arch {
        Arch::User { reason, pins } => {
            pinned(plan, lookups, facts, policy, *reason, pins, decision)
        }
        Arch::Decide(analysis) => ours(plan, analysis, lookups, facts, policy, decision),
    }
}

/// Step 2 (the pod constrains its arch itself) with steps 6b, 8 and 9: the images are checked
/// against the pod's own constraint, failed lookups only counted.
fn pinned(
    plan: &Plan<'_>,
    lookups: &Lookups,
    facts: &Facts,
    policy: &Policy,
    reason: SkipReason,
    pins: &Pins<'_>,
    mut decision: Decision,
) -> Decision {
    let resolution = support::resolve(&plan.images, lookups, plan.os, policy);
    count_failures(&resolution, &mut decision);
    let common = support::common(&resolution.resolved);
    if let Some(common) = &common {
        if !common.iter().any(|a| pins.admits(a)) {
            decision.signals.push(Signal::Contradiction);
            let images = |r: &&support::Resolved<'_>| text::image_platforms(r.image, r.platforms);
            if policy.on_contradiction == policy::OnContradiction::Deny {
                let listed = text::list(resolution.resolved.iter().map(|r| images(&r)));
                let message = format!(
                    "no architecture this pod selects is supported by every image: {listed}"
                );
                return deny(decision, DenyReason::Contradiction, message);
            }
            let alone: Vec<String> = resolution
                .resolved
                .iter()
                .filter(|r| !r.usable.iter().any(|a| pins.admits(a)))
                .map(|r| images(&r))
                .collect();
            if alone.is_empty() {
                let listed = text::list(resolution.resolved.iter().map(|r| images(&r)));
                decision.warnings.push(format!(
                    "no architecture this pod selects is supported by every image: {listed}"
                ));
            }
            for image in alone {
                decision.warnings.push(format!(
                    "image {image} cannot run on the architectures this pod selects"
                ));
            }
        }
    }
    // Step 9: the pinned archs the images are known to support; without resolved images, the
    // archs the pod names (configured ones only: they are the only ones with tolerations).
    let resolved = common.is_some();
    let candidates: BTreeSet<&str> = match common {
        Some(common) => common,
        None if pins.explicit() => policy.architectures.keys().map(String::as_str).collect(),
        None => BTreeSet::new(),
    };
    let may_run_on: BTreeSet<&str> = candidates
        .into_iter()
        .filter(|a| pins.admits(a) && policy.is_schedulable(a))
        .collect();
    if resolved {
        cluster::warn_without_nodes(&may_run_on, facts, &mut decision);
    }
    constrain::untouched(plan, policy, reason, &may_run_on, decision)
}

fn count_failures(resolution: &Resolution<'_>, decision: &mut Decision) {
    for failure in &resolution.failed {
        decision.signals.push(Signal::LookupFailed {
            image: failure.image.to_owned(),
            error: failure.error.to_owned(),
        });
    }
}

/// Steps 3–10 for a pod whose arch constraint is ours to write.
fn ours(
    plan: &Plan<'_>,
    analysis: &Analysis<'_>,
    lookups: &Lookups,
    facts: &Facts,
    policy: &Policy,
    mut decision: Decision,
) -> Decision {
    if plan.images.is_empty() {
        return constrain::untouched(
            plan,
            policy,
            SkipReason::NoImages,
            &BTreeSet::new(),
            decision,
        );
    }
    let mut resolution = support::resolve(&plan.images, lookups, plan.os, policy);
    count_failures(&resolution, &mut decision);
    if !resolution.failed.is_empty() {
        let failures = || {
            text::list(resolution.failed.iter().map(|f| {
                format!(
                    "{} ({})",
                    text::image(f.image),
                    text::truncate(f.error, 120)
                )
            }))
        };
        let fail_open = match policy.on_lookup_error {
            OnLookupError::Deny => {
                let message = format!("could not find the platforms of {}", failures());
                return deny(decision, DenyReason::LookupFailed, message);
            }
            OnLookupError::AllowPod => true,
            OnLookupError::Fallback if policy.fallback().is_some() => false,
            OnLookupError::IgnoreImage | OnLookupError::Fallback => resolution.resolved.is_empty(),
        };
        if fail_open {
            for failure in &resolution.failed {
                decision.warnings.push(format!(
                    "pod not constrained to an architecture: could not find the platforms of {} ({})",
                    text::image(failure.image),
                    failure.error
                ));
            }
            decision.signals.push(Signal::FailedOpen);
            decision.signals.push(Signal::Skipped {
                reason: SkipReason::LookupFailed,
            });
            decision.verdict = Verdict::Unchanged {
                reason: SkipReason::LookupFailed,
            };
            return decision;
        }
        let fell_back = support::fall_back(&mut resolution, policy);
        for failure in &fell_back {
            decision.warnings.push(format!(
                "image {} taken to support only {}: could not find its platforms ({})",
                text::image(failure.image),
                policy.fallback().unwrap_or_default(),
                failure.error
            ));
        }
        for failure in &resolution.failed {
            decision.warnings.push(format!(
                "image {} ignored for architecture selection: could not find its platforms ({})",
                text::image(failure.image),
                failure.error
            ));
        }
    }
    let Some(common) = support::common(&resolution.resolved) else {
        // Only arch-neutral image volumes besides images without a result: nothing to decide.
        return constrain::untouched(
            plan,
            policy,
            SkipReason::NoImages,
            &BTreeSet::new(),
            decision,
        );
    };
    if common.is_empty() {
        let message = format!(
            "no architecture is supported by every container: {}{}",
            support::describe(&resolution.resolved, policy),
            support::context(&resolution.resolved, plan.os, policy)
        );
        return deny(decision, DenyReason::NoCommonArch, message);
    }
    let windows = if plan.os == windows::WINDOWS && !analysis.windows_build_pinned {
        match windows::of_resolved(&resolution.resolved, &common) {
            windows::Builds::Unknown => None,
            windows::Builds::Common(builds) => Some(windows::expression(&builds)),
            windows::Builds::Disjoint(per_image) => {
                let message = windows::disjoint_message(&per_image);
                return deny(decision, DenyReason::WindowsBuild, message);
            }
        }
    } else {
        None
    };
    constrain::constrain(plan, analysis, facts, policy, &common, windows, decision)
}
