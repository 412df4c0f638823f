//! The checkpointer: a thread with its own connection that copies the WAL
//! back into the database file every tick (a PASSIVE checkpoint, which
//! never blocks the writer or the readers).
//!
//! The writer connection has automatic checkpoints turned off, so a commit
//! never pays for a whole checkpoint and its fsyncs. A checkpoint running
//! beside a busy writer never quite catches up with it, though, and the WAL
//! only restarts from its beginning once a checkpoint has copied every
//! frame. So when the WAL holds more than [`WAL_BOUND_FRAMES`], the
//! checkpointer raises [`GapFlag`], and the writer, between two groups,
//! copies the few frames left itself (`writer::close_wal_gap`). The writer
//! also does the final TRUNCATE checkpoint when it stops. Each tick also
//! looks at the database's files ([`Faults::check_files`]).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;

use crate::engine::faults::Faults;
use crate::engine::space::Space;
use crate::error::{Result, StoreError};

/// WAL length (4 KiB frames) past which the writer closes the gap: 32 MiB.
pub(crate) const WAL_BOUND_FRAMES: i64 = 8192;
/// How often the checkpointer runs.
const TICK: Duration = Duration::from_millis(200);

/// Raised by the checkpointer when the writer should close the WAL's gap.
#[derive(Debug, Clone, Default)]
pub(crate) struct GapFlag(Arc<AtomicBool>);

impl GapFlag {
    pub(crate) fn raise(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub(crate) fn is_raised(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub(crate) fn lower(&self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// The running checkpointer; stops when dropped.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    /// Dropping the sender wakes the thread and stops it.
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    pub(crate) fn start(
        db: &Path,
        gap: GapFlag,
        (space, faults): (Arc<Space>, Arc<Faults>),
    ) -> Result<Self> {
        // Never created here: the writer made the file or refused to.
        let conn = Connection::open_with_flags(
            db,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_secs(5))?;
        crate::engine::schema::keep_wal_on_close(&conn)?;
        let (stop, rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("storaged-checkpointer".into())
            .spawn(move || {
                // The error of the failing state, logged once when it
                // begins or changes, and its end once (a read-only volume
                // would otherwise log every tick).
                let mut failing: Option<String> = None;
                while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(TICK) {
                    faults.check_files(false);
                    if faults.frozen() {
                        continue;
                    }
                    space.measure();
                    space.keep_reserve();
                    match space.checkpoint(&conn) {
                        Ok((_, log, copied)) => {
                            if log >= WAL_BOUND_FRAMES {
                                gap.raise();
                            }
                            if failing.take().is_some() {
                                tracing::info!("checkpoints work again");
                            }
                            tracing::trace!(wal_frames = log, copied, "checkpoint");
                        }
                        Err(e) => {
                            faults.note_error(&e);
                            let why = e.to_string();
                            if failing.as_deref() != Some(why.as_str()) {
                                tracing::warn!(error = %why, "checkpoint failed; retrying every {TICK:?}, logged again when this changes");
                                failing = Some(why);
                            } else {
                                tracing::debug!(error = %why, "checkpoint failed again");
                            }
                        }
                    }
                }
            })
            .map_err(|e| StoreError::Io {
                what: "spawn the checkpointer for",
                path: db.to_owned(),
                source: e,
            })?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
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
