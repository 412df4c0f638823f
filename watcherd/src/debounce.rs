//! The debounce: a file still being written is announced once, after it
//! has been quiet for `DEBOUNCE_MS` and its size and mtime held still, not
//! once per write.
//!
//! Pure bookkeeping, with the time passed in: the watcher feeds it what it
//! saw of a path (an inotify event's or a scan's `stat`), asks it which
//! paths are due, `stat`s each again and tells it what it found. A path
//! whose size or mtime moved starts its quiet period over; one that held
//! still is settled and leaves; one that is gone leaves without a word.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What a `stat` of a file said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Seen {
    pub size: u64,
    pub mtime_ns: i64,
}

/// What the second look at a due path decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Quiet and unchanged: announce it with this size and mtime.
    Settled(Seen),
    /// It moved since: its quiet period starts over.
    Again,
    /// Not pending (settled already, or never seen).
    Unknown,
}

#[derive(Debug)]
struct Pending {
    seen: Seen,
    /// When the quiet period ends.
    due: Instant,
    /// When something last happened at the path.
    touched: Instant,
}

/// The paths waiting to be quiet.
#[derive(Debug)]
pub struct Debouncer {
    quiet: Duration,
    pending: HashMap<String, Pending>,
}

impl Debouncer {
    pub fn new(quiet: Duration) -> Self {
        Self {
            quiet,
            pending: HashMap::new(),
        }
    }

    /// Something happened at `path`, which `stat`s as `seen` now. A change
    /// of size or mtime (or a first sight) starts the quiet period; the same
    /// `stat` again (an event that changed nothing) does not extend it.
    pub fn touch(&mut self, path: &str, seen: Seen, now: Instant) {
        let due = now + self.quiet;
        let touched = now;
        match self.pending.get_mut(path) {
            Some(p) if p.seen == seen => p.touched = now,
            Some(p) => *p = Pending { seen, due, touched },
            None => {
                self.pending
                    .insert(path.to_owned(), Pending { seen, due, touched });
            }
        }
    }

    /// [`Debouncer::touch`] of a path the caller owns already (a walk's
    /// result): no copy of it is made. `due_now` is for a file known to be
    /// quiet already (its mtime is older than the quiet period, or it is a
    /// known file moved here): due at once, still checked by a second
    /// `stat`.
    pub fn touch_owned(&mut self, path: String, seen: Seen, now: Instant, due_now: bool) {
        let due = if due_now { now } else { now + self.quiet };
        let touched = now;
        match self.pending.get_mut(&path) {
            Some(p) if p.seen == seen && !due_now => p.touched = now,
            Some(p) => *p = Pending { seen, due, touched },
            None => {
                self.pending.insert(path, Pending { seen, due, touched });
            }
        }
    }

    /// When something last happened at a pending path.
    pub fn touched_at(&self, path: &str) -> Option<Instant> {
        self.pending.get(path).map(|p| p.touched)
    }

    /// The path went away before it settled: nothing is announced for it.
    pub fn forget(&mut self, path: &str) {
        self.pending.remove(path);
    }

    /// Paths pending now.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// When the next pending path is due, if any is pending.
    pub fn next_due(&self) -> Option<Instant> {
        self.pending.values().map(|p| p.due).min()
    }

    /// Up to `max` paths quiet for the whole period by `now`, in path
    /// order (which ones, when more are due, is unspecified: the rest come
    /// in the next call). Only the paths returned are copied.
    /// Each with the `stat` it waits on, for the second look to compare.
    pub fn due(&self, now: Instant, max: usize) -> Vec<(String, Seen)> {
        let mut due: Vec<(String, Seen)> = self
            .pending
            .iter()
            .filter(|(_, p)| now >= p.due)
            .take(max)
            .map(|(path, p)| (path.clone(), p.seen))
            .collect();
        due.sort_by(|a, b| a.0.cmp(&b.0));
        due
    }

