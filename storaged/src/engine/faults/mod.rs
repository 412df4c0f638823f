//! Faults of the database's files that storaged notices on its own, and
//! what it does about each (the volume filling up is [`super::space`]'s).
//!
//! - **A file removed or replaced under a running storaged** (the
//!   database, its WAL or the WAL's index `-shm`), by an operator
//!   "cleaning up", a restore copied over it, a careless script. SQLite
//!   goes on writing into the unlinked files, and the next start would
//!   find an empty store, or lose every commit since the last checkpoint,
//!   or replay one file's WAL into another. The checkpointer sees it
//!   within a tick ([`Faults::check_files`]): writes are refused from then
//!   on, nothing checkpoints, and once the write group in flight is over
//!   the files this process still holds open are put back at their paths
//!   through `/proc/self/fd` ([`put_back`]); then storaged exits, and the
//!   next start recovers them as they were. Another meta-core store put in
//!   the place of ours is kept: ours goes beside it, with its WAL, so that
//!   nothing acknowledged is gone. If putting back fails, storaged stays up
//!   with writes refused (a restart would begin an empty store) and tries
//!   again; `<db>.files-changed`, written when the change is seen and
//!   removed once all is back, makes a start refuse to open the store if
//!   storaged stopped before. A copy written over the database in place
//!   (`cp` onto it) keeps its inode and is not seen: restore with meta-core
//!   stopped.
//! - **A damaged database** (a page of garbage): SQLite reports
//!   `SQLITE_CORRUPT` where it reads the page; a `PRAGMA quick_check` run
//!   after readiness, beside the writer, finds it wherever it is. Writes
//!   are refused from then on (they could spread the damage), reads go on,
//!   and `/health` says to restore from a backup. The file is left as is.
//! - **The volume failing** (`SQLITE_IOERR`: EIO from a dying disk or a
//!   lost path): writes are refused, nothing checkpoints, and storaged
//!   restarts rather than retry on files whose dirty pages the kernel may
//!   have dropped and marked clean.
//!
//! A fault stays until the restart that clears it; a change of the files
//! outranks damage or a failed volume (it may be their cause).

mod put_back;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use metacore::sync::Locked;
use rusqlite::Connection;

use crate::error::{is_damage, is_io_error};
use tokio::sync::watch;

/// What is wrong with the database's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// A file was removed or replaced (`what`): frozen while what this
    /// process holds open is put back.
    FilesChanged(String),
    /// ... and put back (`what` was done): restart on it.
    FilesPutBack(String),
    /// SQLite found damage: refuse writes, keep serving reads.
    Damaged(String),
    /// The volume failed a read or a write (`SQLITE_IOERR`, EIO): restart
    /// and recover from what is on the disk. After a failed write the
    /// kernel may have dropped the dirty pages and marked them clean, so
    /// nothing that process still holds can be trusted (PostgreSQL has
    /// answered the same way since 2018).
    VolumeFailed(String),
}

impl Fault {
    /// Whether storaged must exit to be restarted on what is on the disk.
    pub(crate) fn needs_restart(&self) -> bool {
        matches!(self, Fault::FilesPutBack(_) | Fault::VolumeFailed(_))
    }

    /// Whether nothing may write to the database's files any more (no
    /// checkpoint, no new connection): they are copied out of what is
    /// still open, or can no longer be trusted.
    pub(crate) fn freezes_files(&self) -> bool {
        !matches!(self, Fault::Damaged(_))
    }

    /// What `/health` and a refused write say (no path: clients see it).
    pub(crate) fn reason(&self) -> String {
        match self {
            Fault::FilesChanged(what) => format!(
                "the database's files changed under storaged ({what}): writes are refused \
                 while storaged puts back what it holds open, then it restarts"
            ),
            Fault::FilesPutBack(what) => format!(
                "the database's files changed under storaged: writes are refused; {what}, \
                 and storaged restarts on it"
            ),
            Fault::Damaged(what) => crate::error::damaged(what),
            Fault::VolumeFailed(what) => crate::error::volume_failed(what),
        }
    }
}

