//! Putting the database's files back at their paths from the descriptors
//! this process still holds (`/proc/self/fd/<n>` opens a file even once it
//! is unlinked), with nothing writing to them any more.
//!
//! - A WAL removed, or replaced by another file (moved aside as
//!   `-wal.foreign-<ms>`), is copied back: beside the untouched database
//!   the next start replays it, as it would have.
//! - A database removed is copied back; its WAL stays as it is.
//! - A file at the database's place that is not a meta-core store is moved
//!   aside (`.foreign-<ms>`) and ours copied back.
//! - Another meta-core store put in our place (a restore done while
//!   running) is kept as the operator put it, with whatever WAL they put
//!   beside it; ours is copied beside it as `<db>.replaced-<ms>` with its
//!   WAL as `<db>.replaced-<ms>-wal`, a whole database SQLite opens as is.
//! - The WAL's index (`-shm`) is never copied: the next start rebuilds it.
//!
//! What is held is fsynced first. Every copy goes through
//! `<name>.restoring` and is moved into place with `RENAME_NOREPLACE`, so
//! nothing that appeared at a path meanwhile is overwritten. Each step is
//! done once: a retry after a failure goes on from the step that failed.

use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use metacore::clock::unix_ms;
use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::{FileId, id_of, suffixed};

/// What was done so far, kept across retries.
#[derive(Debug, Default)]
pub(super) struct Progress {
    wal: bool,
    db: bool,
    /// In words for clients (no path).
    done: Vec<String>,
}

/// Puts back what changed at `paths` (database, WAL, index) since the
/// files `held` were opened; what was done, in words for clients.
pub(super) fn run(
    paths: &[PathBuf; 3],
    held: [Option<FileId>; 3],
    progress: &mut Progress,
) -> Result<String, String> {
    let [db, wal, shm] = paths;
    for id in held[..2].iter().flatten() {
        open_held(*id)?
            .sync_all()
            .map_err(|e| format!("fsync a file storaged holds: {e}"))?;
    }
    let stamp = unix_ms();
    let db_changed = !progress.db && held[0].is_some() && id_of(db) != held[0];
    if db_changed && id_of(db).is_some() && !is_meta_core_store(db) {
        rename(db, &suffixed(db, &format!(".foreign-{stamp}")))?;
        progress.done.push(format!(
            "a file that is not a meta-core store was at the database's place and was moved \
             aside (suffix .foreign-{stamp})"
        ));
    }
    if db_changed && id_of(db).is_some() {
        let kept = suffixed(db, &format!(".replaced-{stamp}"));
        if let Some(ours) = held[0] {
            copy_back(ours, &kept)?;
        }
        if let Some(ours) = held[1] {
            if id_of(wal) == Some(ours) {
                rename(wal, &suffixed(&kept, "-wal"))?;
            } else {
                copy_back(ours, &suffixed(&kept, "-wal"))?;
            }
        }
        if held[2].is_some() && id_of(shm) == held[2] {
            let _ = std::fs::remove_file(shm);
        }
        progress.wal = true;
        progress.db = true;
        progress.done.push(format!(
            "another meta-core database was put in its place and is opened now; the one \
             storaged held is kept beside it with its WAL (suffix .replaced-{stamp})"
        ));
    }
    if !progress.wal
        && let Some(ours) = held[1]
        && id_of(wal) != Some(ours)
    {
        if id_of(wal).is_some() {
            rename(wal, &suffixed(wal, &format!(".foreign-{stamp}")))?;
            progress.done.push(format!(
                "another file at the WAL's place was moved aside (suffix .foreign-{stamp})"
            ));
        }
        copy_back(ours, wal)?;
        progress.wal = true;
        progress.done.push("the WAL was put back".into());
    }
    if !progress.db
        && let Some(ours) = held[0]
        && id_of(db) != Some(ours)
    {
        copy_back(ours, db)?;
        progress.db = true;
        progress.done.push("the database file was put back".into());
    }
    if progress.done.is_empty() {
        progress
            .done
            .push("only the WAL's index changed; the next start rebuilds it".into());
    }
    if let Some(dir) = db.parent() {
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(progress.done.join("; "))
}

/// Whether `path` is a meta-core store (it has the schema sentinel), read
/// without touching any WAL or index beside it.
fn is_meta_core_store(path: &Path) -> bool {
    let uri = format!("file:{}?immutable=1", path.display());
    let Ok(conn) = Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
    ) else {
        return false;
    };
    conn.query_row(
        "SELECT v FROM kv WHERE k = ?1",
        [crate::engine::schema::SCHEMA_KEY],
        |r| r.get::<_, String>(0),
    )
    .optional()
    .is_ok_and(|v| v.is_some())
}

fn rename(from: &Path, to: &Path) -> Result<(), String> {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        from,
        rustix::fs::CWD,
        to,
        rustix::fs::RenameFlags::NOREPLACE,
    )
    .map_err(|e| format!("move {} to {}: {e}", from.display(), to.display()))
}

/// Copies the open file `id` to `to`, through `<to>.restoring`.
fn copy_back(id: FileId, to: &Path) -> Result<(), String> {
    let mut from = open_held(id)?;
    let restoring = suffixed(to, ".restoring");
    let _ = std::fs::remove_file(&restoring);
    let copied = (|| {
        let mut into = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&restoring)?;
        std::io::copy(&mut from, &mut into)?;
        into.sync_all()
    })();
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&restoring);
        return Err(format!("copy into {}: {e}", restoring.display()));
    }
    rename(&restoring, to).inspect_err(|_| {
        let _ = std::fs::remove_file(&restoring);
    })?;
    tracing::info!(to = %to.display(), "put a file storaged held open back");
    Ok(())
}

/// The file `id` through one of this process's descriptors of it (found by
/// what `stat` of `/proc/self/fd/<n>` says, which opens nothing).
fn open_held(id: FileId) -> Result<std::fs::File, String> {
    let fds = std::fs::read_dir("/proc/self/fd").map_err(|e| format!("list /proc/self/fd: {e}"))?;
    for fd in fds.flatten() {
        let is_it = std::fs::metadata(fd.path()).is_ok_and(|m| (m.dev(), m.ino()) == id);
        if is_it && let Ok(file) = std::fs::File::open(fd.path()) {
            return Ok(file);
        }
    }
    Err(format!(
        "no descriptor of the file (device {}, inode {}) is open here",
        id.0, id.1
    ))
}
