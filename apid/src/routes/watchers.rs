//! The watchers API (`/api/watchers...`), served by watcherd on its socket
//! and relayed here as it answers ([`super::relay`]), plus the original's
//! deprecated `/api/scan/*` routes. All of them are admin routes
//! (`META_CORE_ADMIN_TOKEN`).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::response::Response;
use axum::routing::{get, post};
use http::{HeaderValue, Method, header};
use metacore::error::ApiError;

use super::relay::{self, Relayed};
use crate::state::{AppState, State};

/// Largest body a watchers route takes (a path and two settings).
pub(crate) const MAX_WATCHER_BODY: usize = 16 * 1024;

/// watcherd's watchers API, relayed.
static WATCHERS: Relayed = Relayed {
    public: "/api/watchers",
    socket: "/watchers",
    // watcherd bounds its own waits at 25 s.
    within: Duration::from_secs(30),
    max_body: MAX_WATCHER_BODY,
    query: &[],
    check: checked_id,
    client: |st| st.watcherd.agreed(),
};

pub(crate) fn routes() -> Router<Arc<AppState>> {
    let deprecated = Router::new()
        .route("/api/scan/trigger", post(deprecated_trigger))
        .route("/api/scan/status", get(deprecated_status))
        .layer(DefaultBodyLimit::max(MAX_WATCHER_BODY));
    relay::routes(&WATCHERS).merge(deprecated)
}

/// The first segment after `/api/watchers` is a watcher id as watcherd
/// makes them (8 hex characters; `scan-all` and `reset-all` pass too):
/// anything else names no watcher, and is answered here without a call.
fn checked_id(segments: &[&str]) -> Result<(), ApiError> {
    let Some(id) = segments.first() else {
        return Ok(());
    };
    if !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        Ok(())
    } else {
        Err(ApiError::not_found(
            "watcher not found: the id is not a watcher id",
        ))
    }
}

/// Marks an answer of a retired route: `Deprecation`, and the route that
/// replaces it as the successor.
fn deprecated(mut resp: Response, successor: &'static str) -> Response {
    let h = resp.headers_mut();
    h.insert("deprecation", HeaderValue::from_static("true"));
    h.insert(header::LINK, HeaderValue::from_static(successor));
    resp
}

/// `POST /api/scan/trigger`: scans every enabled watcher, as
/// `POST /api/watchers/scan-all` does.
async fn deprecated_trigger(st: State) -> Response {
    let path = "/watchers/scan-all";
    let resp = relay::pass(
        &WATCHERS,
        &st,
        Method::POST,
        path,
        "/api/scan/trigger",
        None,
    )
    .await;
    deprecated(resp, "</api/watchers/scan-all>; rel=\"successor-version\"")
}

/// `GET /api/scan/status`: the watchers and how each is doing, as
/// `GET /api/watchers` answers.
async fn deprecated_status(st: State) -> Response {
    let resp = relay::pass(
        &WATCHERS,
        &st,
        Method::GET,
        "/watchers",
        "/api/scan/status",
        None,
    )
    .await;
    deprecated(resp, "</api/watchers>; rel=\"successor-version\"")
}
