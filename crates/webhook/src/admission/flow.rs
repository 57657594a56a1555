//! One admission from its envelope to its answer, in the order it goes. A pod creation the
//! [`memo`](super::memo) holds is answered from it when what its decision read is unchanged
//! ([`Decider::recheck`](crate::decider::Decider::recheck)). Otherwise the request's objects are
//! read; a pod being created is decided (its images selected first, gated, or inline) and, the
//! second time the memo sees it, remembered; debug containers added to a pod are checked against
//! its node; anything else is allowed unchanged. The decision is reported ([`super::report`]) and
//! its response written ([`super::response`]).

use bytes::Bytes;
use serde_json::Value;

use super::memo::{self, Checked, Memo};
use super::report;
use super::response::{self, Answer, Rendered};
use super::review::{self, Envelope, Invalid, Request, Subject};
use super::Admission;
use crate::decider::{Inputs, Scope, SelectionStep};
use crate::metrics::outcome;
use noe_core::decide::{Decision, Lookups, Signal};

/// A pod creation the memo serves: where it is remembered, and how its entry was found.
struct Remembering<'m> {
    memo: &'m Memo,
    key: u128,
    checked: Checked,
}

/// What an admission decided, before it is reported and its response written. Made once per
/// admission and consumed at once, never held across an `.await`: boxing its larger variant would
/// only add an allocation to every admission.
#[allow(clippy::large_enum_variant)]
enum Decided<'a> {
    /// The memo's entry, what its decision read unchanged: answered again.
    Remembered(Scope<'a>, &'a memo::Entry),
    /// A decision on the pod `scope` names, with what it read when the memo is to remember it.
    Decision {
        scope: Scope<'a>,
        decision: Decision,
        inputs: Option<Inputs>,
    },
    /// Neither a pod creation nor debug containers added to a pod: allowed unchanged.
    Other,
}

