//! Steps 4–6: usable architectures per image, failed lookups, intersection.

use std::collections::BTreeSet;

use super::{Decision, Lookups, OnLookupError, Policy, Signal, SkipReason, Verdict, DENY_CODE};

/// The architectures of `platforms` a pod of `os` can use: OS equal to the pod's or empty,
/// architecture schedulable and non-empty; variants ignored.
fn usable_archs(
    platforms: &[noe_registry::Platform],
    os: &str,
    policy: &Policy,
) -> BTreeSet<String> {
    platforms
        .iter()
        .filter(|p| p.os.is_empty() || p.os == os)
        .filter(|p| !p.architecture.is_empty() && policy.is_schedulable(&p.architecture))
        .map(|p| p.architecture.clone())
        .collect()
}

fn list<'a>(items: impl IntoIterator<Item = &'a String>) -> String {
    items
        .into_iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(",")
}

/// The sorted set of architectures every resolved image supports, or `None` when the decision is
/// already final (fail-open or denial, written into `decision`).
pub(crate) fn common_archs(
    images: &[String],
    lookups: &Lookups,
    policy: &Policy,
    os: &str,
    decision: &mut Decision,
) -> Option<BTreeSet<String>> {
    let mut resolved: Vec<(&String, BTreeSet<String>)> = Vec::new();
    let mut failed: Vec<(&String, &str)> = Vec::new();
    for image in images {
        match lookups.get(image) {
            Some(Ok(platforms)) => resolved.push((image, usable_archs(platforms, os, policy))),
            Some(Err(error)) => failed.push((image, error)),
            None => failed.push((image, "no lookup result")),
        }
    }
    for (image, error) in &failed {
        decision.signals.push(Signal::LookupFailed {
            image: (*image).clone(),
            error: (*error).to_owned(),
        });
    }
    let failures = || {
        failed
            .iter()
            .map(|(image, error)| format!("{image} ({error})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !failed.is_empty() {
        let fail_open = match policy.on_lookup_error {
            OnLookupError::Deny => {
                decision.verdict = Verdict::Deny {
                    code: DENY_CODE,
                    message: format!("could not find the platforms of {}", failures()),
                };
                return None;
            }
            OnLookupError::AllowPod => true,
            OnLookupError::IgnoreImage => resolved.is_empty(),
        };
        if fail_open {
            decision.warnings.push(format!(
                "pod not constrained to an architecture: could not find the platforms of {}",
                failures()
            ));
            decision.signals.push(Signal::FailedOpen);
            decision.signals.push(Signal::Skipped {
                reason: SkipReason::LookupFailed,
            });
            decision.verdict = Verdict::Unchanged {
                reason: SkipReason::LookupFailed,
            };
            return None;
        }
        for (image, error) in &failed {
            decision.warnings.push(format!(
                "image {image} ignored for architecture selection: could not find its platforms ({error})"
            ));
        }
    }
    let mut sets = resolved.iter().map(|(_, archs)| archs);
    let mut common = sets.next().cloned().unwrap_or_default();
    for archs in sets {
        common.retain(|a| archs.contains(a));
    }
    if common.is_empty() {
        let per_image = resolved
            .iter()
            .map(|(image, archs)| format!("{image} [{}]", list(archs)))
            .collect::<Vec<_>>()
            .join(", ");
        decision.verdict = Verdict::Deny {
            code: DENY_CODE,
            message: format!("no architecture is supported by every container: {per_image}"),
        };
        return None;
    }
    Some(common)
}
