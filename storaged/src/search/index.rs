//! The search index: one row per record in the FTS5 table `search_fts`
//! (contentless, `detail=none`: only which rows hold a token), kept in the
//! write transaction of every record change and rebuildable from the kv
//! rows.
//!
//! A row's rowid is the record's *label*: a number that grows with the
//! RID, so FTS5, which returns rows in rowid order, returns candidates in
//! RID order and a search can stop at its `limit`. A label starts as the
//! RID's top 63 bits (its millisecond and a few more: UUIDv7 RIDs grow
//! with time, so new records append). When that does not fall strictly
//! between the neighbours' labels, the largest RID yet goes
//! [`APPEND_STEP`] after the last (RIDs minted in one millisecond share
//! their top bits), any other the neighbours' midpoint; when they are
//! adjacent, a window around the record is spread out again (`relabel`). Labels live in the kv table:
//! `idx:fts/<rid>` → label and `idx:ftsrow/<label>` → rid.

use metacore::record::{Fields, prefix_end};
use metacore::rid::Rid;
use rusqlite::{Connection, OptionalExtension, params};

use super::tokens::{SCHEME, document};
use super::visible;
use crate::error::{Result, StoreError};
use crate::records;

const LABEL_PREFIX: &str = "idx:fts/";
const ROW_PREFIX: &str = "idx:ftsrow/";
/// What the index was built under: the scheme and the excluded prefixes.
const BUILT_KEY: &str = "idx:fts-built";

/// The index's table (contentless, `detail=none`, the `ascii` tokenizer:
/// its words are the 12-letter tokens of [`super::tokens`]).
pub(crate) const CREATE_TABLE: &str = "CREATE VIRTUAL TABLE IF NOT EXISTS search_fts USING fts5(\
     doc, content='', contentless_delete=1, detail=none, tokenize='ascii')";

/// The room left after a label when RIDs of one millisecond are appended.
const APPEND_STEP: i64 = 1024;

fn label_key(rid: Rid) -> String {
    format!("{LABEL_PREFIX}{rid}")
}

fn row_key(label: i64) -> String {
    format!("{ROW_PREFIX}{label:019}")
}

fn built_under(exclude: &[String]) -> String {
    format!("{SCHEME};{}", exclude.join(","))
}

/// Creates the table and rebuilds the index when it was built under
/// another scheme or other excluded prefixes (or never), or when it does
/// not hold one row per record (records written by a build that does not
/// keep it, such as a standby on an older image). Runs before the writer
/// starts, in one transaction. True when it rebuilt.
pub(crate) fn ensure(conn: &Connection, exclude: &[String]) -> Result<bool> {
    conn.execute_batch(CREATE_TABLE)?;
    // Merge segments eight at a time instead of four: about a sixth
    // more write rate on the benchmark, queries unchanged.
    conn.execute(
        "INSERT INTO search_fts(search_fts, rank) VALUES('automerge', 8)",
        [],
    )?;
    let want = built_under(exclude);
    if crate::kv::get(conn, BUILT_KEY)?.as_deref() == Some(want.as_str()) {
        let rows = count_in(conn, LABEL_PREFIX)?;
        let roots = crate::engine::schema::root_count(conn)?;
        if rows == roots {
            return Ok(false);
        }
        tracing::warn!(
            rows,
            roots,
            "the search index does not hold one row per record (written by another build?); rebuilding it"
        );
    }
    let started = std::time::Instant::now();
    let n = crate::engine::schema::in_transaction(conn, || {
        let n = rebuild(conn, exclude)?;
        set(conn, BUILT_KEY, Some(&want))?;
        Ok(n)
    })?;
    tracing::info!(records = n, took = ?started.elapsed(), "built the search index");
    Ok(true)
}

/// Marks the index for a rebuild at the next open (inside the caller's
/// transaction): its build mark is removed, and search scans while it is
/// (the state is the database's own, so each store, and every reader of
/// it, sees its own).
pub(crate) fn mark_stale(conn: &Connection) -> Result<()> {
    conn.prepare_cached("DELETE FROM kv WHERE k = ?1")?
        .execute([BUILT_KEY])?;
    Ok(())
}

/// Whether the index cannot be trusted until the next open rebuilds it
/// (one index seek, in the reader's transaction).
pub(crate) fn is_stale(conn: &Connection) -> Result<bool> {
    Ok(crate::kv::get(conn, BUILT_KEY)?.is_none())
}

