//! The editor's surface: `/api/metadata/*` and `/api/files/tuples`. Every
//! write goes through the same checks as `/meta` (deprecated fields are
//! refused on every write route, CONTRACT decision 3), and a batch update
//! of one record is one transaction.

use axum::Json;
use metacore::api::storaged::{FieldsPageQuery, MAX_PAGE, PageQuery, StoragedClient};
use metacore::checked::{CheckedField, CheckedFields, FieldName};
use metacore::error::ApiError;
use metacore::record::{Fields, Target};
use metacore::rid::Rid;
use metacore::socket::body::{JsonBody, JsonReply, PathTarget, QueryParams};
use serde::{Deserialize, Serialize};

use super::listing::each_root;
use crate::state::State;

/// The editor's status field, never stored (the original dropped it).
const PROCESSING_STATUS: &str = "processingStatus";

#[derive(Debug, Default, Deserialize)]
pub(crate) struct TuplesQuery {
    pub summary: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Tuple {
    pub hash_id: Rid,
    pub file_path: String,
    pub size_byte: u64,
    pub mtime_nano: u64,
}

/// `GET /api/files/tuples`: `files` is left out with `summary`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Tuples {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<Tuple>>,
    pub count: u64,
    pub total_size: u64,
}

/// `GET /api/files/tuples[?summary=1]`: the roots that have `filePath`,
/// `sizeByte` and `mtimeNano` (the numbers must parse), with their count
/// and total size; `summary` leaves the list out.
pub(super) async fn tuples(
    st: State,
    QueryParams(q): QueryParams<TuplesQuery>,
) -> JsonReply<Tuples> {
    let summary = matches!(q.summary.as_deref(), Some("1" | "true"));
    let mut files = Vec::new();
    let (mut count, mut total) = (0u64, 0u64);
    each_root(&st.store, &["filePath", "sizeByte", "mtimeNano"], |row| {
        let f = &row.fields;
        if let (Some(path), Some(size), Some(mtime)) = (
            f.get("filePath"),
            f.get("sizeByte").and_then(|v| v.parse::<u64>().ok()),
            f.get("mtimeNano").and_then(|v| v.parse::<u64>().ok()),
        ) {
            count += 1;
            total += size;
            if !summary {
                files.push(Tuple {
                    hash_id: row.rid,
                    file_path: path.clone(),
                    size_byte: size,
                    mtime_nano: mtime,
                });
            }
        }
        true
    })
    .await?;
    Ok(Json(Tuples {
        files: (!summary).then_some(files),
        count,
        total_size: total,
    }))
}

