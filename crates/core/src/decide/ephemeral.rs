//! Ephemeral (debug) containers (step 3 in docs/architecture.md): they are added to a running pod
//! through the `pods/ephemeralcontainers` subresource, so the pod's node is already chosen; an
//! image that cannot run on that node's platform gets a warning, or with `--on-contradiction=deny`
//! a denial.

use super::facts::{Facts, Lookups, NodeFacts};
use super::outcome::{Decision, DenyReason, Signal, SkipReason, Verdict, DENY_CODE};
use super::policy::{Mode, OnContradiction, OnLookupError, Policy};
use super::support::{NO_PLATFORM, NO_RESULT};
use super::text;
use super::windows::{build_of, os_version, WINDOWS};

fn node_platform(node: &NodeFacts, arch: &str) -> String {
    match node.os.as_deref() {
        Some(os) => format!("{}/{}", text::truncate(os, 32), text::truncate(arch, 32)),
        None => text::truncate(arch, 32).into_owned(),
    }
}

/// Whether an image with `platforms` runs on `node` (of arch `arch`): same arch, same or
/// unstated OS, and on a Windows node of a known build, the same build when the image says.
fn runs_on(platforms: &[crate::Platform], node: &NodeFacts, arch: &str) -> bool {
    platforms.iter().any(|p| {
        if p.is_any() {
            return true;
        }
        let os_ok = p.os.is_empty() || node.os.as_deref().is_none_or(|os| os == p.os);
        let build_ok = match (node.os.as_deref(), node.windows_build.as_deref()) {
            (Some(WINDOWS), Some(build)) => {
                os_version(p).and_then(build_of).is_none_or(|b| b == build)
            }
            _ => true,
        };
        os_ok && p.architecture == arch && build_ok
    })
}

/// Checks the images of new ephemeral containers ([`ephemeral_images`]) against the node the
/// pod is bound to (`facts.node`): allowed when they can run there or when the node's arch is
/// unknown; else a warning per image, or a denial with `--on-contradiction=deny` (a warning in
/// audit mode). A failed lookup follows `--on-lookup-error` (`deny` denies, `fallback` assumes
/// the fallback arch, otherwise the image is not checked, with a warning).
pub fn check_ephemeral(
    images: &[&str],
    lookups: &Lookups,
    facts: &Facts,
    policy: &Policy,
) -> Decision {
    let mut decision = check(images, lookups, facts, policy);
    decision.warnings = text::bound_warnings(std::mem::take(&mut decision.warnings));
    decision
}

fn check(images: &[&str], lookups: &Lookups, facts: &Facts, policy: &Policy) -> Decision {
    let mut decision = Decision::new(Verdict::Unchanged {
        reason: SkipReason::NodeName,
    });
    let Some((node, arch)) = facts
        .node
        .as_ref()
        .and_then(|n| Some((n, n.arch.as_deref().filter(|a| !a.is_empty())?)))
    else {
        return decision;
    };
    let mut cannot_run: Vec<String> = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    for image in images {
        let error = match lookups.get(*image) {
            Some(Ok(platforms)) if !platforms.is_empty() => {
                if !runs_on(platforms, node, arch) {
                    cannot_run.push(text::image_platforms(image, platforms));
                }
                continue;
            }
            Some(Ok(_)) => NO_PLATFORM,
            Some(Err(error)) => error.message.as_str(),
            None => NO_RESULT,
        };
        decision.signals.push(Signal::LookupFailed {
            image: (*image).to_owned(),
            error: error.to_owned(),
        });
        match (policy.on_lookup_error, policy.fallback()) {
            (OnLookupError::Fallback, Some(fallback)) => {
                if fallback != arch {
                    cannot_run.push(format!("{} [assumed {fallback}]", text::image(image)));
                }
            }
            (OnLookupError::Deny, _) => failed.push(format!(
                "{} ({})",
                text::image(image),
                text::truncate(error, 120)
            )),
            _ => decision.warnings.push(format!(
                "debug image {} not checked: could not find its platforms ({error})",
                text::image(image)
            )),
        }
    }
    let node = node_platform(node, arch);
    let enforce = policy.mode == Mode::Enforce;
    if !failed.is_empty() {
        let message = format!("could not find the platforms of {}", text::list(&failed));
        if enforce {
            decision.verdict = Verdict::Deny {
                code: DENY_CODE,
                reason: DenyReason::LookupFailed,
                message: text::message(message),
            };
            return decision;
        }
        decision
            .warnings
            .push(format!("audit: would deny: {message}"));
    }
    if cannot_run.is_empty() {
        return decision;
    }
    decision.signals.push(Signal::Contradiction);
    if policy.on_contradiction == OnContradiction::Deny {
        let message = format!(
            "debug container images cannot run on the pod's node ({node}): {}",
            text::list(&cannot_run)
        );
        if enforce {
            decision.verdict = Verdict::Deny {
                code: DENY_CODE,
                reason: DenyReason::DebugImage,
                message: text::message(message),
            };
        } else {
            decision
                .warnings
                .push(format!("audit: would deny: {message}"));
        }
        return decision;
    }
    for image in cannot_run {
        decision.warnings.push(format!(
            "debug image {image} cannot run on the pod's node ({node})"
        ));
    }
    decision
}
