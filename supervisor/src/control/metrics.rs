//! `GET /metrics`: the daemon table of `/status` as OpenMetrics text, per
//! daemon whether it is up and ready, its state, restarts, failures in a
//! row, uptime and how it last ended; and the supervisor's own role and
//! uptime. apid's public `/metrics` joins it with the daemons' own.

use axum::extract::State;
use axum::response::Response;
use metacore::api::supervisor::{DaemonState, Role, SupervisorStatus};
use metacore::layout::Daemon;
use metacore::metrics::{DaemonLabels, Part, RenderError};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Unit;

use super::St;

/// Every state a row can be in, for the one-hot `metacore_daemon_state`.
const STATES: [DaemonState; 7] = [
    DaemonState::Stopped,
    DaemonState::Starting,
    DaemonState::Running,
    DaemonState::Backoff,
    DaemonState::CrashLoop,
    DaemonState::Stopping,
    DaemonState::Failed,
];

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StateLabels {
    daemon: Daemon,
    state: DaemonState,
}

pub(super) async fn metrics(State(c): St) -> Response {
    metacore::metrics::answer(render(&c.status()))
}

/// A gauge family with one value per daemon.
fn per_daemon(
    s: &SupervisorStatus,
    value: impl Fn(&metacore::api::supervisor::DaemonStatus) -> Option<i64>,
) -> Family<DaemonLabels, Gauge> {
    let family = Family::<DaemonLabels, Gauge>::default();
    for d in &s.daemons {
        if let Some(v) = value(d) {
            family
                .get_or_create(&DaemonLabels { daemon: d.name })
                .set(v);
        }
    }
    family
}

/// One gauge per daemon and state, 1 for the state it is in.
fn states(s: &SupervisorStatus) -> Family<StateLabels, Gauge> {
    let state = Family::<StateLabels, Gauge>::default();
    for d in &s.daemons {
        for st in STATES {
            let labels = StateLabels {
                daemon: d.name,
                state: st,
            };
            state.get_or_create(&labels).set(i64::from(d.state == st));
        }
    }
    state
}

/// Each daemon's restarts, a counter.
fn restarts(s: &SupervisorStatus) -> Family<DaemonLabels, Counter> {
    let restarts = Family::<DaemonLabels, Counter>::default();
    for d in &s.daemons {
        restarts
            .get_or_create(&DaemonLabels { daemon: d.name })
            .inc_by(u64::from(d.restarts));
    }
    restarts
}

/// The exposition of the status `s`.
pub(crate) fn render(s: &SupervisorStatus) -> Result<String, RenderError> {
    let mut r = metacore::metrics::registry();
    metacore::metrics::register_build_info(&mut r, Part::Supervisor);
    r.register(
        "supervisor_leader",
        "1 while this supervisor holds the leader lock and runs the daemons",
        ConstGauge::new(i64::from(s.role == Role::Leader)),
    );
    r.register_with_unit(
        "supervisor_uptime",
        "Time since this supervisor started",
        Unit::Seconds,
        ConstGauge::new(s.uptime_ms as f64 / 1000.0),
    );
    r.register(
        "daemon_up",
        "1 while the daemon's process runs",
        per_daemon(s, |d| Some(i64::from(d.pid.is_some()))),
    );
    r.register(
        "daemon_ready",
        "1 while the daemon is ready and answers its health check",
        per_daemon(s, |d| Some(i64::from(d.ready))),
    );
    r.register(
        "daemon_state",
        "The daemon's state (1 for the one it is in)",
        states(s),
    );
    r.register(
        "daemon_restarts",
        "Starts of the daemon after its first (crashes and requested restarts)",
        restarts(s),
    );
    r.register(
        "daemon_failures",
        "Failures of the daemon in a row, without a stable uptime between",
        per_daemon(s, |d| Some(i64::from(d.failures))),
    );
    let uptime = Family::<DaemonLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    for d in &s.daemons {
        if let Some(ms) = d.uptime_ms {
            uptime
                .get_or_create(&DaemonLabels { daemon: d.name })
                .set(ms as f64 / 1000.0);
        }
    }
    r.register_with_unit(
        "daemon_uptime",
        "Time since the daemon's current process started (absent while none runs)",
        Unit::Seconds,
        uptime,
    );
    r.register(
        "daemon_last_exit_code",
        "The exit code of the daemon's last process, when it exited (absent otherwise)",
        per_daemon(s, |d| d.last_exit.as_ref()?.code.map(i64::from)),
    );
    r.register(
        "daemon_last_exit_signal",
        "The signal that ended the daemon's last process, when one did (absent otherwise)",
        per_daemon(s, |d| d.last_exit.as_ref()?.signal.map(i64::from)),
    );
    metacore::metrics::render(&[&r])
}

#[cfg(test)]
mod tests {
    use metacore::api::supervisor::{DaemonStatus, LastExit};

    use super::*;

    fn row(name: Daemon) -> DaemonStatus {
        DaemonStatus {
            name,
            pid: Some(42),
            state: DaemonState::Running,
            ready: true,
            uptime_ms: Some(1500),
            restarts: 0,
            failures: 0,
            last_exit: None,
            next_start_in_ms: None,
            degraded: None,
        }
    }

    #[test]
    fn each_row_becomes_its_daemons_series() {
        let crashed = DaemonStatus {
            pid: None,
            state: DaemonState::Backoff,
            ready: false,
            uptime_ms: None,
            restarts: 3,
            failures: 2,
            last_exit: Some(LastExit {
                code: None,
                signal: Some(9),
                at: 0,
                reason: "killed by SIGKILL".into(),
            }),
            ..row(Daemon::Watcherd)
        };
        let status = SupervisorStatus {
            role: Role::Leader,
            pid: 1,
            uptime_ms: 2000,
            leader_url: None,
            log_dir: "/logs".into(),
            daemons: vec![row(Daemon::Storaged), crashed],
        };
        let text = render(&status).expect("renders");
        for line in [
            "metacore_supervisor_leader 1",
            "metacore_daemon_up{daemon=\"storaged\"} 1",
            "metacore_daemon_up{daemon=\"watcherd\"} 0",
            "metacore_daemon_ready{daemon=\"watcherd\"} 0",
            "metacore_daemon_state{daemon=\"watcherd\",state=\"backoff\"} 1",
            "metacore_daemon_state{daemon=\"watcherd\",state=\"running\"} 0",
            "metacore_daemon_restarts_total{daemon=\"watcherd\"} 3",
            "metacore_daemon_restarts_total{daemon=\"storaged\"} 0",
            "metacore_daemon_failures{daemon=\"watcherd\"} 2",
            "metacore_daemon_uptime_seconds{daemon=\"storaged\"} 1.5",
            "metacore_daemon_last_exit_signal{daemon=\"watcherd\"} 9",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(!text.contains("metacore_daemon_uptime_seconds{daemon=\"watcherd\"}"));
        assert!(!text.contains("metacore_daemon_last_exit_code{"), "{text}");
        // No pid, no path: the table's private columns stay out.
        assert!(!text.contains("42") && !text.contains("/logs"), "{text}");
    }
}
