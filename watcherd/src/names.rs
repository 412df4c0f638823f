//! Names watcherd cannot carry: a file or folder whose name is not UTF-8.
//!
//! `file:events` carries paths as JSON strings and records hold them as
//! `filePath`, so such a name cannot be announced without changing it. It
//! is skipped: a file is never minted nor announced, a folder is neither
//! watched nor walked into. Each path is logged and counted once (shown as
//! `refusedNames` in `/status`), not at every walk that meets it again.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use metacore::sync::Locked;

/// Most refused paths remembered (each logged and counted once). Past it,
/// further ones are still skipped, without a log line of their own and
/// without being counted: a tree full of such names cannot grow
/// watcherd's memory.
pub const MAX_REMEMBERED: usize = 10_000;

/// The paths refused so far.
#[derive(Debug, Default)]
pub struct RefusedNames {
    /// Paths logged and counted already. A lock because walks (on the
    /// blocking pool) and the engine's inotify events both refuse names;
    /// held only to look one path up and insert it.
    paths: Mutex<HashSet<PathBuf>>,
    count: AtomicU64,
    /// The operator was told that [`MAX_REMEMBERED`] was reached.
    full: AtomicBool,
}

impl RefusedNames {
    /// Whether `name`, the last part of `path`, is refused (not UTF-8); the
    /// first time a path is, it is logged and counted.
    pub fn refuses(&self, path: &Path, name: &OsStr) -> bool {
        if name.to_str().is_some() {
            return false;
        }
        self.refuse(path);
        true
    }

    /// Logs and counts `path` unless it was already.
    pub fn refuse(&self, path: &Path) {
        let mut paths = self.paths.locked();
        if paths.contains(path) {
            return;
        }
        if paths.len() >= MAX_REMEMBERED {
            if !self.full.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    remembered = MAX_REMEMBERED,
                    "more names that are not UTF-8 are skipped, without a log line each"
                );
            }
            return;
        }
        paths.insert(path.to_owned());
        self.count.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            path = %path.display(),
            "a name that is not UTF-8 is skipped (never minted nor announced); \
             rename it to have it watched"
        );
    }

    /// Distinct paths refused (at most [`MAX_REMEMBERED`]).
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStrExt;

    use super::*;

    #[test]
    fn a_name_that_is_not_utf8_is_counted_once_per_path() {
        let names = RefusedNames::default();
        let bad = OsStr::from_bytes(b"a\xff.mkv");
        let path = Path::new("/files/watch").join(bad);
        assert!(!names.refuses(Path::new("/files/watch/ok.mkv"), OsStr::new("ok.mkv")));
        assert!(names.refuses(&path, bad));
        assert!(names.refuses(&path, bad), "refused every time");
        assert_eq!(names.count(), 1, "counted once");
        let other = Path::new("/files/plugin").join(bad);
        assert!(names.refuses(&other, bad));
        assert_eq!(names.count(), 2);
    }
}
