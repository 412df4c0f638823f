//! The KV browser: `/api/kv/*`, on range reads of the kv table. `tree`
//! lists one level under a prefix and skips each branch's keys with a
//! single range jump; `keys` pages the roots; `search` and `find` are the
//! two scans by nature (a substring anywhere), bounded by their limits.

use axum::Json;
use axum::response::{IntoResponse, Response};
use metacore::api::storaged::{PageQuery, RangeQuery};
use metacore::error::{ApiError, ErrorCode};
use metacore::record::prefix_end;
use metacore::rid::Rid;
use metacore::socket::body::{JsonBody, PathParams, QueryParams};
use serde::Deserialize;
use serde_json::{Value, json};

use super::listing::each_root;
use crate::state::State;

/// Most keys one range read returns.
const RANGE_PAGE: u32 = 5000;

/// `GET /api/kv/info`: roots, their total `sizeByte`, the database size.
pub(super) async fn info(st: State) -> Result<Json<Value>, ApiError> {
    let stats = st.store.stats().await?;
    let mut total: u64 = 0;
    each_root(&st.store, &["sizeByte"], |r| {
        total += r
            .fields
            .get("sizeByte")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        true
    })
    .await?;
    Ok(Json(json!({
        "prefix": "file:",
        "fileCount": stats.roots,
        "keyCount": stats.roots,
        "totalSize": total,
        "memoryUsage": human_bytes(stats.db_bytes),
    })))
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
pub struct KeysQuery {
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub count: Option<u32>,
}

/// `GET /api/kv/keys?cursor=&count=`: `file:<root>` names a page at a time.
/// The cursor is opaque (the last root of the page); `"0"` means done.
pub(super) async fn keys(
    st: State,
    QueryParams(q): QueryParams<KeysQuery>,
) -> Result<Json<Value>, ApiError> {
    let after = match q.cursor.as_deref() {
        None | Some("" | "0") => None,
        Some(c) => Some(
            Rid::parse(c)
                .map_err(|e| ApiError::schema(format!("cursor: {e}")))?
                .to_string(),
        ),
    };
    let limit = q
        .count
        .unwrap_or(50)
        .clamp(1, metacore::api::storaged::MAX_PAGE);
    let page = st
        .store
        .list_roots(&PageQuery {
            after,
            limit: Some(limit),
        })
        .await?;
    let keys: Vec<String> = page.rids.iter().map(|r| format!("file:{r}")).collect();
    let cursor = page
        .next
        .map(|r| r.to_string())
        .unwrap_or_else(|| "0".into());
    Ok(Json(
        json!({ "keys": keys, "hasMore": cursor != "0", "cursor": cursor }),
    ))
}

#[derive(Debug, Deserialize)]
pub struct TreeQuery {
    #[serde(default)]
    pub prefix: String,
    #[serde(default)]
    pub delimiter: Option<String>,
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub max: Option<u32>,
}

/// `GET /api/kv/tree?prefix=&delimiter=&cursor=&max=`: one level of the
/// key space under `prefix`, S3 style: `branches` are `prefix + segment +
/// delimiter`, `leaves` full keys, both sorted. The cursor is the key to
/// continue after (empty when done).
pub(super) async fn tree(
    st: State,
    QueryParams(q): QueryParams<TreeQuery>,
) -> Result<Json<Value>, ApiError> {
    let delimiter = q.delimiter.unwrap_or_else(|| "/".into());
    let max = q.max.unwrap_or(500).clamp(1, 5000) as usize;
    let end = prefix_end(&q.prefix);
    let mut start = match q.cursor.as_deref() {
        Some(c) if !c.is_empty() => Cursor::After(c.to_owned()),
        _ => Cursor::From(q.prefix.clone()),
    };
    let (mut branches, mut leaves) = (Vec::new(), Vec::new());
    let mut last_emitted: Option<String> = None;
    let has_more = 'walk: loop {
        let (from, after) = match &start {
            Cursor::From(s) => (s.clone(), None),
            Cursor::After(a) => (q.prefix.clone(), Some(a.clone())),
        };
        let page = st
            .store
            .kv_range(&RangeQuery {
                start: Some(from),
                end: end.clone(),
                after,
                limit: Some(RANGE_PAGE),
                keys_only: true,
                ..Default::default()
            })
            .await?;
        if page.rows.is_empty() {
            break false;
        }
        for row in &page.rows {
            if branches.len() + leaves.len() >= max {
                break 'walk true;
            }
            let rest = &row.key[q.prefix.len()..];
            match (!delimiter.is_empty())
                .then(|| rest.find(delimiter.as_str()))
                .flatten()
            {
                Some(i) => {
                    let branch = format!("{}{}{}", q.prefix, &rest[..i], delimiter);
                    last_emitted = Some(branch.clone());
                    // Jump past every key of this branch in one range read.
                    match prefix_end(&branch) {
                        Some(past) => start = Cursor::From(past),
                        None => {
                            branches.push(branch);
                            break 'walk false;
                        }
                    }
                    branches.push(branch);
                    continue 'walk;
                }
                None => {
                    leaves.push(row.key.clone());
                    last_emitted = Some(row.key.clone());
                }
            }
        }
        match page.next {
            Some(n) => start = Cursor::After(n),
            None => break false,
        }
    };
    let cursor = if has_more {
        last_emitted
            .map(|k| tree_cursor(&k, &delimiter))
            .unwrap_or_default()
    } else {
        String::new()
    };
    Ok(Json(json!({
        "prefix": q.prefix,
        "delimiter": delimiter,
        "branches": branches,
        "leaves": leaves,
        "cursor": cursor,
        "hasMore": has_more,
    })))
}

