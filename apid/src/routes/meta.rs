//! The service-to-service surface: `/meta`, `/meta/{hash}` and its
//! properties, `/api/meta/{cid}`, `/data/{hash}`. `{hash}` is a RID or any
//! registered CID; a write to a CID nobody registered mints its record
//! (CONTRACT decision 13). PUT replaces, PATCH merges (decision 3). Each
//! handler parses its address and checks its fields once, here, and hands
//! the typed values to storaged.

use axum::Json;
use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use metacore::api::storaged::Document;
use metacore::checked::{CheckedField, CheckedFields, FieldName, SetMember};
use metacore::cid::Cid;
use metacore::error::{ApiError, ErrorCode};
use metacore::record::{Fields, RESERVED_FIELD, Target};
use metacore::rid::Rid;
use metacore::socket::body::{
    JsonBody, JsonReply, PathParams, PathTarget, PathTargetAnd, QueryParams, RawBody,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::listing::all_roots;
use crate::file_path;
use crate::http::choice;
use crate::state::State;

/// `?shape=flat|nested` on record reads.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ShapeQuery {
    pub shape: Option<String>,
}

impl ShapeQuery {
    /// The asked shape, checked before the store is asked.
    pub(crate) fn shape(&self) -> Result<Shape, ApiError> {
        choice("shape", self.shape.as_deref(), SHAPES, "flat or nested")
    }
}

/// `?shape=`, the first is the default.
const SHAPES: &[(&str, Shape)] = &[("flat", Shape::Flat), ("nested", Shape::Nested)];

/// How record fields go over the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Flat,
    Nested,
}

/// A record's fields as they go over the wire: flat, or nested on request.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub(crate) enum Metadata {
    Flat(Fields),
    Nested(Value),
}

impl Shape {
    pub(crate) fn render(self, fields: Fields) -> Metadata {
        match self {
            Shape::Flat => Metadata::Flat(fields),
            Shape::Nested => Metadata::Nested(crate::nested::nest(&fields)),
        }
    }
}

/// `GET /meta`, `GET /api/metadata/hash-ids`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HashIds {
    pub hash_ids: Vec<Rid>,
    pub count: usize,
}

/// `GET /meta/{hash}`, `GET /api/metadata/{hashId}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Record {
    pub hash_id: Rid,
    pub metadata: Metadata,
}

/// `PUT /meta/{hash}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MetaWritten {
    pub success: bool,
    pub hash_id: Rid,
}

/// `PATCH /meta/{hash}`: `updated` is the number of fields sent.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MetaMerged {
    pub success: bool,
    pub hash_id: Rid,
    pub updated: usize,
}

/// `DELETE /meta/{hash}`: `deleted` is the rows removed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MetaDeleted {
    pub success: bool,
    pub hash_id: Rid,
    pub deleted: u64,
}

/// `PUT` and `DELETE /meta/{hash}/{key...}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PropertyWritten {
    pub success: bool,
    pub hash_id: Rid,
    pub property: String,
}

/// `POST /meta/{hash}/_add/{key...}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SetAdded {
    pub success: bool,
    pub hash_id: Rid,
    pub property: String,
    pub added: bool,
}

/// `GET /api/meta/{cid}` (`canonical_cid` keeps the original's spelling).
#[derive(Debug, Serialize)]
pub(crate) struct CidDocument {
    pub cid: Cid,
    pub metadata: Metadata,
    pub cids: Vec<String>,
    pub canonical_cid: Option<String>,
    pub duplicates: Vec<String>,
}

/// `GET /data/{hash}/path`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DataPath {
    pub hash_id: Rid,
    pub path: String,
    pub exists: bool,
}

/// `GET /meta` and `GET /api/metadata/hash-ids`: every root.
pub(super) async fn list(st: State) -> JsonReply<HashIds> {
    let hash_ids = all_roots(&st.store).await?;
    Ok(Json(HashIds {
        count: hash_ids.len(),
        hash_ids,
    }))
}

pub(super) async fn get(
    st: State,
    hash: PathTarget,
    QueryParams(shape): QueryParams<ShapeQuery>,
) -> JsonReply<Record> {
    let shape = shape.shape()?;
    let target = hash.target()?;
    let rec = st.store.get_record(&target).await?;
    Ok(Json(Record {
        hash_id: rec.rid,
        metadata: shape.render(rec.fields),
    }))
}

/// Drops the reserved `__fields__` as the original's bulk writes did.
fn without_reserved(mut fields: Fields) -> Fields {
    fields.remove(RESERVED_FIELD);
    fields
}

pub(super) async fn put(
    st: State,
    hash: PathTarget,
    JsonBody(fields): JsonBody<Fields>,
) -> JsonReply<MetaWritten> {
    let target = hash.target()?;
    let fields = CheckedFields::check_for(&target, without_reserved(fields))?;
    let w = st.store.replace(&target, &fields).await?;
    Ok(Json(MetaWritten {
        success: true,
        hash_id: w.rid,
    }))
}

pub(super) async fn patch(
    st: State,
    hash: PathTarget,
    JsonBody(fields): JsonBody<Fields>,
) -> JsonReply<MetaMerged> {
    let target = hash.target()?;
    let fields = CheckedFields::check(without_reserved(fields))?;
    let w = st.store.merge(&target, &fields).await?;
    Ok(Json(MetaMerged {
        success: true,
        hash_id: w.rid,
        updated: fields.len(),
    }))
}

pub(super) async fn delete(st: State, hash: PathTarget) -> JsonReply<MetaDeleted> {
    let target = hash.target()?;
    let d = st.store.delete_record(&target).await?;
    Ok(Json(MetaDeleted {
        success: true,
        hash_id: d.rid,
        deleted: d.deleted,
    }))
}

