//! Serving an axum router on a Unix socket, with the hygiene every daemon
//! needs: refuse to start when a live process already answers on the path,
//! remove a stale socket file, bind, set the mode, then serve until shutdown.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use axum::Router;
use tokio::net::{UnixListener, UnixStream};

use crate::shutdown::Shutdown;

/// Mode of every daemon socket: owner only.
pub const SOCKET_MODE: u32 = 0o600;

/// Why a socket could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("another process is already serving on {0}")]
    InUse(std::path::PathBuf),
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Binds `path` after checking nobody serves it, removing a stale file.
pub async fn bind(path: &Path) -> Result<UnixListener, BindError> {
    let io_err = |what, source| BindError::Io {
        what,
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io_err("create the directory of", e))?;
    }
    if path.exists() {
        match tokio::time::timeout(Duration::from_secs(1), UnixStream::connect(path)).await {
            Ok(Ok(_)) => return Err(BindError::InUse(path.to_owned())),
            _ => std::fs::remove_file(path).map_err(|e| io_err("remove the stale socket", e))?,
        }
    }
    let listener = UnixListener::bind(path).map_err(|e| io_err("bind", e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(SOCKET_MODE))
        .map_err(|e| io_err("set the mode of", e))?;
    Ok(listener)
}

/// Serves `router` on `listener` until `shutdown` fires, then lets
/// in-flight requests finish (long-lived streams watch the same shutdown
/// and end themselves). Removes the socket file at the end.
pub async fn serve(
    listener: UnixListener,
    path: &Path,
    router: Router,
    shutdown: Shutdown,
) -> io::Result<()> {
    let result = axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.wait().await })
        .await;
    let _ = std::fs::remove_file(path);
    result
}
