//! The checkpointer: a thread with its own connection that copies the WAL
//! back into the database file (a PASSIVE checkpoint, which never blocks the
//! writer or the readers) whenever the WAL has grown past a threshold.
//!
//! The writer connection has automatic checkpoints turned off, so a commit
//! never pays for a whole checkpoint and its fsyncs; the writer only closes
//! the last gap when the WAL outgrows its bound (so the WAL can restart) and
//! does the final TRUNCATE checkpoint when it stops.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;

use crate::error::{Result, StoreError};

/// WAL size past which the checkpointer copies frames back.
pub const WAL_THRESHOLD_BYTES: u64 = 16 * 1024 * 1024;
/// WAL size past which the writer closes the gap itself between groups,
/// so the WAL restarts (see `writer::close_wal_gap`).
pub const WAL_BOUND_BYTES: u64 = 2 * WAL_THRESHOLD_BYTES;
/// How often the WAL's size is looked at.
const TICK: Duration = Duration::from_millis(200);

/// The running checkpointer; stops when dropped.
#[derive(Debug)]
pub struct Checkpointer {
    /// Dropping the sender wakes the thread and stops it.
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

pub fn wal_path(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push("-wal");
    PathBuf::from(p)
}

impl Checkpointer {
    pub fn start(db: &Path) -> Result<Self> {
        let conn = Connection::open(db)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        let wal = wal_path(db);
        let (stop, rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("storaged-checkpointer".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(TICK) {
                    let size = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
                    if size < WAL_THRESHOLD_BYTES {
                        continue;
                    }
                    let r = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                        Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
                    });
                    match r {
                        Ok((_, log, done)) => tracing::debug!(wal_frames = log, copied = done, "checkpoint"),
                        Err(e) => tracing::warn!(error = %e, "checkpoint failed; will retry"),
                    }
                }
            })
            .map_err(|e| StoreError::Io { what: "spawn the checkpointer for", path: db.to_owned(), source: e })?;
        Ok(Self { stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
