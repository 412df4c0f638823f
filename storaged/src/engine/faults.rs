//! Faults of the database's files that storaged notices on its own, and
//! what it does about each (the volume filling up is [`super::space`]'s).
//!
//! - **The WAL (or its index, `-shm`) removed or replaced** under a running
//!   storaged, by an operator "cleaning up" or a careless script. SQLite
//!   goes on writing into the unlinked file, and every commit since the
//!   last checkpoint would vanish at the next start. The checkpointer sees
//!   it within a tick ([`Faults::check_files`]): from then on writes are
//!   refused (503, nothing applied), the writer's last TRUNCATE checkpoint
//!   copies what the old WAL holds into the database file, and storaged
//!   exits to be restarted on a fresh WAL, having lost nothing.
//! - **The database file replaced** (another file moved over its path):
//!   the same, so that the restart opens what is now at the path.
//! - **The database file removed**: storaged still holds the only copy
//!   open. Writes are refused, the checkpointer waits out the group in
//!   flight, copies the file through `/proc/self/fd` and puts the copy
//!   back at the path (never over a file that appeared there meanwhile);
//!   the WAL is left as it is, nothing checkpoints any more, and the next
//!   start replays it onto the copy. If that fails, writes stay refused
//!   and storaged stays up: a restart would begin an empty store, a silent
//!   wipe.
//! - **A damaged database** (a page of garbage): SQLite reports
//!   `SQLITE_CORRUPT` where it reads the page; a `PRAGMA quick_check` run
//!   after readiness, beside the writer, finds it wherever it is. Writes
//!   are refused from then on (they could spread the damage), reads go on,
//!   and `/health` says to restore from a backup. The file is left as is.
//! - **The volume failing** (`SQLITE_IOERR`: EIO from a dying disk or a
//!   lost path): writes are refused and storaged restarts rather than
//!   retry on files whose dirty pages the kernel may have dropped.
//!
//! Each of these is a [`Fault`]; the first one raised stays until the
//! restart that clears it.

use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use metacore::sync::Locked;
use rusqlite::Connection;
use tokio::sync::watch;

/// What is wrong with the database's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The WAL or its index was removed or replaced: restart after the
    /// final checkpoint.
    WalLost,
    /// Another file is at the database's path: restart to open it.
    DbReplaced,
    /// The database file was removed: refuse writes, keep running (it
    /// could not be put back).
    DbRemoved,
    /// The database file was removed and a copy of it was put back at its
    /// path: restart on it.
    DbRestored,
    /// SQLite found damage: refuse writes, keep serving reads.
    Damaged(String),
    /// The volume failed a read or a write (`SQLITE_IOERR`, EIO): restart
    /// and recover from what is on the disk. After a failed write the
    /// kernel may have dropped the dirty pages and marked them clean, so
    /// nothing that process still holds can be trusted (PostgreSQL's
    /// answer to the same, since 2018, is the same).
    VolumeFailed(String),
}

impl Fault {
    /// Whether storaged must exit (after its final checkpoint) to be
    /// restarted on the files now at its paths.
    pub(crate) fn needs_restart(&self) -> bool {
        matches!(
            self,
            Fault::WalLost | Fault::DbReplaced | Fault::DbRestored | Fault::VolumeFailed(_)
        )
    }

    /// Whether nothing may write to the database's files any more: a
    /// removed database is copied out of the file still open, and its WAL
    /// must reach the next start as it is.
    pub(crate) fn freezes_files(&self) -> bool {
        matches!(self, Fault::DbRemoved | Fault::DbRestored)
    }

    /// What `/health` and a refused write say (no path: clients see it).
    pub(crate) fn reason(&self) -> String {
        match self {
            Fault::WalLost => {
                "the database's WAL file was removed under storaged: writes are refused \
                 while what it held is copied into the database, and storaged restarts"
                    .into()
            }
            Fault::DbReplaced => {
                "another file was put at the database's path: writes are refused and \
                 storaged restarts to open it"
                    .into()
            }
            Fault::DbRemoved => {
                "the database file was removed under storaged and could not be put back \
                 (see storaged's log): writes are refused; storaged holds the only copy \
                 open, do not restart it before the cause is fixed"
                    .into()
            }
            Fault::DbRestored => {
                "the database file was removed under storaged: writes are refused, a copy \
                 of every commit was put back in its place, and storaged restarts on it"
                    .into()
            }
            Fault::Damaged(what) => format!(
                "the database is damaged ({what}): writes are refused, reads go on; \
                 restore it from a backup (docs/operations.md)"
            ),
            Fault::VolumeFailed(what) => format!(
                "the database's volume failed a read or a write ({what}): writes are refused, \
                 and storaged restarts to recover from what is on the disk"
            ),
        }
    }
}

