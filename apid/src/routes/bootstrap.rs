//! Bootstrap and discovery: `/health`, `/status`, `/leader`, `/urls`, and
//! apid's own socket `/health` and `/status`.

use std::time::SystemTime;

use axum::Json;
use metacore::api::apid::ApidStatus;
use metacore::api::mountd::{MountdStatus, RcdState};
use metacore::api::supervisor::{DaemonState, DaemonStatus, LastExit, Role, SupervisorStatus};
use metacore::api::watcherd::WatcherdStatus;
use metacore::layout::Daemon;
use metacore::socket::Health;
use serde::Serialize;

use crate::state::State;
use crate::urls::{LeaderInfo, Urls};

/// `GET /health`: always 200; `status` is `degraded` and `redis` false
/// while storaged does not answer (the field keeps the original's name),
/// and `degraded` with `reason` while storaged answers but cannot write
/// (its volume is full).
#[derive(Debug, Serialize)]
pub(crate) struct PublicHealth {
    pub status: &'static str,
    pub redis: bool,
    pub timestamp: String,
    pub leader: LeaderInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PublicStatus {
    pub status: &'static str,
    pub redis: bool,
    pub service_name: String,
    pub version: String,
    pub uptime_seconds: u64,
    pub file_count: u64,
    pub leader: LeaderInfo,
    /// The supervisor's daemon table (`meta-core status`); null when apid
    /// runs without the supervisor. Pids and paths only for the admin.
    pub supervisor: Option<Shown<SupervisorStatus, PublicSupervisor>>,
    /// watcherd's figures (watched folders against the inotify limit,
    /// files known and pending); null when it does not answer.
    pub watcher: Option<WatcherdStatus>,
    /// mountd's figures (its rclone's state, the mounts configured); null
    /// when it does not answer. Pids and rclone's address only for the
    /// admin.
    pub mounts: Option<Shown<MountdStatus, PublicMounts>>,
}

/// A part of `/status` as the admin sees it (`Full`), or as anyone else
/// does: without pids, paths or addresses of what runs inside.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum Shown<F, P> {
    Full(F),
    Public(P),
}

/// The supervisor's table for anyone: no pids, no log folder.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PublicSupervisor {
    role: Role,
    uptime_ms: u64,
    leader_url: Option<String>,
    daemons: Vec<PublicDaemon>,
}

/// One daemon's row for anyone: [`DaemonStatus`] without its pid.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PublicDaemon {
    name: Daemon,
    state: DaemonState,
    ready: bool,
    uptime_ms: Option<u64>,
    restarts: u32,
    failures: u32,
    last_exit: Option<LastExit>,
    next_start_in_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    degraded: Option<String>,
}

impl From<SupervisorStatus> for PublicSupervisor {
    fn from(s: SupervisorStatus) -> Self {
        Self {
            role: s.role,
            uptime_ms: s.uptime_ms,
            leader_url: s.leader_url,
            daemons: s
                .daemons
                .into_iter()
                .map(|d: DaemonStatus| PublicDaemon {
                    name: d.name,
                    state: d.state,
                    ready: d.ready,
                    uptime_ms: d.uptime_ms,
                    restarts: d.restarts,
                    failures: d.failures,
                    last_exit: d.last_exit,
                    next_start_in_ms: d.next_start_in_ms,
                    degraded: d.degraded,
                })
                .collect(),
        }
    }
}

/// mountd's figures for anyone: no pids, not rclone's address.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PublicMounts {
    daemon: Daemon,
    version: String,
    rclone: PublicRclone,
    mounts: usize,
    looks: u64,
}

/// rclone's state for anyone.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PublicRclone {
    state: RcdState,
    restarts: u64,
}

impl From<MountdStatus> for PublicMounts {
    fn from(m: MountdStatus) -> Self {
        Self {
            daemon: m.daemon,
            version: m.version,
            rclone: PublicRclone {
                state: m.rclone.state,
                restarts: m.rclone.restarts,
            },
            mounts: m.mounts,
            looks: m.looks,
        }
    }
}

/// `full` for the admin, its public view for anyone else.
fn shown<F, P: From<F>>(full: F, admin: bool) -> Shown<F, P> {
    if admin {
        Shown::Full(full)
    } else {
        Shown::Public(P::from(full))
    }
}

pub(crate) fn leader_info(urls: &Urls) -> LeaderInfo {
    let timestamp = metacore::clock::unix_ms();
    LeaderInfo {
        urls: urls.clone(),
        timestamp,
        pid: std::process::id(),
    }
}

fn status_word(up: bool) -> &'static str {
    if up { "ok" } else { "degraded" }
}

pub(super) async fn health(st: State) -> Json<PublicHealth> {
    let health = st.store.health().await;
    let up = health.is_ok();
    let reason = health
        .ok()
        .filter(|h| h.status != metacore::socket::HealthStatus::Ok)
        .map(|h| {
            h.reason
                .unwrap_or_else(|| format!("storaged is {}", h.status))
        });
    Json(PublicHealth {
        status: status_word(up && reason.is_none()),
        redis: up,
        timestamp: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        leader: leader_info(&st.urls),
        reason,
    })
}

/// `GET /status`: the original's fields, then the tree's figures; what
/// only operators need (pids, paths, rclone's address) only with the
/// admin token.
pub(super) async fn status(st: State, headers: http::HeaderMap) -> Json<PublicStatus> {
    let admin = crate::http::is_admin(&st, &headers);
    let bonus = std::time::Duration::from_secs(2);
    let (stats, supervisor, watcher, mounts) = tokio::join!(
        st.store.stats(),
        st.supervisor.status(),
        // watcherd's and mountd's figures are a bonus: a busy or
        // restarting daemon does not hold up the status.
        tokio::time::timeout(bonus, st.watcherd.status()),
        tokio::time::timeout(bonus, st.mountd.status()),
    );
    let watcher = watcher.ok().and_then(Result::ok);
    let mounts = mounts.ok().and_then(Result::ok);
    Json(PublicStatus {
        status: status_word(stats.is_ok()),
        redis: stats.is_ok(),
        service_name: st.config.service_name.clone(),
        version: st.config.service_version.clone(),
        uptime_seconds: st.started.elapsed().as_secs(),
        file_count: stats.map(|s| s.roots).unwrap_or(0),
        leader: leader_info(&st.urls),
        supervisor: supervisor.ok().map(|s| shown(s, admin)),
        watcher,
        mounts: mounts.map(|m| shown(m, admin)),
    })
}

/// `GET /leader`: this process serves only on the leader, so it answers
/// with its own lock info.
pub(super) async fn leader(st: State) -> Json<LeaderInfo> {
    Json(leader_info(&st.urls))
}

pub(super) async fn urls(st: State) -> Json<Urls> {
    Json(st.urls.clone())
}

/// apid's socket `/health`, for the supervisor's liveness check.
pub(super) async fn socket_health() -> Json<Health> {
    Json(Health::ok(Daemon::Apid))
}

/// apid's socket `/status`.
pub(super) async fn socket_status(st: State) -> Json<ApidStatus> {
    Json(ApidStatus {
        daemon: Daemon::Apid,
        version: env!("CARGO_PKG_VERSION").into(),
        pid: std::process::id(),
        uptime_secs: st.started.elapsed().as_secs(),
        listen: format!("{}:{}", st.config.http_host, st.config.http_port),
        storaged: st.store.health().await.is_ok(),
        events: st.events.status(),
    })
}
