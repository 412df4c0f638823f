//! The KV browser: `/api/kv/*`, on range reads of the kv table: `info`,
//! `keys` (the roots a page at a time), one key's value and hash, and the
//! value writes. The reads that walk ranges (`tree`, `search`, `find`)
//! are in [`scan`].

mod scan;

pub(super) use scan::{find, search, tree};

use axum::Json;
use metacore::api::storaged::{MAX_PAGE, PageQuery};
use metacore::error::{ApiError, ErrorCode};
use metacore::key::{KeyWrite, WritableKey};
use metacore::record::{Fields, Target};
use metacore::rid::Rid;
use metacore::socket::body::{JsonBody, JsonReply, PathParams, QueryParams};
use serde::{Deserialize, Serialize};

use super::listing::page_size;
use crate::state::State;

/// `GET /api/kv/info`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KvInfo {
    pub prefix: &'static str,
    pub file_count: u64,
    /// Equals `fileCount`, as in the original.
    pub key_count: u64,
    /// Sum of every record's `sizeByte`.
    pub total_size: u64,
    pub memory_usage: String,
}

/// `GET /api/kv/info`: roots, their total `sizeByte` (one storaged call),
/// the database size.
pub(super) async fn info(st: State) -> JsonReply<KvInfo> {
    let (stats, totals) = tokio::try_join!(st.store.stats(), st.store.totals())?;
    Ok(Json(KvInfo {
        prefix: "file:",
        file_count: stats.roots,
        key_count: stats.roots,
        total_size: totals.bytes,
        memory_usage: human_bytes(stats.db_bytes),
    }))
}

/// `1.5M`-style sizes, as Redis printed `used_memory_human`.
fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b}B")
    } else {
        format!("{v:.2}{}", UNITS[u])
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct KeysQuery {
    pub cursor: Option<String>,
    pub count: Option<u32>,
}

/// `GET /api/kv/keys`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KvKeys {
    pub keys: Vec<String>,
    pub has_more: bool,
    /// The last root of the page, or `"0"` when done.
    pub cursor: String,
}

/// `GET /api/kv/keys?cursor=&count=`: `file:<root>` names a page at a time.
/// The cursor is opaque (the last root of the page); `"0"` means done.
pub(super) async fn keys(st: State, QueryParams(q): QueryParams<KeysQuery>) -> JsonReply<KvKeys> {
    let after = match q.cursor.as_deref() {
        None | Some("" | "0") => None,
        Some(c) => Some(Rid::parse(c).map_err(|e| ApiError::schema(format!("cursor: {e}")))?),
    };
    let limit = page_size("count", q.count, 50, MAX_PAGE)?;
    let page = st
        .store
        .list_roots(&PageQuery {
            after,
            offset: None,
            limit: Some(limit),
        })
        .await?;
    let keys: Vec<String> = page.rids.iter().map(|r| format!("file:{r}")).collect();
    let cursor = page
        .next
        .map(|r| r.to_string())
        .unwrap_or_else(|| "0".into());
    Ok(Json(KvKeys {
        keys,
        has_more: cursor != "0",
        cursor,
    }))
}

#[derive(Debug, Deserialize)]
pub(crate) struct KeyQuery {
    pub key: String,
}

/// `GET` and `PUT /api/kv/value`: a key as Redis described it.
#[derive(Debug, Serialize)]
pub(crate) struct KvValue {
    pub key: String,
    /// `string`, or empty when the key is absent.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub value: String,
    pub exists: bool,
}

impl KvValue {
    /// A key and its value, if it has one.
    pub(crate) fn of(key: String, value: Option<String>) -> Self {
        Self {
            key,
            kind: if value.is_some() { "string" } else { "" },
            exists: value.is_some(),
            value: value.unwrap_or_default(),
        }
    }
}

/// `GET /api/kv/value?key=`.
pub(super) async fn get_value(
    st: State,
    QueryParams(q): QueryParams<KeyQuery>,
) -> JsonReply<KvValue> {
    let value = st.store.kv_get(&q.key).await?;
    Ok(Json(KvValue::of(q.key, value)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PutValue {
    pub key: String,
    pub value: String,
}

/// `PUT /api/kv/value`: a `file:` key follows the record rules (checks,
/// events, aliases, root index); bookkeeping prefixes are refused.
pub(super) async fn put_value(st: State, JsonBody(b): JsonBody<PutValue>) -> JsonReply<KvValue> {
    let write = KeyWrite::new(&b.key, b.value)?;
    st.store.kv_put(&write).await?;
    Ok(Json(KvValue::of(b.key, Some(write.value().to_owned()))))
}

/// `DELETE /api/kv/value`.
#[derive(Debug, Serialize)]
pub(crate) struct KvDeleted {
    pub key: String,
    pub deleted: bool,
}

/// `DELETE /api/kv/value?key=`.
pub(super) async fn delete_value(
    st: State,
    QueryParams(q): QueryParams<KeyQuery>,
) -> JsonReply<KvDeleted> {
    let d = st.store.kv_delete(&WritableKey::parse(&q.key)?).await?;
    Ok(Json(KvDeleted {
        key: q.key,
        deleted: d.existed,
    }))
}

/// `GET /api/kv/key/{key...}`.
#[derive(Debug, Serialize)]
pub(crate) struct KvHash {
    pub key: String,
    /// Always `hash`: a record is shown as a Redis hash of its fields.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub value: Fields,
}

/// `GET /api/kv/key/{key...}`: the record `file:<hashId>` as a hash.
pub(super) async fn get_key(st: State, PathParams(key): PathParams<String>) -> JsonReply<KvHash> {
    let Some(raw) = key.strip_prefix("file:") else {
        return Err(ApiError::new(
            ErrorCode::SchemaViolation,
            "the key must be file:<hashId>",
        ));
    };
    let target: Target = raw.parse()?;
    let rec = st.store.get_record(&target).await?;
    Ok(Json(KvHash {
        key,
        kind: "hash",
        value: rec.fields,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_redis() {
        for (bytes, text) in [(512, "512B"), (1536, "1.50K"), (655 << 20, "655.00M")] {
            assert_eq!(human_bytes(bytes), text);
        }
    }
}
