//! Event streams as kv rows `ev:<stream>/<ms13>-<seq10>` with the
//! high-water mark `evhwm:<stream>`.
//!
//! The writer owns [`StreamState`]: it issues IDs (strictly increasing even
//! when the clock steps back), writes entries inside the current
//! transaction, writes each touched stream's high-water mark once per group,
//! trims to the retention every `trim_every` appends, and after COMMIT
//! publishes the new heads through [`Heads`] so tails wake up.

use std::collections::BTreeSet;

use metacore::stream::{Entry, EntryFields, StreamId, StreamName};
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::watch;

use crate::error::{Result, StoreError};

/// Entries kept per stream (about; trimming runs every `trim_every`).
pub(crate) const DEFAULT_RETENTION: u64 = 100_000;
/// Appends between two trims.
pub(crate) const DEFAULT_TRIM_EVERY: u64 = 10_000;

/// The last committed ID of each stream, published after every COMMIT.
pub type Heads = [Option<StreamId>; 2];

fn slot(s: StreamName) -> usize {
    match s {
        StreamName::Meta => 0,
        StreamName::Files => 1,
    }
}

/// The committed head of one stream in a [`Heads`] value.
pub fn head_of(heads: &Heads, s: StreamName) -> Option<StreamId> {
    heads[slot(s)]
}

/// The writer's view of the streams.
#[derive(Debug)]
pub(crate) struct StreamState {
    /// Last ID issued per stream; never goes back, even if a transaction
    /// that used it rolls back.
    last: [Option<StreamId>; 2],
    /// Streams appended to in the current group.
    touched: BTreeSet<StreamName>,
    /// Appends since the last trim, per stream.
    since_trim: [u64; 2],
    /// Entries kept per stream: counted at load, then kept by appends and
    /// trims. Appends of writes that roll back are counted too, so it may
    /// run a little high; a trim then keeps slightly fewer than the
    /// retention, never more.
    length: [u64; 2],
    retention: u64,
    trim_every: u64,
}

impl StreamState {
    /// Loads each stream's high-water mark (or its newest row).
    pub(crate) fn load(conn: &Connection, retention: u64, trim_every: u64) -> Result<Self> {
        let mut last = [None, None];
        let mut len = [0, 0];
        for s in StreamName::ALL {
            last[slot(s)] = high_water_mark(conn, s)?;
            len[slot(s)] = length(conn, s)?;
        }
        Ok(Self {
            last,
            touched: BTreeSet::new(),
            since_trim: [0, 0],
            length: len,
            retention,
            trim_every,
        })
    }

    /// The heads as last loaded or issued.
    pub(crate) fn heads(&self) -> Heads {
        self.last
    }

    /// Writes one entry in the current transaction and returns its ID.
    pub(crate) fn append(
        &mut self,
        conn: &Connection,
        stream: StreamName,
        json: &str,
        now_ms: u64,
    ) -> Result<StreamId> {
        let id = self.last[slot(stream)]
            .unwrap_or(StreamId::ZERO)
            .next_after(now_ms);
        self.last[slot(stream)] = Some(id);
        conn.prepare_cached("INSERT INTO kv(k, v) VALUES (?1, ?2)")?
            .execute(params![stream.entry_key(id), json])?;
        self.touched.insert(stream);
        self.since_trim[slot(stream)] += 1;
        self.length[slot(stream)] += 1;
        Ok(id)
    }

    /// Deletes every entry of a stream (a watcher reset); the IDs go on
    /// from the last issued, so no follower sees one twice.
    pub(crate) fn clear(&mut self, conn: &Connection, stream: StreamName) -> Result<u64> {
        let removed = conn
            .prepare_cached("DELETE FROM kv WHERE k > ?1 AND k < ?2")?
            .execute(params![stream.key_prefix(), stream.key_end()])?;
        self.length[slot(stream)] = 0;
        self.touched.insert(stream);
        Ok(removed as u64)
    }

    /// Called once per group before COMMIT: high-water marks and trims.
    pub(crate) fn finish_group(&mut self, conn: &Connection) -> Result<()> {
        for s in std::mem::take(&mut self.touched) {
            if let Some(id) = self.last[slot(s)] {
                conn.prepare_cached(
                    "INSERT INTO kv(k, v) VALUES (?1, ?2) ON CONFLICT(k) DO UPDATE SET v = excluded.v",
                )?
                .execute(params![s.hwm_key(), id.to_string()])?;
            }
            let i = slot(s);
            if self.since_trim[i] >= self.trim_every {
                self.since_trim[i] = 0;
                let excess = self.length[i].saturating_sub(self.retention);
                let removed = trim_oldest(conn, s, excess)?;
                self.length[i] = self.length[i].saturating_sub(removed.max(excess));
            }
        }
        Ok(())
    }
}

