//! The editor's surface: `/api/metadata/*` and `/api/files/tuples`. Every
//! write goes through the same checks as `/meta` (deprecated fields are
//! refused on every write route, CONTRACT decision 3), and a batch update
//! of one record is one transaction.

use axum::Json;
use metacore::api::storaged::{PageQuery, StoragedClient};
use metacore::error::ApiError;
use metacore::record::Fields;
use metacore::rid::Rid;
use metacore::socket::body::{JsonBody, PathParams, QueryParams};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::listing::{delete_all_records, each_root};
use crate::http::hash;
use crate::state::State;

/// The editor's status field, never stored (the original dropped it).
const PROCESSING_STATUS: &str = "processingStatus";

#[derive(Debug, Default, Deserialize)]
pub struct TuplesQuery {
    #[serde(default)]
    pub summary: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tuple {
    pub hash_id: String,
    pub file_path: String,
    pub size_byte: u64,
    pub mtime_nano: u64,
}

/// `GET /api/files/tuples[?summary=1]`: the roots that have `filePath`,
/// `sizeByte` and `mtimeNano` (the numbers must parse), with their count
/// and total size; `summary` leaves the list out.
pub(super) async fn tuples(
    st: State,
    QueryParams(q): QueryParams<TuplesQuery>,
) -> Result<Json<Value>, ApiError> {
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
                    hash_id: row.rid.to_string(),
                    file_path: path.clone(),
                    size_byte: size,
                    mtime_nano: mtime,
                });
            }
        }
        true
    })
    .await?;
    let mut body = json!({ "count": count, "totalSize": total });
    if !summary {
        body["files"] = json!(files);
    }
    Ok(Json(body))
}

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    pub offset: Option<u64>,
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListItem {
    pub hash_id: String,
    pub title: String,
    pub file_name: String,
    pub file_path: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub year: String,
}

/// Fields of a list item; `type` falls back to `fileType`.
const LIST_FIELDS: [&str; 6] = ["title", "fileName", "filePath", "type", "fileType", "year"];

