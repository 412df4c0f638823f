//! The APIs other daemons serve on their sockets, served here under a
//! prefix of apid's own (watcherd's watchers under `/api/watchers`,
//! mountd's mounts under `/api/mounts`): every path under the prefix, with
//! any method, is passed on and answered as the daemon answers it (status,
//! JSON body, error envelope). Which routes exist is the daemon's to say,
//! so apid keeps no copy of its table; it only refuses, without a call, a
//! path that names no id the daemon could have made.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use bytes::Bytes;
use http::{Method, Uri, header};
use metacore::error::{ApiError, ErrorCode};
use metacore::socket::body::RawBody;
use metacore::socket::client::{AgreedClient, ClientError};

use crate::state::{AppState, State};

/// A daemon's API as apid serves it.
#[derive(Debug)]
pub(crate) struct Relayed {
    /// Where clients call it (`/api/watchers`).
    pub(crate) public: &'static str,
    /// Where the daemon serves it on its socket (`/watchers`).
    pub(crate) socket: &'static str,
    /// How long an answer may take (the daemon bounds its own waits;
    /// this is the backstop).
    pub(crate) within: Duration,
    /// Largest body a route takes.
    pub(crate) max_body: usize,
    /// The query parameters passed on, the first of each name.
    pub(crate) query: &'static [&'static str],
    /// The segments of the path after the prefix checked: a 404 for one
    /// that names nothing the daemon could have made.
    pub(crate) check: fn(&[&str]) -> Result<(), ApiError>,
    /// The daemon's socket.
    pub(crate) client: fn(&AppState) -> &AgreedClient,
}

/// `api.public` and every path under it, any method, relayed.
pub(crate) fn routes(api: &'static Relayed) -> Router<Arc<AppState>> {
    let handler = move |st: State, method: Method, uri: Uri, RawBody(body): RawBody| async move {
        relay(api, &st, method, &uri, body).await
    };
    Router::new()
        .route(api.public, any(handler))
        .route(&format!("{}/{{*rest}}", api.public), any(handler))
        .layer(DefaultBodyLimit::max(api.max_body))
}

/// Checks the path, then passes the request on.
async fn relay(api: &Relayed, st: &AppState, method: Method, uri: &Uri, body: Bytes) -> Response {
    let rest = uri.path().strip_prefix(api.public).unwrap_or_default();
    let segments: Vec<&str> = rest.split('/').skip(1).collect();
    let no_route = || ApiError::new(ErrorCode::NotFound, format!("no route for {}", uri.path()));
    if segments.iter().any(|s| s.is_empty()) {
        return no_route().into_response();
    }
    if let Err(e) = (api.check)(&segments) {
        return e.into_response();
    }
    if !segments.iter().all(|s| plain(s)) {
        return no_route().into_response();
    }
    let path = format!("{}{rest}{}", api.socket, passed_query(api, uri.query()));
    let body = (!body.is_empty()).then_some(body);
    pass(api, st, method, &path, uri.path(), body).await
}

/// Whether a path segment is a plain word (letters, digits, `-`), as
/// every segment of a relayed route is: nothing else reaches the daemon.
fn plain(segment: &str) -> bool {
    segment.len() <= 64
        && segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// The query the daemon is given: the first of each parameter in
/// `api.query`, a value that is not plain letters and digits (at most 24)
/// passed as `invalid`, which the daemon refuses.
fn passed_query(api: &Relayed, query: Option<&str>) -> String {
    let pairs = query.unwrap_or_default().split('&');
    let passed: Vec<String> = api
        .query
        .iter()
        .filter_map(|name| {
            let value = pairs
                .clone()
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))?;
            let plain = !value.is_empty()
                && value.len() <= 24
                && value.bytes().all(|b| b.is_ascii_alphanumeric());
            Some(format!("{name}={}", if plain { value } else { "invalid" }))
        })
        .collect();
    if passed.is_empty() {
        String::new()
    } else {
        format!("?{}", passed.join("&"))
    }
}

/// Calls the daemon at `path` and relays its answer; 503 when it does not
/// answer within `api.within` or cannot be reached. The daemon's own 404
/// and 405 name the path it was asked: the client is told the one it
/// asked (`public`).
pub(crate) async fn pass(
    api: &Relayed,
    st: &AppState,
    method: Method,
    path: &str,
    public: &str,
    body: Option<Bytes>,
) -> Response {
    let daemon = (api.client)(st);
    let call = daemon.exchange(method, path, body);
    let Ok(answer) = tokio::time::timeout(api.within, call).await else {
        return ApiError::unavailable(format!(
            "{} did not answer in time, retry shortly",
            daemon.socket().daemon()
        ))
        .into_response();
    };
    let resp = match answer {
        Ok(resp) if resp.status().is_success() => {
            return (
                resp.status(),
                [(header::CONTENT_TYPE, "application/json")],
                axum::body::Body::new(resp.into_body()),
            )
                .into_response();
        }
        Ok(resp) => resp,
        Err(e) => return ApiError::from(e).into_response(),
    };
    // A 405 says which methods the path takes; the rest of the daemon's
    // headers are its own business.
    let allow = resp.headers().get(header::ALLOW).cloned();
    match daemon.socket().refusal(resp).await {
        ClientError::Api(mut e) => {
            let asked = path.split('?').next().unwrap_or_default();
            let fallback = matches!(e.code, ErrorCode::NotFound | ErrorCode::MethodNotAllowed);
            if fallback && let Some(said) = e.message.strip_suffix(asked) {
                e.message = format!("{said}{public}");
            }
            let mut out = e.into_response();
            if let Some(allow) = allow {
                out.headers_mut().insert(header::ALLOW, allow);
            }
            out
        }
        e => ApiError::from(e).into_response(),
    }
}
