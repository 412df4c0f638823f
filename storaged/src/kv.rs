//! Raw keys, for the KV browser and for rows other services keep here
//! (`udl:`, `btmagnet:`, `searchcov:`, `nzb:`, ...).
//!
//! Writes take a checked [`KeyWrite`] / [`WritableKey`]
//! (`metacore::key`): a `file:<rid>/<field>` key goes through the record
//! rules (events, aliases, root index); the prefixes storaged maintains
//! were refused before the write was queued. Range reads are index range
//! scans, never scans of the table.

use metacore::api::storaged::{KvDeleted, KvRange, KvRow, KvWrite, RangeQuery};
use metacore::key::{KeyWrite, WritableKey};
use metacore::record::{Target, prefix_end};
use rusqlite::{Connection, OptionalExtension, params};

use crate::engine::tx::Tx;
use crate::error::Result;
use crate::records;

/// Sets a key.
pub(crate) fn put(tx: &mut Tx<'_>, write: &KeyWrite) -> Result<KvWrite> {
    let changed = match write {
        KeyWrite::Record { rid, field } => {
            records::set_field(tx, &Target::Rid(*rid), field)?.changed
        }
        KeyWrite::Plain { key, value } => tx.put_raw(key, value)?,
    };
    Ok(KvWrite {
        key: write.key(),
        changed,
    })
}

/// Deletes a key.
pub(crate) fn delete(tx: &mut Tx<'_>, key: &WritableKey) -> Result<KvDeleted> {
    let existed = match key {
        WritableKey::Record { rid, field } => {
            if tx.get(&key.key())?.is_none() {
                false
            } else {
                records::delete_field(tx, &Target::Rid(*rid), field)?.existed
            }
        }
        WritableKey::Plain(k) => tx.delete_raw(k)?,
    };
    Ok(KvDeleted {
        key: key.key(),
        existed,
    })
}

/// A key's value.
pub(crate) fn get(conn: &Connection, key: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT v FROM kv WHERE k = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()?)
}

/// Rows of a range, in key order, at most `limit`.
pub(crate) fn range(conn: &Connection, q: &RangeQuery, limit: u32) -> Result<KvRange> {
    let (start, end) = match &q.prefix {
        Some(p) => (p.clone(), prefix_end(p)),
        None => (q.start.clone().unwrap_or_default(), q.end.clone()),
    };
    // `after` continues a listing: strictly greater than the last key seen.
    let (lower, strict) = match &q.after {
        Some(a) if *a >= start => (a.clone(), true),
        _ => (start, false),
    };
    let end = end.unwrap_or_else(|| "\u{10FFFF}\u{10FFFF}".to_owned());
    let sql = match (strict, q.keys_only) {
        (true, true) => "SELECT k, NULL FROM kv WHERE k > ?1 AND k < ?2 ORDER BY k LIMIT ?3",
        (true, false) => "SELECT k, v FROM kv WHERE k > ?1 AND k < ?2 ORDER BY k LIMIT ?3",
        (false, true) => "SELECT k, NULL FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k LIMIT ?3",
        (false, false) => "SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k LIMIT ?3",
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows: Vec<KvRow> = stmt
        .query_map(params![lower, end, i64::from(limit) + 1], |r| {
            Ok(KvRow {
                key: r.get(0)?,
                value: r.get(1)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    let next = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|r| r.key.clone())
    } else {
        None
    };
    Ok(KvRange { rows, next })
}