    /// The second look at a due path: `now_seen` is its `stat` now (`None`
    /// when it is gone, which forgets it).
    pub fn settle(&mut self, path: &str, now_seen: Option<Seen>, now: Instant) -> Settle {
        let Some(p) = self.pending.get_mut(path) else {
            return Settle::Unknown;
        };
        match now_seen {
            None => {
                self.pending.remove(path);
                Settle::Unknown
            }
            Some(seen) if seen == p.seen => {
                self.pending.remove(path);
                Settle::Settled(seen)
            }
            Some(seen) => {
                *p = Pending {
                    seen,
                    due: now + self.quiet,
                    touched: now,
                };
                Settle::Again
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUIET: Duration = Duration::from_secs(30);

    fn seen(size: u64, mtime_ns: i64) -> Seen {
        Seen { size, mtime_ns }
    }

    #[test]
    fn a_file_written_in_pieces_settles_once_after_the_last_write() {
        let t0 = Instant::now();
        let p = "watch/a.mkv";
        let mut d = Debouncer::new(QUIET);
        // Ten writes, 5 s apart: never quiet for 30 s until the end.
        for i in 0..10u64 {
            let now = t0 + Duration::from_secs(5 * i);
            d.touch(p, seen(1 << (20 + i), i as i64), now);
            assert!(d.due(now, 10).is_empty(), "write {i}");
        }
        let last = t0 + Duration::from_secs(45);
        assert_eq!(d.next_due(), Some(last + QUIET));
        assert!(
            d.due(last + QUIET - Duration::from_millis(1), 10)
                .is_empty()
        );
        assert_eq!(d.due(last + QUIET, 10), [(p.to_owned(), seen(1 << 29, 9))]);
        let s = d.settle(p, Some(seen(1 << 29, 9)), last + QUIET);
        assert_eq!(s, Settle::Settled(seen(1 << 29, 9)));
        assert!(d.is_empty());
        assert_eq!(
            d.settle(p, Some(seen(1 << 29, 9)), last + QUIET),
            Settle::Unknown
        );
    }

    #[test]
    fn an_event_that_changed_nothing_does_not_extend_the_wait() {
        let t0 = Instant::now();
        let p = "a";
        let mut d = Debouncer::new(QUIET);
        d.touch(p, seen(10, 1), t0);
        d.touch(p, seen(10, 1), t0 + Duration::from_secs(20));
        assert_eq!(d.next_due(), Some(t0 + QUIET));
    }

    #[test]
    fn a_change_seen_at_the_second_look_starts_the_wait_over() {
        let t0 = Instant::now();
        let p = "a";
        let mut d = Debouncer::new(QUIET);
        d.touch(p, seen(10, 1), t0);
        let at = t0 + QUIET;
        assert_eq!(d.settle(p, Some(seen(20, 2)), at), Settle::Again);
        assert_eq!(d.next_due(), Some(at + QUIET));
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn a_file_gone_before_it_settled_is_never_announced() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(QUIET);
        d.touch("a", seen(1, 1), t0);
        d.touch("b", seen(1, 1), t0);
        d.forget("a");
        assert_eq!(d.settle("b", None, t0 + QUIET), Settle::Unknown);
        assert!(d.is_empty());
        assert_eq!(d.next_due(), None);
    }

    #[test]
    fn a_file_quiet_already_is_due_at_once_and_still_checked() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(QUIET);
        d.touch_owned("a".into(), seen(10, 1), t0, true);
        assert_eq!(d.due(t0, 10), [("a".to_owned(), seen(10, 1))]);
        assert_eq!(d.settle("a", Some(seen(11, 2)), t0), Settle::Again);
        assert_eq!(d.next_due(), Some(t0 + QUIET));
    }

    #[test]
    fn without_a_quiet_period_everything_is_due_at_once_in_path_order() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(Duration::ZERO);
        for name in ["c", "a", "b"] {
            d.touch(name, seen(1, 1), t0);
        }
        let due: Vec<_> = d.due(t0, 10).into_iter().map(|(p, _)| p).collect();
        assert_eq!(d.due(t0, 2).len(), 2);
        assert_eq!(due, ["a", "b", "c"]);
    }
}
