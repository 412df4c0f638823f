//! The control socket (`$META_CORE_RUN_DIR/meta-core.sock`): the status
//! table, and restart and stop for the operator CLI. It is served from the
//! start, standby included, so `meta-core status` always has an answer.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use metacore::api::supervisor::{
    DaemonStatus, Role, StopAccepted, SupervisorHealth, SupervisorStatus,
};
use metacore::layout::Daemon;
use metacore::shutdown::Trigger;
use metacore::socket::body::{no_method, no_route};
use metacore::{ApiError, ErrorCode};
use tokio::sync::{mpsc, oneshot};

use crate::leader;
use crate::logs::Logs;
use crate::policy::{Policy, TABLE};
use crate::tree::{Command, Table};

/// What the control socket reads and drives.
#[derive(Debug)]
pub struct Control {
    pub started: Instant,
    pub role: Mutex<Role>,
    pub table: Table,
    pub info_path: PathBuf,
    pub log_dir: PathBuf,
    /// The runners' command queues, once leader.
    pub commands: Mutex<HashMap<Daemon, mpsc::Sender<Command>>>,
    /// The log files, once leader (SIGHUP reopens them).
    pub logs: Mutex<Option<Logs>>,
    /// Fires the orderly stop.
    pub stop: Trigger,
}

impl Control {
    pub fn role(&self) -> Role {
        *self.role.lock().expect("role lock")
    }

    pub fn set_role(&self, role: Role) {
        *self.role.lock().expect("role lock") = role;
    }

    pub fn status(&self) -> SupervisorStatus {
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

type St = State<Arc<Control>>;

pub fn router(control: Arc<Control>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/status", get(status))
        .route("/restart/{daemon}", post(restart))
        .route("/stop", post(stop))
        .fallback(no_route)
        .method_not_allowed_fallback(no_method)
        .with_state(control)
}

async fn health(State(c): St) -> Json<SupervisorHealth> {
    Json(SupervisorHealth {
        status: "ok".into(),
        role: c.role(),
    })
}

async fn status(State(c): St) -> Json<SupervisorStatus> {
    Json(c.status())
}

/// The supervised daemon named `name`, or a 404 that lists the names.
pub fn supervised(name: &str) -> Result<Daemon, ApiError> {
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

async fn restart(State(c): St, Path(name): Path<String>) -> Result<Json<DaemonStatus>, ApiError> {
    let daemon = supervised(&name)?;
    let role = c.role();
    if role != Role::Leader {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!(
                "meta-core is {}: it runs no daemon to restart",
                role.as_str()
            ),
        ));
    }
    let tx = c
        .commands
        .lock()
        .expect("commands lock")
        .get(&daemon)
        .cloned();
    let Some(tx) = tx else {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("{name} has not been started yet"),
        ));
    };
    let (reply, answer) = oneshot::channel();
    tx.send(Command::Restart(reply)).await.map_err(|_| {
        ApiError::new(
            ErrorCode::Conflict,
            format!("{name} is no longer supervised (stopping)"),
        )
    })?;
    let row = answer
        .await
        .map_err(|_| ApiError::new(ErrorCode::Conflict, format!("{name} stopped instead")))??;
    Ok(Json(row))
}

async fn stop(State(c): St) -> Json<StopAccepted> {
    tracing::info!("stop requested on the control socket");
    c.stop.fire();
    Json(StopAccepted { stopping: true })
}