enum Cursor {
    /// Keys `>= s`.
    From(String),
    /// Keys `> s`.
    After(String),
}

/// The cursor after an emitted entry: a leaf continues after itself, a
/// branch after its last possible key.
fn tree_cursor(last: &str, delimiter: &str) -> String {
    if !delimiter.is_empty() && last.ends_with(delimiter) {
        // Every key of the branch sorts before prefix_end(branch); continuing
        // after the last char below it would be fragile, so continue after
        // the greatest key of the branch: branch + U+10FFFF.
        format!("{last}\u{10FFFF}")
    } else {
        last.to_owned()
    }
}

#[derive(Debug, Deserialize)]
pub struct SearchQuery {
    #[serde(default)]
    pub contains: String,
    #[serde(default)]
    pub limit: Option<u32>,
}

/// `GET /api/kv/search?contains=&limit=`: keys containing a substring (a
/// scan of the key column, stopping at `limit`).
pub(super) async fn search(
    st: State,
    QueryParams(q): QueryParams<SearchQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = q.limit.unwrap_or(500).clamp(1, 10_000) as usize;
    let mut keys = Vec::new();
    let mut after: Option<String> = None;
    let truncated = loop {
        let page = st
            .store
            .kv_range(&RangeQuery {
                after: after.clone(),
                limit: Some(RANGE_PAGE),
                keys_only: true,
                ..Default::default()
            })
            .await?;
        for row in page.rows {
            if row.key.contains(&q.contains) {
                if keys.len() == limit {
                    break;
                }
                keys.push(row.key);
            }
        }
        if keys.len() == limit {
            break true;
        }
        match page.next {
            Some(n) => after = Some(n),
            None => break false,
        }
    };
    Ok(Json(
        json!({ "contains": q.contains, "keys": keys, "truncated": truncated }),
    ))
}

#[derive(Debug, Deserialize)]
pub struct FindQuery {
    #[serde(default)]
    pub contains: String,
    #[serde(default)]
    pub fields: String,
    #[serde(default)]
    pub limit: Option<u32>,
}

