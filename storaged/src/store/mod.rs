//! `Store`: the narrow interface the socket layer (and the benchmarks)
//! call: records ([`records`]), raw keys ([`kv`]), streams ([`streams`])
//! and, here, opening, closing and the figures. Writes go to the writer
//! thread, reads to the reader pool; nothing here knows HTTP. Every write
//! method takes checked inputs ([`metacore::checked`], [`metacore::key`]),
//! so a bad request is refused before it is queued.
//!
//! A second backend (for multi-host deployments) would implement the same
//! methods; none is built until an issue asks for it.

mod files;
mod kv;
mod options;
mod records;
mod search;
mod streams;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use metacore::api::storaged::{Stats, WriterStats};
use metacore::clock::unix_ms;
use rusqlite::{Connection, OpenFlags};
use tokio::sync::watch;

use crate::derived::SearchAndSchema;
use crate::engine::checkpointer::{Checkpointer, GapFlag};
use crate::engine::derive::Derive;
use crate::engine::faults::{Fault, Faults};
use crate::engine::lock::DbLock;
use crate::engine::readers::Readers;
use crate::engine::schema;
use crate::engine::space::Space;
use crate::engine::writer::Writer;
use crate::error::{Result, StoreError};
use crate::streams::{Heads, HeadsPublisher, StreamState};
use metacore::sync::Locked;