/// A file's identity: its device and inode.
pub(crate) type FileId = (u64, u64);

fn id_of(path: &Path) -> Option<FileId> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// How long a failed attempt to put the files back waits for the next.
const PUT_BACK_RETRY: Duration = Duration::from_secs(5);

/// The marker beside a database whose files changed under storaged and
/// are not all back yet: a start refuses to open the store beside it.
pub(crate) fn marker(db: &Path) -> PathBuf {
    suffixed(db, ".files-changed")
}

/// `path` with `suffix` added to its name (`<db>-wal`, `<db>.restoring`).
pub(crate) fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// The database's files as storaged opened them, and the fault raised.
#[derive(Debug)]
pub(crate) struct Faults {
    /// The database, its WAL and the WAL's index.
    paths: [PathBuf; 3],
    /// What was at each path when first seen: the files storaged holds.
    ids: Mutex<[Option<FileId>; 3]>,
    raised: watch::Sender<Option<Fault>>,
    /// What putting back has done so far; when it last failed, and why
    /// (logged once).
    put_back: Mutex<(put_back::Progress, Option<(Instant, String)>)>,
    /// Odd while the writer is inside a group: see [`Faults::writes_settled`].
    group_seq: AtomicU64,
}

impl Faults {
    /// For the database at `db`, whose files are open now.
    pub(crate) fn new(db: &Path) -> Self {
        let faults = Self {
            paths: [db.to_owned(), suffixed(db, "-wal"), suffixed(db, "-shm")],
            ids: Mutex::new([None; 3]),
            raised: watch::channel(None).0,
            put_back: Mutex::new(Default::default()),
            group_seq: AtomicU64::new(0),
        };
        faults.compare_files();
        faults
    }

    /// The fault raised, if any.
    pub(crate) fn raised(&self) -> Option<Fault> {
        self.raised.borrow().clone()
    }

    /// Whether nothing may write to the files, nor open them again.
    pub(crate) fn frozen(&self) -> bool {
        self.raised
            .borrow()
            .as_ref()
            .is_some_and(Fault::freezes_files)
    }

    /// Raises `fault` unless one is raised already; a change of the files
    /// replaces damage or a failed volume.
    pub(crate) fn raise(&self, fault: Fault) {
        self.raised.send_if_modified(|now| {
            let replaces = match now {
                None => true,
                Some(Fault::Damaged(_) | Fault::VolumeFailed(_)) => {
                    matches!(fault, Fault::FilesChanged(_))
                }
                Some(_) => false,
            };
            if replaces {
                tracing::error!(fault = ?fault, "{}", fault.reason());
                *now = Some(fault);
            }
            replaces
        });
        // Orders the fault before the reading of `group_seq` that follows
        // (see `writes_settled`), whatever the channel's lock does.
        std::sync::atomic::fence(Ordering::SeqCst);
    }

