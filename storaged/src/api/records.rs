//! Record routes: resolve, list, get, replace, merge, delete, document,
//! single fields, set-add, aliases, duplicates, mint.

use axum::Json;
use metacore::api::storaged::{
    AliasBody, AliasResult, Deleted, Document, DuplicateBody, DuplicateResult, FieldDelete,
    FieldValue, FieldWrite, FieldsBody, FieldsPage, FieldsPageQuery, MAX_FIELDS_PER_PAGE, MintBody,
    PageQuery, RecordFields, RidBody, RootPage, SetAdd, ValueBody, WriteResult,
};
use metacore::error::ApiError;
use metacore::rid::Rid;
use metacore::socket::body::{JsonBody, PathParams, QueryParams};

use super::{State, page, target};

type Res<T> = Result<Json<T>, ApiError>;

pub(super) async fn resolve(st: State, PathParams(hash): PathParams<String>) -> Res<RidBody> {
    let rid = st.store.resolve(target(&hash)?).await?;
    Ok(Json(RidBody { rid }))
}

pub(super) async fn list(st: State, QueryParams(q): QueryParams<PageQuery>) -> Res<RootPage> {
    let after = match q.after.as_deref() {
        None | Some("") => None,
        Some(a) => Some(Rid::parse(a).map_err(|e| ApiError::schema(format!("after: {e}")))?),
    };
    Ok(Json(st.store.list_roots(after, page(q.limit, 1000)).await?))
}

pub(super) async fn fields_page(
    st: State,
    QueryParams(q): QueryParams<FieldsPageQuery>,
) -> Res<FieldsPage> {
    let names: Vec<String> = q
        .names
        .split(',')
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    if names.is_empty() || names.len() > MAX_FIELDS_PER_PAGE {
        return Err(ApiError::schema(format!(
            "names: give 1 to {MAX_FIELDS_PER_PAGE} comma-separated field names"
        )));
    }
    let after = match q.after.as_deref() {
        None | Some("") => None,
        Some(a) => Some(Rid::parse(a).map_err(|e| ApiError::schema(format!("after: {e}")))?),
    };
    Ok(Json(
        st.store
            .fields_page(names, after, page(q.limit, 1000))
            .await?,
    ))
}

pub(super) async fn get(st: State, PathParams(hash): PathParams<String>) -> Res<RecordFields> {
    Ok(Json(st.store.get_record(target(&hash)?).await?))
}

pub(super) async fn replace(
    st: State,
    PathParams(hash): PathParams<String>,
    JsonBody(body): JsonBody<FieldsBody>,
) -> Res<WriteResult> {
    Ok(Json(st.store.replace(target(&hash)?, body.fields).await?))
}

pub(super) async fn merge(
    st: State,
    PathParams(hash): PathParams<String>,
    JsonBody(body): JsonBody<FieldsBody>,
) -> Res<WriteResult> {
    Ok(Json(st.store.merge(target(&hash)?, body.fields).await?))
}

pub(super) async fn delete(st: State, PathParams(hash): PathParams<String>) -> Res<Deleted> {
    Ok(Json(st.store.delete_root(target(&hash)?).await?))
}

pub(super) async fn document(st: State, PathParams(hash): PathParams<String>) -> Res<Document> {
    Ok(Json(st.store.document(target(&hash)?).await?))
}

pub(super) async fn get_field(
    st: State,
    PathParams((hash, field)): PathParams<(String, String)>,
) -> Res<FieldValue> {
    Ok(Json(st.store.get_field(target(&hash)?, field).await?))
}

pub(super) async fn set_field(
    st: State,
    PathParams((hash, field)): PathParams<(String, String)>,
    JsonBody(body): JsonBody<ValueBody>,
) -> Res<FieldWrite> {
    Ok(Json(
        st.store
            .set_field(target(&hash)?, field, body.value)
            .await?,
    ))
}

pub(super) async fn delete_field(
    st: State,
    PathParams((hash, field)): PathParams<(String, String)>,
) -> Res<FieldDelete> {
    Ok(Json(st.store.delete_field(target(&hash)?, field).await?))
}

pub(super) async fn set_add(
    st: State,
    PathParams((hash, field)): PathParams<(String, String)>,
    JsonBody(body): JsonBody<ValueBody>,
) -> Res<SetAdd> {
    Ok(Json(
        st.store.set_add(target(&hash)?, field, body.value).await?,
    ))
}

pub(super) async fn add_alias(
    st: State,
    PathParams(hash): PathParams<String>,
    JsonBody(body): JsonBody<AliasBody>,
) -> Res<AliasResult> {
    Ok(Json(st.store.add_alias(target(&hash)?, body.cid).await?))
}

pub(super) async fn add_duplicate(
    st: State,
    PathParams(hash): PathParams<String>,
    JsonBody(body): JsonBody<DuplicateBody>,
) -> Res<DuplicateResult> {
    Ok(Json(
        st.store.add_duplicate(target(&hash)?, body.path).await?,
    ))
}

pub(super) async fn mint(st: State, JsonBody(body): JsonBody<MintBody>) -> Res<RidBody> {
    Ok(Json(RidBody {
        rid: st.store.mint(body).await?,
    }))
}