/// `GET /meta/{hash}/{key...}`: the value as plain text; 404 when the
/// property is missing or empty.
pub(super) async fn get_property(
    st: State,
    PathTargetAnd(hash, key): PathTargetAnd,
) -> Result<Response, ApiError> {
    let target = hash.target()?;
    let v = st.store.get_field(&target, &FieldName::new(&key)?).await?;
    if v.value.is_empty() {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            format!("property {key:?} not found"),
        ));
    }
    Ok((
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        v.value,
    )
        .into_response())
}

/// A property body: `{"value": "..."}` when it is JSON with a non-empty
/// string `value`, otherwise the raw text.
fn property_value(body: &Bytes) -> Result<String, ApiError> {
    if let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(body)
        && let Some(Value::String(v)) = o.get("value")
        && !v.is_empty()
    {
        return Ok(v.clone());
    }
    String::from_utf8(body.to_vec())
        .map_err(|_| ApiError::bad_request("the value is not UTF-8 text"))
}

pub(super) async fn put_property(
    st: State,
    PathTargetAnd(hash, key): PathTargetAnd,
    RawBody(body): RawBody,
) -> JsonReply<PropertyWritten> {
    // The body is read before the address, as the original did.
    let value = property_value(&body)?;
    let target = hash.target()?;
    let field = CheckedField::new(key.clone(), value)?;
    let w = st.store.set_field(&target, &field).await?;
    Ok(Json(PropertyWritten {
        success: true,
        hash_id: w.rid,
        property: key,
    }))
}

pub(super) async fn delete_property(
    st: State,
    PathTargetAnd(hash, key): PathTargetAnd,
) -> JsonReply<PropertyWritten> {
    let target = hash.target()?;
    let d = st
        .store
        .delete_field(&target, &FieldName::new(&key)?)
        .await?;
    Ok(Json(PropertyWritten {
        success: true,
        hash_id: d.rid,
        property: key,
    }))
}

/// `POST /meta/{hash}/_add/{key...}`: adds a value to the pipe-delimited
/// set in one field; an empty value is a 400.
pub(super) async fn add_to_set(
    st: State,
    PathTargetAnd(hash, key): PathTargetAnd,
    RawBody(body): RawBody,
) -> JsonReply<SetAdded> {
    let value = property_value(&body)?;
    if value.is_empty() {
        return Err(ApiError::schema("a value to add is required"));
    }
    let target = hash.target()?;
    let member = SetMember::new(key.clone(), value)?;
    let a = st.store.set_add(&target, &member).await?;
    Ok(Json(SetAdded {
        success: true,
        hash_id: a.rid,
        property: key,
        added: a.added,
    }))
}

/// `GET /api/meta/{cid}`: the metadata document of a CID.
pub(super) async fn by_cid(
    st: State,
    PathParams(raw): PathParams<String>,
    QueryParams(shape): QueryParams<ShapeQuery>,
) -> JsonReply<CidDocument> {
    let shape = shape.shape()?;
    let cid =
        Cid::parse(&raw).map_err(|e| ApiError::schema(format!("{raw:?} is not a CID: {e}")))?;
    let Document {
        fields,
        cids,
        canonical_cid,
        duplicates,
        ..
    } = st.store.document(&Target::Cid(cid.clone())).await?;
    Ok(Json(CidDocument {
        cid,
        metadata: shape.render(fields),
        cids,
        canonical_cid,
        duplicates,
    }))
}

/// `HEAD /data/{hash}`: 200 when a record answers, else 404 / 400 / 503,
/// without a body; the 503 keeps its `Retry-After` (CONTRACT decision 2).
pub(super) async fn head_data(st: State, PathParams(raw): PathParams<String>) -> Response {
    let Ok(target) = raw.parse::<Target>() else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    match st.store.resolve(&target).await {
        Ok(_) => StatusCode::OK.into_response(),
        Err(e) => {
            let (mut parts, _) = ApiError::from(e).into_response().into_parts();
            parts.headers.remove(header::CONTENT_TYPE);
            Response::from_parts(parts, axum::body::Body::empty())
        }
    }
}

/// `GET /data/{hash}/path`: where the record's file is on disk.
pub(super) async fn data_path(st: State, hash: PathTarget) -> JsonReply<DataPath> {
    let target = hash.target()?;
    let f = st.store.get_field(&target, &file_path::field()).await?;
    let path = file_path::disk_path(&st.config.files_path, &f.value).ok_or_else(|| {
        ApiError::new(
            ErrorCode::NotFound,
            "the record's filePath is not under FILES_PATH",
        )
    })?;
    // There only if it resolves inside FILES_PATH: a symlink out says
    // nothing of what it leads to.
    let exists = match st.roots.get(&st.config).await {
        Some(roots) => {
            let p = path.clone();
            tokio::task::spawn_blocking(move || roots.confined(&p).is_some())
                .await
                .unwrap_or(false)
        }
        None => false,
    };
    Ok(Json(DataPath {
        hash_id: f.rid,
        path: path.display().to_string(),
        exists,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn property_bodies() {
        assert_eq!(
            property_value(&Bytes::from_static(br#"{"value":"x"}"#)).unwrap(),
            "x"
        );
        assert_eq!(
            property_value(&Bytes::from_static(br#"{"value":""}"#)).unwrap(),
            r#"{"value":""}"#
        );
        assert_eq!(
            property_value(&Bytes::from_static(b"plain")).unwrap(),
            "plain"
        );
    }
}