    /// The writer says a group begins; it checks [`Faults::raised`] after
    /// this, before it runs the group and again before its COMMIT.
    pub(crate) fn group_begins(&self) {
        self.group_seq.fetch_add(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
    }

    /// The writer says its group and the checkpoint after it are over.
    pub(crate) fn group_ends(&self) {
        self.group_seq.fetch_add(1, Ordering::SeqCst);
    }

    /// After a fault is raised: waits (up to 10 s) for the group in flight,
    /// if any, which may have checked before the fault. Any later group
    /// begins after the fault was raised and sees it.
    fn writes_settled(&self) -> Result<(), String> {
        let seen = self.group_seq.load(Ordering::SeqCst);
        if seen.is_multiple_of(2) {
            return Ok(());
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.group_seq.load(Ordering::SeqCst) == seen {
            if Instant::now() > deadline {
                return Err("the write group in flight did not end within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
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
    /// first seen, and puts back what changed (the checkpointer calls this
    /// every tick; the writer, `now`, before and after its last checkpoint,
    /// when a failed attempt is not waited out).
    pub(crate) fn check_files(&self, now: bool) {
        self.compare_files();
        let Some(Fault::FilesChanged(what)) = self.raised() else {
            return;
        };
        let marker = marker(&self.paths[0]);
        if !marker.exists()
            && let Err(e) = std::fs::write(&marker, format!("{what}\n"))
        {
            tracing::error!(marker = %marker.display(), error = %e, "cannot write the marker of changed files");
        }
        let mut put_back = self.put_back.locked();
        let (progress, failed) = &mut *put_back;
        if !now
            && failed
                .as_ref()
                .is_some_and(|(at, _)| at.elapsed() < PUT_BACK_RETRY)
        {
            return;
        }
        let held = *self.ids.locked();
        match self
            .writes_settled()
            .and_then(|()| put_back::run(&self.paths, held, progress))
        {
            Ok(done) => {
                *failed = None;
                let _ = std::fs::remove_file(&marker);
                tracing::warn!(changed = %what, "{done}");
                self.raised.send_replace(Some(Fault::FilesPutBack(done)));
            }
            Err(e) => {
                if failed.as_ref().is_none_or(|(_, last)| *last != e) {
                    tracing::error!(error = %e, "cannot put the database's files back; tried again every {PUT_BACK_RETRY:?}, logged again when this changes");
                }
                *failed = Some((Instant::now(), e));
            }
        }
    }

    /// Raises [`Fault::FilesChanged`] when a path no longer holds what was
    /// first seen there. A sidecar not there yet is recorded when it
    /// appears.
    pub(crate) fn compare_files(&self) {
        if self
            .raised()
            .is_some_and(|f| matches!(f, Fault::FilesChanged(_) | Fault::FilesPutBack(_)))
        {
            return;
        }
        let mut ids = self.ids.locked();
        let mut changed = Vec::new();
        for (i, seen) in ids.iter_mut().enumerate() {
            let now = id_of(&self.paths[i]);
            let name = ["the database file", "its WAL", "the WAL's index"][i];
            match (*seen, now) {
                (None, now) => *seen = now,
                (Some(a), Some(b)) if a == b => {}
                (Some(_), None) => changed.push(format!("{name} was removed")),
                (Some(_), Some(_)) => changed.push(format!("{name} was replaced")),
            }
        }
        drop(ids);
        if !changed.is_empty() {
            self.raise(Fault::FilesChanged(changed.join(", ")));
        }
    }

    /// Whether every path still holds the file first seen there (a new
    /// connection would open whatever is there, beside this process's
    /// WAL and index).
    pub(crate) fn files_are_ours(&self) -> bool {
        let ids = *self.ids.locked();
        ids[0].is_some()
            && ids
                .iter()
                .zip(&self.paths)
                .all(|(seen, path)| seen.is_none() || id_of(path) == *seen)
    }

    /// Raises [`Fault::Damaged`] or [`Fault::VolumeFailed`] when `e` is
    /// SQLite reporting damage or an I/O error. A changed file fails reads
    /// too, so the files are compared first: that is the fault then, and a
    /// restart must never begin an empty store at the path.
    pub(crate) fn note_error(&self, e: &rusqlite::Error) {
        let fault = if is_damage(e) {
            Fault::Damaged(e.to_string())
        } else if is_io_error(e) {
            Fault::VolumeFailed(e.to_string())
        } else {
            return;
        };
        self.compare_files();
        self.raise(fault);
    }

    /// Runs `PRAGMA quick_check` on `conn` (a reader's) and raises
    /// [`Fault::Damaged`] with its first finding.
    pub(crate) fn quick_check(&self, conn: &Connection) {
        let started = Instant::now();
        let first: rusqlite::Result<String> =
            conn.query_row("PRAGMA quick_check(1)", [], |r| r.get(0));
        match first {
            Ok(ok) if ok == "ok" => {
                tracing::info!(took = ?started.elapsed(), "quick_check found no damage");
            }
            Ok(finding) => {
                self.compare_files();
                self.raise(Fault::Damaged(finding));
            }
            Err(e) => {
                self.note_error(&e);
                tracing::warn!(error = %e, "quick_check did not finish");
            }
        }
    }
}

#[cfg(test)]
mod tests;
