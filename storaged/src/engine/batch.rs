//! The group-commit decision, as a pure function: with `taken` writes
//! already run in the open group, does the writer take the next queued
//! write, wait a moment for more, or commit?
//!
//! - A full group (`max_writes`) or one open for `max_open` commits, so the
//!   first write of a long group is not acknowledged late.
//! - A queued write joins the group.
//! - With the queue empty, the group waits up to `max_linger` while it is
//!   smaller than the last one (`expected`): the writers just acknowledged
//!   are about to send their next write, and one commit for all of them
//!   costs far less than one each (every commit rewrites the pages all of
//!   them touch). A lone writer (`expected` 1) never waits.

use std::time::Duration;

/// Limits of one group.
#[derive(Debug, Clone, Copy)]
pub struct BatchLimits {
    pub max_writes: usize,
    pub max_open: Duration,
    pub max_linger: Duration,
}

impl Default for BatchLimits {
    fn default() -> Self {
        Self {
            max_writes: 256,
            max_open: Duration::from_millis(50),
            max_linger: Duration::from_millis(2),
        }
    }
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Take the next queued write into this group.
    Take,
    /// Wait (at most this long) for a write to be queued, then decide again.
    Wait(Duration),
    /// Commit the group.
    Commit,
}

/// The decision.
pub(crate) fn next(
    limits: &BatchLimits,
    taken: usize,
    open_for: Duration,
    queue_empty: bool,
    expected: usize,
) -> Next {
    if taken >= limits.max_writes || open_for >= limits.max_open {
        return Next::Commit;
    }
    if !queue_empty {
        return Next::Take;
    }
    if taken < expected && open_for < limits.max_linger {
        return Next::Wait(limits.max_linger - open_for);
    }
    Next::Commit
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: BatchLimits = BatchLimits {
        max_writes: 4,
        max_open: Duration::from_millis(10),
        max_linger: Duration::from_millis(2),
    };
    const NOW: Duration = Duration::ZERO;
    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_lone_writer_commits_at_once() {
        assert_eq!(next(&L, 1, NOW, true, 1), Next::Commit);
    }

    #[test]
    fn queued_writes_join_the_group() {
        assert_eq!(next(&L, 1, NOW, false, 1), Next::Take);
        assert_eq!(next(&L, 3, NOW, false, 1), Next::Take);
    }

    #[test]
    fn a_full_group_commits() {
        assert_eq!(next(&L, 4, NOW, false, 8), Next::Commit);
        assert_eq!(next(&L, 5, NOW, false, 8), Next::Commit);
    }

    #[test]
    fn a_group_open_too_long_commits() {
        assert_eq!(next(&L, 2, 10 * MS, false, 3), Next::Commit);
        assert_eq!(next(&L, 2, 9 * MS, false, 3), Next::Take);
    }

    #[test]
    fn a_group_smaller_than_the_last_waits_briefly() {
        assert_eq!(next(&L, 1, NOW, true, 3), Next::Wait(2 * MS));
        assert_eq!(next(&L, 2, MS, true, 3), Next::Wait(MS));
    }

    #[test]
    fn waiting_is_bounded() {
        assert_eq!(next(&L, 1, 2 * MS, true, 3), Next::Commit);
        assert_eq!(
            next(&L, 3, NOW, true, 3),
            Next::Commit,
            "as large as the last: commit"
        );
    }
}
