//! The KV browser: `/api/kv/*`, on range reads of the kv table. `tree`
//! lists one level under a prefix and skips each branch's keys with a
//! single range jump; `keys` pages the roots; `search` and `find` are the
//! two scans by nature (a substring anywhere), bounded by their limits.

use axum::Json;
use metacore::api::storaged::{MAX_FIELDS_PER_PAGE, MAX_PAGE, PageQuery, RangeQuery};
use metacore::error::{ApiError, ErrorCode};
use metacore::key::{KeyWrite, WritableKey};
use metacore::record::{Fields, Target, prefix_end};
use metacore::rid::Rid;
use metacore::socket::body::{JsonBody, JsonReply, PathParams, QueryParams};
use serde::{Deserialize, Serialize};

use super::listing::each_root;
use crate::state::State;

/// Most keys one range read returns.
const RANGE_PAGE: u32 = 5000;

/// Most keys `search` looks at in one request (and `find` roots): past
/// it the answer says `truncated` and the client narrows its query, so a
/// request that matches nothing costs no more than one that matches.
pub(crate) const MAX_EXAMINED: usize = 100_000;
/// The tree's `max` at most.
pub(crate) const MAX_TREE: u32 = 5000;
/// `search` and `find`'s `limit` at most.
pub(crate) const MAX_MATCHES: u32 = 10_000;

/// A page size from the query: `default` when absent; 400 when 0 or over
/// `cap`, with the cap in the message.
pub(crate) fn page_size(
    name: &str,
    v: Option<u32>,
    default: u32,
    cap: u32,
) -> Result<u32, ApiError> {
    match v {
        None => Ok(default),
        Some(0) => Err(ApiError::schema(format!("{name} must be at least 1"))),
        Some(n) if n > cap => Err(ApiError::schema(format!(
            "{name} is at most {cap}, not {n}"
        ))),
        Some(n) => Ok(n),
    }
}

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
pub(crate) struct TreeQuery {
    #[serde(default)]
    pub prefix: String,
    pub delimiter: Option<String>,
    pub cursor: Option<String>,
    pub max: Option<u32>,
}

/// `GET /api/kv/tree?prefix=&delimiter=&cursor=&max=`: one level of the
/// key space under `prefix`, S3 style: `branches` are `prefix + segment +
/// delimiter`, `leaves` full keys, both sorted. The cursor is the key to
/// continue after (empty when done).
pub(super) async fn tree(st: State, QueryParams(q): QueryParams<TreeQuery>) -> JsonReply<KvTree> {
    let delimiter = q.delimiter.unwrap_or_else(|| "/".into());
    let max = page_size("max", q.max, 500, MAX_TREE)? as usize;
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
    Ok(Json(KvTree {
        prefix: q.prefix,
        delimiter,
        branches,
        leaves,
        cursor,
        has_more,
    }))
}

/// `GET /api/kv/tree`: one level of the key space, S3 style.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KvTree {
    pub prefix: String,
    pub delimiter: String,
    pub branches: Vec<String>,
    pub leaves: Vec<String>,
    /// The key to continue after; empty when done.
    pub cursor: String,
    pub has_more: bool,
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
pub(crate) struct SearchQuery {
    #[serde(default)]
    pub contains: String,
    pub limit: Option<u32>,
}

/// `GET /api/kv/search`.
#[derive(Debug, Serialize)]
pub(crate) struct KvSearch {
    pub contains: String,
    pub keys: Vec<String>,
    pub truncated: bool,
}

/// `GET /api/kv/search?contains=&limit=`: keys containing a substring (a
/// scan of the key column, stopping at `limit`).
pub(super) async fn search(
    st: State,
    QueryParams(q): QueryParams<SearchQuery>,
) -> JsonReply<KvSearch> {
    let limit = page_size("limit", q.limit, 500, MAX_MATCHES)? as usize;
    let mut keys = Vec::new();
    let mut after: Option<String> = None;
    let mut examined = 0usize;
    let truncated = loop {
        if examined >= MAX_EXAMINED {
            break true;
        }
        let page = st
            .store
            .kv_range(&RangeQuery {
                after: after.clone(),
                limit: Some(RANGE_PAGE),
                keys_only: true,
                ..Default::default()
            })
            .await?;
        examined += page.rows.len();
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
    Ok(Json(KvSearch {
        contains: q.contains,
        keys,
        truncated,
    }))
}

#[derive(Debug, Deserialize)]
pub(crate) struct FindQuery {
    #[serde(default)]
    pub contains: String,
    #[serde(default)]
    pub fields: String,
    pub limit: Option<u32>,
}

/// One field of `GET /api/kv/find`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KvFindMatch {
    pub key: String,
    pub value: String,
    pub entry_path: String,
    pub field: String,
}

/// `GET /api/kv/find`.
#[derive(Debug, Serialize)]
pub(crate) struct KvFind {
    pub contains: String,
    pub fields: Vec<String>,
    pub matches: Vec<KvFindMatch>,
    pub truncated: bool,
}

/// `GET /api/kv/find?contains=&fields=a,b&limit=`: records whose field
/// (one of `fields`) contains `contains`, case-insensitively, sorted by key.
pub(super) async fn find(st: State, QueryParams(q): QueryParams<FindQuery>) -> JsonReply<KvFind> {
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
    if fields.len() > MAX_FIELDS_PER_PAGE {
        return Err(ApiError::schema("too many fields"));
    }
    let limit = page_size("limit", q.limit, 200, MAX_MATCHES)? as usize;
    let needle = q.contains.to_lowercase();
    let mut matches = Vec::new();
    let mut truncated = false;
    let mut examined = 0usize;
    let names: Vec<&str> = fields.iter().map(String::as_str).collect();
    each_root(&st.store, &names, |r| {
        examined += 1;
        if examined > MAX_EXAMINED {
            truncated = true;
            return false;
        }
        for (field, value) in &r.fields {
            if value.to_lowercase().contains(&needle) {
                if matches.len() == limit {
                    truncated = true;
                    return false;
                }
                let entry = format!("file:{}", r.rid);
                matches.push(KvFindMatch {
                    key: format!("{entry}/{field}"),
                    value: value.clone(),
                    entry_path: entry,
                    field: field.clone(),
                });
            }
        }
        true
    })
    .await?;
    Ok(Json(KvFind {
        contains: q.contains,
        fields,
        matches,
        truncated,
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

    #[test]
    fn a_branch_cursor_continues_past_the_branch() {
        assert_eq!(tree_cursor("file:A", "/"), "file:A");
        assert!(tree_cursor("file:A/", "/").as_str() > "file:A/zzz");
    }
}