/// A file's identity: its device and inode.
type FileId = (u64, u64);

fn id_of(path: &Path) -> Option<FileId> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// The database's files as storaged opened them, and the fault raised.
#[derive(Debug)]
pub(crate) struct Faults {
    db: PathBuf,
    /// `-wal` and `-shm` beside it.
    sidecars: [PathBuf; 2],
    /// What was at each path (db, wal, shm) when first seen.
    ids: Mutex<[Option<FileId>; 3]>,
    raised: watch::Sender<Option<Fault>>,
    /// Why putting a removed database back last failed (logged once).
    put_back_error: Mutex<Option<String>>,
    /// The writer is inside a group (between its BEGIN and its last
    /// acknowledgement): see [`Faults::writes_settled`].
    in_group: AtomicBool,
}

impl Faults {
    /// For the database at `db`, whose files are open now.
    pub(crate) fn new(db: &Path) -> Self {
        let beside = |suffix: &str| {
            let mut p = db.as_os_str().to_owned();
            p.push(suffix);
            PathBuf::from(p)
        };
        let faults = Self {
            db: db.to_owned(),
            sidecars: [beside("-wal"), beside("-shm")],
            ids: Mutex::new([None; 3]),
            raised: watch::channel(None).0,
            put_back_error: Mutex::new(None),
            in_group: AtomicBool::new(false),
        };
        faults.compare_files();
        faults
    }

    /// The fault raised, if any.
    pub(crate) fn raised(&self) -> Option<Fault> {
        self.raised.borrow().clone()
    }

    /// Raises `fault` unless one is raised already (the first one stays).
    pub(crate) fn raise(&self, fault: Fault) {
        self.raised.send_if_modified(|now| {
            if now.is_some() {
                return false;
            }
            tracing::error!(fault = ?fault, "{}", fault.reason());
            *now = Some(fault);
            true
        });
    }

    /// The writer says a group begins; it checks [`Faults::raised`] after
    /// this and before its COMMIT.
    pub(crate) fn group_begins(&self) {
        self.in_group.store(true, Ordering::SeqCst);
    }

    /// The writer says its group is over (committed or not).
    pub(crate) fn group_ends(&self) {
        self.in_group.store(false, Ordering::SeqCst);
    }

    /// After a fault is raised: waits (up to 10 s) until no group that may
    /// have checked before the fault can still commit. A group is either
    /// inside [`Faults::group_begins`] .. `group_ends` now, and waited for,
    /// or begins after and sees the fault (both sides are SeqCst).
    fn writes_settled(&self) -> Result<(), String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while self.in_group.load(Ordering::SeqCst) {
            if std::time::Instant::now() > deadline {
                return Err("the write group in flight did not end within 10 s".into());
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Ok(())
    }

    /// Replaces the fault raised with `fault` (a step of the same one).
    fn advance(&self, fault: Fault) {
        tracing::warn!(fault = ?fault, "{}", fault.reason());
        self.raised.send_replace(Some(fault));
    }

    /// Resolves once a fault that needs a restart is raised.
    pub(crate) async fn restart_needed(&self) -> Fault {
        let mut rx = self.raised.subscribe();
        let seen = rx
            .wait_for(|f| f.as_ref().is_some_and(Fault::needs_restart))
            .await
            .ok()
            .and_then(|f| f.clone());
        match seen {
            Some(f) => f,
            // The sender lives as long as `self`.
            None => std::future::pending().await,
        }
    }

    /// Compares what is at the database's paths with what was there when
    /// first seen (the checkpointer calls this every tick), and puts a
    /// removed database back. A sidecar not there yet is recorded when it
    /// appears.
    pub(crate) fn check_files(&self) {
        self.compare_files();
        if self.raised() == Some(Fault::DbRemoved) {
            match self.put_back() {
                Ok(()) => self.advance(Fault::DbRestored),
                Err(e) => {
                    let mut last = self.put_back_error.locked();
                    if last.as_deref() != Some(e.as_str()) {
                        tracing::error!(error = %e, "cannot put the removed database back; tried again every tick, logged again when this changes");
                        *last = Some(e);
                    }
                }
            }
        }
    }

    /// Copies the removed database, from the file this process still holds
    /// open, into a new file and moves it to the database's path, unless
    /// something is there now. The WAL is left where it is: beside the
    /// copy (page for page the file it belongs to), the next start replays
    /// it, as it would have for the original.
    fn put_back(&self) -> Result<(), String> {
        // Writes are refused from before this; a group already past that
        // check is waited for.
        self.writes_settled()?;
        let Some(expected) = self.ids.locked()[0] else {
            return Err("the database was never seen".into());
        };
        let mut from = open_removed(&self.db, expected)?;
        let mut restoring = self.db.as_os_str().to_owned();
        restoring.push(".restoring");
        let restoring = PathBuf::from(restoring);
        let _ = std::fs::remove_file(&restoring);
        let mut to = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&restoring)
            .map_err(|e| format!("create {}: {e}", restoring.display()))?;
        std::io::copy(&mut from, &mut to)
            .and_then(|_| to.sync_all())
            .map_err(|e| format!("copy into {}: {e}", restoring.display()))?;
        drop(to);
        rustix::fs::renameat_with(
            rustix::fs::CWD,
            &restoring,
            rustix::fs::CWD,
            &self.db,
            rustix::fs::RenameFlags::NOREPLACE,
        )
        .map_err(|e| format!("move {} into place: {e}", restoring.display()))?;
        if let Some(dir) = self.db.parent() {
            let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
        }
        tracing::info!(db = %self.db.display(), "put the removed database back");
        Ok(())
    }

