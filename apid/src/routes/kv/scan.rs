//! The KV reads that walk ranges of the kv table, each bounded: `tree`
//! lists one level under a prefix and skips each branch's keys with a
//! single range jump; `search` and `find` are the two scans by nature (a
//! substring anywhere), stopping at their limit or after
//! [`MAX_EXAMINED`] keys or records.

use axum::Json;
use metacore::api::storaged::{MAX_FIELDS_PER_PAGE, RangeQuery};
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
/// delimiter`, `leaves` full keys, both sorted. The cursor is the key to
/// continue after (empty when done).
pub(crate) async fn tree(st: State, QueryParams(q): QueryParams<TreeQuery>) -> JsonReply<KvTree> {
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
pub(crate) async fn search(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_branch_cursor_continues_past_the_branch() {
        assert_eq!(tree_cursor("file:A", "/"), "file:A");
        assert!(tree_cursor("file:A/", "/").as_str() > "file:A/zzz");
    }
}
