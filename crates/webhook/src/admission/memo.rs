//! The decision memo: a pod creation whose object is, but for what differs between the pods of
//! one template ([`key`]: the generated name, uid, creation time, field-manager entries, token
//! volume name, and what the decision never reads), one already decided in the same namespace
//! is answered with that decision, once what the decision read besides the pod is found
//! unchanged (docs/architecture.md, "The decision memo").
//!
//! The decision is a pure function of the pod, its images' platforms, the facts of its
//! surroundings and the policy ([`noe_core::decide`]). The pod is the request's `object` as
//! sent, read through [`key`], so an equal key is an equal pod as the decision reads it; the
//! policy does not change while the process runs.
//! What may change is checked on every hit, as a fresh admission would read it: the images are
//! looked up again (from the caches, with the pod's pull secrets) and the facts asked again, and
//! the remembered answer is sent only when both are what the decision saw. Otherwise the pod is
//! decided again with the lookups just made (none is made twice) and remembered anew. A pod is
//! remembered the second time it is seen: one seen once is decided as without the memo, its key
//! only noted.
//!
//! Pods of one ReplicaSet, Job or DaemonSet share a key whenever they are created, in one burst
//! or seconds apart: the apiserver gives each its own name, uid and times before any webhook
//! sees it, and the key leaves those out.
//!
//! Bounded: at most [`MAX_BYTES`] of answers and what they were decided from ([`Table`]); keyed
//! by a keyed 128-bit hash of the namespace and the object, so no one can choose two pods that
//! share an entry.

mod key;

use std::sync::Arc;

use noe_core::decide::Signal;
use prometheus::IntCounter;

use super::response::Rendered;
use crate::decider::Inputs;
use crate::metrics::Metrics;
use crate::table::{Table, Weighed};

/// Bytes of remembered answers and what they were decided from, at most.
pub const MAX_BYTES: u64 = 4 * 1024 * 1024;
/// Entries the table is sized for (its bound is [`MAX_BYTES`]).
pub const MAX_ENTRIES: usize = 4096;
/// Keys of pods seen once kept at most (about 56 bytes each).
pub const SEEN: usize = 16 * 1024;

/// One remembered decision.
#[derive(Debug)]
pub struct Entry {
    /// The name (or generated name) of the pod it was decided for, for log lines.
    pub pod: Box<str>,
    pub inputs: Inputs,
    /// The decision's signals, counted again on each hit.
    pub signals: Vec<Signal>,
    /// The `outcome` label of the request duration.
    pub outcome: &'static str,
    /// The answer, less the request's version and uid.
    pub answer: Rendered,
}

impl Weighed for Entry {
    fn weight(&self) -> u64 {
        let sum =
            |sizes: &mut dyn Iterator<Item = usize>| sizes.fold(0usize, usize::saturating_add);
        let strings = |list: &[String]| sum(&mut list.iter().map(|s| s.len().saturating_add(24)));
        let lookups = sum(&mut self.inputs.lookups.iter().map(|(image, found)| {
            let found = match found {
                Ok(platforms) => platforms.len().saturating_mul(64),
                Err(error) => error.message.len().saturating_add(error.registry.len()),
            };
            image.len().saturating_add(64).saturating_add(found)
        }));
        let bytes = sum(&mut [
            std::mem::size_of::<Self>(),
            self.pod.len(),
            strings(&self.inputs.images),
            strings(&self.inputs.pull_secrets),
            lookups,
            self.signals.len().saturating_mul(64),
            self.answer.len(),
        ]
        .into_iter());
        u64::try_from(bytes).unwrap_or(u64::MAX)
    }
}

/// `noe_admission_decision_memo_total` children.
struct Counters {
    hit: IntCounter,
    miss: IntCounter,
    changed: IntCounter,
}

/// The remembered decisions.
pub struct Memo {
    table: Table<Entry>,
    /// Keys of the pods seen once (and not remembered), most recent first out: a pod is
    /// remembered the second time it is seen.
    seen:
        quick_cache::sync::Cache<u128, (), quick_cache::UnitWeighter, foldhash::fast::RandomState>,
    counters: Counters,
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memo")
            .field("entries", &self.table.len())
            .finish_non_exhaustive()
    }
}

/// How a pod creation went with the memo (the `result` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    /// Remembered, and the lookups and facts were what its decision saw: answered from it.
    Same,
    /// Remembered, but a lookup or a fact changed: decided again.
    Changed,
    /// Not remembered: decided.
    Missed,
}

