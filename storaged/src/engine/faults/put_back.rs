//! Putting the database's files back at their paths from the descriptors
//! this process still holds (`/proc/self/fd/<n>` opens a file even once it
//! is unlinked), with nothing writing to them any more.
//!
//! - A WAL removed, or replaced by another file (moved aside as
//!   `-wal.foreign-<ms>`), is copied back: beside the untouched database
//!   the next start replays it, as it would have.
//! - A database removed is copied back; its WAL stays as it is.
//! - A database replaced by another one is kept as the operator put it;
//!   ours is copied beside it as `<db>.replaced-<ms>` and its WAL moved to
//!   `<db>.replaced-<ms>-wal`, a whole database SQLite opens as it is.
//! - The WAL's index (`-shm`) is never copied: the next start rebuilds it.
//!
//! Every copy goes through `<name>.restoring` and is moved into place with
//! `RENAME_NOREPLACE`, so nothing that appeared at a path meanwhile is
//! overwritten, and fsynced with its directory.

use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use metacore::clock::unix_ms;

use super::{FileId, id_of};

/// Puts back what changed at `paths` (database, WAL, index) since `ids`
/// were seen; what was done, in words for clients (no path).
pub(super) fn run(paths: &[PathBuf; 3], ids: [Option<FileId>; 3]) -> Result<String, String> {
    let [db, wal, shm] = paths;
    let stamp = unix_ms();
    let mut done = Vec::new();
    if let Some(ours) = ids[1]
        && id_of(wal) != Some(ours)
    {
        if id_of(wal).is_some() {
            let aside = suffixed(wal, &format!(".foreign-{stamp}"));
            rename(wal, &aside)?;
            done.push(format!(
                "another file at the WAL's place was moved aside (suffix .foreign-{stamp})"
            ));
        }
        copy_back(ours, wal)?;
        done.push("the WAL was put back".to_string());
    }
    if let Some(ours) = ids[0]
        && id_of(db) != Some(ours)
    {
        if id_of(db).is_some() {
            let kept = suffixed(db, &format!(".replaced-{stamp}"));
            copy_back(ours, &kept)?;
            if id_of(wal).is_some() {
                rename(wal, &suffixed(&kept, "-wal"))?;
            }
            let _ = std::fs::remove_file(shm);
            done.push(format!(
                "another database was put in its place and is opened now; the one storaged \
                 held is kept beside it with its WAL (suffix .replaced-{stamp})"
            ));
        } else {
            copy_back(ours, db)?;
            done.push("the database file was put back".to_string());
        }
    }
    if done.is_empty() {
        done.push("only the WAL's index changed; the next start rebuilds it".to_string());
    }
    if let Some(dir) = db.parent() {
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(done.join("; "))
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
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
