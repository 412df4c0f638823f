//! The KV reads that walk ranges of the kv table, each bounded: `tree`
//! lists one level under a prefix (storaged skips each branch's keys with
//! one index seek); `search` and `find` are the two scans by nature (a
//! substring anywhere), stopping at their limit or after
//! [`MAX_EXAMINED`] keys or records.

use axum::Json;
use metacore::api::storaged::{KvTreeQuery, MAX_FIELDS_PER_PAGE, RangeQuery};
use metacore::error::ApiError;
use metacore::record::prefix_end;
use metacore::socket::body::{JsonReply, QueryParams};
use serde::{Deserialize, Serialize};

use crate::routes::listing::{each_root, page_size};
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
/// delimiter`, `leaves` full keys, both sorted. The cursor is where the
/// next page starts (past a leaf, the leaf and U+0001; past a branch, the
/// first string after its keys), empty when done. storaged walks it with
/// one index seek per entry (`KvTreePage`).
pub(crate) async fn tree(st: State, QueryParams(q): QueryParams<TreeQuery>) -> JsonReply<KvTree> {
    let delimiter = q.delimiter.unwrap_or_else(|| "/".into());
    let max = page_size("max", q.max, 500, MAX_TREE)?;
    let page = st
        .store
        .kv_tree(&KvTreeQuery {
            prefix: q.prefix.clone(),
            delimiter: delimiter.clone(),
            start: q.cursor.filter(|c| !c.is_empty()),
            max,
        })
        .await?;
    Ok(Json(KvTree {
        prefix: q.prefix,
        delimiter,
        branches: page.branches,
        leaves: page.leaves,
        has_more: page.next.is_some(),
        cursor: page.next.unwrap_or_default(),
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
    /// Where the next page starts; empty when done.
    pub cursor: String,
    pub has_more: bool,
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

/// Stream entries, one row each: `search` passes over them (the streams
/// have their own routes), so that they do not use up its
/// [`MAX_EXAMINED`] before the first record key.
const STREAM_ROWS: &str = "ev:";

/// `GET /api/kv/search?contains=&limit=`: keys containing a substring (a
/// scan of the key column, stopping at `limit`), stream entries left out.
pub(crate) async fn search(
    st: State,
    QueryParams(q): QueryParams<SearchQuery>,
) -> JsonReply<KvSearch> {
    let limit = page_size("limit", q.limit, 500, MAX_MATCHES)? as usize;
    let mut keys = Vec::new();
    let mut examined = 0usize;
    // Below the stream rows, then above them.
    let mut segments = [
        (None, Some(STREAM_ROWS.to_owned())),
        (prefix_end(STREAM_ROWS), None),
    ]
    .into_iter();
    let (mut start, mut end) = segments.next().expect("two segments");
    let mut after: Option<String> = None;
    let truncated = loop {
        if examined >= MAX_EXAMINED {
            break true;
        }
        let page = st
            .store
            .kv_range(&RangeQuery {
                start: start.clone(),
                end: end.clone(),
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
            None => match segments.next() {
                Some(next) => {
                    (start, end) = next;
                    after = None;
                }
                None => break false,
            },
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
pub(crate) async fn find(st: State, QueryParams(q): QueryParams<FindQuery>) -> JsonReply<KvFind> {
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