impl Memo {
    /// Whether it serves an admission that gates pods (`--lookup-mode=gate|hybrid`) or selects
    /// images (`--image-selection`): neither. A gated pod's answer is the gate, not a decision;
    /// selection decides on a pod it changed from facts (nodes, artifacts) a hit does not check
    /// again. It serves inline admission without selection.
    pub fn serves(gated: bool, selects: bool) -> bool {
        !gated && !selects
    }

    pub fn new(metrics: &Metrics) -> Self {
        let counter = |result: &str| metrics.decision_memo.with_label_values(&[result]);
        Self {
            table: Table::new(MAX_BYTES, MAX_ENTRIES),
            seen: quick_cache::sync::Cache::with(
                SEEN,
                u64::try_from(SEEN).unwrap_or(u64::MAX),
                quick_cache::UnitWeighter,
                foldhash::fast::RandomState::default(),
                quick_cache::sync::DefaultLifecycle::default(),
            ),
            counters: Counters {
                hit: counter("hit"),
                miss: counter("miss"),
                changed: counter("changed"),
            },
        }
    }

    /// The key of a pod whose request names `namespace` and whose object is `object`, as sent:
    /// the same for the pods of one template ([`key`]).
    pub fn key(namespace: &str, object: &str) -> u128 {
        Table::<Entry>::key(&key::PodKey { namespace, object })
    }

    /// The entry of `key`, if one is remembered (counted by [`Memo::count`] once checked).
    pub fn get(&self, key: u128) -> Option<Arc<Entry>> {
        self.table.get(key)
    }

    /// Whether the pod of `key` is seen for the first time (lately): noted, so the next one
    /// with the same key is remembered.
    pub fn first_sight(&self, key: u128) -> bool {
        if self.seen.get(&key).is_some() {
            self.seen.remove(&key);
            return false;
        }
        self.seen.insert(key, ());
        true
    }

    /// Counts one pod creation.
    pub fn count(&self, checked: Checked) {
        match checked {
            Checked::Same => self.counters.hit.inc(),
            Checked::Changed => self.counters.changed.inc(),
            Checked::Missed => self.counters.miss.inc(),
        }
    }

    /// Remembers `entry` under `key`, unless it is too heavy.
    pub fn remember(&self, key: u128, entry: Entry) {
        self.table.remember(key, entry);
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use noe_core::decide::Facts;
    use noe_core::Platform;

    fn entry(images: usize) -> Entry {
        let platforms: Arc<[Platform]> = Arc::from(vec![
            Platform::new("linux", "amd64", None),
            Platform::new("linux", "arm64", None),
        ]);
        let images: Vec<String> = (0..images)
            .map(|i| format!("registry.example/team/app-{i}:1.2.3"))
            .collect();
        let answer = super::super::response::Answer {
            warnings: vec!["a warning".to_owned()],
            ..super::super::response::Answer::allow()
        };
        Entry {
            pod: "web-5d8c7b9f6-".into(),
            inputs: Inputs {
                lookups: images
                    .iter()
                    .map(|image| (image.clone(), Ok(platforms.clone())))
                    .collect(),
                images,
                pull_secrets: vec!["regcred".to_owned()],
                service_account: None,
                wants_namespace: false,
                facts: Facts::default(),
                generation: 0,
            },
            signals: Vec::new(),
            outcome: "allowed",
            answer: Rendered::new(&answer),
        }
    }

    #[test]
    fn bounded_by_its_bytes_and_heavy_decisions_are_not_kept() {
        let memo = Memo::new(&Metrics::register(&prometheus::Registry::new()).unwrap());
        let typical = entry(2).weight();
        assert!((400..2048).contains(&typical), "{typical}");
        for key in 0..50_000u128 {
            memo.remember(key, entry(2));
        }
        assert!(memo.table.weight() <= MAX_BYTES, "{}", memo.table.weight());
        assert!(memo.len() >= 1000, "{}", memo.len());

        let heavy = entry(1000);
        assert!(heavy.weight() > memo.table.max_value_bytes());
        memo.remember(u128::MAX, heavy);
        assert!(memo.get(u128::MAX).is_none());
        assert!(
            memo.get(49_999).is_some(),
            "the newest typical entry is kept"
        );
    }

    #[test]
    fn keys_depend_on_namespace_and_bytes() {
        let key = Memo::key("a", r#"{"spec":{}}"#);
        assert_eq!(key, Memo::key("a", r#"{"spec":{}}"#));
        assert_ne!(key, Memo::key("b", r#"{"spec":{}}"#));
        assert_ne!(key, Memo::key("a", r#"{"spec": {}}"#));
        assert_ne!(Memo::key("ab", "c"), Memo::key("a", "bc"));
    }
}
