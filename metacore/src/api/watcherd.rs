//! watcherd's socket: the wire types of its `/status` (shown in the public
//! `/status` too), of the watchers API (which apid relays under
//! `/api/watchers` as watcherd answers it) and of `/scan` (mountd's walks
//! of its mounts), and a client for it.

use http::Method;
use serde::{Deserialize, Serialize};

use crate::api::daemon::{DaemonClient, DaemonStatus};
use crate::checked::RelPath;
use crate::layout::Daemon;
use crate::socket::client::ClientError;

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

/// One polling watcher, as `watchers.json` keeps it and the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatcherConfig {
    /// 8 lower-case hex characters.
    pub id: String,
    /// Absolute, inside `FILES_PATH`.
    pub path: String,
    pub interval_ms: u64,
    pub enabled: bool,
    /// Unix ms.
    pub created_at: u64,
}

/// `POST /watchers`: a new watcher.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewWatcher {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<u64>,
    /// Off unless asked, as in the original.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// `PUT /watchers/{id}`: what changes; what is absent stays.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WatcherUpdate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// A watcher as the API shows it: its configuration and how it is doing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatcherStatus {
    #[serde(flatten)]
    pub config: WatcherConfig,
    /// Enabled, and the file watcher runs.
    pub active: bool,
    /// When its folder was last walked to the end (Unix ms), if ever.
    pub last_scan: Option<u64>,
    /// Files known under its folder.
    pub file_count: usize,
    pub is_scanning: bool,
}

/// `GET /watchers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatcherList {
    pub watchers: Vec<WatcherStatus>,
    pub count: usize,
}

/// What a watchers action answers (a delete, a scan, a reset): `ok`, what
/// was done, and the files it found when it walked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatcherDone {
    pub status: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watcher_id: Option<String>,
    /// Files known under the folder once it was walked or reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_count: Option<usize>,
    /// Files found by an action over every watcher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_files: Option<usize>,
}

impl WatcherDone {
    /// `ok` with `message`, nothing counted.
    pub fn ok(message: &str) -> Self {
        Self {
            status: "ok".into(),
            message: message.into(),
            watcher_id: None,
            file_count: None,
            total_files: None,
        }
    }
}

/// `POST /scan`: one walk of a folder under `FILES_PATH` that is not a
/// watcher's (mountd's scans of its mounts), answered when it is done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScanRequest {
    /// The folder, relative to `FILES_PATH`.
    pub path: RelPath,
}

/// What `POST /scan` answers. `fileCount` is required: an answer without
/// it is a protocol error, never a count of 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScanDone {
    pub status: String,
    pub message: String,
    /// Files known under the folder once it was walked.
    pub file_count: usize,
}

/// A client of watcherd's socket ([`DaemonClient`]).
pub type WatcherdClient = DaemonClient<WatcherdStatus>;

impl DaemonStatus for WatcherdStatus {
    const DAEMON: Daemon = Daemon::Watcherd;
}

impl WatcherdClient {
    /// `POST /scan`: walks `path` (relative to `FILES_PATH`) now and
    /// answers when the walk is done.
    pub async fn scan(&self, path: &RelPath) -> Result<ScanDone, ClientError> {
        let body = ScanRequest { path: path.clone() };
        self.agreed().call(Method::POST, "/scan", Some(&body)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_answer_without_its_count_is_refused_not_zero() {
        let done: ScanDone =
            serde_json::from_str(r#"{"status":"ok","message":"Scan triggered","fileCount":3}"#)
                .unwrap();
        assert_eq!(done.file_count, 3);
        let renamed = r#"{"status":"ok","message":"Scan triggered","filesFound":3}"#;
        assert!(serde_json::from_str::<ScanDone>(renamed).is_err());
    }

    #[test]
    fn a_scan_names_a_folder_inside_files_path() {
        let body = ScanRequest {
            path: RelPath::new("corn/films").unwrap(),
        };
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            r#"{"path":"corn/films"}"#
        );
        for bad in [r#"{"path":"/files/corn"}"#, r#"{"path":"../etc"}"#] {
            assert!(serde_json::from_str::<ScanRequest>(bad).is_err(), "{bad}");
        }
    }
}