/// Deletes the `n` oldest entries of a stream: one walk to find the first
/// entry to keep, then a range delete of the rows before it.
pub(crate) fn trim_oldest(conn: &Connection, stream: StreamName, n: u64) -> Result<u64> {
    if n == 0 {
        return Ok(0);
    }
    let keep_from: Option<String> = conn
        .prepare_cached("SELECT k FROM kv WHERE k > ?1 AND k < ?2 ORDER BY k LIMIT 1 OFFSET ?3")?
        .query_row(
            params![stream.key_prefix(), stream.key_end(), n as i64],
            |r| r.get(0),
        )
        .optional()?;
    let end = keep_from.as_deref().unwrap_or(stream.key_end());
    let removed = conn
        .prepare_cached("DELETE FROM kv WHERE k > ?1 AND k < ?2")?
        .execute(params![stream.key_prefix(), end])?;
    tracing::debug!(stream = %stream, removed, "trimmed stream");
    Ok(removed as u64)
}

/// The stream's high-water mark, or the ID of its newest row.
pub(crate) fn high_water_mark(conn: &Connection, stream: StreamName) -> Result<Option<StreamId>> {
    let hwm: Option<String> = conn
        .prepare_cached("SELECT v FROM kv WHERE k = ?1")?
        .query_row([stream.hwm_key()], |r| r.get(0))
        .optional()?;
    let newest: Option<String> = conn
        .prepare_cached("SELECT k FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k DESC LIMIT 1")?
        .query_row(params![stream.key_prefix(), stream.key_end()], |r| r.get(0))
        .optional()?;
    let hwm = hwm.map(|v| parse_id(stream.hwm_key(), &v)).transpose()?;
    let newest = newest.map(|k| id_of_key(stream, &k)).transpose()?;
    Ok(hwm.max(newest))
}

fn parse_id(key: &str, text: &str) -> Result<StreamId> {
    StreamId::parse(text).map_err(|e| StoreError::Corrupt {
        key: key.to_owned(),
        detail: e.to_string(),
    })
}

fn id_of_key(stream: StreamName, key: &str) -> Result<StreamId> {
    parse_id(key, &key[stream.key_prefix().len()..])
}

fn entry_of_row(stream: StreamName, key: &str, value: &str) -> Result<Entry> {
    let id = id_of_key(stream, key)?;
    let fields: EntryFields = serde_json::from_str(value).map_err(|e| StoreError::Corrupt {
        key: key.to_owned(),
        detail: e.to_string(),
    })?;
    Ok(Entry { id, fields })
}

/// Entries strictly after `after` (from the oldest when `None`).
pub(crate) fn read_after(
    conn: &Connection,
    stream: StreamName,
    after: Option<StreamId>,
    limit: u32,
) -> Result<Vec<Entry>> {
    let start = match after {
        Some(id) => stream.entry_key(id),
        // Every entry key sorts after the bare prefix.
        None => stream.key_prefix().to_owned(),
    };
    let mut stmt =
        conn.prepare_cached("SELECT k, v FROM kv WHERE k > ?1 AND k < ?2 ORDER BY k LIMIT ?3")?;
    let mut rows = stmt.query(params![start, stream.key_end(), i64::from(limit)])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let k: String = row.get(0)?;
        let v: String = row.get(1)?;
        out.push(entry_of_row(stream, &k, &v)?);
    }
    Ok(out)
}

/// Oldest kept entry's ID.
pub(crate) fn first_id(conn: &Connection, stream: StreamName) -> Result<Option<StreamId>> {
    let k: Option<String> = conn
        .prepare_cached("SELECT k FROM kv WHERE k > ?1 AND k < ?2 ORDER BY k LIMIT 1")?
        .query_row(params![stream.key_prefix(), stream.key_end()], |r| r.get(0))
        .optional()?;
    k.map(|k| id_of_key(stream, &k)).transpose()
}

/// Number of kept entries.
pub(crate) fn length(conn: &Connection, stream: StreamName) -> Result<u64> {
    let n: i64 = conn
        .prepare_cached("SELECT count(*) FROM kv WHERE k > ?1 AND k < ?2")?
        .query_row(params![stream.key_prefix(), stream.key_end()], |r| r.get(0))?;
    Ok(n as u64)
}

/// Publishes heads to tails; one sender, owned by the writer.
#[derive(Debug)]
pub(crate) struct HeadsPublisher(pub watch::Sender<Heads>);

impl HeadsPublisher {
    pub(crate) fn publish(&self, heads: Heads) {
        self.0.send_if_modified(|cur| {
            let changed = *cur != heads;
            *cur = heads;
            changed
        });
    }
}

/// JSON of a `meta:events` entry: `{"type":..,"key":..,"ts":..}`.
pub(crate) fn meta_event_json(kind: &str, key: &str, ts_ms: u64) -> String {
    #[derive(serde::Serialize)]
    struct MetaEvent<'a> {
        #[serde(rename = "type")]
        kind: &'a str,
        key: &'a str,
        ts: String,
    }
    serde_json::to_string(&MetaEvent {
        kind,
        key,
        ts: ts_ms.to_string(),
    })
    .expect("strings serialize")
}
