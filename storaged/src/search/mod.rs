//! `POST /search`: records passing a free-text query and field filters,
//! in RID order, with the original's semantics (`matchers`).
//!
//! [`search`] turns the request into an FTS5 query over the index
//! (`index`, `tokens`), whose rows come in RID order: each candidate is
//! read and judged by the matchers until `limit` have passed, so the
//! index only decides which records are looked at. A request the index
//! cannot narrow (no filter, and a query of only one- and two-letter
//! words) is [`scan`]ned: every record in RID order through the same
//! matchers, which also serves as the reference the index is tested
//! against.

pub(crate) mod index;
pub(crate) mod matchers;
pub(crate) mod tokens;

#[cfg(test)]
mod fuzz_test;

use metacore::api::storaged::{RecordFields, SearchFilter, SearchPage, SearchQuery};
use metacore::record::Fields;
use rusqlite::Connection;

use crate::engine::schema::root_count;
use crate::error::Result;
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

/// Bytes of field names and values in one answer at most (past them the
/// answer stops early and says `truncated`): 10,000 whole records could
/// be hundreds of MiB, held by storaged and apid both.
pub(crate) const MAX_ANSWER_BYTES: usize = 16 << 20;

/// The results of a search as they are found, within `limit` and
/// [`MAX_ANSWER_BYTES`].
struct Answer {
    results: Vec<RecordFields>,
    bytes: usize,
    limit: usize,
    truncated: bool,
}

impl Answer {
    fn new(limit: u32) -> Self {
        Self {
            results: Vec::new(),
            bytes: 0,
            limit: limit as usize,
            truncated: false,
        }
    }

    /// Whether more results are wanted.
    fn open(&self) -> bool {
        self.results.len() < self.limit && !self.truncated
    }

    /// Adds a result unless it would pass the byte bound (the first is
    /// always kept).
    fn push(&mut self, r: RecordFields) {
        let size: usize = r.fields.iter().map(|(k, v)| k.len() + v.len()).sum();
        if !self.results.is_empty() && self.bytes + size > MAX_ANSWER_BYTES {
            self.truncated = true;
            return;
        }
        self.bytes += size;
        self.results.push(r);
    }

    fn page(self, conn: &Connection) -> Result<SearchPage> {
        Ok(SearchPage {
            results: self.results,
            total: root_count(conn)?,
            truncated: self.truncated,
        })
    }
}

/// Every record in RID order through the matchers, until `q.limit`.
pub(crate) fn scan(conn: &Connection, q: &SearchQuery, exclude: &[String]) -> Result<SearchPage> {
    let mut answer = Answer::new(q.limit);
    let mut from = PageStart::default();
    'walk: while answer.open() {
        let page = records::list_roots(conn, from, SCAN_PAGE)?;
        for rid in page.rids {
            let fields = visible(records::fields(conn, rid)?, exclude);
            if matchers::matches(&rid.to_string(), &fields, &q.query, &q.filters) {
                answer.push(RecordFields { rid, fields });
                if !answer.open() {
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
    answer.page(conn)
}

/// Characters a lowercased RID is made of (Crockford base32).
const RID_CHARS: &str = "0123456789abcdefghjkmnpqrstvwxyz";

/// The index's part of one filter: any value's key-set member, or the
/// flat field containing it. `None` for a blank filter.
fn filter_expr(f: &SearchFilter) -> tokens::Expr {
    let values: Vec<&str> = matchers::usable_values(f);
    if f.property.is_empty() || values.is_empty() {
        return None;
    }
    let arms: Vec<String> = values
        .iter()
        .flat_map(|v| {
            [
                tokens::has_field(&format!("{}/{v}", f.property)),
                if f.exact {
                    tokens::field_equals(&f.property, v)
                } else {
                    tokens::field_contains(&f.property, v)
                },
            ]
        })
        .collect();
    Some(format!("({})", arms.join(" OR ")))
}

/// The index's part of the free-text query: every word of three letters
/// or more in one of the haystack fields, or the query in the RID. `None`
/// when that cannot be narrowed.
fn query_expr(query: &str) -> tokens::Expr {
    let words: Vec<String> = matchers::tokens(query)
        .into_iter()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|t| t.chars().count() >= 3)
        // The free-text fields share one scope in the index.
        .map(|t| tokens::field_contains(matchers::HAYSTACK_FIELDS[0], &t))
        .collect();
    if words.is_empty() {
        return None;
    }
    let words = words.join(" AND ");
    let q = query.to_lowercase();
    if q.chars().count() > 26 || !q.chars().all(|c| RID_CHARS.contains(c)) {
        // No RID can contain it.
        return Some(words);
    }
    tokens::rid_contains(&q).map(|rid| format!("({words}) OR {rid}"))
}

/// The FTS5 query of a search, or `None` when it must be scanned.
pub(crate) fn fts_query(q: &SearchQuery) -> tokens::Expr {
    let parts: Vec<String> = q
        .filters
        .iter()
        .filter_map(filter_expr)
        .chain(if q.query.is_empty() {
            None
        } else {
            query_expr(&q.query)
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(" AND "))
}

/// Records passing `q` in RID order, at most `q.limit`: the index's
/// candidates judged one by one, or a scan.
pub(crate) fn search(conn: &Connection, q: &SearchQuery, exclude: &[String]) -> Result<SearchPage> {
    if index::is_stale(conn)? {
        return scan(conn, q, exclude);
    }
    let Some(expr) = fts_query(q) else {
        return scan(conn, q, exclude);
    };
    let mut answer = Answer::new(q.limit);
    let mut stmt = conn
        .prepare_cached("SELECT rowid FROM search_fts WHERE search_fts MATCH ?1 ORDER BY rowid")?;
    let mut rows = stmt.query([&expr])?;
    while answer.open() {
        let Some(row) = rows.next()? else { break };
        let Some(rid) = index::rid_of(conn, row.get(0)?)? else {
            continue;
        };
        let fields = visible(records::fields(conn, rid)?, exclude);
        if matchers::matches(&rid.to_string(), &fields, &q.query, &q.filters) {
            answer.push(RecordFields { rid, fields });
        }
    }
    answer.page(conn)
}