    /// [`Faults::check_files`] without putting anything back.
    pub(crate) fn compare_files(&self) {
        if self.raised().is_some() {
            return;
        }
        let now = [
            id_of(&self.db),
            id_of(&self.sidecars[0]),
            id_of(&self.sidecars[1]),
        ];
        let mut ids = self.ids.locked();
        let mut fault = None;
        for (i, (seen, now)) in ids.iter_mut().zip(now).enumerate() {
            match (*seen, now) {
                (None, now) => *seen = now,
                (Some(a), Some(b)) if a == b => {}
                (Some(_), gone_or_other) => {
                    fault.get_or_insert(match (i, gone_or_other) {
                        (0, None) => Fault::DbRemoved,
                        (0, Some(_)) => Fault::DbReplaced,
                        _ => Fault::WalLost,
                    });
                }
            }
        }
        drop(ids);
        if let Some(f) = fault {
            self.raise(f);
        }
    }

    /// Raises [`Fault::Damaged`] or [`Fault::VolumeFailed`] when `e` is
    /// SQLite reporting damage or an I/O error.
    pub(crate) fn note_error(&self, e: &rusqlite::Error) {
        if is_damage(e) {
            self.raise(Fault::Damaged(e.to_string()));
        } else if is_io_error(e) {
            // A file removed or replaced also fails I/O: that fault comes
            // first, lest a restart begin an empty store at the path.
            self.compare_files();
            self.raise(Fault::VolumeFailed(e.to_string()));
        }
    }

    /// The WAL's path, to move a WAL that must not be replayed aside.
    pub(crate) fn wal(&self) -> &Path {
        &self.sidecars[0]
    }

    /// Runs `PRAGMA quick_check` on `conn` (a reader's) and raises
    /// [`Fault::Damaged`] with its first finding.
    pub(crate) fn quick_check(&self, conn: &Connection) {
        let started = std::time::Instant::now();
        let first: rusqlite::Result<String> =
            conn.query_row("PRAGMA quick_check(1)", [], |r| r.get(0));
        match first {
            Ok(ok) if ok == "ok" => {
                tracing::info!(took = ?started.elapsed(), "quick_check found no damage");
            }
            Ok(finding) => self.raise(Fault::Damaged(finding)),
            Err(e) if is_damage(&e) => self.raise(Fault::Damaged(e.to_string())),
            Err(e) => tracing::warn!(error = %e, "quick_check could not run"),
        }
    }
}

/// The removed database `db` (once `expected`), through this process's
/// descriptor of it: `/proc/self/fd/<n>` opens the file even unlinked.
fn open_removed(db: &Path, expected: FileId) -> Result<std::fs::File, String> {
    let deleted = format!("{} (deleted)", db.display());
    let fds = std::fs::read_dir("/proc/self/fd").map_err(|e| format!("list /proc/self/fd: {e}"))?;
    for fd in fds.flatten() {
        let is_it = std::fs::read_link(fd.path())
            .is_ok_and(|target| target.as_os_str() == deleted.as_str());
        if !is_it {
            continue;
        }
        let Ok(file) = std::fs::File::open(fd.path()) else {
            continue;
        };
        if file
            .metadata()
            .is_ok_and(|m| (m.dev(), m.ino()) == expected)
        {
            return Ok(file);
        }
    }
    Err(format!(
        "no descriptor of the removed {} is open",
        db.display()
    ))
}

/// SQLite's "disk I/O error", in any of its extended forms.
pub(crate) fn is_io_error(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::SystemIoFailure)
}

/// SQLite's "database disk image is malformed" and "file is not a
/// database".
pub(crate) fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
    )
}

#[cfg(test)]
#[path = "faults_test.rs"]
mod tests;
