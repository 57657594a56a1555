//! Which version of a track first supports a target, with few lookups: a pure state machine
//! the caller drives ([`Search::next`] says which version to look up, [`Search::record`] takes
//! what the lookup said), so the strategy is tested without a registry.
//!
//! The versions searched are those above the current one (which does not support the target:
//! that is why it is searched). In order:
//! 1. the newest, then the lowest (the next version after the current one): a lowest that
//!    supports is the answer at once; when neither supports, the middle one (support added
//!    and removed again shows there);
//! 2. when the newest supports, a binary search between the highest version known not to
//!    support and the lowest known to support, on the assumption that support, once added,
//!    stays. Its answer's predecessor is always one it looked up (or the current version), so
//!    both are checked;
//! 3. when what was looked up contradicts the assumption (a version that supports below one
//!    that does not: support removed), the versions below the lowest known to support are
//!    looked up one by one from the bottom, within the budget: the answer is the lowest only
//!    when every version below it was looked up.
//!
//! Budget: ⌈log2(track length)⌉ + 3 lookups. A lookup that fails stops the search: the answer
//! is then only what the lookups so far prove, never a guess. A track whose support comes and
//! goes between the versions looked up is not seen to contradict the assumption: the answer
//! is then a version that supports whose predecessor does not, maybe not the lowest.

/// What one lookup of a version said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Its index supports the target.
    Supports,
    /// It does not.
    Blocks,
    /// The lookup failed.
    Failed,
}

/// The answer of a finished (or stopped) search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum First {
    /// The lowest version that supports: its index among the versions searched.
    Found(usize),
    /// No version above the current one supports the target.
    None,
    /// Not known: a lookup failed, or the budget ran out after the track contradicted the
    /// assumption. `seen`: the lowest version seen to support (the answer is at most it).
    Unknown { seen: Option<usize> },
}

/// A search over `n` versions (ascending, all above the current one).
#[derive(Clone, Debug)]
pub struct Search {
    known: Vec<Option<bool>>,
    budget: usize,
    probes: usize,
    failed: Option<usize>,
}

/// ⌈log2(n)⌉ for n ≥ 1 (0 for 0 and 1).
fn ceil_log2(n: usize) -> usize {
    match n {
        0 | 1 => 0,
        n => usize::try_from(usize::BITS - (n - 1).leading_zeros()).unwrap_or(usize::MAX),
    }
}

/// The lookups a search over a track of `track_len` versions may make.
pub fn budget(track_len: usize) -> usize {
    ceil_log2(track_len).saturating_add(3)
}

impl Search {
    /// A search over the `n` versions above the current one of a track of `track_len`
    /// versions (with its budget, [`budget`]).
    pub fn new(n: usize, track_len: usize) -> Self {
        Self::with_budget(n, budget(track_len.max(n)))
    }

    /// A search over `n` versions with `budget` lookups.
    pub fn with_budget(n: usize, budget: usize) -> Self {
        Self {
            known: vec![None; n],
            budget,
            probes: 0,
            failed: None,
        }
    }

    /// Lookups recorded so far.
    pub fn probes(&self) -> usize {
        self.probes
    }

    /// The version (its index) whose failed lookup stopped the search.
    pub fn failed(&self) -> Option<usize> {
        self.failed
    }

    /// What is known of version `index`: `Some(true)` supports, `Some(false)` does not.
    pub fn known(&self, index: usize) -> Option<bool> {
        self.known.get(index).copied().flatten()
    }

    /// Records what the lookup of version `index` said.
    pub fn record(&mut self, index: usize, probe: Probe) {
        self.probes = self.probes.saturating_add(1);
        match probe {
            Probe::Failed => {
                self.failed.get_or_insert(index);
            }
            Probe::Supports | Probe::Blocks => {
                if let Some(slot) = self.known.get_mut(index) {
                    *slot = Some(probe == Probe::Supports);
                }
            }
        }
    }

    /// The lowest version known to support.
    fn lowest_supporting(&self) -> Option<usize> {
        self.known.iter().position(|k| *k == Some(true))
    }

    /// Some version known not to support lies above one known to support.
    pub fn contradicted(&self) -> bool {
        match self.lowest_supporting() {
            Some(low) => self.known[low..].contains(&Some(false)),
            None => false,
        }
    }

    /// The version to look up next; `None` when the search is over ([`Search::first`]).
    pub fn next(&self) -> Option<usize> {
        if self.failed.is_some() || self.probes >= self.budget {
            return None;
        }
        let n = self.known.len();
        let newest = n.checked_sub(1)?;
        if self.known[newest].is_none() {
            return Some(newest);
        }
        if self.known[0].is_none() {
            return Some(0);
        }
        let Some(low) = self.lowest_supporting() else {
            let middle = newest / 2;
            return self.known[middle].is_none().then_some(middle);
        };
        if self.contradicted() {
            // One by one from the bottom, below the lowest known to support.
            return self.known[..low].iter().position(Option::is_none);
        }
        // Between the highest known not to support below `low` and `low`.
        let from = self.known[..low]
            .iter()
            .rposition(|k| *k == Some(false))
            .map_or(0, |i| i + 1);
        (from < low).then(|| from + (low - from) / 2)
    }

