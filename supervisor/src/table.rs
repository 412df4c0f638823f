//! The status table: each daemon's lifecycle state as its runner last
//! published it, turned into the rows of `meta-core status` and of
//! `GET /status` ([`DaemonStatus`]) when someone reads it.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use metacore::api::supervisor::{DaemonState, DaemonStatus, LastExit};
use metacore::clock::unix_ms;
use metacore::layout::Daemon;

use crate::lifecycle::{Phase, State};
use crate::policy::Policy;
use crate::reason::Exit;
use metacore::sync::Locked;

/// One row per daemon of the policy table, in its order.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    /// Written by the runners after each transition, read by the control
    /// socket: a plain mutex, held only to copy a state in or out.
    rows: Arc<Mutex<Vec<(Daemon, State)>>>,
}

impl Table {
    pub(crate) fn new(policies: &[Policy]) -> Self {
        let rows = policies
            .iter()
            .map(|p| (p.daemon, State::default()))
            .collect();
        Self {
            rows: Arc::new(Mutex::new(rows)),
        }
    }

    /// Publishes `daemon`'s state.
    pub(crate) fn set(&self, daemon: Daemon, state: &State) {
        let mut rows = self.rows.locked();
        if let Some((_, row)) = rows.iter_mut().find(|(d, _)| *d == daemon) {
            row.clone_from(state);
        }
    }

    /// The table as it is now.
    pub(crate) fn snapshot(&self) -> Vec<DaemonStatus> {
        let rows = self.rows.locked().clone();
        let (now, now_ms) = (Instant::now(), unix_ms());
        rows.iter()
            .map(|(d, s)| status_of(*d, s, now, now_ms))
            .collect()
    }

    /// `daemon`'s row as it is now.
    pub(crate) fn row(&self, daemon: Daemon) -> Option<DaemonStatus> {
        self.snapshot().into_iter().find(|r| r.name == daemon)
    }
}

/// The wire state of a lifecycle phase.
fn wire_state(phase: &Phase) -> DaemonState {
    match phase {
        Phase::Idle | Phase::Stopped => DaemonState::Stopped,
        Phase::Spawning | Phase::Starting { .. } => DaemonState::Starting,
        Phase::Running { .. } => DaemonState::Running,
        Phase::Exiting { .. } => DaemonState::Stopping,
        Phase::Backoff {
            crash_loop: false, ..
        } => DaemonState::Backoff,
        Phase::Backoff {
            crash_loop: true, ..
        } => DaemonState::CrashLoop,
        Phase::Failed => DaemonState::Failed,
    }
}

/// `daemon`'s row at `now` (monotonic) and `now_ms` (Unix ms).
fn status_of(daemon: Daemon, s: &State, now: Instant, now_ms: u64) -> DaemonStatus {
    let ms = |d: std::time::Duration| d.as_millis() as u64;
    DaemonStatus {
        name: daemon,
        pid: s.pid().map(|p| p as u32),
        state: wire_state(&s.phase),
        ready: s.is_ready(),
        uptime_ms: s.started().map(|t| ms(now.saturating_duration_since(t))),
        restarts: s.restarts,
        failures: s.failures,
        last_exit: s.last.as_ref().map(|(ending, at)| {
            let (code, signal) = match ending.exit {
                Exit::Code(c) => (Some(c), None),
                Exit::Signal(s) => (None, Some(s)),
            };
            LastExit {
                code,
                signal,
                at: now_ms.saturating_sub(ms(now.saturating_duration_since(*at))),
                reason: ending.to_string(),
            }
        }),
        next_start_in_ms: match s.phase {
            Phase::Backoff { until, .. } => Some(ms(until.saturating_duration_since(now))),
            _ => None,
        },
        degraded: None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::reason::{Cause, Ending};

    #[test]
    fn a_row_shows_the_state_with_times_and_the_last_exit() {
        let t0 = Instant::now();
        let now = t0 + Duration::from_secs(42);
        let s = State {
            phase: Phase::Backoff {
                until: now + Duration::from_millis(640),
                crash_loop: false,
            },
            failures: 4,
            restarts: 4,
            waiting: 0,
            last: Some((
                Ending {
                    exit: Exit::Signal(9),
                    cause: Some(Cause::NotReady(Duration::from_secs(30))),
                },
                now - Duration::from_secs(2),
            )),
            ..State::default()
        };
        let row = status_of(Daemon::Apid, &s, now, 1_000_000);
        assert_eq!(row.state, DaemonState::Backoff);
        assert_eq!((row.pid, row.ready, row.uptime_ms), (None, false, None));
        assert_eq!(row.next_start_in_ms, Some(640));
        let last = row.last_exit.expect("recorded");
        assert_eq!((last.code, last.signal, last.at), (None, Some(9), 998_000));
        assert_eq!(last.reason, "killed by SIGKILL (not ready after 30 s)");
        let json = serde_json::to_value(status_of(Daemon::Apid, &s, now, 0)).unwrap();
        assert_eq!(json["name"], "apid", "the wire name is the daemon's");

        let running = State {
            phase: Phase::Running {
                pid: 7,
                since: t0,
                ready_at: t0,
                misses: 0,
            },
            ..State::default()
        };
        let row = status_of(Daemon::Storaged, &running, now, 0);
        assert_eq!(row.state, DaemonState::Running);
        assert_eq!(
            (row.pid, row.ready, row.uptime_ms),
            (Some(7), true, Some(42_000))
        );
    }
}
