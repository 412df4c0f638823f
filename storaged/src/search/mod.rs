//! `POST /search`: records passing a free-text query and field filters,
//! in RID order, with the original's semantics (`matchers`).
//!
//! `scan` is the plan that needs no index: it walks the root index in RID
//! order and asks the matchers about each record until `limit` are found.
//! It is the reference the indexed plans are held to.

pub(crate) mod matchers;

use metacore::api::storaged::{RecordFields, SearchPage, SearchQuery};
use metacore::record::Fields;
use rusqlite::Connection;

use crate::engine::schema::COUNT_ROOTS_KEY;
use crate::error::{Result, StoreError};
use crate::records::{self, PageStart};

/// Default of `META_CORE_INDEX_EXCLUDE_PREFIXES`: fields search does not
/// see (the original's default).
pub(crate) const DEFAULT_EXCLUDE_PREFIXES: &[&str] = &["categories/newznab/"];

/// Roots read from the root index at a time while scanning.
const SCAN_PAGE: u32 = 1000;

/// A record's fields as search sees them: without the excluded prefixes.
pub(crate) fn visible(mut fields: Fields, exclude: &[String]) -> Fields {
    if !exclude.is_empty() {
        fields.retain(|k, _| !exclude.iter().any(|p| k.starts_with(p.as_str())));
    }
    fields
}

/// The number of records, search's `total`.
pub(crate) fn total(conn: &Connection) -> Result<u64> {
    let v = crate::kv::get(conn, COUNT_ROOTS_KEY)?.unwrap_or_default();
    v.parse::<u64>().map_err(|e| StoreError::Corrupt {
        key: COUNT_ROOTS_KEY.into(),
        detail: e.to_string(),
    })
}

/// Every record in RID order through the matchers, until `q.limit`.
pub(crate) fn scan(conn: &Connection, q: &SearchQuery, exclude: &[String]) -> Result<SearchPage> {
    let limit = q.limit as usize;
    let mut results = Vec::new();
    let mut from = PageStart::default();
    'walk: while results.len() < limit {
        let page = records::list_roots(conn, from, SCAN_PAGE)?;
        for rid in page.rids {
            let fields = visible(records::fields(conn, rid)?, exclude);
            if matchers::matches(&rid.to_string(), &fields, &q.query, &q.filters) {
                results.push(RecordFields { rid, fields });
                if results.len() == limit {
                    break 'walk;
                }
            }
        }
        match page.next {
            Some(n) => {
                from = PageStart {
                    after: Some(n),
                    offset: 0,
                }
            }
            None => break,
        }
    }
    Ok(SearchPage {
        results,
        total: total(conn)?,
    })
}
