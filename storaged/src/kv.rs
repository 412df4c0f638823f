//! Raw keys, for the KV browser and for rows other services keep here
//! (`udl:`, `btmagnet:`, `searchcov:`, `nzb:`, ...).
//!
//! Writes take a checked [`KeyWrite`] / [`WritableKey`]
//! (`metacore::key`): a `file:<rid>/<field>` key goes through the record
//! rules (events, aliases, root index); the prefixes storaged maintains
//! were refused before the write was queued. Range reads are index range
//! scans, never scans of the table.

use metacore::api::storaged::{
    KvDeleted, KvRange, KvRow, KvTreePage, KvTreeQuery, KvWrite, RangeQuery,
};
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
pub(crate) use crate::engine::rows::get;

/// Above every key (keys are UTF-8 text; nothing sorts after U+10FFFF
/// twice).
const KEY_SPACE_END: &str = "\u{10FFFF}\u{10FFFF}";

/// One level of the key space under `q.prefix`, at most `q.max` entries.
/// Each entry costs one index seek: a branch is skipped whole by seeking
/// past its last possible key, so the work is proportional to what is
/// returned, not to how many keys the branches hold.
pub(crate) fn tree(conn: &Connection, q: &KvTreeQuery) -> Result<KvTreePage> {
    let end = prefix_end(&q.prefix).unwrap_or_else(|| KEY_SPACE_END.to_owned());
    let mut seek =
        conn.prepare_cached("SELECT k FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k LIMIT 1")?;
    let mut start = match &q.start {
        Some(s) if *s >= q.prefix => s.clone(),
        _ => q.prefix.clone(),
    };
    let (mut branches, mut leaves) = (Vec::new(), Vec::new());
    let max = q.max.max(1) as usize;
    let more = loop {
        let key: Option<String> = seek
            .query_row(params![start, end], |r| r.get(0))
            .optional()?;
        let Some(key) = key else { break false };
        if branches.len() + leaves.len() == max {
            break true;
        }
        let rest = &key[q.prefix.len()..];
        let cut = (!q.delimiter.is_empty())
            .then(|| rest.find(q.delimiter.as_str()))
            .flatten();
        match cut {
            Some(i) => {
                let branch = format!("{}{}{}", q.prefix, &rest[..i], q.delimiter);
                // Every key of the branch sorts below prefix_end(branch).
                let past = prefix_end(&branch);
                branches.push(branch);
                match past {
                    Some(p) => start = p,
                    None => break false,
                }
            }
            None => {
                // No key holds NUL: none sorts between `key` and this.
                start = format!("{key}\u{1}");
                leaves.push(key);
            }
        }
    };
    Ok(KvTreePage {
        branches,
        leaves,
        next: more.then_some(start),
    })
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
    let end = end.unwrap_or_else(|| KEY_SPACE_END.to_owned());
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
