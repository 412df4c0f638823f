//! The restart policy, as one table: what each daemon needs before it
//! starts, how long it may take to become ready and to stop, how restarts
//! back off, and what a crash loop does. Adding a daemon is adding a row:
//! nothing else in the supervisor names a daemon.

use std::time::Duration;

use metacore::backoff::Backoff;
use metacore::layout::Daemon;

/// What the supervisor does when a daemon keeps failing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnCrashLoop {
    /// Stop the whole tree and exit non-zero, so the container is restarted
    /// or a standby takes over (the store is not worth running half-broken).
    GiveUp,
    /// Keep restarting at the longest backoff, shown as `crash-loop` in the
    /// status, while the rest of the tree keeps serving.
    KeepRetrying,
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    pub(crate) daemon: Daemon,
    /// Started only once these have been ready (they are not restarted with it).
    pub(crate) after: &'static [Daemon],
    /// Longer than this from start to readiness counts as a failed start.
    pub(crate) ready_timeout: Duration,
    /// Time between SIGTERM and SIGKILL on an orderly stop.
    pub(crate) stop_grace: Duration,
    /// Delay before the first restart after a failure; each further failure
    /// in a row multiplies it by [`BACKOFF_FACTOR`], up to `max_backoff`.
    pub(crate) first_backoff: Duration,
    pub(crate) max_backoff: Duration,
    /// An uptime this long forgives the failures before it.
    pub(crate) stable_after: Duration,
    /// This many failures in a row is a crash loop.
    pub(crate) crash_loop_after: u32,
    pub(crate) on_crash_loop: OnCrashLoop,
}

pub(crate) const BACKOFF_FACTOR: u32 = 4;

/// Health checks missed in a row before a daemon is declared hung and killed.
pub(crate) const MISSED_HEALTH_CHECKS: u32 = 3;

/// The longest a health check may take.
pub(crate) const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// The table, in start order (stop order is the reverse).
pub(crate) const TABLE: &[Policy] = &[
    Policy {
        daemon: Daemon::Storaged,
        after: &[],
        // Opening a large database runs the integrity checks and migrations.
        ready_timeout: Duration::from_secs(120),
        // Queued writes are committed before it exits (milliseconds). The
        // graces of the table add up to under Docker's default 10 s.
        stop_grace: Duration::from_millis(4_500),
        first_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_secs(10),
        stable_after: Duration::from_secs(30),
        crash_loop_after: 5,
        on_crash_loop: OnCrashLoop::GiveUp,
    },
    Policy {
        daemon: Daemon::Apid,
        after: &[Daemon::Storaged],
        ready_timeout: Duration::from_secs(30),
        stop_grace: Duration::from_secs(3),
        first_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_secs(10),
        stable_after: Duration::from_secs(30),
        crash_loop_after: 5,
        on_crash_loop: OnCrashLoop::KeepRetrying,
    },
    Policy {
        daemon: Daemon::Watcherd,
        after: &[Daemon::Storaged],
        // Ready once its socket is bound; it reads what it knows and scans
        // after that, with the API up.
        ready_timeout: Duration::from_secs(30),
        // Nothing to flush: what it had not sent is found again by the
        // scan of its next start.
        stop_grace: Duration::from_secs(1),
        first_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_secs(10),
        stable_after: Duration::from_secs(30),
        crash_loop_after: 5,
        on_crash_loop: OnCrashLoop::KeepRetrying,
    },
    Policy {
        daemon: Daemon::Mountd,
        after: &[],
        // Ready once its socket is bound; rclone starts after that.
        ready_timeout: Duration::from_secs(30),
        // It unmounts every mount (through rclone for half a second, then
        // detaching what is left), then stops rclone rcd, which ends at
        // once on SIGTERM. The graces of the table add up to under 10 s.
        stop_grace: Duration::from_secs(1),
        first_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_secs(10),
        stable_after: Duration::from_secs(30),
        crash_loop_after: 5,
        on_crash_loop: OnCrashLoop::KeepRetrying,
    },
];

