//! `Store`: the narrow interface the socket layer (and the benchmarks)
//! call: records, raw keys, streams and stats. Writes go to the writer
//! thread, reads to the reader pool; nothing here knows HTTP.
//!
//! A second backend (for multi-host deployments) would implement the same
//! methods; none is built until an issue asks for it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use metacore::api::storaged::{
    AliasResult, Deleted, Document, DuplicateResult, FieldDelete, FieldValue, FieldWrite,
    FieldsPage, KvDeleted, KvRange, KvWrite, MintBody, RangeQuery, RecordFields, RootPage, SetAdd,
    Stats, StreamInfo, WriteResult, WriterStats,
};
use metacore::cid::Cid;
use metacore::clock::unix_ms;
use metacore::error::ApiError;
use metacore::record::{Fields, Target, check_shape};
use metacore::rid::Rid;
use metacore::stream::{Entry, EntryFields, StreamId, StreamName};
use rusqlite::{Connection, OpenFlags};
use tokio::sync::watch;

use crate::engine::Options;
use crate::engine::checkpointer::{Checkpointer, GapFlag};
use crate::engine::lock::DbLock;
use crate::engine::readers::Readers;
use crate::engine::schema::{self, COUNT_ROOTS_KEY};
use crate::engine::writer::Writer;
use crate::error::{Result, StoreError, schema as reject};
use crate::records::CheckedFields;
use crate::streams::{self, Heads, HeadsPublisher, StreamState};
use crate::{kv, records};

/// Largest stream entry accepted, in bytes of JSON.
const MAX_ENTRY_BYTES: usize = 64 * 1024;
/// How long a count of the whole table is reused.
const KEY_COUNT_TTL: Duration = Duration::from_secs(60);

/// An open store.
#[derive(Debug)]
pub struct Store {
    writer: Writer,
    readers: Arc<Readers>,
    heads: watch::Receiver<Heads>,
    db_path: PathBuf,
    started: Instant,
    /// The last count of the kv table and when it was taken; counting a
    /// large table takes a while, so it is cached.
    key_count: tokio::sync::Mutex<Option<(u64, u64, Instant)>>,
    /// Held for the life of the store: no other storaged may open the file.
    _lock: DbLock,
    /// Copies the WAL back into the database off the writer's path; taken
    /// (and so stopped) by the first `close`.
    checkpointer: Mutex<Option<Checkpointer>>,
}

