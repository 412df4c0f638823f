//! mountd's socket: the wire types of its `/status` and a client for it.
//! The mounts API itself is relayed by apid as mountd answers it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::layout::Daemon;
use crate::socket::client::{ClientError, SocketClient};

/// rclone rcd, mountd's child, as its status shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RcdStatus {
    /// `starting`, `running`, `restarting`, `not-installed`, `stopped`.
    pub state: String,
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

/// A client of mountd's socket.
#[derive(Debug, Clone)]
pub struct MountdClient {
    inner: SocketClient,
}

impl MountdClient {
    pub fn new(socket: &Path) -> Self {
        Self {
            inner: SocketClient::new(Daemon::Mountd.name(), socket),
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

    pub async fn status(&self) -> Result<MountdStatus, ClientError> {
        self.inner.get("/status").await
    }
}
