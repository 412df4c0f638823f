//! mountd: the rclone mounts of meta-core. It runs `rclone rcd` as its own
//! child, on a loopback port with a user and password made at each start
//! (given to rclone in its environment, never on its command line or in a
//! log), restarts it when it dies, and serves its figures on
//! `$META_CORE_RUN_DIR/mountd.sock`. Without `rclone` on the PATH it stays
//! up and says so.
//!
//! The mounts themselves (`mounts.json`, the mount API) come next
//! (issue 15).

pub mod config;
pub mod rcd;

use std::sync::Arc;

use axum::routing::get;
use axum::{Json, Router};
use metacore::Config;
use metacore::layout::Daemon;
use metacore::shutdown::Shutdown;
use metacore::socket::Health;
use metacore::socket::body::{no_method, no_route};

use crate::rcd::{Rcd, RcdStatus};

/// Why mountd stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot serve the socket")]
    Bind(#[source] metacore::socket::server::BindError),
    #[error("the socket server failed")]
    Serve(#[source] std::io::Error),
    #[error("cannot open the mounts file")]
    Mounts(#[source] config::OpenError),
}

/// `GET /status` on mountd's socket.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MountdStatus {
    pub daemon: &'static str,
    pub version: &'static str,
    pub pid: u32,
    pub rclone: RcdStatus,
    /// Mounts in `mounts.json`.
    pub mounts: usize,
}

pub async fn run(config: Config, shutdown: Shutdown) -> Result<(), RunError> {
    let layout = config.layout();
    let (mounts, aside) = config::Mounts::open(&layout.mounts_file(), metacore::clock::unix_ms())
        .map_err(RunError::Mounts)?;
    if let Some((kept, why)) = aside {
        tracing::warn!(
            kept = %kept.display(),
            "mounts.json could not be read ({why}); it was set aside and mountd starts with no mounts"
        );
    }
    let count = mounts.mounts.len();
    let socket = layout.socket(Daemon::Mountd);
    let rcd = Arc::new(Rcd::new(socket.with_file_name("mountd-rclone.pid")));
    let keeper = tokio::spawn(rcd.clone().keep_running(shutdown.clone()));
    let listener = metacore::socket::server::bind(&socket)
        .await
        .map_err(RunError::Bind)?;
    tracing::info!(socket = %socket.display(), "mountd ready");
    metacore::daemon::notify_ready();
    let state = rcd.clone();
    let router = Router::new()
        .route(
            "/health",
            get(|| async { Json(Health::ok(Daemon::Mountd)) }),
        )
        .route(
            "/status",
            get(move || {
                let rcd = state.clone();
                async move {
                    Json(MountdStatus {
                        daemon: "mountd",
                        version: env!("CARGO_PKG_VERSION"),
                        pid: std::process::id(),
                        rclone: rcd.status(),
                        mounts: count,
                    })
                }
            }),
        )
        .fallback(no_route)
        .method_not_allowed_fallback(no_method);
    let served = metacore::socket::server::serve(listener, &socket, router, shutdown.clone())
        .await
        .map_err(RunError::Serve);
    // rclone is stopped before mountd exits.
    let _ = keeper.await;
    served
}
