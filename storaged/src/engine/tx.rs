//! `Tx`: what a write operation sees while the writer runs it: the writer's
//! connection inside the group's transaction (and the write's own
//! SAVEPOINT), the stream state, and the group's clock reading. Every row
//! primitive that has a side effect beyond its row (an event, a counter)
//! lives here, so operations cannot forget it.

use metacore::rid::Rid;
use metacore::stream::StreamName;
use rusqlite::{Connection, OptionalExtension, params};

use crate::engine::derive::Touched;
use crate::engine::schema::COUNT_ROOTS_KEY;
use crate::error::Result;
use crate::streams::{StreamState, meta_event_json};

/// The transaction context of one write.
#[derive(Debug)]
pub(crate) struct Tx<'a> {
    pub conn: &'a Connection,
    pub streams: &'a mut StreamState,
    pub now_ms: u64,
    /// Change of `idx:count/roots` by this write; the writer adds it to the
    /// group's when the write's savepoint is released, and writes the
    /// group's total once before COMMIT.
    pub roots_delta: i64,
    /// Records whose fields this group changed, with their fields as
    /// they were before the group: before COMMIT their derived rows are
    /// brought up to date once ([`Derive`](crate::engine::derive::Derive)).
    /// `None` where nothing is derived (a benchmark's store).
    pub touched: Option<Touched<'a>>,
}

/// The record a `file:<rid>/...` key belongs to.
fn record_of(key: &str) -> Option<Rid> {
    Rid::parse(key.strip_prefix("file:")?.get(..26)?).ok()
}

impl Tx<'_> {
    /// The value of a key.
    pub(crate) fn get(&self, key: &str) -> Result<Option<String>> {
        crate::engine::rows::get(self.conn, key)
    }

    /// Whether any key lies in `[start, end)`.
    pub(crate) fn any_in(&self, start: &str, end: &str) -> Result<bool> {
        Ok(self
            .conn
            .prepare_cached("SELECT 1 FROM kv WHERE k >= ?1 AND k < ?2 LIMIT 1")?
            .query_row(params![start, end], |_| Ok(()))
            .optional()?
            .is_some())
    }

    /// Keys and values in `[start, end)`.
    pub(crate) fn rows_in(&self, start: &str, end: &str) -> Result<Vec<(String, String)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2")?;
        let rows = stmt.query_map(params![start, end], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Sets a key; true when the row was inserted or its value changed.
    /// No event: callers under `file:` use [`Tx::put_record_key`].
    pub(crate) fn put_raw(&self, key: &str, value: &str) -> Result<bool> {
        let n = self
            .conn
            .prepare_cached(
                "INSERT INTO kv(k, v) VALUES (?1, ?2) \
                 ON CONFLICT(k) DO UPDATE SET v = excluded.v WHERE kv.v IS NOT excluded.v",
            )?
            .execute(params![key, value])?;
        Ok(n > 0)
    }

    /// Inserts a key unless present; true when inserted.
    pub(crate) fn insert_new(&self, key: &str, value: &str) -> Result<bool> {
        let n = self
            .conn
            .prepare_cached("INSERT INTO kv(k, v) VALUES (?1, ?2) ON CONFLICT(k) DO NOTHING")?
            .execute(params![key, value])?;
        Ok(n > 0)
    }

    /// Deletes a key; true when it existed.
    pub(crate) fn delete_raw(&self, key: &str) -> Result<bool> {
        Ok(self
            .conn
            .prepare_cached("DELETE FROM kv WHERE k = ?1")?
            .execute([key])?
            > 0)
    }

    /// Deletes a key only when it holds `value`; true when it did.
    pub(crate) fn delete_if(&self, key: &str, value: &str) -> Result<bool> {
        Ok(self
            .conn
            .prepare_cached("DELETE FROM kv WHERE k = ?1 AND v = ?2")?
            .execute(params![key, value])?
            > 0)
    }

    /// Deletes `[start, end)`; returns the number of rows.
    pub(crate) fn delete_range(&self, start: &str, end: &str) -> Result<u64> {
        Ok(self
            .conn
            .prepare_cached("DELETE FROM kv WHERE k >= ?1 AND k < ?2")?
            .execute(params![start, end])? as u64)
    }

    /// Sets a `file:` key and appends `set` to `meta:events` when the value
    /// really changed.
    pub(crate) fn put_record_key(&mut self, key: &str, value: &str) -> Result<bool> {
        self.before_change(key)?;
        let changed = self.put_raw(key, value)?;
        if changed {
            self.emit_meta("set", key)?;
        }
        Ok(changed)
    }

    /// Deletes a `file:` key and appends `del` when it existed.
    pub(crate) fn delete_record_key(&mut self, key: &str) -> Result<bool> {
        self.before_change(key)?;
        let existed = self.delete_raw(key)?;
        if existed {
            self.emit_meta("del", key)?;
        }
        Ok(existed)
    }

    /// Before the group's first change to a record: its fields as they are.
    fn before_change(&mut self, key: &str) -> Result<()> {
        match (self.touched.as_mut(), record_of(key)) {
            (Some(touched), Some(rid)) => touched.note(self.conn, rid),
            _ => Ok(()),
        }
    }

    fn emit_meta(&mut self, kind: &str, key: &str) -> Result<()> {
        let json = meta_event_json(kind, key, self.now_ms);
        self.streams
            .append(self.conn, StreamName::Meta, &json, self.now_ms)?;
        Ok(())
    }

    /// Counts a root in or out of `idx:count/roots` (written per group).
    pub(crate) fn count_roots(&mut self, delta: i64) {
        self.roots_delta += delta;
    }
}

/// Adds `delta` to `idx:count/roots`.
pub(crate) fn add_to_root_count(conn: &Connection, delta: i64) -> Result<()> {
    if delta != 0 {
        conn.prepare_cached(
            "UPDATE kv SET v = CAST(CAST(v AS INTEGER) + ?2 AS TEXT) WHERE k = ?1",
        )?
        .execute(params![COUNT_ROOTS_KEY, delta])?;
    }
    Ok(())
}
