//! The reader pool: up to `META_CORE_DB_READERS` read-only connections.
//! Each read borrows one for the duration of a closure run on the blocking
//! pool, and sees the last committed state. One connection is opened with
//! the pool (so a database readers cannot open fails the start); the others
//! when reads first need them, which keeps a restarting storaged's time to
//! readiness short (each connection costs its open and its pragmas).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OpenFlags};
use tokio::sync::Semaphore;

use crate::engine::faults::Faults;
use crate::engine::schema::common_pragmas;
use crate::error::{Result, StoreError};
use metacore::sync::Locked;

/// A pool of reader connections.
#[derive(Debug)]
pub(crate) struct Readers {
    /// Idle connections. A plain mutex: it is held only to push or pop.
    idle: Mutex<Vec<Connection>>,
    /// One permit per connection the pool may have, so a borrower finds
    /// one idle or may open one, and never more than `size` are open.
    permits: Semaphore,
    size: u32,
    path: PathBuf,
    cache_mb: u32,
    /// No new connection is opened once the files changed or failed, and
    /// damage or an I/O error a read finds is raised here.
    faults: Arc<Faults>,
}

impl Readers {
    pub(crate) fn open(
        path: &Path,
        (size, cache_mb): (u32, u32),
        faults: Arc<Faults>,
    ) -> Result<Self> {
        let pool = Self {
            idle: Mutex::new(Vec::with_capacity(size as usize)),
            permits: Semaphore::new(size as usize),
            size,
            path: path.to_owned(),
            cache_mb,
            faults,
        };
        if size > 0 {
            let first = pool.connect()?;
            pool.put_back(first);
        }
        Ok(pool)
    }

    /// A new reader connection.
    fn connect(&self) -> Result<Connection> {
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI,
        )?;
        common_pragmas(&conn, self.cache_mb)?;
        conn.pragma_update(None, "query_only", true)?;
        conn.set_prepared_statement_cache_capacity(64);
        Ok(conn)
    }

    /// An idle connection, or a new one; the caller holds a permit.
    fn take(&self) -> Result<Connection> {
        let idle = self.idle.locked().pop();
        match idle {
            Some(conn) => Ok(conn),
            // It would open whatever is at the path now, beside this
            // process's WAL and index.
            None if self.faults.frozen() || !self.faults.files_are_ours() => Err(
                StoreError::Unavailable("the database's files changed or failed (see /health)"),
            ),
            None => self.connect(),
        }
    }

    /// Raises the damage `r` reports, and hands it on.
    fn noted<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(StoreError::Sqlite(e)) = &r {
            self.faults.note_error(e);
        }
        r
    }

    fn put_back(&self, conn: Connection) {
        self.idle.locked().push(conn);
    }

    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// Runs `f` with a reader connection on the calling thread: for point
    /// reads (a key, a record), which take tens of microseconds, so the hop
    /// to the blocking pool would cost more than the read. The connection
    /// goes back to the pool even if `f` panics.
    pub(crate) async fn read_now<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T>,
    {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| StoreError::Unavailable("the reader pool is closed"))?;
        let conn = self.take()?;
        let lease = Lease {
            pool: self,
            conn: Some(conn),
        };
        match lease.conn.as_ref() {
            Some(conn) => self.noted(f(conn)),
            None => Err(StoreError::Unavailable("the reader pool lost a connection")),
        }
    }

    /// Runs `f` with a reader connection on the blocking pool: for scans.
    pub(crate) async fn read<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| StoreError::Unavailable("the reader pool is closed"))?;
        let pool = self.clone();
        let out = tokio::task::spawn_blocking(move || {
            let conn = pool.take()?;
            let r = f(&conn);
            pool.put_back(conn);
            pool.noted(r)
        })
        .await;
        match out {
            Ok(r) => r,
            Err(_) => {
                // The connection died with the closure: retire its permit.
                permit.forget();
                Err(StoreError::Unavailable(
                    "a read panicked (see storaged's log)",
                ))
            }
        }
    }
}

/// A connection borrowed from the pool; returned when dropped.
struct Lease<'a> {
    pool: &'a Readers,
    conn: Option<Connection>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            self.pool.put_back(c);
        }
    }
}
