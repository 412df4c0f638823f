//! Raw keys, for the KV browser and for rows other services keep here
//! (`udl:`, `btmagnet:`, `searchcov:`, `nzb:`, ...).
//!
//! A `file:<rid>/<field>` key goes through the record rules (checks, events,
//! aliases, root index). Keys storaged maintains itself (`idx:`, `ev:`,
//! `evhwm:`, `cid:`, `dup:`, `meta-core:`) cannot be written or deleted
//! here. Range reads are index range scans, never scans of the table.

use metacore::api::storaged::{KvDeleted, KvRange, KvRow, KvWrite, RangeQuery};
use metacore::record::{Target, check_shape, prefix_end};
use metacore::rid::Rid;
use rusqlite::{Connection, OptionalExtension, params};

use crate::engine::tx::Tx;
use crate::error::{Result, schema};
use crate::records;

/// Longest raw key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 2048;

/// Prefixes storaged maintains; raw writes are refused.
pub const RESERVED_PREFIXES: &[&str] = &["idx:", "ev:", "evhwm:", "cid:", "dup:", "meta-core:"];

/// What a raw key is.
enum KeyKind<'a> {
    Record { rid: Rid, field: &'a str },
    Plain,
}

fn classify(key: &str) -> Result<KeyKind<'_>> {
    if key.is_empty() || key.len() > MAX_KEY_LEN || key.contains('\0') {
        return Err(schema(format!(
            "a key is 1 to {MAX_KEY_LEN} bytes without NUL"
        )));
    }
    if let Some(rest) = key.strip_prefix("file:") {
        let (rid, field) = rest
            .split_once('/')
            .ok_or_else(|| schema(format!("{key:?}: record keys are file:<rid>/<field>")))?;
        let rid = Rid::parse(rid).map_err(|e| schema(format!("{key:?}: {e}")))?;
        check_shape(field).map_err(|e| schema(e.to_string()))?;
        return Ok(KeyKind::Record { rid, field });
    }
    if let Some(p) = RESERVED_PREFIXES.iter().find(|p| key.starts_with(**p)) {
        return Err(schema(format!(
            "keys under {p} are maintained by storaged and cannot be written directly"
        )));
    }
    Ok(KeyKind::Plain)
}

/// Sets a key.
pub fn put(tx: &mut Tx<'_>, key: &str, value: &str) -> Result<KvWrite> {
    let changed = match classify(key)? {
        KeyKind::Record { rid, field } => {
            records::set_field(tx, &Target::Rid(rid), field, value)?.changed
        }
        KeyKind::Plain => {
            if value.contains('\0') {
                return Err(schema("a value cannot contain NUL"));
            }
            tx.put_raw(key, value)?
        }
    };
    Ok(KvWrite {
        key: key.to_owned(),
        changed,
    })
}

/// Deletes a key.
pub fn delete(tx: &mut Tx<'_>, key: &str) -> Result<KvDeleted> {
    let existed = match classify(key)? {
        KeyKind::Record { rid, field } => {
            if tx.get(key)?.is_none() {
                false
            } else {
                records::delete_field(tx, &Target::Rid(rid), field)?.existed
            }
        }
        KeyKind::Plain => tx.delete_raw(key)?,
    };
    Ok(KvDeleted {
        key: key.to_owned(),
        existed,
    })
}

/// A key's value.
pub fn get(conn: &Connection, key: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT v FROM kv WHERE k = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()?)
}

/// Rows of a range, in key order, at most `limit`.
pub fn range(conn: &Connection, q: &RangeQuery, limit: u32) -> Result<KvRange> {
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
