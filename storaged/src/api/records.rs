//! Record routes: resolve, list, get, replace, merge, delete, document,
//! single fields, set-add, aliases, duplicates, mint, and the operations
//! over many records (totals, import, wipe). Each handler decodes its
//! address as a [`Target`] and checks its input into the types the store's
//! write methods take, so a bad request is answered before it is queued.

use axum::Json;
use metacore::api::storaged::{
    AliasBody, AliasResult, Deleted, Document, DuplicateBody, DuplicateResult, FieldDelete,
    FieldValue, FieldWrite, FieldsBody, FieldsPage, ImportBody, Imported, MAX_FIELDS_PER_PAGE,
    MintBody, NamesQuery, PageQuery, RecordFields, RidBody, RootPage, SetAdd, Totals, ValueBody,
    Wiped, WriteResult,
};
use metacore::checked::{CheckedField, CheckedFields, FieldName, FilePath, SetMember};
use metacore::error::ApiError;
use metacore::rid::Rid;
use metacore::socket::body::{JsonBody, JsonReply, PathTarget, PathTargetAnd, QueryParams};

use super::{State, page};
use crate::bulk::ImportGroup;
use crate::records::PageStart;

fn start(after: Option<Rid>, offset: Option<u64>) -> PageStart {
    PageStart {
        after,
        offset: offset.unwrap_or(0),
    }
}

fn field_name(field: String) -> Result<FieldName, ApiError> {
    FieldName::new(field).map_err(ApiError::from)
}

pub(super) async fn resolve(st: State, hash: PathTarget) -> JsonReply<RidBody> {
    let target = hash.target()?;
    let rid = st.store.resolve(target).await?;
    Ok(Json(RidBody { rid }))
}

pub(super) async fn list(st: State, QueryParams(q): QueryParams<PageQuery>) -> JsonReply<RootPage> {
    let from = start(q.after, q.offset);
    Ok(Json(st.store.list_roots(from, page(q.limit, 1000)).await?))
}

pub(super) async fn fields_page(
    st: State,
    QueryParams(q): QueryParams<NamesQuery>,
    QueryParams(p): QueryParams<PageQuery>,
) -> JsonReply<FieldsPage> {
    let names = q
        .names
        .split(',')
        .filter(|n| !n.is_empty())
        .map(|n| field_name(n.to_owned()))
        .collect::<Result<Vec<_>, _>>()?;
    if names.is_empty() || names.len() > MAX_FIELDS_PER_PAGE {
        return Err(ApiError::schema(format!(
            "names: give 1 to {MAX_FIELDS_PER_PAGE} comma-separated field names"
        )));
    }
    let from = start(p.after, p.offset);
    Ok(Json(
        st.store
            .fields_page(names, from, page(p.limit, 1000))
            .await?,
    ))
}

pub(super) async fn totals(st: State) -> JsonReply<Totals> {
    Ok(Json(st.store.totals().await?))
}

pub(super) async fn get(st: State, hash: PathTarget) -> JsonReply<RecordFields> {
    let target = hash.target()?;
    Ok(Json(st.store.get_record(target).await?))
}

pub(super) async fn replace(
    st: State,
    hash: PathTarget,
    JsonBody(body): JsonBody<FieldsBody>,
) -> JsonReply<WriteResult> {
    let target = hash.target()?;
    let fields = CheckedFields::check_for(&target, body.fields)?;
    Ok(Json(st.store.replace(target, fields).await?))
}

pub(super) async fn merge(
    st: State,
    hash: PathTarget,
    JsonBody(body): JsonBody<FieldsBody>,
) -> JsonReply<WriteResult> {
    let target = hash.target()?;
    let fields = CheckedFields::check(body.fields)?;
    Ok(Json(st.store.merge(target, fields).await?))
}

pub(super) async fn delete(st: State, hash: PathTarget) -> JsonReply<Deleted> {
    let target = hash.target()?;
    Ok(Json(st.store.delete_root(target).await?))
}

pub(super) async fn document(st: State, hash: PathTarget) -> JsonReply<Document> {
    let target = hash.target()?;
    Ok(Json(st.store.document(target).await?))
}

pub(super) async fn get_field(
    st: State,
    PathTargetAnd(hash, field): PathTargetAnd,
) -> JsonReply<FieldValue> {
    let target = hash.target()?;
    Ok(Json(st.store.get_field(target, field_name(field)?).await?))
}

pub(super) async fn set_field(
    st: State,
    PathTargetAnd(hash, field): PathTargetAnd,
    JsonBody(body): JsonBody<ValueBody>,
) -> JsonReply<FieldWrite> {
    let target = hash.target()?;
    let field = CheckedField::new(field, body.value)?;
    Ok(Json(st.store.set_field(target, field).await?))
}

pub(super) async fn delete_field(
    st: State,
    PathTargetAnd(hash, field): PathTargetAnd,
) -> JsonReply<FieldDelete> {
    let target = hash.target()?;
    Ok(Json(
        st.store.delete_field(target, field_name(field)?).await?,
    ))
}

pub(super) async fn set_add(
    st: State,
    PathTargetAnd(hash, field): PathTargetAnd,
    JsonBody(body): JsonBody<ValueBody>,
) -> JsonReply<SetAdd> {
    let target = hash.target()?;
    let member = SetMember::new(field, body.value)?;
    Ok(Json(st.store.set_add(target, member).await?))
}

pub(super) async fn add_alias(
    st: State,
    hash: PathTarget,
    JsonBody(body): JsonBody<AliasBody>,
) -> JsonReply<AliasResult> {
    let target = hash.target()?;
    Ok(Json(st.store.add_alias(target, body.cid).await?))
}

pub(super) async fn add_duplicate(
    st: State,
    hash: PathTarget,
    JsonBody(body): JsonBody<DuplicateBody>,
) -> JsonReply<DuplicateResult> {
    let target = hash.target()?;
    let path = FilePath::new(body.path)?;
    Ok(Json(st.store.add_duplicate(target, path).await?))
}

pub(super) async fn mint(st: State, JsonBody(body): JsonBody<MintBody>) -> JsonReply<RidBody> {
    Ok(Json(RidBody {
        rid: st.store.mint(body).await?,
    }))
}

pub(super) async fn import(st: State, JsonBody(body): JsonBody<ImportBody>) -> JsonReply<Imported> {
    Ok(Json(st.store.import(ImportGroup::check(body)?).await?))
}

pub(super) async fn wipe(st: State) -> JsonReply<Wiped> {
    Ok(Json(Wiped {
        deleted: st.store.wipe().await?,
    }))
}
