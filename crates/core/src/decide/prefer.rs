//! Step 7, the fourth step of the pass: the preferred architecture, and how it is expressed —
//! pinned by `nodeSelector` (`required` mode) or a soft preferred term (`preferred` mode, or a
//! pod whose own arch terms rule out a hard preference). Its output, a [`Preference`], is what
//! [`constrain`](super::constrain) writes.

use super::facts::Facts;
use super::intersect::Placement;
use super::outcome::{Decision, Signal};
use super::policy::{Policy, PreferenceMode};
use super::read::Plan;

/// The preferred arch of a pod whose arch constraint is ours, as it will be written.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Preference<'a> {
    /// `nodeSelector["kubernetes.io/arch"]`: the pod is pinned to this arch.
    pub pin: Option<&'a str>,
    /// A preferred node-affinity term for this arch.
    pub soft: Option<&'a str>,
}

/// Step 7's candidate: the pod label if set and schedulable (else a warning), else the
/// namespace's label if schedulable, else the flag. The flag says whether it is the pod label.
fn candidate<'a>(
    plan: &Plan<'a>,
    facts: &'a Facts,
    policy: &'a Policy,
    decision: &mut Decision,
) -> (Option<&'a str>, bool) {
    if let Some(arch) = plan.label_preference {
        if policy.is_schedulable(arch) {
            return (Some(arch), true);
        }
        decision
            .warnings
            .push(format!("could not select preferred arch: {arch}"));
    }
    let namespace = facts
        .namespace_preferred_arch
        .as_deref()
        .filter(|a| !a.is_empty() && policy.is_schedulable(a));
    (namespace.or_else(|| policy.preferred()), false)
}

/// Chooses the preferred arch (none when the arch constraint is not ours, or the pod has a
/// preferred arch term of its own).
pub(crate) fn choose<'a>(
    plan: &Plan<'a>,
    placement: &Placement<'a, '_>,
    facts: &'a Facts,
    policy: &'a Policy,
    decision: &mut Decision,
) -> Preference<'a> {
    let Placement::Ours {
        analysis, common, ..
    } = placement
    else {
        return Preference::default();
    };
    let (candidate, from_label) = candidate(plan, facts, policy, decision);
    let preferred = match candidate {
        // The pod chose its own soft preference: none is added.
        _ if analysis.user_preference => None,
        Some(arch) if common.contains(arch) => Some(arch),
        Some(arch) => {
            decision.signals.push(Signal::PreferredArchNotAvailable {
                arch: arch.to_owned(),
            });
            if from_label {
                decision
                    .warnings
                    .push(format!("could not select preferred arch: {arch}"));
            }
            None
        }
        None => None,
    };
    // Some terms pin the arch themselves: a hard preference would make them impossible.
    let partial = analysis
        .user_terms
        .terms
        .as_ref()
        .is_some_and(|t| !t.is_empty());
    let required_mode = policy.preference_mode == PreferenceMode::Required;
    let preference = Preference {
        pin: preferred.filter(|_| required_mode && !partial),
        soft: preferred.filter(|_| !required_mode || partial),
    };
    decision
        .summary
        .record(|summary| summary.preferred = preferred.map(str::to_owned));
    preference
}
