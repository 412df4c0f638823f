//! The internal protocol between daemons: HTTP/1.1 with JSON bodies over
//! Unix sockets in `META_CORE_RUN_DIR`, the same error envelope as the
//! public API, and a `/health` that states versions.

pub mod body;
pub mod client;
pub mod server;

use serde::{Deserialize, Serialize};

use crate::layout::Daemon;

/// Version of the internal socket protocol; bumped on any incompatible
/// change of a request or response type in `metacore::api`.
pub const PROTOCOL_VERSION: u32 = 2;

/// Whether a daemon does all its work (`"ok"`) or answers but does not
/// (`"degraded"`, with a reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthStatus {
    Ok,
    Degraded,
}

impl HealthStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            HealthStatus::Ok => "ok",
            HealthStatus::Degraded => "degraded",
        }
    }
}

impl std::fmt::Display for HealthStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every daemon's `GET /health` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub status: HealthStatus,
    pub daemon: Daemon,
    pub version: String,
    pub protocol: u32,
    pub pid: u32,
    /// Why `status` is `degraded` (a full disk), when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The part of a `/health` answer every release keeps: read first, so that
/// a peer of another release, whose answer may have another shape, is
/// named by its protocol and version rather than taken for no answer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HealthProtocol {
    pub protocol: u32,
    pub version: Option<String>,
}

impl HealthProtocol {
    /// A sentence for an operator when the peer (`daemon`) speaks another
    /// protocol ([`Health::mismatch`]).
    pub fn mismatch(&self, daemon: Daemon) -> Option<String> {
        Health {
            protocol: self.protocol,
            version: self
                .version
                .clone()
                .unwrap_or_else(|| "(unknown version)".into()),
            ..Health::ok(daemon)
        }
        .mismatch()
    }
}

impl Health {
    pub fn ok(daemon: Daemon) -> Self {
        Self {
            status: HealthStatus::Ok,
            daemon,
            version: env!("CARGO_PKG_VERSION").into(),
            protocol: PROTOCOL_VERSION,
            pid: std::process::id(),
            reason: None,
        }
    }

    /// Up, but not doing all its work, for `reason`.
    pub fn degraded(daemon: Daemon, reason: impl Into<String>) -> Self {
        Self {
            status: HealthStatus::Degraded,
            reason: Some(reason.into()),
            ..Self::ok(daemon)
        }
    }

    /// A sentence for an operator when a peer speaks another protocol.
    pub fn mismatch(&self) -> Option<String> {
        (self.protocol != PROTOCOL_VERSION).then(|| {
            format!(
                "{} {} speaks socket protocol {}, this process speaks {}: run matching versions",
                self.daemon, self.version, self.protocol, PROTOCOL_VERSION
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_of_another_protocol_is_named_in_words() {
        let mut h = Health::ok(Daemon::Storaged);
        assert_eq!(h.mismatch(), None);
        h.protocol = PROTOCOL_VERSION + 1;
        let why = h.mismatch().expect("a mismatch");
        assert!(
            why.contains("storaged") && why.contains("protocol"),
            "{why}"
        );
    }
}
