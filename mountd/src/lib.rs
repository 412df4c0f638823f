//! mountd: the rclone mounts of meta-core, under `FILES_PATH/corn/`.
//!
//! - It runs `rclone rcd` as its own child ([`rcd`]), on a loopback port
//!   with a user and password made at each start, and restarts it when it
//!   dies.
//! - It keeps the mounts of `mounts.json` ([`config`]) mounted through
//!   rclone's remote control, mounts again what is lost, and scans the
//!   mounts through watcherd ([`manager`]).
//! - No mount serves or covers one of meta-core's own places
//!   ([`confine`]): a remote of type `local` is refused, and what an
//!   alias serves is asked of rclone before every mount.
//! - It serves the mounts API on `$META_CORE_RUN_DIR/mountd.sock` ([`api`]),
//!   which apid exposes under `/api/mounts`, and its figures on `/metrics`
//!   ([`metrics`]).
//! - On SIGTERM it unmounts everything, then stops rclone. A mountd killed
//!   outright takes rclone with it, and the next one detaches the stale
//!   mounts it left before mounting again.
//! - Without `rclone` on the PATH it stays up and says so.

pub mod api;
pub mod config;
pub mod confine;
pub mod manager;
pub mod metrics;
pub mod rc;
pub mod rcd;
pub mod request;
pub mod system;
pub mod units;

use std::sync::Arc;

use metacore::Config;
use metacore::api::watcherd::WatcherdClient;
use metacore::layout::Daemon;
use metacore::shutdown::Shutdown;

use crate::manager::Manager;
use crate::rcd::Rcd;

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
    let socket = layout.socket(Daemon::Mountd);
    let rcd = Arc::new(Rcd::new(socket.with_file_name("mountd-rclone.pid")));
    let manager = Arc::new(Manager::new(
        config.files_path.clone(),
        layout.mount_errors_dir(),
        mounts,
        rcd.clone(),
        WatcherdClient::new(&layout.socket(Daemon::Watcherd)),
        confine::Places::new(&config),
    ));
    // What a mountd killed outright left: its rclone is gone, its mounts
    // answer "Transport endpoint is not connected".
    manager.detach_leftovers().await;
    // rclone outlives the socket server: it is stopped once everything is
    // unmounted.
    let (rclone_stop, rclone_shutdown) = metacore::shutdown::channel();
    let rclone = tokio::spawn(rcd.clone().keep_running(rclone_shutdown));
    let keeper = tokio::spawn(manager.clone().keep(shutdown.clone()));
    let listener = metacore::socket::server::bind(&socket)
        .await
        .map_err(RunError::Bind)?;
    tracing::info!(socket = %socket.display(), "mountd ready");
    metacore::daemon::notify_ready();
    let router = api::router(manager.clone());
    let stop = shutdown.clone();
    let mut server = tokio::spawn(async move {
        metacore::socket::server::serve(listener, &socket, router, stop).await
    });
    let served = tokio::select! {
        served = &mut server => Some(served),
        () = shutdown.wait() => None,
    };
    // The stop must fit the supervisor's grace: the keeper's pass and the
    // requests still running (a safe-unmount may wait two minutes) are
    // not waited for.
    keeper.abort();
    manager.unmount_all().await;
    rclone_stop.fire();
    let _ = rclone.await;
    // What rclone's own stop left (it was killed, or it had mounted
    // meanwhile).
    manager.detach_leftovers().await;
    let served = match served {
        Some(s) => s,
        None => match tokio::time::timeout(LAST_ANSWERS, &mut server).await {
            Ok(s) => s,
            Err(_) => {
                server.abort();
                return Ok(());
            }
        },
    };
    served
        .unwrap_or_else(|e| Err(std::io::Error::other(e)))
        .map_err(RunError::Serve)
}

/// How long the requests still running at a stop get, once everything is
/// unmounted, to finish their answers.
const LAST_ANSWERS: std::time::Duration = std::time::Duration::from_millis(100);
