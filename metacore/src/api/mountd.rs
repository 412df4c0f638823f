//! mountd's socket: the wire types of its `/status` and of the mounts API
//! (which apid relays under `/api/mounts` as mountd answers it), and a
//! client for it. A mount as `mounts.json` stores it is [`MountConfig`],
//! the same shape the API shows.

use serde::{Deserialize, Serialize};

use crate::api::daemon::{DaemonClient, DaemonStatus};
use crate::layout::Daemon;

/// What rclone rcd, mountd's child, is doing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RcdState {
    /// Started, not answering yet (and before the first start).
    #[default]
    Starting,
    /// Answering its remote control: mounts can be made.
    Running,
    /// It ended; started again after a backoff.
    Restarting,
    /// Not on the PATH; looked for again every few seconds.
    NotInstalled,
    /// Stopped with mountd.
    Stopped,
}

impl RcdState {
    /// The state as `/status` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Restarting => "restarting",
            Self::NotInstalled => "not-installed",
            Self::Stopped => "stopped",
        }
    }
}

impl std::fmt::Display for RcdState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// rclone rcd, mountd's child, as its status shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RcdStatus {
    pub state: RcdState,
    /// What is wrong when it is not running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Its remote-control address (it answers nothing without the
    /// credentials mountd made for this start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Times it was started again after it ended.
    pub restarts: u64,
}

/// `GET /status` on mountd's socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MountdStatus {
    pub daemon: Daemon,
    pub version: String,
    pub pid: u32,
    pub rclone: RcdStatus,
    /// Mounts in `mounts.json`.
    pub mounts: usize,
    /// The keeper's passes over the mounts since mountd started.
    pub looks: u64,
}

/// One mount, as `mounts.json` stores it (the original's format) and as
/// the API shows it (the obscured password left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MountConfig {
    /// A UUID v4.
    pub id: String,
    pub name: String,
    /// `rclone` or `smb`.
    #[serde(rename = "type")]
    pub kind: String,
    pub enabled: bool,
    pub desired_mounted: bool,
    /// `FILES_PATH/corn/<sanitized name>`.
    pub mount_path: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub smb_server: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub smb_share: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub smb_username: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub smb_password_obscured: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub smb_domain: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rclone_remote: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rclone_path: String,
    #[serde(default = "default_cache_max_size")]
    pub cache_max_size: String,
    #[serde(default = "default_cache_max_age")]
    pub cache_max_age: String,
    #[serde(default = "default_dir_cache_time")]
    pub dir_cache_time: String,
    #[serde(default = "default_true")]
    pub polling_enabled: bool,
    #[serde(default = "default_polling_interval_ms")]
    pub polling_interval_ms: u64,
}

// What a member an older file lacks reads as (a new mount's defaults).
fn default_cache_max_size() -> String {
    "50G".into()
}
fn default_cache_max_age() -> String {
    "24h".into()
}
fn default_dir_cache_time() -> String {
    "5m".into()
}
fn default_true() -> bool {
    true
}
fn default_polling_interval_ms() -> u64 {
    30_000
}

/// A mount as the API shows it: its configuration (the obscured password
/// left out) and how it is doing. Times are Unix milliseconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MountStatus {
    #[serde(flatten)]
    pub config: MountConfig,
    pub mounted: bool,
    pub error: Option<String>,
    pub last_checked: Option<u64>,
    pub remounts: u64,
    pub polling_active: bool,
    pub last_polled_scan: Option<u64>,
    pub scanning: bool,
    pub current_scan_started_at: Option<u64>,
    pub last_scan_duration_ms: Option<u64>,
    pub last_scan_file_count: Option<usize>,
    pub last_scan_error: Option<String>,
    pub next_scan_at: Option<u64>,
}

/// `POST /mounts`. Members the route does not take are ignored and JSON
/// `null` reads as absent, as the original's Go decoder read them.
#[derive(Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewMount {
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub enabled: Option<bool>,
    pub smb_server: Option<String>,
    pub smb_share: Option<String>,
    pub smb_username: Option<String>,
    /// In plain text; stored obscured, as rclone obscures it.
    pub smb_password: Option<String>,
    pub smb_domain: Option<String>,
    pub rclone_remote: Option<String>,
    pub rclone_path: Option<String>,
    #[serde(flatten)]
    pub tuning: MountUpdate,
}

impl std::fmt::Debug for NewMount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewMount")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("enabled", &self.enabled)
            .field("smb_server", &self.smb_server)
            .field("smb_share", &self.smb_share)
            .field("smb_username", &self.smb_username)
            .field("smb_password", &self.smb_password.as_ref().map(|_| "<set>"))
            .field("smb_domain", &self.smb_domain)
            .field("rclone_remote", &self.rclone_remote)
            .field("rclone_path", &self.rclone_path)
            .field("tuning", &self.tuning)
            .finish()
    }
}

/// What may change once a mount exists (cache settings take effect at its
/// next mount).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MountUpdate {
    pub cache_max_size: Option<String>,
    pub cache_max_age: Option<String>,
    pub dir_cache_time: Option<String>,
    pub polling_enabled: Option<bool>,
    pub polling_interval_ms: Option<u64>,
}

/// `PUT`/`PATCH /mounts/{id}`: the cache and polling settings, and
/// `enabled` (off unmounts, on mounts).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MountEdit {
    pub enabled: Option<bool>,
    #[serde(flatten)]
    pub tuning: MountUpdate,
}

/// `GET /mounts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountList {
    pub mounts: Vec<MountStatus>,
}

/// One mount: what a create, a read and an update answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OneMount {
    pub mount: MountStatus,
}

/// What a mount action answers (a delete, a mount, an unmount, a scan).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MountDone {
    /// `ok`, or `warning` when a safe-unmount left the mount up.
    pub status: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_count: Option<usize>,
}

/// The query of `POST /mounts/{id}/safe-unmount`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SafeUnmountQuery {
    /// How long to wait for open files to close, in milliseconds.
    pub timeout: Option<String>,
}

/// A remote of rclone's configuration: its name and type, nothing else
/// of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remote {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
}

/// `GET /mounts/rclone/remotes`, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remotes {
    pub remotes: Vec<Remote>,
}

/// A client of mountd's socket ([`DaemonClient`]).
pub type MountdClient = DaemonClient<MountdStatus>;

impl DaemonStatus for MountdStatus {
    const DAEMON: Daemon = Daemon::Mountd;
}
