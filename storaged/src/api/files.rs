//! The watcher's routes: `/files/observe`, `/files/seen`, `/files/reset`,
//! `/files/repair`.

use axum::Json;
use metacore::api::storaged::{
    MAX_OBSERVATIONS, ObserveBody, Observed, RepairBody, RepairDone, ResetBody, ResetDone,
    SeenPage, SeenQuery,
};
use metacore::checked::RelPath;
use metacore::error::ApiError;
use metacore::socket::body::{JsonBody, JsonReply, QueryParams};

use super::{State, page};

pub(super) async fn observe(
    st: State,
    JsonBody(body): JsonBody<ObserveBody>,
) -> JsonReply<Observed> {
    if body.observations.len() > MAX_OBSERVATIONS {
        return Err(ApiError::schema(format!(
            "at most {MAX_OBSERVATIONS} observations a call"
        )));
    }
    if !body.root.as_str().starts_with('/') {
        return Err(ApiError::schema("root is FILES_PATH, an absolute path"));
    }
    Ok(Json(Observed {
        outcomes: st.store.observe(body).await,
    }))
}

pub(super) async fn seen(st: State, QueryParams(q): QueryParams<SeenQuery>) -> JsonReply<SeenPage> {
    Ok(Json(st.store.seen(q.after, page(q.limit, 1000)).await?))
}

pub(super) async fn reset(st: State, JsonBody(body): JsonBody<ResetBody>) -> JsonReply<ResetDone> {
    for dir in body.dirs.iter().filter(|d| !d.is_empty()) {
        RelPath::new(dir.trim_end_matches('/'))?;
    }
    Ok(Json(st.store.reset_files(body).await?))
}

pub(super) async fn repair(
    st: State,
    JsonBody(body): JsonBody<RepairBody>,
) -> JsonReply<RepairDone> {
    if !body.root.as_str().starts_with('/') {
        return Err(ApiError::schema("root is FILES_PATH, an absolute path"));
    }
    Ok(Json(st.store.repair_files(body).await?))
}
