//! The pure part of node taints: what our taint should be on a node, and the node's new taint
//! list. Ours are exactly the taints with our key and effect `NoSchedule`; others (including a
//! `NoExecute` someone put under our key) are never touched.

use std::collections::BTreeSet;

/// Our taint key.
pub const TAINT_KEY: &str = "arch.noe.adevinta.com/arch";
/// Our taint effect (never `NoExecute`: running pods are never evicted by our taint).
pub const TAINT_EFFECT: &str = "NoSchedule";

/// Whether a taint is one we manage.
pub fn is_ours(key: &str, effect: &str) -> bool {
    key == TAINT_KEY && effect == TAINT_EFFECT
}

/// The value our taint should have on a node of `arch`: `Some(arch)` when `arch` is in
/// `taint_arches`, else `None` (no taint of ours).
pub fn wanted<'a>(arch: Option<&'a str>, taint_arches: &BTreeSet<String>) -> Option<&'a str> {
    arch.filter(|arch| taint_arches.contains(*arch))
}

/// Whether the node's taints, given as `(key, value, effect)`, already are what we want.
pub fn converged<'t>(
    taints: impl IntoIterator<Item = (&'t str, &'t str, &'t str)>,
    wanted: Option<&str>,
) -> bool {
    let ours: Vec<&str> = taints
        .into_iter()
        .filter(|(key, _, effect)| is_ours(key, effect))
        .map(|(_, value, _)| value)
        .collect();
    match wanted {
        Some(value) => ours == [value],
        None => ours.is_empty(),
    }
}

/// The new taint list: others kept as they are and where they are, ours replaced by the one
/// wanted (appended), duplicates and stale values dropped. `make` builds a taint of ours.
pub fn apply<T>(
    taints: Vec<T>,
    parts: impl Fn(&T) -> (&str, &str, &str),
    wanted: Option<&str>,
    make: impl FnOnce(&str) -> T,
) -> Vec<T> {
    let mut kept: Vec<T> = taints
        .into_iter()
        .filter(|taint| {
            let (key, _, effect) = parts(taint);
            !is_ours(key, effect)
        })
        .collect();
    if let Some(value) = wanted {
        kept.push(make(value));
    }
    kept
}
