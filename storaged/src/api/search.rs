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

pub(super) async fn search(
    st: State,
    JsonBody(mut q): JsonBody<SearchQuery>,
) -> JsonReply<SearchPage> {
    q.limit = q.limit.clamp(1, MAX_PAGE);
    Ok(Json(st.store.search(q).await?))
}
