//! Room on the database's volume, and how storaged keeps a full volume
//! recoverable with little freed space.
//!
//! SQLite needs room in two places: in the WAL for a commit, and in the
//! database file for a checkpoint that copies new pages back from the WAL.
//! On a volume that fills up, the checkpoint fails first, while commits go
//! on reusing the length the WAL file already has. The WAL can only start
//! again from its beginning after a checkpoint has copied all of it, so
//! every commit after that first failure adds to what the checkpoint must
//! copy, and freeing a little space later lets the checkpoint grow the
//! database by that much and fail again: writes came back only once as
//! much as the whole uncopied WAL (tens of MiB) had been freed.
//!
//! Three rules bound what must be freed to one write group:
//! - below [`LOW_SPACE_BYTES`] of free space the writer checkpoints after
//!   every group, so the WAL holds at most one group uncopied;
//! - once a checkpoint has failed for want of space ([`Space::is_stuck`]),
//!   no group commits until a checkpoint has copied the whole WAL again
//!   (the writer tries one before each group);
//! - a volume that fills faster than storaged measures it (another program
//!   writing a large file) can leave more than a group uncopied: the
//!   reserve file `<db>-reserve` (`META_CORE_DB_RESERVE_MB`, made while
//!   there is room) is removed at the first failure, so that checkpoint
//!   can finish; it is made again once the volume has room.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{FallocateFlags, Mode, OFlags};

use crate::engine::checkpointer::passive_checkpoint;

/// Free space under which the WAL is checkpointed after every group.
pub(crate) const LOW_SPACE_BYTES: u64 = 64 * 1024 * 1024;

/// Free space over which a volume that was full counts as usable again
/// (`/health` leaves `degraded` without waiting for the next write).
const RECOVERED_BYTES: u64 = 256 * 1024;

/// The failure a group is told while the WAL cannot be copied back. It
/// carries SQLite's own words so that it maps to the same 507.
pub(crate) const STUCK: &str = "database or disk is full: the WAL cannot be copied into the database until space is freed; nothing was written";

/// What the checkpointer and the writer know of the database's volume.
#[derive(Debug)]
pub(crate) struct Space {
    db: PathBuf,
    reserve: PathBuf,
    reserve_bytes: u64,
    /// The reserve file is there, whole.
    reserved: AtomicBool,
    /// The filesystem refused to allocate it: not tried again.
    unsupported: AtomicBool,
    /// Held while the reserve is made or released (two threads do).
    reserve_turn: std::sync::Mutex<()>,
    low: AtomicBool,
    stuck: AtomicBool,
}

/// What a `PRAGMA wal_checkpoint` answered: busy, frames in the WAL, frames
/// copied.
pub(crate) type Checkpoint = rusqlite::Result<(bool, i64, i64)>;

impl Space {
    /// For the database at `db`, with a reserve of `reserve_bytes` (0: none).
    pub(crate) fn new(db: &Path, reserve_bytes: u64) -> Self {
        let mut reserve = db.as_os_str().to_owned();
        reserve.push("-reserve");
        let space = Self {
            db: db.to_owned(),
            reserve: reserve.into(),
            reserve_bytes,
            reserved: AtomicBool::new(false),
            unsupported: AtomicBool::new(false),
            reserve_turn: std::sync::Mutex::new(()),
            low: AtomicBool::new(false),
            stuck: AtomicBool::new(false),
        };
        if reserve_bytes == 0 {
            // Configured off: a reserve left by an earlier run goes.
            let _ = std::fs::remove_file(&space.reserve);
        }
        space.keep_reserve();
        space
    }

    /// Makes the reserve file whole when it is missing and the volume has
    /// room for it besides [`LOW_SPACE_BYTES`] (the checkpointer calls
    /// this every tick).
    pub(crate) fn keep_reserve(&self) {
        // The writer may release the reserve meanwhile (`checkpoint`).
        let _turn = self.reserve_turn.lock().unwrap_or_else(|p| p.into_inner());
        if self.reserve_bytes == 0
            || self.reserved.load(Ordering::Relaxed)
            || self.unsupported.load(Ordering::Relaxed)
            || self.is_stuck()
        {
            return;
        }
        let have = std::fs::metadata(&self.reserve).map_or(0, |m| m.len());
        let Some(free) = self.measure() else { return };
        if have < self.reserve_bytes && free < self.reserve_bytes - have + LOW_SPACE_BYTES {
            return;
        }
        let made = rustix::fs::open(
            &self.reserve,
            OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::RUSR | Mode::WUSR,
        )
        .and_then(|fd| rustix::fs::fallocate(&fd, FallocateFlags::empty(), 0, self.reserve_bytes));
        match made {
            Ok(()) => {
                self.reserved.store(true, Ordering::Relaxed);
                if have < self.reserve_bytes {
                    tracing::info!(path = %self.reserve.display(), bytes = self.reserve_bytes, "made the reserve for a full volume's checkpoint");
                }
            }
            Err(e) if matches!(e, rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::NOSYS) => {
                // A filesystem without fallocate: no reserve, said once.
                let _ = std::fs::remove_file(&self.reserve);
                tracing::warn!(error = %e, path = %self.reserve.display(), "cannot make the reserve for a full volume's checkpoint on this filesystem; going without");
                self.unsupported.store(true, Ordering::Relaxed);
            }
            Err(e) => {
                // No room after all, or another passing failure: tried
                // again on a later tick.
                let _ = std::fs::remove_file(&self.reserve);
                tracing::debug!(error = %e, "cannot make the reserve yet");
            }
        }
    }