/// Keys under `prefix` (an index-only count).
fn count_in(conn: &Connection, prefix: &str) -> Result<u64> {
    let end = prefix_end(prefix).expect("a prefix");
    let n: i64 = conn
        .prepare_cached("SELECT count(*) FROM kv WHERE k >= ?1 AND k < ?2")?
        .query_row(params![prefix, end], |r| r.get(0))?;
    Ok(n as u64)
}

/// Empties the index and indexes every record again; returns how many.
fn rebuild(conn: &Connection, exclude: &[String]) -> Result<u64> {
    conn.execute("DELETE FROM search_fts", [])?;
    for prefix in [LABEL_PREFIX, ROW_PREFIX] {
        let end = prefix_end(prefix).expect("a prefix");
        conn.execute(
            "DELETE FROM kv WHERE k >= ?1 AND k < ?2",
            params![prefix, end],
        )?;
    }
    let mut n = 0;
    let mut from = records::PageStart::default();
    loop {
        let page = records::list_roots(conn, from, 1000)?;
        for rid in &page.rids {
            let fields = records::fields(conn, *rid)?;
            let exists = !fields.is_empty();
            refresh(conn, *rid, visible(fields, exclude), exists, exclude)?;
            n += 1;
        }
        match page.next {
            Some(next) => from.after = Some(next),
            None => return Ok(n),
        }
    }
}

fn parse_label(key: &str, v: &str) -> Result<i64> {
    v.parse().map_err(|_| StoreError::Corrupt {
        key: key.to_owned(),
        detail: format!("not a label: {v:?}"),
    })
}

/// The record's label, if it is indexed.
fn label(conn: &Connection, rid: Rid) -> Result<Option<i64>> {
    let key = label_key(rid);
    crate::kv::get(conn, &key)?
        .map(|v| parse_label(&key, &v))
        .transpose()
}

/// The RID of a label (search's way back from a row).
pub(crate) fn rid_of(conn: &Connection, label: i64) -> Result<Option<Rid>> {
    let key = row_key(label);
    crate::kv::get(conn, &key)?
        .map(|v| {
            Rid::parse(&v).map_err(|e| StoreError::Corrupt {
                key,
                detail: e.to_string(),
            })
        })
        .transpose()
}

/// Brings the record's row up to date with `fields`, its fields as
/// search sees them (inside the caller's transaction): written again, or
/// removed with the record when it no longer `exists` (a record whose
/// every field is excluded keeps a row: its RID can still be searched).
/// `exclude` is for the neighbours' rows should they be relabelled.
pub(crate) fn refresh(
    conn: &Connection,
    rid: Rid,
    fields: Fields,
    exists: bool,
    exclude: &[String],
) -> Result<()> {
    let old = label(conn, rid)?;
    if let Some(l) = old {
        conn.prepare_cached("DELETE FROM search_fts WHERE rowid = ?1")?
            .execute([l])?;
    }
    if !exists {
        if let Some(l) = old {
            set(conn, &label_key(rid), None)?;
            set(conn, &row_key(l), None)?;
        }
        return Ok(());
    }
    let l = match old {
        Some(l) => {
            // Written again each time, so that a lost row key heals.
            set(conn, &row_key(l), Some(&rid.to_string()))?;
            l
        }
        None => place(conn, rid, exclude)?,
    };
    insert_row(conn, rid, l, &fields)
}

fn insert_row(conn: &Connection, rid: Rid, label: i64, fields: &Fields) -> Result<()> {
    conn.prepare_cached("INSERT INTO search_fts(rowid, doc) VALUES (?1, ?2)")?
        .execute(params![label, document(&rid.to_string(), fields)])?;
    Ok(())
}

fn set(conn: &Connection, key: &str, value: Option<&str>) -> Result<()> {
    match value {
        Some(v) => conn
            .prepare_cached(
                "INSERT INTO kv(k, v) VALUES (?1, ?2) ON CONFLICT(k) DO UPDATE SET v = excluded.v",
            )?
            .execute(params![key, v])?,
        None => conn
            .prepare_cached("DELETE FROM kv WHERE k = ?1")?
            .execute([key])?,
    };
    Ok(())
}

