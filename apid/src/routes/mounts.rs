//! The mounts API (`/api/mounts...`), served by mountd on its socket and
//! relayed here as it answers. All of them are admin routes
//! (`META_CORE_ADMIN_TOKEN`).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, RawQuery};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use http::Method;
use metacore::error::ApiError;
use metacore::socket::body::RawBody;

use crate::state::{AppState, State};

/// How long a mounts call may take: a `safe-unmount` waits up to 120 s
/// for open files to close (mountd bounds it), then for the mount's lock
/// (a mount attempt of the keeper's: 15 s of listing, 20 s of mounting)
/// and up to 20 s for rclone to unmount.
const RELAY_TIMEOUT: Duration = Duration::from_secs(180);

/// Largest body a mounts route takes (a mount's settings).
pub(crate) const MAX_MOUNT_BODY: usize = 16 * 1024;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/mounts", get(list).post(create))
        .route("/api/mounts/rclone/remotes", get(remotes))
        .route(
            "/api/mounts/{id}",
            get(get_one).put(update).patch(update).delete(delete),
        )
        .route("/api/mounts/{id}/{action}", post(action))
        .layer(DefaultBodyLimit::max(MAX_MOUNT_BODY))
}

/// A mount id as mountd makes them (a UUID); anything else names no
/// mount, and is answered here without a call.
fn checked_id(id: &str) -> Result<&str, ApiError> {
    let is_uuid = id.len() == 36
        && id.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    if is_uuid {
        Ok(id)
    } else {
        Err(ApiError::not_found(
            "mount not found: the id is not a mount id",
        ))
    }
}

async fn relay(st: &AppState, method: Method, path: &str, body: Option<Bytes>) -> Response {
    super::relay::relay(st.mountd.socket(), RELAY_TIMEOUT, method, path, body).await
}

async fn list(st: State) -> Response {
    relay(&st, Method::GET, "/mounts", None).await
}

async fn create(st: State, RawBody(body): RawBody) -> Response {
    relay(&st, Method::POST, "/mounts", Some(body)).await
}

async fn remotes(st: State) -> Response {
    relay(&st, Method::GET, "/mounts/rclone/remotes", None).await
}

async fn get_one(st: State, Path(id): Path<String>) -> Response {
    match checked_id(&id) {
        Ok(id) => relay(&st, Method::GET, &format!("/mounts/{id}"), None).await,
        Err(e) => e.into_response(),
    }
}

async fn update(
    st: State,
    method: Method,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Response {
    match checked_id(&id) {
        Ok(id) => relay(&st, method, &format!("/mounts/{id}"), Some(body)).await,
        Err(e) => e.into_response(),
    }
}

async fn delete(st: State, Path(id): Path<String>) -> Response {
    match checked_id(&id) {
        Ok(id) => relay(&st, Method::DELETE, &format!("/mounts/{id}"), None).await,
        Err(e) => e.into_response(),
    }
}

/// `mount`, `unmount`, `safe-unmount` (with its `timeout` query) and
/// `scan`.
async fn action(
    st: State,
    Path((id, action)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Response {
    if !matches!(
        action.as_str(),
        "mount" | "unmount" | "safe-unmount" | "scan"
    ) {
        return ApiError::not_found(format!("no route for /api/mounts/{{id}}/{action}"))
            .into_response();
    }
    let id = match checked_id(&id) {
        Ok(id) => id,
        Err(e) => return e.into_response(),
    };
    // Only the query safe-unmount takes is passed on: a value that is not
    // plain digits and letters goes as `invalid`, which mountd refuses.
    let timeout = query
        .as_deref()
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("timeout=")))
        .filter(|_| action == "safe-unmount")
        .map(|v| {
            if !v.is_empty() && v.len() <= 24 && v.bytes().all(|b| b.is_ascii_alphanumeric()) {
                v
            } else {
                "invalid"
            }
        });
    let path = match timeout {
        Some(t) => format!("/mounts/{id}/{action}?timeout={t}"),
        None => format!("/mounts/{id}/{action}"),
    };
    relay(&st, Method::POST, &path, None).await
}
