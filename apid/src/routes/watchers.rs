//! The watchers API (`/api/watchers...`), served by watcherd on its socket
//! and relayed here as it answers (status, JSON body, error envelope),
//! plus the original's deprecated `/api/scan/*` routes. All of them are
//! admin routes (`META_CORE_ADMIN_TOKEN`).

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use http::{HeaderValue, Method, header};
use metacore::error::ApiError;
use metacore::socket::body::RawBody;

use crate::state::{AppState, State};

/// How long a watchers call may take (watcherd bounds its own waits at
/// 25 s; this is the backstop).
const RELAY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Largest body a watchers route takes (a path and two settings).
pub(crate) const MAX_WATCHER_BODY: usize = 16 * 1024;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/watchers", get(list).post(create))
        .route("/api/watchers/scan-all", post(scan_all))
        .route("/api/watchers/reset-all", post(reset_all))
        .route(
            "/api/watchers/{id}",
            get(get_one).put(update).delete(delete),
        )
        .route("/api/watchers/{id}/scan", post(scan))
        .route("/api/watchers/{id}/reset", post(reset))
        .route("/api/scan/trigger", post(deprecated_trigger))
        .route("/api/scan/status", get(deprecated_status))
        .layer(DefaultBodyLimit::max(MAX_WATCHER_BODY))
}

/// A watcher id as watcherd makes them (8 hex characters); anything else
/// names no watcher, and is answered here without a call.
fn checked_id(id: &str) -> Result<&str, ApiError> {
    if !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        Ok(id)
    } else {
        Err(ApiError::not_found(
            "watcher not found: the id is not a watcher id",
        ))
    }
}

/// Calls watcherd and relays its answer.
async fn relay(st: &AppState, method: Method, path: &str, body: Option<Bytes>) -> Response {
    super::relay::relay(st.watcherd.socket(), RELAY_TIMEOUT, method, path, body).await
}

async fn list(st: State) -> Response {
    relay(&st, Method::GET, "/watchers", None).await
}

async fn create(st: State, RawBody(body): RawBody) -> Response {
    relay(&st, Method::POST, "/watchers", Some(body)).await
}

async fn get_one(st: State, Path(id): Path<String>) -> Response {
    match checked_id(&id) {
        Ok(id) => relay(&st, Method::GET, &format!("/watchers/{id}"), None).await,
        Err(e) => e.into_response(),
    }
}

async fn update(st: State, Path(id): Path<String>, RawBody(body): RawBody) -> Response {
    match checked_id(&id) {
        Ok(id) => relay(&st, Method::PUT, &format!("/watchers/{id}"), Some(body)).await,
        Err(e) => e.into_response(),
    }
}

async fn delete(st: State, Path(id): Path<String>) -> Response {
    match checked_id(&id) {
        Ok(id) => relay(&st, Method::DELETE, &format!("/watchers/{id}"), None).await,
        Err(e) => e.into_response(),
    }
}

async fn scan(st: State, Path(id): Path<String>) -> Response {
    match checked_id(&id) {
        Ok(id) => relay(&st, Method::POST, &format!("/watchers/{id}/scan"), None).await,
        Err(e) => e.into_response(),
    }
}

async fn reset(st: State, Path(id): Path<String>) -> Response {
    match checked_id(&id) {
        Ok(id) => relay(&st, Method::POST, &format!("/watchers/{id}/reset"), None).await,
        Err(e) => e.into_response(),
    }
}

async fn scan_all(st: State) -> Response {
    relay(&st, Method::POST, "/watchers/scan-all", None).await
}

async fn reset_all(st: State) -> Response {
    relay(&st, Method::POST, "/watchers/reset-all", None).await
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
    let resp = relay(&st, Method::POST, "/watchers/scan-all", None).await;
    deprecated(resp, "</api/watchers/scan-all>; rel=\"successor-version\"")
}

/// `GET /api/scan/status`: the watchers and how each is doing, as
/// `GET /api/watchers` answers.
async fn deprecated_status(st: State) -> Response {
    let resp = relay(&st, Method::GET, "/watchers", None).await;
    deprecated(resp, "</api/watchers>; rel=\"successor-version\"")
}
