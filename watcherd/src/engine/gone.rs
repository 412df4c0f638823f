//! Known files that vanished, waiting to become a `delete` or a `rename`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use super::Known;
use crate::debounce::Seen;

/// Known paths that disappeared, waiting to become a delete or a rename.
/// Each keeps what was known of it when it went (the index entries are
/// removed with the same values, whatever `known` says by then), and the
/// time it was first missed: seeing it missing again does not restart its
/// wait.
#[derive(Debug, Default)]
pub(super) struct Gone {
    pub(super) since: BTreeMap<String, (Instant, [u8; 32], Seen)>,
    by_hash: HashMap<[u8; 32], BTreeSet<String>>,
    by_seen: HashMap<Seen, usize>,
}

impl Gone {
    pub(super) fn insert(&mut self, path: &str, known: &Known, now: Instant) {
        if self.since.contains_key(path) {
            return;
        }
        self.since
            .insert(path.to_owned(), (now, known.midhash, known.seen));
        self.by_hash
            .entry(known.midhash)
            .or_default()
            .insert(path.to_owned());
        *self.by_seen.entry(known.seen).or_default() += 1;
    }

    pub(super) fn remove(&mut self, path: &str) -> bool {
        let Some((_, midhash, seen)) = self.since.remove(path) else {
            return false;
        };
        if let Some(set) = self.by_hash.get_mut(&midhash) {
            set.remove(path);
            if set.is_empty() {
                self.by_hash.remove(&midhash);
            }
        }
        if let Some(n) = self.by_seen.get_mut(&seen) {
            *n -= 1;
            if *n == 0 {
                self.by_seen.remove(&seen);
            }
        }
        true
    }

    /// When `path` was first missed, if it is waiting.
    pub(super) fn since(&self, path: &str) -> Option<Instant> {
        self.since.get(path).map(|(t, _, _)| *t)
    }

    /// A gone path whose content was `midhash` (the first in path order).
    pub(super) fn matching(&self, midhash: &[u8; 32]) -> Option<String> {
        self.by_hash.get(midhash)?.iter().next().cloned()
    }

    pub(super) fn has_seen(&self, seen: &Seen) -> bool {
        self.by_seen.contains_key(seen)
    }

    pub(super) fn next_due(&self, quiet: Duration) -> Option<Instant> {
        self.since.values().map(|(t, _, _)| *t + quiet).min()
    }

    pub(super) fn due(&self, now: Instant, quiet: Duration) -> Vec<String> {
        self.since
            .iter()
            .filter(|(_, (t, _, _))| now >= *t + quiet)
            .map(|(p, _)| p.clone())
            .collect()
    }
}