/// What is written: a remembered answer, or an answer (to remember, with its entry but the
/// answer, when the memo is to). Like [`Decided`], consumed where it is made.
#[allow(clippy::large_enum_variant)]
enum Reply<'a> {
    Remembered(&'a memo::Entry),
    Answer(Answer, &'static str),
    Remember {
        answer: Answer,
        outcome: &'static str,
        remembering: Remembering<'a>,
        pod: Box<str>,
        inputs: Inputs,
        signals: Vec<Signal>,
    },
}

/// The answer to a review whose envelope is read, and its `outcome` label; `Err` when its
/// objects cannot be read.
pub(super) async fn answer(
    admission: &Admission,
    envelope: Envelope<'_>,
) -> Result<(Bytes, &'static str), Invalid> {
    let api_version = envelope.api_version;
    let uid = envelope.uid.clone();
    let namespace = envelope.namespace.clone().unwrap_or_default();
    let mut remembering = remembering(admission, &envelope);
    let entry = remembering.as_ref().and_then(|r| r.memo.get(r.key));
    let mut known = Lookups::new();
    let mut unchanged = None;
    if let (Some(entry), Some(remembering)) = (&entry, &mut remembering) {
        let scope = Scope::new(&uid, &namespace, &entry.pod);
        match admission.decider.recheck(&entry.inputs, &scope).await {
            Ok(()) => unchanged = Some(scope),
            Err(lookups) => {
                remembering.checked = Checked::Changed;
                known = lookups;
            }
        }
    }
    let request;
    let decided = match (unchanged, &entry, &remembering) {
        (Some(scope), Some(entry), Some(remembering)) => {
            remembering.memo.count(Checked::Same);
            Decided::Remembered(scope, entry)
        }
        _ => {
            request = envelope.into_request()?;
            // Counted once the pod is read: a body refused here is no pod decided. A pod seen
            // for the first time is decided as without the memo, and only noted: most pods seen
            // once are never seen again, and remembering costs more than deciding.
            remembering = remembering.filter(|remembering| {
                remembering.memo.count(remembering.checked);
                remembering.checked == Checked::Changed
                    || !remembering.memo.first_sight(remembering.key)
            });
            decide(admission, &request, known, remembering.is_some()).await
        }
    };
    // Reported, then written (and remembered when the memo is to).
    let reply = match decided {
        Decided::Remembered(scope, entry) => {
            report::remembered(admission.metrics(), &scope, &entry.signals, entry.outcome);
            Reply::Remembered(entry)
        }
        Decided::Other => Reply::Answer(Answer::allow(), outcome::ALLOWED),
        Decided::Decision {
            scope,
            decision,
            inputs,
        } => {
            let signals = remembering.as_ref().map(|_| decision.signals.clone());
            let (answer, outcome) = report::answer(admission.metrics(), &scope, decision);
            // A failed lookup is not remembered: it may be gone by the next pod.
            let inputs = inputs.filter(|i| i.lookups.values().all(Result::is_ok));
            match (remembering, signals, inputs) {
                (Some(remembering), Some(signals), Some(inputs)) => Reply::Remember {
                    answer,
                    outcome,
                    remembering,
                    pod: scope.pod.into(),
                    inputs,
                    signals,
                },
                _ => Reply::Answer(answer, outcome),
            }
        }
    };
    Ok(match reply {
        Reply::Remembered(entry) => (entry.answer.respond(api_version, &uid), entry.outcome),
        Reply::Answer(answer, outcome) => (response::respond(api_version, &uid, answer), outcome),
        Reply::Remember {
            answer,
            outcome,
            remembering,
            pod,
            inputs,
            signals,
        } => {
            let rendered = Rendered::new(&answer);
            let reply = rendered.respond(api_version, &uid);
            let entry = memo::Entry {
                pod,
                inputs,
                signals,
                outcome,
                answer: rendered,
            };
            remembering.memo.remember(remembering.key, entry);
            (reply, outcome)
        }
    })
}

/// The memo's part in a pod creation, when it serves this admission's combination of lookup
/// mode and selection ([`Memo::serves`]).
fn remembering<'a>(admission: &'a Admission, envelope: &Envelope<'_>) -> Option<Remembering<'a>> {
    let memo = admission
        .memo
        .as_ref()
        .filter(|_| Memo::serves(admission.gate.is_some(), admission.decider.selects()))?;
    match (envelope.pod_creation, envelope.namespace.as_deref()) {
        (Some(object), Some(namespace)) if !namespace.is_empty() => Some(Remembering {
            memo,
            key: Memo::key(namespace, object),
            checked: Checked::Missed,
        }),
        _ => None,
    }
}

/// The decision on a pod being created, or on debug containers added to a pod. A pod being
/// created has its images selected first (`--image-selection`), is gated (`--lookup-mode`), or
/// is decided inline with the lookups `known` (and with `record`, what the decision read, for
/// the memo).
async fn decide<'r>(
    admission: &Admission,
    request: &'r Request<'_>,
    known: Lookups,
    record: bool,
) -> Decided<'r> {
    match request.subject() {
        Subject::PodCreation(pod) => {
            let scope = Scope::new(&request.uid, &request.namespace, review::pod_name(pod));
            // The paths most admissions do not take are boxed: inline, their state would make
            // every admission's future larger, and that future is moved into a box per request.
            let (decision, inputs) = if admission.decider.selects() {
                let selected = Box::pin(select_then_decide(admission, pod, &scope)).await;
                (selected, None)
            } else if admission.gate.is_some() {
                (admission.decide_or_gate(pod, &scope).await, None)
            } else {
                let decider = &admission.decider;
                decider.decide_recorded(pod, &scope, known, record).await
            };
            Decided::Decision {
                scope,
                decision,
                inputs,
            }
        }
        Subject::DebugContainers(pod, old) => {
            let scope = Scope::new(&request.uid, &request.namespace, review::pod_name(pod));
            let decision = Box::pin(admission.decider.debug_containers(pod, old, &scope)).await;
            Decided::Decision {
                scope,
                decision,
                inputs: None,
            }
        }
        Subject::Other => {
            tracing::debug!(uid = %request.uid, kind = %request.kind, operation = ?request.operation, "Not a pod creation: allowed");
            Decided::Other
        }
    }
}

/// Image selection (docs/architecture.md, "Image selection"), then the decision (or the
/// gate) on the pod as selection changed it: the answer's patch is selection's operations
/// followed by the decision's (written against the changed pod). Skipped in audit mode.
async fn select_then_decide(admission: &Admission, pod: &Value, scope: &Scope<'_>) -> Decision {
    match admission.decider.select(pod, scope).await {
        SelectionStep::Done(decision) => decision,
        step @ SelectionStep::Decide { .. } => {
            let decision = admission
                .decide_or_gate(step.pod().unwrap_or(pod), scope)
                .await;
            step.finish(decision)
        }
    }
}
