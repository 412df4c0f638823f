//! watcherd's socket: the wire types of its `/status` (shown in the public
//! `/status` too) and a client for it. The watchers API itself is relayed
//! by apid as watcherd answers it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::layout::Daemon;
use crate::socket::client::{ClientError, SocketClient};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InotifyStatus {
    /// Folders with an inotify watch.
    pub watched_dirs: u64,
    /// The kernel's per-user limit (`fs.inotify.max_user_watches`).
    pub max_user_watches: Option<u64>,
    /// The limit was met: `polledDirs` folders are listed every
    /// `WATCH_INTERVAL_MS` instead.
    pub limit_reached: bool,
    pub polled_dirs: u64,
    /// Queue overflows, each followed by a rescan of the whole tree.
    pub overflows: u64,
}

/// The repair a rescan runs (the start-up walk, `scan-all` and the other
/// API scans, a queue-overflow rescan): each record whose `filePath` names
/// no live file gets a live duplicate of it as `filePath`. It runs once
/// the watcher has taken in what the rescan found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepairStatus {
    /// A rescan asked for a repair that has not run to its end yet.
    pub due: bool,
    /// Repairs run to their end.
    pub passes: u64,
    /// Records whose `filePath` a repair handed to a live duplicate.
    pub promoted: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatcherdStatus {
    pub daemon: Daemon,
    /// `ENABLE_FILE_WATCHER`; when false nothing is watched or announced.
    pub enabled: bool,
    /// What was announced before has been read back from storaged.
    pub loaded: bool,
    pub known_files: usize,
    /// Files waiting to be quiet (`DEBOUNCE_MS`).
    pub pending: u64,
    /// Known files gone, waiting to be a delete or a rename.
    pub gone: u64,
    pub announced: u64,
    /// Observations storaged refused (logged with their cause).
    pub refused: u64,
    /// Times storaged could not be reached and the engine waited.
    pub store_waits: u64,
    /// Files and folders skipped because their name is not UTF-8 (each
    /// logged and counted once; never minted nor announced).
    pub refused_names: u64,
    pub repair: RepairStatus,
    pub inotify: InotifyStatus,
    pub watchers: usize,
    pub uptime_ms: u64,
}

/// A client of watcherd's socket.
#[derive(Debug, Clone)]
pub struct WatcherdClient {
    inner: SocketClient,
}

impl WatcherdClient {
    pub fn new(socket: &Path) -> Self {
        Self {
            inner: SocketClient::new(Daemon::Watcherd.name(), socket),
        }
    }

    pub fn socket(&self) -> &SocketClient {
        &self.inner
    }

    /// `GET /metrics`: this daemon's metrics, OpenMetrics text
    /// ([`crate::metrics`]).
    pub async fn metrics(&self) -> Result<String, ClientError> {
        self.inner.get_text("/metrics").await
    }

    pub async fn status(&self) -> Result<WatcherdStatus, ClientError> {
        self.inner.get("/status").await
    }
}