pub use options::Options;
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
    /// Field prefixes search does not see.
    exclude: Arc<[String]>,
    /// Whether the search index is kept (see `Options::search_index`).
    indexed: bool,
    /// Room on the database's volume (see `engine::space`).
    space: Arc<Space>,
    /// Faults of the database's files (see `engine::faults`).
    faults: Arc<Faults>,
    /// The turn of the schema rescan under way: one at a time, a second is
    /// a 409 ([`crate::schema::rescans`]).
    rescans: crate::schema::rescans::Rescans,
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
        let conn = open_writer(opts)?;
        let faults = Arc::new(Faults::new(&opts.db_path));
        if schema::build_counters(&conn)? {
            tracing::info!("built idx:count/roots from the root index");
        }
        let derive: Option<Arc<dyn Derive>> = if opts.search_index {
            Some(Arc::new(SearchAndSchema::open(
                &conn,
                &opts.exclude_prefixes,
            )?))
        } else {
            None
        };
        let state = StreamState::load(&conn, opts.retention, opts.trim_every)?;
        let (tx, heads) = watch::channel(state.heads());
        let readers = Arc::new(Readers::open(
            &opts.db_path,
            (opts.readers, opts.reader_cache_mb),
            faults.clone(),
        )?);
        let gap = GapFlag::default();
        let space = Arc::new(Space::new(&opts.db_path, u64::from(opts.reserve_mb) << 20));
        let writer = Writer::start(
            conn,
            (gap.clone(), space.clone(), faults.clone()),
            derive,
            state,
            HeadsPublisher(tx),
            opts.batch,
        )?;
        let checkpointer =
            Checkpointer::start(&opts.db_path, gap, (space.clone(), faults.clone()))?;
        Ok(Self {
            writer,
            readers,
            heads,
            db_path: opts.db_path.clone(),
            started: Instant::now(),
            key_count: tokio::sync::Mutex::new(None),
            _lock: lock,
            checkpointer: Mutex::new(Some(checkpointer)),
            exclude: opts.exclude_prefixes.clone().into(),
            indexed: opts.search_index,
            space,
            faults,
            rescans: crate::schema::rescans::Rescans::new(),
        })
    }

    /// Finishes queued writes, checkpoints the WAL and stops the writer
    /// (which looks at the files once more first: see `engine::faults`):
    /// true when that last checkpoint copied the whole WAL into the
    /// database (false when the files are frozen, or closed already).
    pub async fn close(&self) -> bool {
        // Stop checkpointing first: the writer's last act is a TRUNCATE one.
        let Some(checkpointer) = self.checkpointer.locked().take() else {
            return false; // closed already
        };
        drop(checkpointer);
        self.writer.close().await
    }

    /// The fault of the database's files raised, if any (see
    /// `engine::faults`): writes are refused while it is.
    pub(crate) fn fault(&self) -> Option<Fault> {
        self.faults.raised()
    }

    /// Why a new connection to the database's path must not be opened
    /// now (a fault froze the files, or another file is at the path).
    pub(crate) fn files_refused(&self) -> Option<String> {
        match self.faults.raised() {
            Some(f) if f.freezes_files() => Some(f.reason()),
            _ if !self.faults.files_are_ours() => {
                Some("the database file changed under storaged (see /health)".into())
            }
            _ => None,
        }
    }

    /// Resolves once storaged must restart to reopen its files.
    pub(crate) async fn restart_needed(&self) -> Fault {
        self.faults.restart_needed().await
    }

    /// Looks for damage in the whole database (`PRAGMA quick_check`) on a
    /// reader connection, beside the writer; raises the fault if it finds
    /// any. Run once after readiness: it reads every page.
    pub(crate) async fn check_pages(&self) {
        let faults = self.faults.clone();
        let checked = self
            .readers
            .read(move |c| {
                faults.quick_check(c);
                Ok(())
            })
            .await;
        if let Err(e) = checked {
            tracing::warn!(error = %e, "quick_check could not run");
        }
    }

    /// Whether the last write failed for want of space on the database's
    /// volume and no room has been seen since.
    pub fn volume_full(&self) -> bool {
        self.space.is_full()
    }

    pub async fn roots(&self) -> Result<u64> {
        self.readers.read(schema::root_count).await
    }

    /// Bytes of the database file and its WAL.
    pub fn db_bytes(&self) -> u64 {
        let (db, wal) = self.file_bytes();
        db + wal
    }

    /// Bytes of the database file, and of its WAL.
    pub fn file_bytes(&self) -> (u64, u64) {
        let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let mut wal = self.db_path.clone().into_os_string();
        wal.push("-wal");
        (size(&self.db_path), size(std::path::Path::new(&wal)))
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

    /// The writer's commit-time histogram, for `/metrics`.
    pub(crate) fn commit_seconds(&self) -> crate::metrics::CommitSeconds {
        self.writer.commit_seconds()
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
pub(crate) fn in_read_tx<T>(c: &Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    let tx = c.unchecked_transaction()?;
    let out = f(&tx);
    drop(tx);
    out
}

/// The writer's connection to the database: created if missing (but not
/// over an empty file), WAL and the table, and through the schema gate.
fn open_writer(opts: &Options) -> Result<Connection> {
    // SQLite takes a zero-byte file for a new database; storaged never
    // leaves one (it writes the schema as it creates the file), so an
    // empty file is something else's, or what is left of a lost one.
    if std::fs::metadata(&opts.db_path).is_ok_and(|m| m.is_file() && m.len() == 0) {
        return Err(StoreError::SchemaGate(format!(
            "{} is an empty file, not a meta-core database; to start a fresh \
             store, remove it (and any {}-wal beside it)",
            opts.db_path.display(),
            opts.db_path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        )));
    }
    let marker = crate::engine::faults::marker(&opts.db_path);
    if let Ok(what) = std::fs::read_to_string(&marker) {
        return Err(StoreError::SchemaGate(format!(
            "the database's files changed under a storaged that stopped before it could put \
             them back ({}): what it held since its last checkpoint may be only in the files \
             kept beside the database (suffixes .replaced-, .foreign-); look there, then remove \
             {} to start on what is at the paths now. Nothing was changed",
            what.trim(),
            marker.display()
        )));
    }
    // A WAL with commits beside no database: creating one would begin an
    // empty store and SQLite would drop the WAL, the last of the data.
    let wal = crate::engine::faults::suffixed(&opts.db_path, "-wal");
    if !opts.db_path.exists() && std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
        return Err(StoreError::SchemaGate(format!(
            "{} is missing but its WAL {} holds commits: put the database file back (or \
             restore a backup); to begin an empty store instead, remove the WAL. Nothing was \
             changed",
            opts.db_path.display(),
            wal.display()
        )));
    }
    let explain = |e: StoreError| explain_open_error(&opts.db_path, e);
    let conn = Connection::open_with_flags(
        &opts.db_path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| explain(e.into()))?;
    // SQLite opens a file it may not write read-only, and says so only at
    // the first write.
    if conn.is_readonly(rusqlite::MAIN_DB)? {
        return Err(StoreError::SchemaGate(format!(
            "{} cannot be written by storaged (a read-only file or volume): make it \
             writable; nothing was changed",
            opts.db_path.display()
        )));
    }
    conn.set_prepared_statement_cache_capacity(64);
    schema::prepare_writer(&conn, opts.cache_mb).map_err(explain)?;
    schema::gate(&conn).map_err(|e| match e {
        StoreError::SchemaGate(why) => {
            StoreError::SchemaGate(format!("{}: {why}", opts.db_path.display()))
        }
        other => explain(other),
    })?;
    Ok(conn)
}

/// What an operator is told when the database cannot be opened for
/// writing: damage, or a file or directory storaged may not write.
fn explain_open_error(db: &std::path::Path, e: StoreError) -> StoreError {
    use rusqlite::ErrorCode as C;
    let StoreError::Sqlite(sqlite) = &e else {
        return e;
    };
    let what_to_do = match sqlite.sqlite_error_code() {
        Some(C::DatabaseCorrupt | C::NotADatabase) => {
            "it is damaged or not a SQLite database: restore it from a backup \
             (docs/operations.md); the file was left as it is"
        }
        Some(C::SystemIoFailure) => {
            "the volume failed a read or a write: is it mounted and healthy? nothing was changed"
        }
        Some(C::CannotOpen | C::ReadOnly | C::PermissionDenied) => {
            "storaged may not create or write it, or the files beside it (-wal, -shm): \
             is its directory or volume read-only? nothing was changed"
        }
        _ => return e,
    };
    StoreError::SchemaGate(format!("{}: {sqlite}: {what_to_do}", db.display()))
}
