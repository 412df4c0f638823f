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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use metacore::sync::Locked;
use rusqlite::Connection;
use rustix::fs::{FallocateFlags, Mode, OFlags};

/// Free space under which the WAL is checkpointed after every group.
pub(crate) const LOW_SPACE_BYTES: u64 = 64 * 1024 * 1024;

/// Space freed, over what was free when a write last failed for want of
/// it, after which a full volume counts as usable again (`/health` leaves
/// `degraded` without waiting for the next write).
const RECOVERED_BYTES: u64 = 256 * 1024;

/// [`Space::full`] when the volume is not full.
const NOT_FULL: u64 = u64::MAX;

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
    /// The free bytes measured when a write or a checkpoint last failed
    /// for want of space, until a group commits or that much plus
    /// [`RECOVERED_BYTES`] is free ([`NOT_FULL`] meanwhile).
    full: AtomicU64,
}

/// What a `PRAGMA wal_checkpoint` answered: busy, frames in the WAL, frames
/// copied.
pub(crate) type Checkpoint = rusqlite::Result<(bool, i64, i64)>;

/// Runs `PRAGMA wal_checkpoint(PASSIVE)`: (busy, frames in the WAL, frames
/// copied).
pub(crate) fn passive_checkpoint(conn: &Connection) -> Checkpoint {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
        Ok((
            r.get::<_, i64>(0)? != 0,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
        ))
    })
}

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
            full: AtomicU64::new(NOT_FULL),
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
        let _turn = self.reserve_turn.locked();
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
        let _turn = self.reserve_turn.locked();
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

    /// A write or a checkpoint failed for want of space: the volume is full
    /// (`/health` says degraded) until a group commits or space is freed.
    pub(crate) fn note_full(&self) {
        let free = self.measure().unwrap_or(0);
        if self.full.swap(free, Ordering::Relaxed) == NOT_FULL {
            tracing::warn!(
                "the database's volume is full: writes are refused until space is freed"
            );
        }
    }

    /// A group committed: the volume has room.
    pub(crate) fn note_committed(&self) {
        if self.full.load(Ordering::Relaxed) != NOT_FULL
            && self.full.swap(NOT_FULL, Ordering::Relaxed) != NOT_FULL
        {
            tracing::info!("the database's volume has room again: writes succeed");
        }
    }

    /// Whether the last write (or checkpoint) failed for want of space and
    /// no room has been seen since.
    pub(crate) fn is_full(&self) -> bool {
        self.full.load(Ordering::Relaxed) != NOT_FULL
    }

    /// While full: clears it once [`RECOVERED_BYTES`] more than at the
    /// failure are free.
    fn note_room(&self) {
        let at = self.full.load(Ordering::Relaxed);
        if at == NOT_FULL {
            return;
        }
        let freed = self
            .measure()
            .is_some_and(|free| free >= at.saturating_add(RECOVERED_BYTES));
        if freed
            && self
                .full
                .compare_exchange(at, NOT_FULL, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::info!("the database's volume has room again: space was freed");
        }
    }

    /// A PASSIVE checkpoint on `conn`, noted (see [`Self::after_checkpoint`]).
    /// One that fails for want of space while the reserve is there is
    /// tried again at once on the reserve's room.
    pub(crate) fn checkpoint(&self, conn: &Connection) -> Checkpoint {
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
                self.note_full();
            }
            // Copied all it could (up to what readers still see) without
            // running out of room: the volume has room again.
            Ok((false, _, _)) => {
                if self.stuck.swap(false, Ordering::Relaxed) {
                    tracing::info!("the WAL is copied back; writes are accepted again");
                }
                self.note_room();
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

    #[test]
    fn the_volume_is_full_from_a_failure_for_space_until_a_group_commits() {
        let dir = tempfile::tempdir().unwrap();
        let s = Space::new(&dir.path().join("db"), 0);
        assert!(!s.is_full());
        s.note_committed();
        assert!(
            !s.is_full(),
            "a commit of a volume with room changes nothing"
        );
        s.after_checkpoint(&full());
        assert!(s.is_full(), "a checkpoint that found no room");
        s.note_committed();
        assert!(!s.is_full());
        s.note_full();
        s.note_full();
        assert!(s.is_full(), "a write that found no room");
        s.note_committed();
        assert!(!s.is_full());
    }
}
