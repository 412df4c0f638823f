//! The supervisor's control socket (`$META_CORE_RUN_DIR/meta-core.sock`):
//! `GET /health`, `GET /status` (the daemon table), `GET /metrics` (the same
//! table as OpenMetrics text), `POST /restart/{daemon}` and `POST /stop`.
//! The operator CLI (`meta-core status|restart|stop`) and apid's public
//! `/status` and `/metrics` read it through [`SupervisorClient`].

use std::path::Path;

use http::Method;
use serde::{Deserialize, Serialize};

use crate::layout::Daemon;
use crate::socket::client::{ClientError, SocketClient};

/// What the supervisor is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Waiting for the leader lock; runs no daemon.
    Standby,
    /// Holds the lock and runs the daemons.
    Leader,
    /// Stopping the daemons before it exits.
    Stopping,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Standby => "standby",
            Role::Leader => "leader",
            Role::Stopping => "stopping",
        }
    }
}

/// Where one daemon is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DaemonState {
    /// Not started (standby, or waiting for what it depends on).
    Stopped,
    /// Started, not ready yet.
    Starting,
    /// Ready and answering its health check.
    Running,
    /// Exited; restarts after the backoff.
    Backoff,
    /// Failing again and again: restarts at the longest backoff.
    CrashLoop,
    /// Being stopped.
    Stopping,
    /// Given up on (the supervisor stops the tree when this is storaged).
    Failed,
}

impl DaemonState {
    pub fn as_str(self) -> &'static str {
        match self {
            DaemonState::Stopped => "stopped",
            DaemonState::Starting => "starting",
            DaemonState::Running => "running",
            DaemonState::Backoff => "backoff",
            DaemonState::CrashLoop => "crash-loop",
            DaemonState::Stopping => "stopping",
            DaemonState::Failed => "failed",
        }
    }
}

/// How a daemon's process last ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastExit {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal number, when a signal ended it.
    pub signal: Option<i32>,
    /// Unix milliseconds.
    pub at: u64,
    /// In words: "exited with status 1", "killed by SIGKILL", and why the
    /// supervisor ended it when it did ("did not answer /health").
    pub reason: String,
}

/// One row of the status table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonStatus {
    /// On the wire, the daemon's name (`"storaged"`).
    pub name: Daemon,
    pub pid: Option<u32>,
    pub state: DaemonState,
    /// Signalled readiness and has not failed a health check since.
    pub ready: bool,
    /// Milliseconds since the current process started.
    pub uptime_ms: Option<u64>,
    /// Starts after the first one (crashes and requested restarts).
    pub restarts: u32,
    /// Failures in a row without a stable uptime in between.
    pub failures: u32,
    pub last_exit: Option<LastExit>,
    /// Milliseconds until the next start, in backoff.
    pub next_start_in_ms: Option<u64>,
    /// Why a running daemon says it is degraded (its `/health`), e.g.
    /// storaged's full volume; absent when it is fine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<String>,
}

/// `GET /status` of the control socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SupervisorStatus {
    pub role: Role,
    pub pid: u32,
    pub uptime_ms: u64,
    /// The URL in `kv-leader.info` (ours when leader, the leader's when
    /// standby, if the file is there).
    pub leader_url: Option<String>,
    pub log_dir: String,
    pub daemons: Vec<DaemonStatus>,
}

/// `GET /health` of the control socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SupervisorHealth {
    pub status: String,
    pub role: Role,
}

/// `POST /stop` of the control socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopAccepted {
    pub stopping: bool,
}

/// A typed client of the control socket.
#[derive(Debug, Clone)]
pub struct SupervisorClient {
    inner: SocketClient,
}

impl SupervisorClient {
    pub fn new(socket: &Path) -> Self {
        Self {
            inner: SocketClient::new("meta-core", socket),
        }
    }

    pub async fn health(&self) -> Result<SupervisorHealth, ClientError> {
        self.inner.get("/health").await
    }

    pub async fn status(&self) -> Result<SupervisorStatus, ClientError> {
        self.inner.get("/status").await
    }

    /// `GET /metrics`: the daemon table as metrics (up, ready, restarts, last exit), OpenMetrics text
    /// ([`crate::metrics`]).
    pub async fn metrics(&self) -> Result<String, ClientError> {
        self.inner.get_text("/metrics").await
    }

    /// Restarts one daemon; answers once it is ready again.
    pub async fn restart(&self, daemon: Daemon) -> Result<DaemonStatus, ClientError> {
        self.inner
            .call::<(), _>(Method::POST, &format!("/restart/{daemon}"), None)
            .await
    }

    /// Starts the orderly stop of the whole tree; answers at once.
    pub async fn stop(&self) -> Result<StopAccepted, ClientError> {
        self.inner.call::<(), _>(Method::POST, "/stop", None).await
    }
}
