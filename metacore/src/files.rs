//! Writing the small state files meta-core keeps on the shared volume
//! (`watchers.json`, `mounts/mounts.json`): whole or not at all, with the
//! mode asked for, and an unreadable one set aside, never overwritten.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Mode of a file only meta-core reads (the database, logs, sockets, its
/// own state files).
pub const PRIVATE_FILE: u32 = 0o600;
/// Mode of a folder only meta-core reads.
pub const PRIVATE_DIR: u32 = 0o700;
/// Mode of a file the other services of the mesh read (`kv-leader.info`,
/// the registry's files).
pub const SHARED_FILE: u32 = 0o644;
/// Mode of a folder the other services go through or list
/// (`META_CORE_PATH`, `locks/`, `services/`).
pub const SHARED_DIR: u32 = 0o755;

/// Makes what this process creates private by default (umask 077),
/// whatever umask it was started with; what another service must read is
/// given its mode explicitly ([`SHARED_FILE`], [`SHARED_DIR`]).
pub fn private_by_default() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
}

/// Creates the folder `path` (and missing parents, which get the umask's
/// mode) with `mode`, whatever the umask. A folder that exists is left as
/// it is: it may be an operator's volume.
pub fn ensure_dir(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if path.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Creates the folder `path` and every missing folder on its way, each
/// with `mode` whatever the umask (the umask of a meta-core process is
/// 077: [`private_by_default`]); folders that exist are left as they are.
/// For the folders other services go through (`FILES_PATH`, its
/// `watch/` and `plugin/`), where [`ensure_dir`] would leave the missing
/// parents private.
pub fn ensure_dir_tree(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut missing = Vec::new();
    let mut at = path;
    while !at.is_dir() {
        missing.push(at);
        match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => at = p,
            _ => break,
        }
    }
    for dir in missing.into_iter().rev() {
        match std::fs::create_dir(dir) {
            Ok(()) => std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))?,
            // Made meanwhile by another process: theirs to keep.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes `bytes` to `path` through a temp file in the same folder, synced,
/// then renamed over it, then the folder synced: a reader sees the old file
/// or the new one, and a crash leaves one of them. The file gets `mode`
/// whatever the umask.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Moves an unreadable state file aside as `<name>.unreadable-<ms>` and
/// returns where it went, so the operator can look at it.
pub fn set_aside(path: &Path, now_ms: u64) -> io::Result<PathBuf> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let aside = path.with_file_name(format!("{name}.unreadable-{now_ms}"));
    std::fs::rename(path, &aside)?;
    Ok(aside)
}

/// A JSON state file as read at start.
#[derive(Debug, PartialEq, Eq)]
pub enum StateFile<T> {
    Missing,
    Read(T),
    /// It could not be read as the format: moved to `kept`.
    SetAside {
        kept: PathBuf,
        why: String,
    },
}

/// Reads the JSON state file at `path` (`watchers.json`, `mounts.json`):
/// missing, read, or, when it does not parse as `T` or `check` refuses
/// it (another version), moved aside by [`set_aside`] and reported, never
/// overwritten in place.
pub fn read_state<T: serde::de::DeserializeOwned>(
    path: &Path,
    now_ms: u64,
    check: impl FnOnce(&T) -> Result<(), String>,
) -> io::Result<StateFile<T>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(StateFile::Missing),
        Err(e) => return Err(e),
    };
    let why = match serde_json::from_slice::<T>(&bytes) {
        Ok(v) => match check(&v) {
            Ok(()) => return Ok(StateFile::Read(v)),
            Err(why) => why,
        },
        Err(e) => e.to_string(),
    };
    Ok(StateFile::SetAside {
        kept: set_aside(path, now_ms)?,
        why,
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn writes_whole_with_the_mode_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        write_atomic(&p, b"one", 0o600).unwrap();
        write_atomic(&p, b"two", 0o600).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["state.json"]);
    }

    #[test]
    fn a_failed_write_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        write_atomic(&p, b"old", 0o600).unwrap();
        // The target is now a non-empty directory: the rename fails.
        let q = dir.path().join("sub");
        std::fs::create_dir_all(q.join("x")).unwrap();
        assert!(write_atomic(&q, b"new", 0o600).is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert!(
            !dir.path()
                .join(".sub.tmp.".to_owned() + &std::process::id().to_string())
                .exists()
        );
    }

    #[test]
    fn set_aside_keeps_the_bytes_under_a_new_name() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("watchers.json");
        std::fs::write(&p, b"{not json").unwrap();
        let aside = set_aside(&p, 1747).unwrap();
        assert_eq!(aside, dir.path().join("watchers.json.unreadable-1747"));
        assert_eq!(std::fs::read(&aside).unwrap(), b"{not json");
        assert!(!p.exists());
    }

    #[test]
    fn a_tree_of_folders_gets_the_mode_at_every_level_it_makes() {
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let kept = dir.path().join("kept");
        std::fs::create_dir(&kept).unwrap();
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o700)).unwrap();
        let deep = kept.join("a/b/c");
        ensure_dir_tree(&deep, 0o755).unwrap();
        for d in [kept.join("a"), kept.join("a/b"), deep.clone()] {
            assert_eq!(mode(&d), 0o755, "{}", d.display());
        }
        assert_eq!(mode(&kept), 0o700, "a folder that was there is left alone");
        ensure_dir_tree(&deep, 0o700).unwrap();
        assert_eq!(mode(&deep), 0o755);
    }
}
