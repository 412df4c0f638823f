//! `POST /search`, `GET /schema`, `POST /schema/rescan`.

use axum::Json;
use metacore::api::storaged::{MAX_PAGE, SchemaFields, SchemaRescanned, SearchPage, SearchQuery};
use metacore::socket::body::{JsonBody, JsonReply};

use super::State;

pub(super) async fn schema(st: State) -> JsonReply<SchemaFields> {
    Ok(Json(st.store.schema().await?))
}

pub(super) async fn rescan_schema(st: State) -> JsonReply<SchemaRescanned> {
    Ok(Json(st.store.rescan_schema().await?))
}

/// Searches that run at once: one may have to pass every record (about
/// two seconds at 169,000), and each holds a reader connection.
static SLOTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);
/// How long a search waits for a slot before its 503.
const SLOT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

pub(super) async fn search(
    st: State,
    JsonBody(mut q): JsonBody<SearchQuery>,
) -> JsonReply<SearchPage> {
    q.limit = q.limit.clamp(1, MAX_PAGE);
    let _slot = match tokio::time::timeout(SLOT_WAIT, SLOTS.acquire()).await {
        Ok(Ok(slot)) => slot,
        _ => {
            return Err(metacore::error::ApiError::new(
                metacore::error::ErrorCode::Overloaded,
                "every search slot is taken; retry",
            ));
        }
    };
    Ok(Json(st.store.search(q).await?))
}
