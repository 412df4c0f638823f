//! The reader pool: `META_CORE_DB_READERS` read-only connections. Each read
//! borrows one for the duration of a closure run on the blocking pool, and
//! sees the last committed state.

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OpenFlags};
use tokio::sync::Semaphore;

use crate::engine::schema::common_pragmas;
use crate::error::{Result, StoreError};

/// A pool of reader connections.
#[derive(Debug)]
pub struct Readers {
    /// Idle connections. A plain mutex: it is held only to push or pop.
    idle: Mutex<Vec<Connection>>,
    /// One permit per connection, so a borrower never finds the pool empty.
    permits: Semaphore,
    size: u32,
}

impl Readers {
    pub fn open(path: &Path, size: u32, cache_mb: u32) -> Result<Self> {
        let mut idle = Vec::with_capacity(size as usize);
        for _ in 0..size {
            let conn = Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX
                    | OpenFlags::SQLITE_OPEN_URI,
            )?;
            common_pragmas(&conn, cache_mb)?;
            conn.pragma_update(None, "query_only", true)?;
            conn.set_prepared_statement_cache_capacity(64);
            idle.push(conn);
        }
        Ok(Self {
            idle: Mutex::new(idle),
            permits: Semaphore::new(size as usize),
            size,
        })
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    /// Runs `f` with a reader connection on the calling thread: for point
    /// reads (a key, a record), which take tens of microseconds, so the hop
    /// to the blocking pool would cost more than the read. The connection
    /// goes back to the pool even if `f` panics.
    pub async fn read_now<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T>,
    {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| StoreError::Unavailable("the reader pool is closed"))?;
        let lease = Lease {
            pool: self,
            conn: Some(
                self.idle
                    .lock()
                    .expect("reader pool lock")
                    .pop()
                    .expect("a permit guarantees a connection"),
            ),
        };
        f(lease.conn.as_ref().expect("leased"))
    }

    /// Runs `f` with a reader connection on the blocking pool: for scans.
    pub async fn read<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| StoreError::Unavailable("the reader pool is closed"))?;
        let conn = self
            .idle
            .lock()
            .expect("reader pool lock")
            .pop()
            .expect("a permit guarantees a connection");
        let pool = self.clone();
        let out = tokio::task::spawn_blocking(move || {
            let r = f(&conn);
            pool.idle.lock().expect("reader pool lock").push(conn);
            r
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
            self.pool.idle.lock().expect("reader pool lock").push(c);
        }
    }
}