/// `GET /api/kv/find?contains=&fields=a,b&limit=`: records whose field
/// (one of `fields`) contains `contains`, case-insensitively, sorted by key.
pub(super) async fn find(
    st: State,
    QueryParams(q): QueryParams<FindQuery>,
) -> Result<Json<Value>, ApiError> {
    let fields: Vec<String> = q
        .fields
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(str::to_owned)
        .collect();
    if q.contains.is_empty() || fields.is_empty() {
        return Err(ApiError::schema("contains and fields are both required"));
    }
    if fields.len() > metacore::api::storaged::MAX_FIELDS_PER_PAGE {
        return Err(ApiError::schema("too many fields"));
    }
    let limit = q.limit.unwrap_or(200).clamp(1, 10_000) as usize;
    let needle = q.contains.to_lowercase();
    let mut matches = Vec::new();
    let mut truncated = false;
    let names: Vec<&str> = fields.iter().map(String::as_str).collect();
    each_root(&st.store, &names, |r| {
        for (field, value) in &r.fields {
            if value.to_lowercase().contains(&needle) {
                if matches.len() == limit {
                    truncated = true;
                    return false;
                }
                let entry = format!("file:{}", r.rid);
                matches.push(
                    json!({ "key": format!("{entry}/{field}"), "value": value, "entryPath": entry, "field": field }),
                );
            }
        }
        true
    })
    .await?;
    Ok(Json(
        json!({ "contains": q.contains, "fields": fields, "matches": matches, "truncated": truncated }),
    ))
}

#[derive(Debug, Deserialize)]
pub struct KeyQuery {
    pub key: String,
}

/// `GET /api/kv/value?key=`.
pub(super) async fn get_value(
    st: State,
    QueryParams(q): QueryParams<KeyQuery>,
) -> Result<Json<Value>, ApiError> {
    let value = st.store.kv_get(&q.key).await?;
    Ok(Json(json!({
        "key": q.key,
        "type": if value.is_some() { "string" } else { "" },
        "exists": value.is_some(),
        "value": value.unwrap_or_default(),
    })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutValue {
    pub key: String,
    pub value: String,
}

/// `PUT /api/kv/value`: a `file:` key follows the record rules (checks,
/// events, aliases, root index); bookkeeping prefixes are refused.
pub(super) async fn put_value(
    st: State,
    JsonBody(b): JsonBody<PutValue>,
) -> Result<Json<Value>, ApiError> {
    st.store.kv_put(&b.key, &b.value).await?;
    Ok(Json(
        json!({ "key": b.key, "type": "string", "value": b.value, "exists": true }),
    ))
}

/// `DELETE /api/kv/value?key=`.
pub(super) async fn delete_value(
    st: State,
    QueryParams(q): QueryParams<KeyQuery>,
) -> Result<Json<Value>, ApiError> {
    let d = st.store.kv_delete(&q.key).await?;
    Ok(Json(json!({ "key": q.key, "deleted": d.existed })))
}

/// `GET /api/kv/key/{key...}`: the record `file:<hashId>` as a hash.
pub(super) async fn get_key(
    st: State,
    PathParams(key): PathParams<String>,
) -> Result<Response, ApiError> {
    let Some(raw) = key.strip_prefix("file:") else {
        return Err(ApiError::new(
            ErrorCode::SchemaViolation,
            "the key must be file:<hashId>",
        ));
    };
    let rec = st.store.get_record(&crate::http::hash(raw)?).await?;
    Ok(Json(json!({ "key": key, "type": "hash", "value": rec.fields })).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_redis() {
        assert_eq!(human_bytes(512), "512B");
        assert_eq!(human_bytes(1536), "1.50K");
        assert_eq!(human_bytes(655 * 1024 * 1024), "655.00M");
    }

    #[test]
    fn a_branch_cursor_continues_past_the_branch() {
        assert_eq!(tree_cursor("file:A", "/"), "file:A");
        assert!(tree_cursor("file:A/", "/").as_str() > "file:A/zzz");
    }
}