impl Policy {
    /// The row of `daemon`, if it is supervised.
    pub(crate) fn of(daemon: Daemon) -> Option<&'static Policy> {
        TABLE.iter().find(|p| p.daemon == daemon)
    }

    /// Failures in a row once a process has failed, after `before` failures
    /// in a row. `ready_for` is how long it had been ready (`None`: it never
    /// was): only a stable time *ready* forgives the failures before it; a
    /// start that hangs however long is one more failure.
    pub(crate) fn count_failure(&self, before: u32, ready_for: Option<Duration>) -> u32 {
        match ready_for {
            Some(d) if d >= self.stable_after => 1,
            _ => before + 1,
        }
    }

    /// The delay before the next start after `failures` failures in a row
    /// (at least 1), the last by a process that had been ready or not:
    ///
    /// - the first failure of a daemon that had been ready restarts it at
    ///   once: a serving daemon that crashes once is not a loop yet, and
    ///   each millisecond of delay is downtime for its clients;
    /// - otherwise `first_backoff`, times [`BACKOFF_FACTOR`] for each
    ///   further failure in a row, up to `max_backoff`;
    /// - a crash loop (`crash_loop_after` failures) waits `max_backoff`.
    pub(crate) fn restart_delay(&self, failures: u32, had_been_ready: bool) -> Duration {
        if failures >= self.crash_loop_after {
            self.max_backoff
        } else if failures <= 1 && had_been_ready {
            Duration::ZERO
        } else {
            self.backoff(failures)
        }
    }

    /// The growing part of [`Policy::restart_delay`]: `first_backoff` times
    /// [`BACKOFF_FACTOR`] for each failure after the first, capped.
    pub(crate) fn backoff(&self, failures: u32) -> Duration {
        Backoff::new(self.first_backoff, self.max_backoff, BACKOFF_FACTOR).after(failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_starts_fast_grows_and_is_capped() {
        let p = Policy::of(Daemon::Storaged).unwrap();
        let delays: Vec<u128> = (1..=8).map(|n| p.backoff(n).as_millis()).collect();
        assert_eq!(delays, [10, 40, 160, 640, 2560, 10_000, 10_000, 10_000]);
    }

    #[test]
    fn a_serving_daemon_that_crashes_once_restarts_at_once() {
        let p = Policy::of(Daemon::Apid).unwrap();
        assert_eq!(p.restart_delay(1, true), Duration::ZERO);
        assert_eq!(
            p.restart_delay(1, false),
            p.first_backoff,
            "never ready: backoff"
        );
        assert_eq!(
            p.restart_delay(2, true),
            p.backoff(2),
            "a second one in a row backs off"
        );
        assert_eq!(p.restart_delay(p.crash_loop_after, true), p.max_backoff);
    }

    #[test]
    fn a_stable_uptime_forgives_the_failures_before_it() {
        let p = Policy::of(Daemon::Apid).unwrap();
        assert_eq!(p.count_failure(0, Some(Duration::from_millis(5))), 1);
        assert_eq!(
            p.count_failure(4, Some(Duration::from_secs(1))),
            5,
            "a short life adds to the count"
        );
        assert_eq!(
            p.count_failure(4, Some(p.stable_after)),
            1,
            "a stable one starts it again"
        );
        assert_eq!(
            p.count_failure(4, None),
            5,
            "never ready, however long it took, is a failure"
        );
        assert!(p.count_failure(4, Some(Duration::from_secs(1))) >= p.crash_loop_after);
    }

    #[test]
    fn a_whole_stop_fits_in_dockers_ten_seconds() {
        let total: Duration = TABLE.iter().map(|p| p.stop_grace).sum();
        assert!(total < Duration::from_secs(10), "{total:?}");
    }

    #[test]
    fn the_table_starts_dependencies_first() {
        for (i, p) in TABLE.iter().enumerate() {
            for dep in p.after {
                let at = TABLE
                    .iter()
                    .position(|q| q.daemon == *dep)
                    .expect("a dependency is in the table");
                assert!(at < i, "{:?} must come after {:?}", p.daemon, dep);
            }
        }
        assert_eq!(TABLE[0].daemon, Daemon::Storaged);
        assert_eq!(TABLE[0].on_crash_loop, OnCrashLoop::GiveUp);
    }
}
