//! The HTTP edge every public route shares: the admin bearer token on the
//! admin routes, and body limits (CORS is [`crate::cors`]).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::header;
use metacore::error::{ApiError, ErrorCode};

use crate::state::AppState;

/// Body limit of the metadata and editor routes (a 413 above it).
pub(crate) const MAX_BODY: usize = 8 * 1024 * 1024;
/// Body limit of `PUT /meta/{hash}/{key...}` (one value).
pub(crate) const MAX_PROPERTY_BODY: usize = 1024 * 1024;

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