    /// Removes the reserve so that a checkpoint can use its room; true
    /// when there was one.
    fn release_reserve(&self) -> bool {
        let _turn = self.reserve_turn.lock().unwrap_or_else(|p| p.into_inner());
        self.reserved.store(false, Ordering::Relaxed);
        let released = self.reserve_bytes > 0 && std::fs::remove_file(&self.reserve).is_ok();
        if released {
            tracing::warn!(
                bytes = self.reserve_bytes,
                "the database's volume is full: released the reserve so that the checkpoint can finish; it is made again once the volume has room"
            );
        }
        released
    }

    /// A PASSIVE checkpoint on `conn`, noted (see [`Self::after_checkpoint`]).
    /// One that fails for want of space while the reserve is there is
    /// tried again at once on the reserve's room.
    pub(crate) fn checkpoint(&self, conn: &rusqlite::Connection) -> Checkpoint {
        let mut result = passive_checkpoint(conn);
        if matches!(&result, Err(e) if crate::error::is_disk_full(e)) && self.release_reserve() {
            result = passive_checkpoint(conn);
        }
        self.after_checkpoint(&result);
        result
    }

    /// Reads the free space of the volume; `None` when it cannot be read
    /// (then nothing changes).
    pub(crate) fn measure(&self) -> Option<u64> {
        let v = rustix::fs::statvfs(&self.db).ok()?;
        let free = v.f_bavail.saturating_mul(v.f_frsize);
        let low = free < LOW_SPACE_BYTES;
        if self.low.swap(low, Ordering::Relaxed) != low {
            tracing::info!(
                free_bytes = free,
                "{}",
                if low {
                    "the database's volume is nearly full: checkpointing after every write group"
                } else {
                    "the database's volume has room again: checkpointing in the background"
                }
            );
        }
        Some(free)
    }

    /// Below [`LOW_SPACE_BYTES`] at the last measure.
    pub(crate) fn is_low(&self) -> bool {
        self.low.load(Ordering::Relaxed)
    }

    /// The last checkpoint failed for want of space and none has copied
    /// the whole WAL since.
    pub(crate) fn is_stuck(&self) -> bool {
        self.stuck.load(Ordering::Relaxed)
    }

    /// Takes note of a checkpoint's outcome: a failure for want of space
    /// sets [`Self::is_stuck`] (and `/health` degraded), one that copied
    /// what it could without failing clears it.
    fn after_checkpoint(&self, result: &Checkpoint) {
        match result {
            Err(e) if crate::error::is_disk_full(e) => {
                if !self.stuck.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "the database's volume is full: a checkpoint cannot copy the WAL back; writes are refused until it can"
                    );
                }
                crate::error::DISK_FULL.store(true, Ordering::Relaxed);
            }
            // Copied all it could (up to what readers still see) without
            // running out of room: the volume has room again.
            Ok((false, _, _)) => {
                if self.stuck.swap(false, Ordering::Relaxed) {
                    tracing::info!("the WAL is copied back; writes are accepted again");
                }
                if crate::error::DISK_FULL.load(Ordering::Relaxed)
                    && self.measure().is_some_and(|free| free >= RECOVERED_BYTES)
                {
                    crate::error::DISK_FULL.store(false, Ordering::Relaxed);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> Checkpoint {
        Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            None,
        ))
    }

    #[test]
    fn a_failure_for_space_sticks_until_a_checkpoint_has_room() {
        let dir = tempfile::tempdir().unwrap();
        let s = Space::new(&dir.path().join("db"), 0);
        assert!(!s.is_stuck());
        s.after_checkpoint(&full());
        assert!(s.is_stuck());
        // Busy (another checkpoint runs) leaves it stuck.
        s.after_checkpoint(&Ok((true, 10, 10)));
        assert!(s.is_stuck());
        // Another error is not a full volume.
        s.after_checkpoint(&Err(rusqlite::Error::InvalidQuery));
        assert!(s.is_stuck());
        // A copy of all that readers allowed, without running out of room.
        s.after_checkpoint(&Ok((false, 10, 4)));
        assert!(!s.is_stuck());
        s.after_checkpoint(&full());
        s.after_checkpoint(&Ok((false, 10, 10)));
        assert!(!s.is_stuck());
    }
}
