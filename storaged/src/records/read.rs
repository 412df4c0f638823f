//! The read side of records: resolving a target, a record's fields and
//! document, pages of roots (with a few fields each), and the totals over
//! every record. Each function takes a reader connection (or the writer's,
//! inside its transaction).

use std::collections::BTreeSet;

use metacore::api::storaged::{Document, FieldsPage, RootFields, RootPage, Totals};
use metacore::checked::FieldName;
use metacore::cid::canonical;
use metacore::error::{ApiError, ErrorCode};
use metacore::record::{
    Fields, Target, dup_end, dup_start, field_key, record_end, record_start, root_key,
};
use metacore::rid::Rid;
use rusqlite::{Connection, OptionalExtension, params};

use crate::cid_index;
use crate::error::{Result, StoreError};

/// The root index's keys: `idx:roots/<rid>`.
const ROOTS_PREFIX: &str = "idx:roots/";

/// The root a target names, if any record answers to it.
pub(crate) fn resolve(conn: &Connection, target: &Target) -> Result<Option<Rid>> {
    let rid = match target {
        Target::Rid(rid) => *rid,
        Target::Cid(cid) => match cid_index::owner(conn, cid)? {
            Some(rid) => rid,
            None => return Ok(None),
        },
    };
    let exists = conn
        .prepare_cached("SELECT 1 FROM kv WHERE k = ?1")?
        .query_row([root_key(rid)], |_| Ok(()))
        .optional()?
        .is_some();
    Ok(exists.then_some(rid))
}

/// The root of a target, or its 404.
pub(crate) fn resolve_or_404(conn: &Connection, target: &Target) -> Result<Rid> {
    resolve(conn, target)?.ok_or_else(|| target.not_found().into())
}

/// A record's fields.
pub(crate) fn fields(conn: &Connection, rid: Rid) -> Result<Fields> {
    let start = record_start(rid);
    let mut stmt = conn.prepare_cached("SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2")?;
    let mut rows = stmt.query(params![start, record_end(rid)])?;
    let mut out = Fields::new();
    while let Some(row) = rows.next()? {
        let k: String = row.get(0)?;
        out.insert(k[start.len()..].to_owned(), row.get(1)?);
    }
    Ok(out)
}

/// One field's value.
pub(crate) fn field(conn: &Connection, rid: Rid, field: &str) -> Result<Option<String>> {
    crate::kv::get(conn, &field_key(rid, field))
}

/// The record as a document: fields, the CIDs of its key-set, the canonical
/// CID elected by rank, and its duplicate paths.
pub(crate) fn document(conn: &Connection, rid: Rid) -> Result<Document> {
    let fields = fields(conn, rid)?;
    let cids: Vec<String> = fields
        .keys()
        .filter_map(|f| cid_index::member_cid(f))
        .map(str::to_owned)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let canonical_cid = canonical(cids.iter().map(String::as_str)).map(str::to_owned);
    let start = dup_start(rid);
    let mut stmt = conn.prepare_cached("SELECT k FROM kv WHERE k >= ?1 AND k < ?2")?;
    let duplicates = stmt
        .query_map(params![start, dup_end(rid)], |r| r.get::<_, String>(0))?
        .map(|k| k.map(|k| k[start.len()..].to_owned()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Document {
        rid,
        fields,
        cids,
        canonical_cid,
        duplicates,
    })
}

/// Where a page of roots starts: strictly after `after`, then `offset`
/// roots further (SQLite steps over them inside the index, no row leaves
/// it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageStart {
    pub after: Option<Rid>,
    pub offset: u64,
}

/// A page of roots in RID order.
pub(crate) fn list_roots(conn: &Connection, from: PageStart, limit: u32) -> Result<RootPage> {
    let start = match from.after {
        Some(r) => root_key(r),
        None => ROOTS_PREFIX.to_owned(),
    };
    let mut stmt = conn.prepare_cached(
        "SELECT k FROM kv WHERE k > ?1 AND k < 'idx:roots0' ORDER BY k LIMIT ?2 OFFSET ?3",
    )?;
    let offset = i64::try_from(from.offset).unwrap_or(i64::MAX);
    let keys = stmt
        .query_map(params![start, i64::from(limit) + 1, offset], |r| {
            r.get::<_, String>(0)
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut rids = Vec::with_capacity(keys.len());
    for k in &keys {
        let rid = Rid::parse(&k[ROOTS_PREFIX.len()..]).map_err(|e| StoreError::Corrupt {
            key: k.clone(),
            detail: e.to_string(),
        })?;
        rids.push(rid);
    }
    let next = if rids.len() > limit as usize {
        rids.truncate(limit as usize);
        rids.last().copied()
    } else {
        None
    };
    Ok(RootPage { rids, next })
}

/// The fields `names` of a page of roots in RID order (absent fields are
/// left out of a row).
pub(crate) fn fields_page(
    conn: &Connection,
    names: &[FieldName],
    from: PageStart,
    limit: u32,
) -> Result<FieldsPage> {
    let page = list_roots(conn, from, limit)?;
    let mut rows = Vec::with_capacity(page.rids.len());
    for rid in page.rids {
        let mut fields = Fields::new();
        for name in names {
            if let Some(v) = field(conn, rid, name.as_str())? {
                fields.insert(name.as_str().to_owned(), v);
            }
        }
        rows.push(RootFields { rid, fields });
    }
    Ok(FieldsPage {
        rows,
        next: page.next,
    })
}

/// Counts and sizes over every record, in one pass over the root index
/// with two point reads a root (`filePath`, `sizeByte`); the caller holds
/// one read transaction around it. A `sizeByte` that is not a number counts
/// as 0.
pub(crate) fn totals(conn: &Connection) -> Result<Totals> {
    let mut stmt = conn.prepare_cached(
        "SELECT fp.k IS NOT NULL, sz.v FROM kv AS r \
         LEFT JOIN kv AS fp ON fp.k = 'file:' || substr(r.k, 11) || '/filePath' \
         LEFT JOIN kv AS sz ON sz.k = 'file:' || substr(r.k, 11) || '/sizeByte' \
         WHERE r.k > 'idx:roots/' AND r.k < 'idx:roots0'",
    )?;
    let mut rows = stmt.query([])?;
    let mut t = Totals::default();
    while let Some(row) = rows.next()? {
        let has_path: bool = row.get(0)?;
        let size = row
            .get::<_, Option<String>>(1)?
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        t.roots += 1;
        t.bytes += size;
        if has_path {
            t.files += 1;
            t.file_bytes += size;
        }
    }
    Ok(t)
}

/// The 404 for a missing field.
pub(crate) fn field_not_found(rid: Rid, field: &str) -> StoreError {
    StoreError::Rejected(ApiError::new(
        ErrorCode::NotFound,
        format!("record {rid} has no field {field:?}"),
    ))
}
