//! The service-to-service surface: `/meta`, `/meta/{hash}` and its
//! properties, `/api/meta/{cid}`, `/data/{hash}`. `{hash}` is a RID or any
//! registered CID; a write to a CID nobody registered mints its record
//! (CONTRACT decision 13). PUT replaces, PATCH merges (decision 3).

use std::path::{Component, Path, PathBuf};

use axum::Json;
use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use metacore::api::storaged::Document;
use metacore::cid::Cid;
use metacore::error::{ApiError, ErrorCode};
use metacore::record::{Fields, RESERVED_FIELD};
use metacore::rid::Rid;
use metacore::socket::body::{JsonBody, PathParams, QueryParams, RawBody};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::listing::all_roots;
use crate::http::hash;
use crate::state::State;

type Res<T> = Result<Json<T>, ApiError>;

/// `?shape=flat|nested` on record reads.
#[derive(Debug, Default, Deserialize)]
pub struct ShapeQuery {
    #[serde(default)]
    pub shape: Option<String>,
}

impl ShapeQuery {
    /// The asked shape, checked before the store is asked.
    pub fn shape(&self) -> Result<Shape, ApiError> {
        match self.shape.as_deref() {
            None | Some("") | Some("flat") => Ok(Shape::Flat),
            Some("nested") => Ok(Shape::Nested),
            Some(other) => Err(ApiError::bad_request(format!(
                "shape must be flat or nested, not {other:?}"
            ))),
        }
    }
}

/// How record fields go over the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Flat,
    Nested,
}

