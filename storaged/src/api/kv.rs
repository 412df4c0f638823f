//! Raw key routes: get, put, delete one key; list a range.

use axum::Json;
use metacore::api::storaged::{
    KeyQuery, KvDeleted, KvPut, KvRange, KvTreePage, KvTreeQuery, KvValue, KvWrite, RangeQuery,
};
use metacore::key::{KeyWrite, WritableKey};
use metacore::socket::body::{JsonBody, JsonReply, QueryParams};

use super::{State, page};

pub(super) async fn get(st: State, QueryParams(q): QueryParams<KeyQuery>) -> JsonReply<KvValue> {
    let value = st.store.kv_get(q.key.clone()).await?;
    Ok(Json(KvValue { key: q.key, value }))
}

pub(super) async fn put(st: State, JsonBody(body): JsonBody<KvPut>) -> JsonReply<KvWrite> {
    let write = KeyWrite::new(&body.key, body.value)?;
    Ok(Json(st.store.kv_put(write).await?))
}

pub(super) async fn delete(
    st: State,
    QueryParams(q): QueryParams<KeyQuery>,
) -> JsonReply<KvDeleted> {
    Ok(Json(st.store.kv_delete(WritableKey::parse(&q.key)?).await?))
}

pub(super) async fn range(
    st: State,
    QueryParams(q): QueryParams<RangeQuery>,
) -> JsonReply<KvRange> {
    let limit = page(q.limit, 1000);
    Ok(Json(st.store.kv_range(q, limit).await?))
}

pub(super) async fn tree(
    st: State,
    QueryParams(mut q): QueryParams<KvTreeQuery>,
) -> JsonReply<KvTreePage> {
    q.max = page(Some(q.max), 1000);
    Ok(Json(st.store.kv_tree(q).await?))
}
