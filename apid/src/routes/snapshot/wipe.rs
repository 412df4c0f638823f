//! `POST /api/snapshot/wipe?scope=metadata`: every record deleted, by
//! storaged itself (a chunk of roots per write, until none is left).

use axum::Json;
use metacore::api::storaged::StoragedClient;
use metacore::error::ApiError;
use metacore::socket::body::{JsonReply, QueryParams};
use serde::{Deserialize, Serialize};

use crate::state::State;

#[derive(Debug, Default, Deserialize)]
pub(super) struct WipeQuery {
    pub scope: Option<String>,
}

/// The answer of a wipe.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WipeResult {
    /// Records deleted.
    pub metadata_deleted: u64,
}

pub(super) async fn wipe_route(
    st: State,
    QueryParams(q): QueryParams<WipeQuery>,
) -> JsonReply<WipeResult> {
    match q.scope.as_deref() {
        Some("metadata") => Ok(Json(WipeResult {
            metadata_deleted: wipe(&st.store).await?,
        })),
        Some(other) => Err(ApiError::bad_request(format!(
            "scope must be metadata, not {other:?}"
        ))),
        None => Err(ApiError::bad_request("say what to wipe: ?scope=metadata")),
    }
}

/// Deletes every record; returns how many.
pub async fn wipe(store: &StoragedClient) -> Result<u64, ApiError> {
    Ok(store.wipe().await?.deleted)
}
