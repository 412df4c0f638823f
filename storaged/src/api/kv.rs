//! Raw key routes: get, put, delete one key; list a range.

use axum::Json;
use metacore::api::storaged::{KeyQuery, KvDeleted, KvPut, KvRange, KvValue, KvWrite, RangeQuery};
use metacore::error::ApiError;
use metacore::socket::body::{JsonBody, QueryParams};

use super::{State, page};

type Res<T> = Result<Json<T>, ApiError>;

pub(super) async fn get(st: State, QueryParams(q): QueryParams<KeyQuery>) -> Res<KvValue> {
    let value = st.store.kv_get(q.key.clone()).await?;
    Ok(Json(KvValue { key: q.key, value }))
}

pub(super) async fn put(st: State, JsonBody(body): JsonBody<KvPut>) -> Res<KvWrite> {
    Ok(Json(st.store.kv_put(body.key, body.value).await?))
}

pub(super) async fn delete(st: State, QueryParams(q): QueryParams<KeyQuery>) -> Res<KvDeleted> {
    Ok(Json(st.store.kv_delete(q.key).await?))
}

pub(super) async fn range(st: State, QueryParams(q): QueryParams<RangeQuery>) -> Res<KvRange> {
    let limit = page(q.limit, 1000);
    Ok(Json(st.store.kv_range(q, limit).await?))
}
