//! `POST /search`.

use axum::Json;
use metacore::api::storaged::{MAX_PAGE, SearchPage, SearchQuery};
use metacore::socket::body::{JsonBody, JsonReply};

use super::State;

pub(super) async fn search(
    st: State,
    JsonBody(mut q): JsonBody<SearchQuery>,
) -> JsonReply<SearchPage> {
    q.limit = q.limit.clamp(1, MAX_PAGE);
    Ok(Json(st.store.search(q).await?))
}