#[derive(Debug, Deserialize)]
pub(crate) struct ListQuery {
    pub offset: Option<u64>,
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListItem {
    pub hash_id: Rid,
    pub title: String,
    pub file_name: String,
    pub file_path: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub year: String,
}

/// Fields of a list item; `type` falls back to `fileType`.
const LIST_FIELDS: [&str; 6] = ["title", "fileName", "filePath", "type", "fileType", "year"];

/// `GET /api/metadata/list`.
#[derive(Debug, Serialize)]
pub(crate) struct EditorList {
    pub count: usize,
    pub items: Vec<ListItem>,
    /// Records in the store.
    pub total: u64,
}

/// `GET /api/metadata/list?offset=&limit=` in root order; `items` is `[]`
/// when empty (the original sent `null`). The offset is skipped by
/// storaged inside its root index, in the same call as the page.
pub(super) async fn list(
    st: State,
    QueryParams(q): QueryParams<ListQuery>,
) -> JsonReply<EditorList> {
    let limit = super::listing::page_size("limit", q.limit, 100, MAX_PAGE)?;
    let total = st.store.stats().await?.roots;
    let page = st
        .store
        .fields_page(&FieldsPageQuery {
            names: LIST_FIELDS.join(","),
            page: PageQuery {
                after: None,
                offset: q.offset.filter(|o| *o > 0),
                limit: Some(limit),
            },
        })
        .await?;
    let items: Vec<ListItem> = page
        .rows
        .into_iter()
        .map(|r| {
            let get = |k: &str| r.fields.get(k).cloned().unwrap_or_default();
            ListItem {
                hash_id: r.rid,
                title: get("title"),
                file_name: get("fileName"),
                file_path: get("filePath"),
                kind: r
                    .fields
                    .get("type")
                    .or_else(|| r.fields.get("fileType"))
                    .cloned()
                    .unwrap_or_default(),
                year: get("year"),
            }
        })
        .collect();
    Ok(Json(EditorList {
        count: items.len(),
        items,
        total,
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchBody {
    pub updates: Vec<BatchUpdate>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BatchUpdate {
    pub hash_id: Option<String>,
    pub metadata: Option<Fields>,
    pub properties: Option<Fields>,
}

/// Whether one update of a batch was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum BatchStatus {
    Ok,
    Error,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BatchResult {
    pub hash_id: String,
    pub status: BatchStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `POST /api/metadata/batch`.
#[derive(Debug, Serialize)]
pub(crate) struct BatchResponse {
    /// Always `completed`: each update has its own result.
    pub status: &'static str,
    pub total: usize,
    pub success: usize,
    pub errors: usize,
    pub results: Vec<BatchResult>,
}

/// `POST /api/metadata/batch`: each update is one transaction: with
/// `metadata` the record's fields become `metadata` plus `properties`;
/// with only `properties` those are merged in. `processingStatus` is
/// dropped. Updates are independent: one failing does not stop the others.
pub(super) async fn batch(
    st: State,
    JsonBody(body): JsonBody<BatchBody>,
) -> JsonReply<BatchResponse> {
    if body.updates.is_empty() {
        return Err(ApiError::schema("updates must not be empty"));
    }
    let mut results = Vec::with_capacity(body.updates.len());
    for u in body.updates {
        let Some(raw) = u.hash_id.filter(|h| !h.is_empty()) else {
            results.push(BatchResult {
                hash_id: "unknown".into(),
                status: BatchStatus::Error,
                error: Some("Missing hash ID".into()),
            });
            continue;
        };
        let outcome = apply_update(&st.store, &raw, u.metadata, u.properties).await;
        results.push(match outcome {
            Ok(()) => BatchResult {
                hash_id: raw,
                status: BatchStatus::Ok,
                error: None,
            },
            Err(e) => BatchResult {
                hash_id: raw,
                status: BatchStatus::Error,
                error: Some(e.message),
            },
        });
    }
    let success = results
        .iter()
        .filter(|r| r.status == BatchStatus::Ok)
        .count();
    Ok(Json(BatchResponse {
        status: "completed",
        total: results.len(),
        success,
        errors: results.len() - success,
        results,
    }))
}

async fn apply_update(
    store: &StoragedClient,
    raw: &str,
    metadata: Option<Fields>,
    properties: Option<Fields>,
) -> Result<(), ApiError> {
    let target: Target = raw.parse()?;
    match metadata {
        Some(mut fields) => {
            fields.remove(PROCESSING_STATUS);
            fields.extend(properties.unwrap_or_default());
            let fields = CheckedFields::check_for(&target, fields)?;
            store.replace(&target, &fields).await?;
        }
        None => {
            let props = CheckedFields::check(properties.unwrap_or_default())?;
            if !props.is_empty() {
                store.merge(&target, &props).await?;
            }
        }
    }
    Ok(())
}

/// `POST /api/metadata/clear`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Cleared {
    pub status: &'static str,
    pub message: &'static str,
    pub deleted_count: u64,
}

/// `POST /api/metadata/clear`: deletes every record (its fields, aliases,
/// duplicates and index rows), inside storaged.
pub(super) async fn clear(st: State) -> JsonReply<Cleared> {
    let deleted = st.store.wipe().await?.deleted;
    Ok(Json(Cleared {
        status: "ok",
        message: "Metadata cleared",
        deleted_count: deleted,
    }))
}

/// `PUT /api/metadata/{hashId}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EditorWritten {
    pub status: &'static str,
    pub hash_id: Rid,
    pub message: &'static str,
}

/// `PUT /api/metadata/{hashId}`: the record's fields become the body's
/// (without `processingStatus`).
pub(super) async fn put(
    st: State,
    hash: PathTarget,
    JsonBody(mut fields): JsonBody<Fields>,
) -> JsonReply<EditorWritten> {
    let target = hash.target()?;
    fields.remove(PROCESSING_STATUS);
    let fields = CheckedFields::check_for(&target, fields)?;
    let w = st.store.replace(&target, &fields).await?;
    Ok(Json(EditorWritten {
        status: "ok",
        hash_id: w.rid,
        message: "Metadata updated",
    }))
}

/// `DELETE /api/metadata/{hashId}`: `deletedKeys` is the rows removed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EditorDeleted {
    pub status: &'static str,
    pub hash_id: Rid,
    pub deleted_keys: u64,
}

pub(super) async fn delete(st: State, hash: PathTarget) -> JsonReply<EditorDeleted> {
    let target = hash.target()?;
    let d = st.store.delete_record(&target).await?;
    Ok(Json(EditorDeleted {
        status: "ok",
        hash_id: d.rid,
        deleted_keys: d.deleted,
    }))
}

#[derive(Debug, Deserialize)]
pub(crate) struct PropertyQuery {
    pub property: String,
}

/// `GET /api/metadata/{hashId}/property?property=`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EditorProperty {
    pub hash_id: Rid,
    pub property: String,
    pub value: String,
}

pub(super) async fn get_property(
    st: State,
    hash: PathTarget,
    QueryParams(q): QueryParams<PropertyQuery>,
) -> JsonReply<EditorProperty> {
    let target = hash.target()?;
    let v = st
        .store
        .get_field(&target, &FieldName::new(&q.property)?)
        .await?;
    Ok(Json(EditorProperty {
        hash_id: v.rid,
        property: v.field,
        value: v.value,
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PropertyBody {
    pub property: String,
    pub value: String,
}

/// `PUT /api/metadata/{hashId}/property`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EditorPropertyWritten {
    pub status: &'static str,
    pub hash_id: Rid,
    pub property: String,
    pub value: String,
    pub message: &'static str,
}

pub(super) async fn put_property(
    st: State,
    hash: PathTarget,
    JsonBody(body): JsonBody<PropertyBody>,
) -> JsonReply<EditorPropertyWritten> {
    let target = hash.target()?;
    let field = CheckedField::new(body.property, body.value)?;
    let w = st.store.set_field(&target, &field).await?;
    Ok(Json(EditorPropertyWritten {
        status: "ok",
        hash_id: w.rid,
        property: w.field,
        value: field.value().to_owned(),
        message: "Property updated",
    }))
}
