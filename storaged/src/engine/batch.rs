//! The group-commit decision, as a pure function: after the writer has taken
//! `taken` writes into the current group, does it take another one that is
//! already queued, or close the group and commit?
//!
//! A group closes when the queue is empty (never wait for more: a lone write
//! commits at once), when it holds `max_writes`, or when it has been open
//! for `max_open` (so the first write of a long group is not acknowledged
//! late).

use std::time::Duration;

/// Limits of one group.
#[derive(Debug, Clone, Copy)]
pub struct BatchLimits {
    pub max_writes: usize,
    pub max_open: Duration,
}

impl Default for BatchLimits {
    fn default() -> Self {
        Self { max_writes: 256, max_open: Duration::from_millis(50) }
    }
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Take the next queued write into this group.
    Take,
    /// Commit the group.
    Commit,
}

/// The decision.
pub fn next(limits: &BatchLimits, taken: usize, open_for: Duration, queue_empty: bool) -> Next {
    if queue_empty || taken >= limits.max_writes || open_for >= limits.max_open { Next::Commit } else { Next::Take }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: BatchLimits = BatchLimits { max_writes: 4, max_open: Duration::from_millis(10) };
    const NOW: Duration = Duration::ZERO;

    #[test]
    fn a_lone_write_commits_at_once() {
        assert_eq!(next(&L, 1, NOW, true), Next::Commit);
    }

    #[test]
    fn queued_writes_join_the_group() {
        assert_eq!(next(&L, 1, NOW, false), Next::Take);
        assert_eq!(next(&L, 3, NOW, false), Next::Take);
    }

    #[test]
    fn a_full_group_commits() {
        assert_eq!(next(&L, 4, NOW, false), Next::Commit);
        assert_eq!(next(&L, 5, NOW, false), Next::Commit);
    }

    #[test]
    fn a_group_open_too_long_commits() {
        assert_eq!(next(&L, 2, Duration::from_millis(10), false), Next::Commit);
        assert_eq!(next(&L, 2, Duration::from_millis(9), false), Next::Take);
    }
}
