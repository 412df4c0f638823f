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
    /// The SSE streams it serves.
    pub events: EventStreams,
}

/// SSE followers of `/api/events/*`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventStreams {
    /// Streams open now, in any phase (snapshot, catch-up, live).
    pub open: usize,
    /// The most it serves at once (`META_CORE_SSE_MAX_FOLLOWERS`).
    pub max: usize,
    /// Followers reading `/api/events/meta` live.
    pub live_meta: usize,
    /// Followers reading `/api/events/files` live.
    pub live_files: usize,
}
