//! Writing the small state files meta-core keeps on the shared volume
//! (`watchers.json`, `mounts/mounts.json`): whole or not at all, with the
//! mode asked for, and an unreadable one set aside, never overwritten.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` through a temp file in the same folder, synced,
/// then renamed over it, then the folder synced: a reader sees the old file
/// or the new one, and a crash leaves one of them.
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
}