impl Store {
    /// Opens (or creates) the database: lock, table, pragmas, schema gate,
    /// counters, stream marks, reader pool, writer thread.
    pub fn open(opts: &Options) -> Result<Self> {
        let lock = DbLock::acquire(&opts.lock_path, &opts.db_path)?;
        if let Some(dir) = opts.db_path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Io {
                what: "create the database directory",
                path: dir.to_owned(),
                source: e,
            })?;
        }
        let conn = Connection::open_with_flags(
            &opts.db_path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.set_prepared_statement_cache_capacity(64);
        schema::prepare_writer(&conn, opts.cache_mb)?;
        schema::gate(&conn).map_err(|e| match e {
            StoreError::SchemaGate(why) => {
                StoreError::SchemaGate(format!("{}: {why}", opts.db_path.display()))
            }
            other => other,
        })?;
        if schema::build_counters(&conn)? {
            tracing::info!("built idx:count/roots from the root index");
        }
        let state = StreamState::load(&conn, opts.retention, opts.trim_every)?;
        let (tx, heads) = watch::channel(state.heads());
        let readers = Arc::new(Readers::open(
            &opts.db_path,
            opts.readers,
            opts.reader_cache_mb,
        )?);
        let gap = GapFlag::default();
        let writer = Writer::start(conn, gap.clone(), state, HeadsPublisher(tx), opts.batch)?;
        let checkpointer = Checkpointer::start(&opts.db_path, gap)?;
        Ok(Self {
            writer,
            readers,
            heads,
            db_path: opts.db_path.clone(),
            started: Instant::now(),
            key_count: tokio::sync::Mutex::new(None),
            _lock: lock,
            checkpointer: Mutex::new(Some(checkpointer)),
        })
    }

    /// Finishes queued writes, checkpoints the WAL and stops the writer.
    pub async fn close(&self) {
        // Stop checkpointing first: the writer's last act is a TRUNCATE one.
        let Some(checkpointer) = self.checkpointer.lock().expect("checkpointer lock").take() else {
            return; // closed already
        };
        drop(checkpointer);
        self.writer.close().await;
    }

    // --- records -----------------------------------------------------------

    pub async fn replace(&self, target: Target, fields: Fields) -> Result<WriteResult> {
        let fields = CheckedFields::check_for(&target, fields)?;
        self.writer
            .write(move |tx| records::replace(tx, &target, &fields))
            .await
    }

    pub async fn merge(&self, target: Target, fields: Fields) -> Result<WriteResult> {
        let fields = CheckedFields::check(fields)?;
        self.writer
            .write(move |tx| records::merge(tx, &target, &fields))
            .await
    }

    pub async fn set_field(
        &self,
        target: Target,
        field: String,
        value: String,
    ) -> Result<FieldWrite> {
        self.writer
            .write(move |tx| records::set_field(tx, &target, &field, &value))
            .await
    }

    pub async fn delete_field(&self, target: Target, field: String) -> Result<FieldDelete> {
        self.writer
            .write(move |tx| records::delete_field(tx, &target, &field))
            .await
    }

    pub async fn set_add(&self, target: Target, field: String, value: String) -> Result<SetAdd> {
        self.writer
            .write(move |tx| records::set_add(tx, &target, &field, &value))
            .await
    }

    pub async fn delete_root(&self, target: Target) -> Result<Deleted> {
        self.writer
            .write(move |tx| records::delete_root(tx, &target))
            .await
    }

    pub async fn mint(&self, body: MintBody) -> Result<Rid> {
        self.writer.write(move |tx| records::mint(tx, &body)).await
    }

    pub async fn add_alias(&self, target: Target, cid: Cid) -> Result<AliasResult> {
        self.writer
            .write(move |tx| records::add_alias(tx, &target, &cid))
            .await
    }

    pub async fn add_duplicate(&self, target: Target, path: String) -> Result<DuplicateResult> {
        self.writer
            .write(move |tx| records::add_duplicate(tx, &target, &path))
            .await
    }

    /// Runs a point read `f` inside one read transaction, so its
    /// statements see one committed state.
    async fn read_tx<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T>,
    {
        self.readers.read_now(move |c| in_read_tx(c, f)).await
    }

    pub async fn resolve(&self, target: Target) -> Result<Rid> {
        self.readers
            .read_now(move |c| records::resolve_or_404(c, &target))
            .await
    }

    pub async fn get_record(&self, target: Target) -> Result<RecordFields> {
        self.read_tx(move |c| {
            let rid = records::resolve_or_404(c, &target)?;
            Ok(RecordFields {
                rid,
                fields: records::fields(c, rid)?,
            })
        })
        .await
    }

    pub async fn get_field(&self, target: Target, field: String) -> Result<FieldValue> {
        check_shape(&field).map_err(ApiError::from)?;
        self.read_tx(move |c| {
            let rid = records::resolve_or_404(c, &target)?;
            match records::field(c, rid, &field)? {
                Some(value) => Ok(FieldValue { rid, field, value }),
                None => Err(records::field_not_found(rid, &field)),
            }
        })
        .await
    }

    pub async fn document(&self, target: Target) -> Result<Document> {
        self.read_tx(move |c| {
            let rid = records::resolve_or_404(c, &target)?;
            records::document(c, rid)
        })
        .await
    }

    pub async fn list_roots(&self, after: Option<Rid>, limit: u32) -> Result<RootPage> {
        self.readers
            .read(move |c| records::list_roots(c, after, limit))
            .await
    }

    /// Chosen fields of a page of roots, read in one transaction.
    pub async fn fields_page(
        &self,
        names: Vec<String>,
        after: Option<Rid>,
        limit: u32,
    ) -> Result<FieldsPage> {
        for n in &names {
            check_shape(n).map_err(ApiError::from)?;
        }
        // A page reads thousands of rows: on the blocking pool, not inline.
        self.readers
            .read(move |c| in_read_tx(c, |c| records::fields_page(c, &names, after, limit)))
            .await
    }

    // --- raw keys ----------------------------------------------------------

    pub async fn kv_get(&self, key: String) -> Result<Option<String>> {
        self.readers.read_now(move |c| kv::get(c, &key)).await
    }

    pub async fn kv_put(&self, key: String, value: String) -> Result<KvWrite> {
        self.writer.write(move |tx| kv::put(tx, &key, &value)).await
    }

    pub async fn kv_delete(&self, key: String) -> Result<KvDeleted> {
        self.writer.write(move |tx| kv::delete(tx, &key)).await
    }

    pub async fn kv_range(&self, q: RangeQuery, limit: u32) -> Result<KvRange> {
        self.readers.read(move |c| kv::range(c, &q, limit)).await
    }

    // --- streams -----------------------------------------------------------

    /// Appends an entry; `meta:events` is written only by the engine.
    pub async fn append(&self, stream: StreamName, fields: EntryFields) -> Result<StreamId> {
        if stream == StreamName::Meta {
            return Err(reject(
                "meta:events is written by storaged itself, in the transaction of each change",
            ));
        }
        match fields.get("type") {
            Some(t) if !t.is_empty() => {}
            _ => return Err(reject("an entry needs a non-empty \"type\" field")),
        }
        if fields
            .iter()
            .any(|(k, v)| k.is_empty() || k.contains('\0') || v.contains('\0'))
        {
            return Err(reject(
                "entry field names are non-empty and no name or value contains NUL",
            ));
        }
        let json = serde_json::to_string(&fields).expect("strings serialize");
        if json.len() > MAX_ENTRY_BYTES {
            return Err(reject(format!(
                "an entry is at most {MAX_ENTRY_BYTES} bytes of JSON"
            )));
        }
        self.writer
            .write(move |tx| tx.streams.append(tx.conn, stream, &json, tx.now_ms))
            .await
    }

    pub async fn entries(
        &self,
        stream: StreamName,
        after: Option<StreamId>,
        limit: u32,
    ) -> Result<Vec<Entry>> {
        self.readers
            .read(move |c| streams::read_after(c, stream, after, limit))
            .await
    }

    pub async fn stream_info(&self, stream: StreamName) -> Result<StreamInfo> {
        let last = streams::head_of(&self.heads.borrow(), stream);
        // Counting the entries walks up to the retention: off the runtime.
        self.readers
            .read(move |c| {
                let tx = c.unchecked_transaction()?;
                let hwm = streams::high_water_mark(&tx, stream)?;
                Ok(StreamInfo {
                    stream: stream.to_string(),
                    first: streams::first_id(&tx, stream)?,
                    last: hwm.max(last),
                    length: streams::length(&tx, stream)?,
                })
            })
            .await
    }

    /// A receiver of the committed heads, to wait for new entries.
    pub fn subscribe(&self) -> watch::Receiver<Heads> {
        self.heads.clone()
    }

    // --- stats -------------------------------------------------------------

    pub async fn roots(&self) -> Result<u64> {
        self.readers
            .read(|c| {
                let v = kv::get(c, COUNT_ROOTS_KEY)?.unwrap_or_default();
                v.parse::<u64>().map_err(|e| StoreError::Corrupt {
                    key: COUNT_ROOTS_KEY.into(),
                    detail: e.to_string(),
                })
            })
            .await
    }

    /// Bytes of the database file and its WAL.
    pub fn db_bytes(&self) -> u64 {
        let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let mut wal = self.db_path.clone().into_os_string();
        wal.push("-wal");
        size(&self.db_path) + size(std::path::Path::new(&wal))
    }

    pub async fn stats(&self) -> Result<Stats> {
        let roots = self.roots().await?;
        let mut cache = self.key_count.lock().await;
        let (keys, at_ms) = match *cache {
            Some((n, at, when)) if when.elapsed() < KEY_COUNT_TTL => (n, at),
            _ => {
                let n = self
                    .readers
                    .read(|c| {
                        Ok(
                            c.query_row("SELECT count(*) FROM kv", [], |r| r.get::<_, i64>(0))?
                                as u64,
                        )
                    })
                    .await?;
                let at = unix_ms();
                *cache = Some((n, at, Instant::now()));
                (n, at)
            }
        };
        Ok(Stats {
            roots,
            keys,
            keys_counted_at_ms: at_ms,
            db_bytes: self.db_bytes(),
        })
    }

    pub fn writer_stats(&self) -> WriterStats {
        self.writer.stats()
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    pub fn db_path(&self) -> &std::path::Path {
        &self.db_path
    }

    pub fn readers(&self) -> u32 {
        self.readers.size()
    }
}

/// Runs `f` inside one read transaction on `c`, so its statements see one
/// committed state.
fn in_read_tx<T>(c: &Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    let tx = c.unchecked_transaction()?;
    let out = f(&tx);
    drop(tx);
    out
}