    /// The answer from what was looked up.
    pub fn first(&self) -> First {
        let Some(low) = self.lowest_supporting() else {
            // Under the assumption, none supports when the newest, the lowest and the middle
            // one do not.
            let newest = self.known.len().saturating_sub(1);
            let checked = [newest, 0, newest / 2]
                .iter()
                .all(|&i| self.known.get(i).is_none_or(|k| *k == Some(false)));
            return if checked && self.failed.is_none() {
                First::None
            } else {
                First::Unknown { seen: None }
            };
        };
        let below = &self.known[..low];
        let settled = if self.contradicted() {
            below.iter().all(|k| *k == Some(false))
        } else {
            // Its predecessor is known not to support (or is the current version).
            low == 0 || below.last() == Some(&Some(false))
        };
        if settled {
            First::Found(low)
        } else {
            First::Unknown { seen: Some(low) }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Runs a search over `supports` (per version) and returns its answer and lookups.
    fn run(supports: &[bool], budget: Option<usize>) -> (First, usize) {
        let mut search = match budget {
            Some(b) => Search::with_budget(supports.len(), b),
            None => Search::new(supports.len(), supports.len() + 1),
        };
        while let Some(i) = search.next() {
            let probe = if supports[i] {
                Probe::Supports
            } else {
                Probe::Blocks
            };
            search.record(i, probe);
        }
        (search.first(), search.probes())
    }

    fn track(s: &str) -> Vec<bool> {
        s.chars().map(|c| c == 'y').collect()
    }

    #[test]
    fn ceil_log2_table() {
        for (n, want) in [
            (0, 0),
            (1, 0),
            (2, 1),
            (3, 2),
            (4, 2),
            (5, 3),
            (1000, 10),
            (1024, 10),
            (1025, 11),
        ] {
            assert_eq!(ceil_log2(n), want, "{n}");
        }
        assert_eq!(budget(1001), 13);
    }

    #[test]
    fn searches_table() {
        // (track above the current version, answer, most lookups)
        let cases = [
            ("", First::None, 0),
            ("n", First::None, 1),
            ("y", First::Found(0), 1),
            ("nnnn", First::None, 3),
            ("yyyy", First::Found(0), 2),
            ("nnyy", First::Found(2), 4),
            ("nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnny", First::Found(31), 7),
            ("nyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy", First::Found(1), 7),
            // Support removed at the newest: the lowest shows it.
            ("ynnn", First::Found(0), 2),
            // Removed and added again: the lowest shows it.
            ("ynny", First::Found(0), 2),
            // Added, then removed: the middle shows it, then one by one from the bottom.
            ("nnynnn", First::Found(2), 4),
            ("nyyynnn", First::Found(1), 4),
            // Removed and added again between the versions looked up: a version that
            // supports whose predecessor does not.
            ("nynnnnyy", First::Found(6), 5),
        ];
        for (s, want, most) in cases {
            let (first, probes) = run(&track(s), None);
            assert_eq!(first, want, "{s}");
            assert!(probes <= most, "{s}: {probes} lookups");
        }
    }

    #[test]
    fn an_exhausted_budget_says_what_is_seen() {
        // Contradicted, then out of lookups before the versions below are all known.
        let (first, probes) = run(&track("nnnnnnnyyynnnnnn"), Some(5));
        assert_eq!(probes, 5);
        assert!(
            matches!(first, First::Unknown { seen: Some(_) }),
            "{first:?}"
        );
    }

    #[test]
    fn a_failed_lookup_stops_with_what_is_proven() {
        // The newest fails: nothing is known.
        let mut search = Search::new(5, 6);
        assert_eq!(search.next(), Some(4));
        search.record(4, Probe::Failed);
        assert_eq!(search.next(), None);
        assert_eq!(search.first(), First::Unknown { seen: None });
        assert_eq!(search.failed(), Some(4));
        // Mid-search: a version that supports is seen, its predecessor is not known.
        let mut search = Search::new(8, 9);
        search.record(7, Probe::Supports);
        search.record(0, Probe::Blocks);
        let mid = search.next().unwrap();
        search.record(mid, Probe::Supports);
        let next = search.next().unwrap();
        search.record(next, Probe::Failed);
        assert_eq!(search.next(), None);
        assert_eq!(search.first(), First::Unknown { seen: Some(mid) });
    }

    proptest::proptest! {
        /// On a track where support, once added, stays, the answer is the lowest that
        /// supports, within ⌈log2(n+1)⌉ + 3 lookups, its predecessor checked.
        #[test]
        fn monotone_tracks_are_answered_exactly(n in 0usize..3000, at in 0usize..3100) {
            let supports: Vec<bool> = (0..n).map(|i| i >= at).collect();
            let (first, probes) = run(&supports, None);
            let want = if at < n { First::Found(at) } else { First::None };
            proptest::prop_assert_eq!(first, want);
            proptest::prop_assert!(probes <= budget(n + 1));
        }

        /// On any track the answer is never wrong: a version found supports and every
        /// version below it was looked up or lies below a checked boundary of a consistent
        /// track; `None` only when both ends do not support.
        #[test]
        fn any_track_gets_a_true_or_unknown_answer(
            supports in proptest::collection::vec(proptest::bool::ANY, 0..200),
        ) {
            let mut search = Search::new(supports.len(), supports.len() + 1);
            while let Some(i) = search.next() {
                proptest::prop_assert!(search.known(i).is_none(), "looked up twice");
                search.record(i, if supports[i] { Probe::Supports } else { Probe::Blocks });
            }
            proptest::prop_assert!(search.probes() <= budget(supports.len() + 1));
            match search.first() {
                First::Found(i) => {
                    proptest::prop_assert!(supports[i]);
                    proptest::prop_assert!(i == 0 || search.known(i - 1) == Some(false));
                }
                First::None => {
                    let n = supports.len();
                    for i in [0, n.saturating_sub(1), n.saturating_sub(1) / 2] {
                        proptest::prop_assert!(supports.get(i) != Some(&true));
                    }
                }
                First::Unknown { seen } => {
                    proptest::prop_assert!(seen.is_none_or(|i| supports[i]));
                }
            }
        }
    }
}