/// `GET /api/metadata/list?offset=&limit=` in root order; `items` is `[]`
/// when empty (the original sent `null`).
pub(super) async fn list(
    st: State,
    QueryParams(q): QueryParams<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = q
        .limit
        .unwrap_or(100)
        .clamp(1, metacore::api::storaged::MAX_PAGE);
    let total = st.store.stats().await?.roots;
    let after = root_before(&st.store, q.offset.unwrap_or(0)).await?;
    let page = st
        .store
        .fields_page(&metacore::api::storaged::FieldsPageQuery {
            names: LIST_FIELDS.join(","),
            after: after.map(|r| r.to_string()),
            limit: Some(limit),
        })
        .await?;
    let items: Vec<ListItem> = page
        .rows
        .into_iter()
        .map(|r| {
            let get = |k: &str| r.fields.get(k).cloned().unwrap_or_default();
            ListItem {
                hash_id: r.rid.to_string(),
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
    Ok(Json(
        json!({ "count": items.len(), "items": items, "total": total }),
    ))
}

/// The root just before position `offset` in root order (`None` for 0 or
/// past the end... which then lists from the start of an empty tail).
async fn root_before(store: &StoragedClient, offset: u64) -> Result<Option<Rid>, ApiError> {
    if offset == 0 {
        return Ok(None);
    }
    let mut skipped = 0u64;
    let mut q = PageQuery {
        after: None,
        limit: Some(metacore::api::storaged::MAX_PAGE),
    };
    loop {
        let page = store.list_roots(&q).await?;
        let n = page.rids.len() as u64;
        if skipped + n >= offset {
            return Ok(Some(page.rids[(offset - skipped - 1) as usize]));
        }
        skipped += n;
        match (page.next, page.rids.last()) {
            (Some(next), _) => q.after = Some(next.to_string()),
            // Past the end: after the last root there is nothing.
            (None, last) => return Ok(last.copied()),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchBody {
    pub updates: Vec<BatchUpdate>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchUpdate {
    #[serde(default)]
    pub hash_id: Option<String>,
    #[serde(default)]
    pub metadata: Option<Fields>,
    #[serde(default)]
    pub properties: Option<Fields>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchResult {
    pub hash_id: String,
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `POST /api/metadata/batch`: each update is one transaction: with
/// `metadata` the record's fields become `metadata` plus `properties`;
/// with only `properties` those are merged in. `processingStatus` is
/// dropped. Updates are independent: one failing does not stop the others.
pub(super) async fn batch(
    st: State,
    JsonBody(body): JsonBody<BatchBody>,
) -> Result<Json<Value>, ApiError> {
    if body.updates.is_empty() {
        return Err(ApiError::schema("updates must not be empty"));
    }
    let mut results = Vec::with_capacity(body.updates.len());
    for u in body.updates {
        let Some(raw) = u.hash_id.filter(|h| !h.is_empty()) else {
            results.push(BatchResult {
                hash_id: "unknown".into(),
                status: "error",
                error: Some("Missing hash ID".into()),
            });
            continue;
        };
        let outcome = apply_update(&st.store, &raw, u.metadata, u.properties).await;
        results.push(match outcome {
            Ok(()) => BatchResult {
                hash_id: raw,
                status: "ok",
                error: None,
            },
            Err(e) => BatchResult {
                hash_id: raw,
                status: "error",
                error: Some(e.message),
            },
        });
    }
    let success = results.iter().filter(|r| r.status == "ok").count();
    Ok(Json(json!({
        "status": "completed",
        "total": results.len(),
        "success": success,
        "errors": results.len() - success,
        "results": results,
    })))
}

async fn apply_update(
    store: &StoragedClient,
    raw: &str,
    metadata: Option<Fields>,
    properties: Option<Fields>,
) -> Result<(), ApiError> {
    let target = hash(raw)?;
    match metadata {
        Some(mut fields) => {
            fields.remove(PROCESSING_STATUS);
            fields.extend(properties.unwrap_or_default());
            store.replace(&target, fields).await?;
        }
        None => {
            let props = properties.unwrap_or_default();
            if !props.is_empty() {
                store.merge(&target, props).await?;
            }
        }
    }
    Ok(())
}

/// `POST /api/metadata/clear`: deletes every record (its fields, aliases,
/// duplicates and index rows).
pub(super) async fn clear(st: State) -> Result<Json<Value>, ApiError> {
    let deleted = delete_all_records(&st.store).await?;
    Ok(Json(
        json!({ "status": "ok", "message": "Metadata cleared", "deletedCount": deleted }),
    ))
}

/// `PUT /api/metadata/{hashId}`: the record's fields become the body's
/// (without `processingStatus`).
pub(super) async fn put(
    st: State,
    PathParams(raw): PathParams<String>,
    JsonBody(mut fields): JsonBody<Fields>,
) -> Result<Json<Value>, ApiError> {
    fields.remove(PROCESSING_STATUS);
    let w = st.store.replace(&hash(&raw)?, fields).await?;
    Ok(Json(
        json!({ "status": "ok", "hashId": w.rid.to_string(), "message": "Metadata updated" }),
    ))
}

pub(super) async fn delete(
    st: State,
    PathParams(raw): PathParams<String>,
) -> Result<Json<Value>, ApiError> {
    let d = st.store.delete_record(&hash(&raw)?).await?;
    Ok(Json(
        json!({ "status": "ok", "hashId": d.rid.to_string(), "deletedKeys": d.deleted }),
    ))
}

#[derive(Debug, Deserialize)]
pub struct PropertyQuery {
    pub property: String,
}

pub(super) async fn get_property(
    st: State,
    PathParams(raw): PathParams<String>,
    QueryParams(q): QueryParams<PropertyQuery>,
) -> Result<Json<Value>, ApiError> {
    let v = st.store.get_field(&hash(&raw)?, &q.property).await?;
    Ok(Json(
        json!({ "hashId": v.rid.to_string(), "property": v.field, "value": v.value }),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PropertyBody {
    pub property: String,
    pub value: String,
}

pub(super) async fn put_property(
    st: State,
    PathParams(raw): PathParams<String>,
    JsonBody(body): JsonBody<PropertyBody>,
) -> Result<Json<Value>, ApiError> {
    let w = st
        .store
        .set_field(&hash(&raw)?, &body.property, &body.value)
        .await?;
    Ok(Json(json!({
        "status": "ok",
        "hashId": w.rid.to_string(),
        "property": w.field,
        "value": body.value,
        "message": "Property updated",
    })))
}
