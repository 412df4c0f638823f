//! The HTTP edge every public route shares: CORS on every answer (and
//! `OPTIONS` preflights answered before routing), the admin bearer token on
//! mutating admin routes, and body limits.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, StatusCode, header};
use metacore::error::{ApiError, ErrorCode};

use crate::state::AppState;

/// Body limit of the metadata and editor routes (a 413 above it).
pub(crate) const MAX_BODY: usize = 8 * 1024 * 1024;
/// Body limit of `PUT /meta/{hash}/{key...}` (one value).
pub(crate) const MAX_PROPERTY_BODY: usize = 1024 * 1024;

/// Adds the CORS headers to every answer; answers preflights itself.
///
/// The original allowed `GET, POST, PUT, DELETE, OPTIONS` and
/// `Content-Type`; PATCH, HEAD, `Authorization` (the admin token) and
/// `Last-Event-ID` (SSE resume) are added so browsers can use every route.
pub(crate) async fn cors(req: Request, next: Next) -> Response {
    // A WebDAV client's OPTIONS (no `Access-Control-Request-Method`)
    // asks what the server speaks: the WebDAV handler answers it.
    let preflight = req.method() == Method::OPTIONS
        && (!req.uri().path().starts_with(crate::dav::PREFIX)
            || req
                .headers()
                .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD));
    let mut resp = if preflight {
        StatusCode::OK.into_response()
    } else {
        next.run(req).await
    };
    let h = resp.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(
            "GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS, PROPFIND, PROPPATCH, MKCOL, COPY, \
             MOVE, LOCK, UNLOCK",
        ),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(
            "Content-Type, Authorization, Last-Event-ID, Range, If-Match, If-None-Match, \
             If-Modified-Since, If-Unmodified-Since, If-Range, Depth, Destination, Overwrite, \
             If, Lock-Token, Timeout",
        ),
    );
    // A player in a browser reads these of a ranged or conditional answer.
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(
            "Content-Range, Content-Length, Accept-Ranges, ETag, Last-Modified, DAV, Lock-Token",
        ),
    );
    resp
}

/// Lets a request through to an admin route only with
/// `Authorization: Bearer <admin token>` ([`metacore::admin`]; every
/// request, unless the operator opted out with `META_CORE_ADMIN_OPEN`).
pub(crate) async fn admin_only(
    State(st): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if st.admin.allows(given) {
        return next.run(req).await;
    }
    let message = if metacore::admin::bearer(given).is_some() {
        "the bearer token is not the admin token"
    } else {
        "this route needs Authorization: Bearer <admin token> (META_CORE_ADMIN_TOKEN, or the \
         file secrets/admin-token under META_CORE_PATH; `meta-core admin-token` prints it)"
    };
    ApiError::new(ErrorCode::Unauthorized, message).into_response()
}

/// Whether `req` bears the admin token (or the admin routes are open): it
/// may see what only operators see (pids, paths).
pub(crate) fn is_admin(st: &AppState, headers: &http::HeaderMap) -> bool {
    st.admin.allows(
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok()),
    )
}

/// A query parameter that names one of a few choices: absent or empty is
/// the first choice; another value is a 400 saying what is `expected`.
pub(crate) fn choice<T: Copy>(
    param: &str,
    given: Option<&str>,
    choices: &[(&str, T)],
    expected: &str,
) -> Result<T, ApiError> {
    let given = given.filter(|v| !v.is_empty()).unwrap_or(choices[0].0);
    choices
        .iter()
        .find(|(name, _)| *name == given)
        .map(|(_, t)| *t)
        .ok_or_else(|| ApiError::bad_request(format!("{param} must be {expected}, not {given:?}")))
}