/// The labels of the indexed records next to `rid`: the nearest below and
/// above (0 and `i64::MAX` past the ends).
fn neighbours(conn: &Connection, rid: Rid) -> Result<(i64, i64)> {
    let key = label_key(rid);
    let end = prefix_end(LABEL_PREFIX).expect("a prefix");
    let below: Option<(String, String)> = conn
        .prepare_cached("SELECT k, v FROM kv WHERE k < ?1 AND k >= ?2 ORDER BY k DESC LIMIT 1")?
        .query_row(params![key, LABEL_PREFIX], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let above: Option<(String, String)> = conn
        .prepare_cached("SELECT k, v FROM kv WHERE k > ?1 AND k < ?2 ORDER BY k LIMIT 1")?
        .query_row(params![key, end], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok((
        below.map_or(Ok(0), |(k, v)| parse_label(&k, &v))?,
        above.map_or(Ok(i64::MAX), |(k, v)| parse_label(&k, &v))?,
    ))
}

/// Gives a new record a label between its neighbours' and records it.
fn place(conn: &Connection, rid: Rid, exclude: &[String]) -> Result<i64> {
    let (lo, hi) = neighbours(conn, rid)?;
    let first = i64::try_from(rid.as_u128() >> 65).unwrap_or(i64::MAX);
    let l = if lo < first && first < hi {
        first
    } else if hi == i64::MAX && lo < i64::MAX - APPEND_STEP {
        // The largest RID yet, in the same millisecond as the last (its
        // top bits are the same): right after it, leaving room for RIDs
        // that later fall between.
        lo + APPEND_STEP
    } else if hi - lo >= 2 {
        lo + (hi - lo) / 2
    } else {
        relabel(conn, rid, exclude)?;
        return label(conn, rid)?.ok_or_else(|| StoreError::Corrupt {
            key: label_key(rid),
            detail: "not labelled after a relabel".into(),
        });
    };
    set(conn, &label_key(rid), Some(&l.to_string()))?;
    set(conn, &row_key(l), Some(&rid.to_string()))?;
    Ok(l)
}

/// Spreads the labels of a window of records around `rid` (which has
/// none yet) evenly over the room between the window's outer neighbours,
/// doubling the window until there is room for all of it; the window's
/// rows are written again under their new labels. Only RIDs made to
/// collide reach this.
fn relabel(conn: &Connection, rid: Rid, exclude: &[String]) -> Result<()> {
    let key = label_key(rid);
    let end = prefix_end(LABEL_PREFIX).expect("a prefix");
    let mut side = 16i64;
    loop {
        let below: Vec<(String, String)> = conn
            .prepare_cached(
                "SELECT k, v FROM kv WHERE k < ?1 AND k >= ?2 ORDER BY k DESC LIMIT ?3",
            )?
            .query_map(params![key, LABEL_PREFIX, side + 1], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?
            .collect::<Result<_, _>>()?;
        let above: Vec<(String, String)> = conn
            .prepare_cached("SELECT k, v FROM kv WHERE k > ?1 AND k < ?2 ORDER BY k LIMIT ?3")?
            .query_map(params![key, end, side + 1], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        // The window: up to `side` on each side and the new record; the
        // one past each end (if any) bounds the room.
        let lo = match below.get(side as usize) {
            Some((k, v)) => parse_label(k, v)?,
            None => 0,
        };
        let hi = match above.get(side as usize) {
            Some((k, v)) => parse_label(k, v)?,
            None => i64::MAX,
        };
        let mut window: Vec<Rid> = Vec::new();
        for (k, _) in below.iter().take(side as usize).rev() {
            window.push(parse_rid(k)?);
        }
        window.push(rid);
        for (k, _) in above.iter().take(side as usize) {
            window.push(parse_rid(k)?);
        }
        let slots = window.len() as i64 + 1;
        let room = hi - lo;
        if room / slots >= 2 {
            let step = room / slots;
            // Every old row and row key goes first: a new label may be
            // another window record's old one.
            for r in &window {
                if let Some(old) = label(conn, *r)? {
                    conn.prepare_cached("DELETE FROM search_fts WHERE rowid = ?1")?
                        .execute([old])?;
                    set(conn, &row_key(old), None)?;
                }
            }
            for (i, r) in window.iter().enumerate() {
                let l = lo + step * (i as i64 + 1);
                set(conn, &label_key(*r), Some(&l.to_string()))?;
                set(conn, &row_key(l), Some(&r.to_string()))?;
                if *r != rid {
                    let fields = visible(records::fields(conn, *r)?, exclude);
                    insert_row(conn, *r, l, &fields)?;
                }
            }
            tracing::info!(
                records = window.len(),
                "spread the search labels of a crowded range"
            );
            return Ok(());
        }
        if below.len() <= side as usize && above.len() <= side as usize {
            return Err(StoreError::Corrupt {
                key: key.clone(),
                detail: "no room for a search label".into(),
            });
        }
        side *= 2;
    }
}

fn parse_rid(key: &str) -> Result<Rid> {
    Rid::parse(&key[LABEL_PREFIX.len()..]).map_err(|e| StoreError::Corrupt {
        key: key.to_owned(),
        detail: e.to_string(),
    })
}
