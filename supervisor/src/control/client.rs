//! The operator CLI's client of the control socket: blocking, one
//! connection a call, no async runtime. A CLI call is a process of its own,
//! so what it costs to start counts: building a runtime and a pooled
//! client for one request cost more than the request. It speaks the same
//! wire types as [`metacore::api::supervisor::SupervisorClient`] and
//! reports failures as the same [`ClientError`].

use std::path::{Path, PathBuf};

use http::StatusCode;
use metacore::ApiError;
use metacore::api::supervisor::{DaemonStatus, StopAccepted, SupervisorHealth, SupervisorStatus};
use metacore::error::ErrorEnvelope;
use metacore::layout::Daemon;
use metacore::socket::client::ClientError;
use serde::de::DeserializeOwned;

use crate::http1;

/// Who answers on the control socket, in errors.
const PEER: &str = "meta-core";

#[derive(Debug, Clone)]
pub(crate) struct ControlClient {
    socket: PathBuf,
}

impl ControlClient {
    pub(crate) fn new(socket: &Path) -> Self {
        Self {
            socket: socket.to_owned(),
        }
    }

    pub(crate) fn socket(&self) -> &Path {
        &self.socket
    }

    pub(crate) fn health(&self) -> Result<SupervisorHealth, ClientError> {
        self.call("GET", "/health")
    }

    pub(crate) fn status(&self) -> Result<SupervisorStatus, ClientError> {
        self.call("GET", "/status")
    }

    /// Restarts one daemon; answers once it is ready again.
    pub(crate) fn restart(&self, daemon: Daemon) -> Result<DaemonStatus, ClientError> {
        self.call("POST", &format!("/restart/{daemon}"))
    }

    /// Starts the orderly stop of the tree; answers at once.
    pub(crate) fn stop(&self) -> Result<StopAccepted, ClientError> {
        self.call("POST", "/stop")
    }

    fn call<T: DeserializeOwned>(&self, method: &str, path: &str) -> Result<T, ClientError> {
        let request = http1::request(method, path, PEER);
        let answer =
            http1::exchange(&self.socket, &request).map_err(|e| ClientError::Unavailable {
                daemon: PEER.into(),
                path: self.socket.clone(),
                source: Box::new(e),
            })?;
        decode(&answer)
    }
}

/// The answer's value, or its error envelope as [`ClientError::Api`].
fn decode<T: DeserializeOwned>(answer: &[u8]) -> Result<T, ClientError> {
    let protocol = |status: StatusCode, detail: String| ClientError::Protocol {
        daemon: PEER.into(),
        status,
        detail,
    };
    let (status, body) = http1::parse(answer).map_err(|e| protocol(StatusCode::OK, e))?;
    let status = StatusCode::from_u16(status)
        .map_err(|_| protocol(StatusCode::OK, format!("status {status}")))?;
    if status.is_success() {
        return serde_json::from_slice(&body)
            .map_err(|e| protocol(status, format!("{e} (is the daemon a different version?)")));
    }
    match serde_json::from_slice::<ErrorEnvelope>(&body) {
        Ok(env) => Err(ClientError::Api(ApiError::from_envelope(status, env))),
        Err(_) => Err(protocol(
            status,
            String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use metacore::ErrorCode;

    use super::*;

    #[test]
    fn answers_and_error_envelopes_decode_as_the_async_client_does() {
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 32\r\n\r\n{\"status\":\"ok\",\"role\":\"standby\"}";
        let health: SupervisorHealth = decode(ok).unwrap();
        assert_eq!(health.status, "ok");
        let env =
            serde_json::to_vec(&ApiError::not_found("unknown daemon \"x\"").envelope()).unwrap();
        let mut not_found = format!(
            "HTTP/1.1 404 Not Found\r\ncontent-length: {}\r\n\r\n",
            env.len()
        )
        .into_bytes();
        not_found.extend(env);
        match decode::<SupervisorHealth>(&not_found) {
            Err(ClientError::Api(e)) => {
                assert_eq!(e.code, ErrorCode::NotFound);
                assert!(e.message.contains("unknown daemon"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            decode::<SupervisorHealth>(b"HTTP/1.1 200 OK\r\n\r\nnot json"),
            Err(ClientError::Protocol { .. })
        ));
    }

    #[test]
    fn nobody_on_the_socket_is_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let client = ControlClient::new(&dir.path().join("meta-core.sock"));
        assert!(matches!(
            client.status(),
            Err(ClientError::Unavailable { .. })
        ));
    }
}
