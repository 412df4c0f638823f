//! The APIs another daemon serves on its socket (watcherd's watchers,
//! mountd's mounts), relayed as that daemon answers: status, JSON body,
//! error envelope.

use std::time::Duration;

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{Method, header};
use metacore::error::ApiError;
use metacore::socket::client::SocketClient;

/// Calls `daemon` and relays its answer; 503 when it does not answer
/// within `within` or cannot be reached.
pub(crate) async fn relay(
    daemon: &SocketClient,
    within: Duration,
    method: Method,
    path: &str,
    body: Option<Bytes>,
) -> Response {
    let call = daemon.send(method, path, body);
    let Ok(answer) = tokio::time::timeout(within, call).await else {
        return ApiError::unavailable(format!(
            "{} did not answer in time, retry shortly",
            daemon.daemon()
        ))
        .into_response();
    };
    match answer {
        Ok(resp) => (
            resp.status(),
            [(header::CONTENT_TYPE, "application/json")],
            axum::body::Body::new(resp.into_body()),
        )
            .into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}
