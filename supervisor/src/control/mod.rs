//! The control socket (`$META_CORE_RUN_DIR/meta-core.sock`): `GET /health`,
//! `GET /status` (the daemon table), `GET /metrics` (the same table as
//! OpenMetrics text), `POST /restart/{daemon}` and `POST /stop`, one file
//! per operation, for the operator CLI ([`client`]) and apid's public
//! `/status` and `/metrics`. It is served from the start, standby
//! included, so `meta-core status` always has an answer.

pub(crate) mod client;
mod health;
mod metrics;
mod restart;
mod status;
mod stop;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use axum::Router;
use axum::routing::{get, post};
use metacore::ApiError;
use metacore::api::supervisor::{Role, SupervisorStatus};
use metacore::layout::Daemon;
use metacore::shutdown::Trigger;
use metacore::socket::body::{no_method, no_route};
use tokio::sync::mpsc;

use crate::leader;
use crate::logs::Logs;
use crate::policy::{Policy, TABLE};
use crate::runner::Request;
use crate::table::Table;
use metacore::sync::Locked;

/// What the control socket reads and drives.
#[derive(Debug)]
pub(crate) struct Control {
    pub(crate) started: Instant,
    /// Written by the stages of `run` (standby, leader, stopping), read by
    /// every request: held only to copy the value.
    role: Mutex<Role>,
    pub(crate) table: Table,
    pub(crate) info_path: PathBuf,
    pub(crate) log_dir: PathBuf,
    /// The daemons' sockets, asked for their health by `/status`.
    pub(crate) run_dir: PathBuf,
    /// The runners' request queues, set once when leading begins: a
    /// standby has none.
    pub(crate) runners: OnceLock<Vec<(Daemon, mpsc::Sender<Request>)>>,
    /// The log files, set once when leading begins (SIGHUP reopens them).
    pub(crate) logs: OnceLock<Logs>,
    /// Fires the orderly stop (`POST /stop`, or the shutdown `run` was
    /// given).
    pub(crate) stop: Trigger,
}

impl Control {
    pub(crate) fn new(
        info_path: PathBuf,
        log_dir: PathBuf,
        run_dir: PathBuf,
        stop: Trigger,
    ) -> Self {
        Self {
            started: Instant::now(),
            role: Mutex::new(Role::Standby),
            table: Table::new(TABLE),
            info_path,
            log_dir,
            run_dir,
            runners: OnceLock::new(),
            logs: OnceLock::new(),
            stop,
        }
    }

    pub(crate) fn role(&self) -> Role {
        *self.role.locked()
    }

    pub(crate) fn set_role(&self, role: Role) {
        *self.role.locked() = role;
    }

    pub(crate) fn status(&self) -> SupervisorStatus {
        SupervisorStatus {
            role: self.role(),
            pid: std::process::id(),
            uptime_ms: self.started.elapsed().as_millis() as u64,
            leader_url: leader::read_info(&self.info_path),
            log_dir: self.log_dir.display().to_string(),
            daemons: self.table.snapshot(),
        }
    }
}

type St = axum::extract::State<Arc<Control>>;

pub(crate) fn router(control: Arc<Control>) -> Router {
    Router::new()
        .route("/health", get(health::health))
        .route("/status", get(status::status))
        .route("/metrics", get(metrics::metrics))
        .route("/restart/{daemon}", post(restart::restart))
        .route("/stop", post(stop::stop))
        .fallback(no_route)
        .method_not_allowed_fallback(no_method)
        .with_state(control)
}

/// The supervised daemon named `name`, or a 404 that lists the names.
pub(crate) fn supervised(name: &str) -> Result<Daemon, ApiError> {
    Daemon::from_name(name)
        .filter(|d| Policy::of(*d).is_some())
        .ok_or_else(|| {
            let known: Vec<&str> = TABLE.iter().map(|p| p.daemon.name()).collect();
            ApiError::not_found(format!(
                "unknown daemon {name:?}; this meta-core supervises {}",
                known.join(", ")
            ))
        })
}
