//! What one COPY may make: at most [`MAX_COPY_ENTRIES`] files and
//! folders, and at most the free space of the destination's filesystem
//! in bytes. The source is walked first, as it will be copied
//! ([`measure`]), and the copy is refused before it starts when it is
//! over either; while it runs, each folder made and each file copied is
//! taken from a [`Budget`], so a source that grows meanwhile cannot
//! carry it further.
//!
//! A copy does not follow a symlink to a folder inside the tree it
//! copies (such a link is left out: a link loop would otherwise copy the
//! same folders again and again); a symlink to a file is copied as the
//! file, when it stays inside ([`crate::confine`]). A destination inside
//! its source, or equal to it, is refused ([`inside`]): a copy would feed
//! on its own output.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType};

use crate::confine::Roots;

/// Files and folders one COPY makes at most.
pub(crate) const MAX_COPY_ENTRIES: u64 = 100_000;

/// What a copy of a tree makes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Tally {
    /// Files and folders, the top one included.
    pub entries: u64,
    /// Bytes of the files.
    pub bytes: u64,
}

/// Whether `dest` is `source` or inside it (both resolved).
pub(super) fn inside(source: &Path, dest: &Path) -> bool {
    dest.starts_with(source)
}

/// Walks the folder at `rel` as a COPY of `deep` depth copies it, and
/// counts what it would make; stops counting once past `max_entries`.
/// Entries that cannot be read are not counted (the copy fails on them).
pub(super) fn measure(roots: &Roots, rel: &Path, deep: bool, max_entries: u64) -> Tally {
    let mut t = Tally {
        entries: 1,
        bytes: 0,
    };
    if !deep {
        return t;
    }
    let mut todo: Vec<PathBuf> = vec![rel.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let Ok((fd, real)) = roots.open_dir(&dir) else {
            continue;
        };
        let Ok(list) = rustix::fs::Dir::read_from(&fd) else {
            continue;
        };
        for entry in list {
            let Ok(entry) = entry else { break };
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let os = OsStr::from_bytes(name);
            let path = real.join(os);
            if !roots.allows(&path) {
                continue;
            }
            let Ok(st) = rustix::fs::statat(&fd, os, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => {
                    t.entries += 1;
                    todo.push(dir.join(os));
                }
                FileType::RegularFile => {
                    t.entries += 1;
                    t.bytes = t.bytes.saturating_add(st.st_size.max(0) as u64);
                }
                FileType::Symlink => {
                    // Copied as its file when it leads to one inside;
                    // left out when it leads to a folder.
                    let Some(target) = roots.confined(&path) else {
                        continue;
                    };
                    if let Ok(ts) = rustix::fs::stat(&target)
                        && FileType::from_raw_mode(ts.st_mode) == FileType::RegularFile
                    {
                        t.entries += 1;
                        t.bytes = t.bytes.saturating_add(ts.st_size.max(0) as u64);
                    }
                }
                _ => {}
            }
            if t.entries > max_entries {
                return t;
            }
        }
    }
    t
}

/// What a running COPY may still make.
#[derive(Debug)]
pub(crate) struct Budget {
    entries: AtomicU64,
    bytes: AtomicU64,
}

impl Budget {
    /// A budget of `entries` files and folders and `bytes` bytes.
    pub(crate) fn new(entries: u64, bytes: u64) -> Self {
        Self {
            entries: AtomicU64::new(entries),
            bytes: AtomicU64::new(bytes),
        }
    }

    /// Takes one entry of `bytes` bytes; `false` (and nothing taken) when
    /// either is spent.
    pub(crate) fn take(&self, bytes: u64) -> bool {
        let take = |a: &AtomicU64, n: u64| {
            a.fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(n)
            })
            .is_ok()
        };
        if !take(&self.entries, 1) {
            return false;
        }
        if !take(&self.bytes, bytes) {
            self.entries.fetch_add(1, Ordering::AcqRel);
            return false;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_counts_what_a_copy_makes_and_leaves_folder_links_out() {
        let d = tempfile::tempdir().unwrap();
        let files = d.path().join("files");
        std::fs::create_dir_all(files.join("src/sub")).unwrap();
        std::fs::write(files.join("src/a"), b"12345").unwrap();
        std::fs::write(files.join("src/sub/b"), b"678").unwrap();
        std::fs::write(d.path().join("outside"), b"xxxxxxxx").unwrap();
        // A loop, a link to a file inside, a link out.
        std::os::unix::fs::symlink("..", files.join("src/sub/up")).unwrap();
        std::os::unix::fs::symlink("../a", files.join("src/sub/a-again")).unwrap();
        std::os::unix::fs::symlink(d.path().join("outside"), files.join("src/out")).unwrap();
        let roots = Roots {
            files: std::fs::canonicalize(&files).unwrap(),
            meta: None,
        };
        let t = measure(&roots, Path::new("src"), true, MAX_COPY_ENTRIES);
        assert_eq!(
            t,
            Tally {
                entries: 5,
                bytes: 13
            },
            "src, a, sub, b and a-again"
        );
        assert_eq!(measure(&roots, Path::new("src"), false, 10).entries, 1);
        assert!(measure(&roots, Path::new("src"), true, 2).entries > 2);
    }

    #[test]
    fn inside_is_by_component() {
        assert!(inside(Path::new("/f/a"), Path::new("/f/a")));
        assert!(inside(Path::new("/f/a"), Path::new("/f/a/b")));
        assert!(!inside(Path::new("/f/a"), Path::new("/f/ab")));
        assert!(!inside(Path::new("/f/a/b"), Path::new("/f/a")));
    }

    #[test]
    fn a_budget_is_spent_once() {
        let b = Budget::new(2, 10);
        assert!(b.take(6));
        assert!(!b.take(6), "bytes spent");
        assert!(b.take(4));
        assert!(!b.take(0), "entries spent");
    }
}
