//! Steps 4, 6 and 6b, the third step of the pass: the architectures every image supports, and
//! what that leaves for the pod. A pod whose arch constraint is ours gets the common set (denied
//! when it is empty, or when its Windows images need different builds); a pod that constrains
//! its arch itself is checked against its own constraint. Its output, a [`Placement`], is what
//! the later steps write.

use std::collections::BTreeSet;

use serde_json::Value;

use super::outcome::{Decision, DenyReason, Signal, SkipReason};
use super::outcome::{SkipReason as Reason, Verdict};
use super::policy::{OnContradiction, Policy};
use super::read::{Analysis, Arch, Plan};
use super::summary::Constraint;
use super::support::{Resolution, Resolved};
use super::text;
use super::windows;

/// Where the pod may go, before anything is written.
#[derive(Debug)]
pub(crate) enum Placement<'a, 'p> {
    /// The arch constraint is not ours to add (the pod's own, or nothing to decide): only
    /// matchNodeLabels and the tolerations of `may_run_on` apply.
    Untouched {
        /// Why (the `update_skip_total` reason).
        reason: SkipReason,
        /// The archs the pod may run on (their tolerations are added).
        may_run_on: BTreeSet<&'a str>,
        /// Whether `may_run_on` comes from resolved images (then a pod no node can take is
        /// warned about).
        resolved: bool,
    },
    /// The arch constraint is ours to write: every image runs on `common` (non-empty).
    Ours {
        analysis: &'a Analysis<'p>,
        common: BTreeSet<&'a str>,
        /// The Windows build expression, when the pod needs one.
        windows: Option<Value>,
    },
}

/// The architectures every resolved image can use; `None` when no image was resolved.
fn common<'a>(resolved: &[Resolved<'a>]) -> Option<BTreeSet<&'a str>> {
    let (first, rest) = resolved.split_first()?;
    let mut common = first.usable.clone();
    for image in rest {
        common.retain(|a| image.usable.contains(a));
    }
    Some(common)
}

/// Step 6's denial: each image with the platforms it really has (`app:1 [linux/amd64],
/// sidecar:2 [linux/s390x]`), then ` (pod OS: linux)` and ` (schedulable: amd64, arm64)` when
/// they explain it.
fn no_common_message(resolved: &[Resolved<'_>], os: &str, policy: &Policy) -> String {
    let images = text::list(resolved.iter().map(|r| {
        if r.assumed {
            let fallback = policy.fallback().unwrap_or_default();
            format!("{} [assumed {fallback}]", text::image(r.image))
        } else if r.corrections.is_empty() {
            text::image_platforms(r.image, r.platforms)
        } else {
            format!(
                "{} (not used: {})",
                text::image_platforms(r.image, r.platforms),
                super::correct::evidence(r.corrections)
            )
        }
    }));
    let mut out = format!("no architecture is supported by every container: {images}");
    if resolved.iter().any(|r| r.other_os) {
        out.push_str(&format!(" (pod OS: {})", text::truncate(os, 64)));
    }
    if !policy.schedulable_from_nodes && !policy.schedulable_archs.is_empty() {
        out.push_str(&format!(
            " (schedulable: {})",
            text::list(&policy.schedulable_archs)
        ));
    }
    out
}

/// Intersects the images' architectures and places the pod; `Err` with the verdict when that
/// denies it.
pub(crate) fn place<'a, 'p>(
    plan: &'a Plan<'p>,
    resolution: &Resolution<'a>,
    policy: &'a Policy,
    decision: &mut Decision,
) -> Result<Placement<'a, 'p>, Verdict> {
    let common = common(&resolution.resolved);
    decision.summary.record(|summary| {
        summary.common = common
            .as_ref()
            .map(|c| c.iter().map(|a| (*a).to_owned()).collect());
    });
    let analysis = match &plan.arch {
        Arch::User { reason, pins } => {
            let placement = pinned(*reason, pins, resolution, common, policy, decision)?;
            if let Placement::Untouched { may_run_on, .. } = &placement {
                decision.summary.record(|summary| {
                    summary.constraint = Constraint::User {
                        archs: may_run_on.iter().map(|a| (*a).to_owned()).collect(),
                    }
                });
            }
            return Ok(placement);
        }
        Arch::Decide(analysis) => analysis,
    };
    let Some(common) = common else {
        // Only arch-neutral image volumes besides images without a result: nothing to decide.
        return Ok(Placement::Untouched {
            reason: Reason::NoImages,
            may_run_on: BTreeSet::new(),
            resolved: false,
        });
    };
    if common.is_empty() {
        let message = no_common_message(&resolution.resolved, plan.os, policy);
        return Err(Verdict::deny(DenyReason::NoCommonArch, message));
    }
    let windows = if plan.os == windows::WINDOWS && !analysis.windows_build_pinned {
        match windows::of_resolved(&resolution.resolved, &common) {
            windows::Builds::Unknown => None,
            windows::Builds::Common(builds) => Some(windows::expression(&builds)),
            windows::Builds::Disjoint(per_image) => {
                let message = windows::disjoint_message(&per_image);
                return Err(Verdict::deny(DenyReason::WindowsBuild, message));
            }
        }
    } else {
        None
    };
    Ok(Placement::Ours {
        analysis,
        common,
        windows,
    })
}

/// Step 2 with 6b: the images are checked against the pod's own constraint, and the archs it
/// may run on are those of its constraint the images support.
fn pinned<'a, 'p>(
    reason: SkipReason,
    pins: &super::read::Pins<'_>,
    resolution: &Resolution<'a>,
    common: Option<BTreeSet<&'a str>>,
    policy: &'a Policy,
    decision: &mut Decision,
) -> Result<Placement<'a, 'p>, Verdict> {
    if let Some(common) = &common {
        if !common.iter().any(|a| pins.admits(a)) {
            decision.signals.push(Signal::Contradiction);
            let images = |r: &Resolved<'_>| text::image_platforms(r.image, r.platforms);
            if policy.on_contradiction == OnContradiction::Deny {
                let listed = text::list(resolution.resolved.iter().map(images));
                let message = format!(
                    "no architecture this pod selects is supported by every image: {listed}"
                );
                return Err(Verdict::deny(DenyReason::Contradiction, message));
            }
            let alone: Vec<String> = resolution
                .resolved
                .iter()
                .filter(|r| !r.usable.iter().any(|a| pins.admits(a)))
                .map(images)
                .collect();
            if alone.is_empty() {
                let listed = text::list(resolution.resolved.iter().map(images));
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
    Ok(Placement::Untouched {
        reason,
        may_run_on,
        resolved,
    })
}
