//! apid's socket (`$META_CORE_RUN_DIR/apid.sock`): `GET /health` (the
//! common [`crate::socket::Health`]) and `GET /status`.

use serde::{Deserialize, Serialize};

use crate::layout::Daemon;

/// `GET /status` of apid's socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApidStatus {
    pub daemon: Daemon,
    pub version: String,
    pub pid: u32,
    pub uptime_secs: u64,
    /// The public address it serves, `host:port`.
    pub listen: String,
    /// Whether storaged answers its health check now.
    pub storaged: bool,
}