impl Shape {
    pub fn render(self, fields: Fields) -> Value {
        match self {
            Shape::Flat => json!(fields),
            Shape::Nested => crate::nested::nest(&fields),
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HashIds {
    pub hash_ids: Vec<String>,
    pub count: usize,
}

/// `GET /meta` and `GET /api/metadata/hash-ids`: every root.
pub(super) async fn list(st: State) -> Res<HashIds> {
    let hash_ids: Vec<String> = all_roots(&st.store)
        .await?
        .iter()
        .map(Rid::to_string)
        .collect();
    Ok(Json(HashIds {
        count: hash_ids.len(),
        hash_ids,
    }))
}

pub(super) async fn get(
    st: State,
    PathParams(raw): PathParams<String>,
    QueryParams(shape): QueryParams<ShapeQuery>,
) -> Result<Json<Value>, ApiError> {
    let shape = shape.shape()?;
    let rec = st.store.get_record(&hash(&raw)?).await?;
    Ok(Json(
        json!({ "hashId": rec.rid.to_string(), "metadata": shape.render(rec.fields) }),
    ))
}

/// Drops the reserved `__fields__` as the original's bulk writes did.
fn without_reserved(mut fields: Fields) -> Fields {
    fields.remove(RESERVED_FIELD);
    fields
}

pub(super) async fn put(
    st: State,
    PathParams(raw): PathParams<String>,
    JsonBody(fields): JsonBody<Fields>,
) -> Result<Json<Value>, ApiError> {
    let w = st
        .store
        .replace(&hash(&raw)?, without_reserved(fields))
        .await?;
    Ok(Json(
        json!({ "success": true, "hashId": w.rid.to_string() }),
    ))
}

pub(super) async fn patch(
    st: State,
    PathParams(raw): PathParams<String>,
    JsonBody(fields): JsonBody<Fields>,
) -> Result<Json<Value>, ApiError> {
    let fields = without_reserved(fields);
    let updated = fields.len();
    let w = st.store.merge(&hash(&raw)?, fields).await?;
    Ok(Json(
        json!({ "success": true, "hashId": w.rid.to_string(), "updated": updated }),
    ))
}

pub(super) async fn delete(
    st: State,
    PathParams(raw): PathParams<String>,
) -> Result<Json<Value>, ApiError> {
    let d = st.store.delete_record(&hash(&raw)?).await?;
    Ok(Json(
        json!({ "success": true, "hashId": d.rid.to_string(), "deleted": d.deleted }),
    ))
}

/// `GET /meta/{hash}/{key...}`: the value as plain text; 404 when the
/// property is missing or empty.
pub(super) async fn get_property(
    st: State,
    PathParams((raw, key)): PathParams<(String, String)>,
) -> Result<Response, ApiError> {
    let v = st.store.get_field(&hash(&raw)?, &key).await?;
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
    PathParams((raw, key)): PathParams<(String, String)>,
    RawBody(body): RawBody,
) -> Result<Json<Value>, ApiError> {
    let value = property_value(&body)?;
    let w = st.store.set_field(&hash(&raw)?, &key, &value).await?;
    Ok(Json(
        json!({ "success": true, "hashId": w.rid.to_string(), "property": key }),
    ))
}

pub(super) async fn delete_property(
    st: State,
    PathParams((raw, key)): PathParams<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let d = st.store.delete_field(&hash(&raw)?, &key).await?;
    Ok(Json(
        json!({ "success": true, "hashId": d.rid.to_string(), "property": key }),
    ))
}

/// `POST /meta/{hash}/_add/{key...}`: adds a value to the pipe-delimited
/// set in one field; an empty value is a 400.
pub(super) async fn add_to_set(
    st: State,
    PathParams((raw, key)): PathParams<(String, String)>,
    RawBody(body): RawBody,
) -> Result<Json<Value>, ApiError> {
    let value = property_value(&body)?;
    if value.is_empty() {
        return Err(ApiError::schema("a value to add is required"));
    }
    let a = st.store.set_add(&hash(&raw)?, &key, &value).await?;
    Ok(Json(
        json!({ "success": true, "hashId": a.rid.to_string(), "property": key, "added": a.added }),
    ))
}

/// `GET /api/meta/{cid}`: the metadata document of a CID.
pub(super) async fn by_cid(
    st: State,
    PathParams(raw): PathParams<String>,
    QueryParams(shape): QueryParams<ShapeQuery>,
) -> Result<Json<Value>, ApiError> {
    let shape = shape.shape()?;
    let cid =
        Cid::parse(&raw).map_err(|e| ApiError::schema(format!("{raw:?} is not a CID: {e}")))?;
    let Document {
        fields,
        cids,
        canonical_cid,
        duplicates,
        ..
    } = st.store.document(cid.as_str()).await?;
    Ok(Json(json!({
        "cid": cid.as_str(),
        "metadata": shape.render(fields),
        "cids": cids,
        "canonical_cid": canonical_cid,
        "duplicates": duplicates,
    })))
}

/// `HEAD /data/{hash}`: 200 when a record answers, else 404 / 400 / 503,
/// without a body; the 503 keeps its `Retry-After` (CONTRACT decision 2).
pub(super) async fn head_data(st: State, PathParams(raw): PathParams<String>) -> Response {
    let Ok(target) = hash(&raw) else {
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

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DataPath {
    pub hash_id: String,
    pub path: String,
    pub exists: bool,
}

/// `GET /data/{hash}/path`: where the record's file is on disk.
pub(super) async fn data_path(st: State, PathParams(raw): PathParams<String>) -> Res<DataPath> {
    let target = hash(&raw)?;
    let f = st.store.get_field(&target, "filePath").await?;
    let path = disk_path(&st.config.files_path, &f.value).ok_or_else(|| {
        ApiError::new(
            ErrorCode::NotFound,
            "the record's filePath is not under FILES_PATH",
        )
    })?;
    let exists = tokio::fs::try_exists(&path).await.unwrap_or(false);
    Ok(Json(DataPath {
        hash_id: f.rid.to_string(),
        path: path.display().to_string(),
        exists,
    }))
}

/// Maps a stored `filePath` to disk without doubling the prefix
/// (CONTRACT decision 5): an absolute path under `files_path` is kept; a
/// path under the conventional `/files` mount point, or a relative one, is
/// joined to `files_path`. `None` when it would leave `files_path`.
pub fn disk_path(files_path: &Path, file_path: &str) -> Option<PathBuf> {
    let p = Path::new(file_path);
    let rel: &Path = if let Ok(r) = p.strip_prefix(files_path) {
        r
    } else if let Ok(r) = p.strip_prefix("/files") {
        r
    } else if p.is_relative() {
        p
    } else {
        return None;
    };
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    Some(files_path.join(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_paths_map_to_disk_once() {
        let root = Path::new("/srv/files");
        assert_eq!(
            disk_path(root, "/srv/files/watch/a.mkv"),
            Some(PathBuf::from("/srv/files/watch/a.mkv"))
        );
        assert_eq!(
            disk_path(root, "/files/watch/a.mkv"),
            Some(PathBuf::from("/srv/files/watch/a.mkv"))
        );
        assert_eq!(
            disk_path(root, "watch/a.mkv"),
            Some(PathBuf::from("/srv/files/watch/a.mkv"))
        );
        assert_eq!(disk_path(root, "/etc/passwd"), None);
        assert_eq!(disk_path(root, "/files/../etc/passwd"), None);
        assert_eq!(disk_path(root, "watch/../../x"), None);
    }

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
