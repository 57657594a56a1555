//! The decision (docs/architecture.md, "The decision"): a pure function from the raw pod, the
//! platforms of its images, what the admission found out about its surroundings and the policy
//! to a verdict (unchanged, patch or denial), admission warnings and metric signals.
//!
//! It works on the raw pod JSON so fields newer than our k8s-openapi survive, and it does no I/O.
//! The admission reads the pod once with [`plan`], looks up [`Plan::images`], gathers [`Facts`],
//! then calls [`decide`]. Debug containers added to a running pod are checked by
//! [`check_ephemeral`].
//!
//! [`decide`] is one pass of steps, one module each, in the order they run; each takes the
//! previous one's output, and one that settles the pod (a denial, a pod that fails open) ends
//! the pass with its verdict:
//! 1. the pod, read once ([`read`], [`plan`]): skipped or not, its arch constraint, images, OS;
//! 2. the platforms proven false left out of each image's ([`correct`]), then what each image
//!    supports, failed lookups under `--on-lookup-error` ([`support`]);
//! 3. the common set, and where that leaves the pod ([`intersect`]);
//! 4. the preferred arch, pinned or soft ([`prefer`]);
//! 5. the arch constraint written into the patch ([`constrain`]);
//! 6. matchNodeLabels ([`labels`]);
//! 7. the tolerations of the archs the pod may run on ([`tolerations`]);
//! 8. the platforms annotation, and the verdict ([`annotate`]);
//! 9. in audit mode, the verdict reported instead of applied ([`audit`]).
//!
//! Each step also fills its part of the decision's [`Summary`] ([`decide`]; [`decide_verdict`]
//! comes to the same verdict and leaves it empty).

mod annotate;
mod architectures;
mod audit;
mod cluster;
mod constrain;
mod correct;
mod ephemeral;
mod facts;
mod intersect;
mod keys;
mod labels;
mod outcome;
mod pod;
mod policy;
mod prefer;
mod read;
mod summary;
mod support;
mod terms;
mod text;
mod tolerations;
mod windows;

pub use crate::images::ephemeral as ephemeral_images;
pub use architectures::{ArchSettings, Architectures};
pub use correct::MAX_ANNOTATION_BYTES as MAX_CORRECTIONS_ANNOTATION_BYTES;
pub use ephemeral::check_ephemeral;
pub use facts::{Facts, Lookups, NodeFacts};
pub use keys::{
    ARCH_LABEL, AUDIT_ANNOTATION, BETA_ARCH_LABEL, CORRECTIONS_ANNOTATION, OS_LABEL,
    PLATFORMS_ANNOTATION, PREFERRED_LABEL, SKIP_LABEL, WINDOWS_BUILD_LABEL,
};
pub use outcome::{
    selector, Decision, DenyReason, LookupError, LookupKind, Signal, SkipReason, Verdict, DENY_CODE,
};
pub use policy::{
    Mode, OnContradiction, OnLookupError, Policy, PolicyError, PreferenceMode, Weight,
};
pub use read::{plan, Plan};
pub use summary::{Constraint, ImageSummary, ImageSupport, Summary};

pub use text::{MAX_MESSAGE_CHARS, MAX_WARNINGS_CHARS, MAX_WARNING_CHARS};

use crate::patch::PatchBuilder;

/// Decides what to do with a pod being created (steps 1–10 in docs/architecture.md), then, in
/// audit mode, turns that into its report. Each step records its findings in the decision's
/// [`Summary`] (what `noe explain` says).
pub fn decide(plan: &Plan<'_>, lookups: &Lookups, facts: &Facts, policy: &Policy) -> Decision {
    decide_into(plan, lookups, facts, policy, Summary::default())
}

/// [`decide`] without the [`Summary`] (left empty): the same verdict, warnings and signals. An
/// admission answers from the verdict alone, and recording the findings (a string for every
/// image and architecture) is a measurable share of the warm path (docs/benchmarks.md).
pub fn decide_verdict(
    plan: &Plan<'_>,
    lookups: &Lookups,
    facts: &Facts,
    policy: &Policy,
) -> Decision {
    decide_into(plan, lookups, facts, policy, Summary::off())
}

fn decide_into(
    plan: &Plan<'_>,
    lookups: &Lookups,
    facts: &Facts,
    policy: &Policy,
    summary: Summary,
) -> Decision {
    let policy = cluster::effective(policy, facts);
    let policy = policy.as_ref();
    let mut decision = Decision::new(Verdict::Unchanged {
        reason: SkipReason::NoImages,
    });
    decision.summary = summary;
    let corrected = correct::apply(&plan.images, lookups, facts);
    let none = correct::Applied::default();
    let (lookups, applied) = corrected.as_ref().map_or((lookups, &none), |(l, a)| (l, a));
    decision.verdict = match pass(plan, lookups, facts, policy, applied, &mut decision) {
        Ok(verdict) | Err(verdict) => verdict,
    };
    if policy.mode == Mode::Audit {
        decision = audit::audit(plan.pod, decision);
    }
    decision.warnings = text::bound_warnings(std::mem::take(&mut decision.warnings));
    decision
}

/// The steps, in order; `Err` is the verdict of a step that settled the pod.
fn pass(
    plan: &Plan<'_>,
    lookups: &Lookups,
    facts: &Facts,
    policy: &Policy,
    applied: &correct::Applied<'_>,
    decision: &mut Decision,
) -> Result<Verdict, Verdict> {
    if let Some(reason) = plan.skip {
        decision.signals.push(Signal::Skipped { reason });
        return Err(Verdict::Unchanged { reason });
    }
    decision.warnings.extend(applied.warnings());
    let resolution = support::assess(plan, lookups, policy, applied, decision)?;
    let placement = intersect::place(plan, &resolution, policy, decision)?;
    let preference = prefer::choose(plan, &placement, facts, policy, decision);
    let mut patch = PatchBuilder::new(plan.pod);
    let written = constrain::write(&mut patch, plan, &placement, preference, policy, decision);
    labels::copy(&mut patch, plan.view, policy, &written, decision);
    tolerations::tolerate(&mut patch, &placement, preference, facts, policy, decision);
    Ok(annotate::finish(patch, plan, &placement, applied, decision))
}
