//! What one COPY may make: at most [`MAX_COPY_ENTRIES`] files and
//! folders, at most `META_CORE_DAV_COPY_MAX_BYTES` bytes, and no more
//! than leaves the destination's filesystem its reserve
//! (`META_CORE_DAV_COPY_RESERVE_BYTES`) free, counting
//! what the COPYs under way there will still write ([`Ledger`]). The
//! source is walked first, as it will be copied ([`measure`]), and the
//! copy is refused before it starts when it is over any of them; while it
//! runs, each folder made and each file copied is taken from a
//! [`Budget`], so a source that grows meanwhile cannot carry it further.
//!
//! A copy does not follow a symlink to a folder inside the tree it
//! copies (such a link is left out: a link loop would otherwise copy the
//! same folders again and again); a symlink to a file is copied as the
//! file, when it stays inside ([`crate::confine`]). A destination inside
//! its source, or equal to it, is refused ([`inside`]): a copy would feed
//! on its own output.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustix::fs::FileType;

use crate::confine::Roots;
use metacore::sync::Locked;

/// Files and folders one COPY makes at most.
pub(crate) const MAX_COPY_ENTRIES: u64 = 100_000;

/// A filesystem: which (`st_dev`), and its free bytes for an
/// unprivileged writer (`f_bavail`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Space {
    pub dev: u64,
    pub free: u64,
}

/// The filesystem of the folder `dir`.
pub(super) fn space(dir: &impl AsFd) -> Option<Space> {
    let v = rustix::fs::fstatvfs(dir).ok()?;
    let st = rustix::fs::fstat(dir).ok()?;
    Some(Space {
        dev: st.st_dev,
        free: v.f_bavail.saturating_mul(v.f_frsize),
    })
}

/// Why a COPY's bytes are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Short {
    /// More than one COPY writes (`META_CORE_DAV_COPY_MAX_BYTES`).
    Ceiling { need: u64, max: u64 },
    /// It would leave less than `reserve` of `free` (the free space less
    /// what copies under way will still write; the reserve is beyond what
    /// the filesystem keeps for root itself: `free` is `f_bavail`).
    Reserve { need: u64, free: u64, reserve: u64 },
}

/// The bytes the COPYs under way will still write, per filesystem: a
/// COPY is judged against the free space less these, so that copies side
/// by side cannot together pass into the reserve that each alone keeps.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// Bytes promised by `st_dev`; a filesystem with none has no entry.
    /// Locked to judge a COPY and to settle a file, never across I/O.
    promised: Mutex<HashMap<u64, u64>>,
}

impl Ledger {
    fn promised(&self) -> std::sync::MutexGuard<'_, HashMap<u64, u64>> {
        self.promised.locked()
    }

    /// Judges a COPY of `need` bytes onto `space`, of at most `max`,
    /// leaving `reserve` free. Granted: the bytes it may write (up to the
    /// reserve, at most `max`) and its [`Promise`] of `need`.
    pub(super) fn promise(
        self: &Arc<Self>,
        space: Space,
        need: u64,
        max: u64,
        reserve: u64,
    ) -> Result<(u64, Promise), Short> {
        if need > max {
            return Err(Short::Ceiling { need, max });
        }
        let mut promised = self.promised();
        let free = space
            .free
            .saturating_sub(promised.get(&space.dev).copied().unwrap_or(0));
        let room = free.saturating_sub(reserve);
        if need > room {
            return Err(Short::Reserve {
                need,
                free,
                reserve,
            });
        }
        if need > 0 {
            *promised.entry(space.dev).or_default() += need;
        }
        let promise = Promise {
            ledger: self.clone(),
            dev: space.dev,
            left: AtomicU64::new(need),
        };
        Ok((room.min(max), promise))
    }

    fn less(&self, dev: u64, n: u64) {
        let mut promised = self.promised();
        if let Some(p) = promised.get_mut(&dev) {
            *p = p.saturating_sub(n);
            if *p == 0 {
                promised.remove(&dev);
            }
        }
    }
}

/// The bytes one COPY will still write, kept in its [`Ledger`] until
/// they are on disk or the COPY ends.
#[derive(Debug)]
pub(crate) struct Promise {
    ledger: Arc<Ledger>,
    dev: u64,
    left: AtomicU64,
}

impl Promise {
    /// `n` bytes of the copy are done with (written, or failed).
    fn settle(&self, n: u64) {
        let before = self
            .left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| {
                Some(l.saturating_sub(n))
            })
            .unwrap_or(0);
        let settled = before.min(n);
        if settled > 0 {
            self.ledger.less(self.dev, settled);
        }
    }
}

impl Drop for Promise {
    fn drop(&mut self) {
        let left = *self.left.get_mut();
        if left > 0 {
            self.ledger.less(self.dev, left);
        }
    }
}

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
        let Ok(entries) = roots.entries(&fd, &real) else {
            continue;
        };
        for child in entries {
            let st = &child.stat;
            match child.file_type() {
                FileType::Directory => {
                    t.entries += 1;
                    todo.push(dir.join(child.os_name()));
                }
                FileType::RegularFile => {
                    t.entries += 1;
                    t.bytes = t.bytes.saturating_add(st.st_size.max(0) as u64);
                }
                FileType::Symlink => {
                    // Copied as its file when it leads to one inside;
                    // left out when it leads to a folder.
                    let Some(target) = roots.confined(&child.path) else {
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
    /// What the copy promised its destination's [`Ledger`], if anything.
    promise: Option<Promise>,
}

impl Budget {
    /// A budget of `entries` files and folders and `bytes` bytes.
    pub(crate) fn new(entries: u64, bytes: u64) -> Self {
        Self {
            entries: AtomicU64::new(entries),
            bytes: AtomicU64::new(bytes),
            promise: None,
        }
    }

    /// [`Budget::new`], with the copy's promise.
    pub(super) fn promised(entries: u64, bytes: u64, promise: Promise) -> Self {
        Self {
            promise: Some(promise),
            ..Self::new(entries, bytes)
        }
    }

    /// A file of `bytes` is copied (or failed): its bytes are no longer
    /// promised.
    pub(crate) fn settle(&self, bytes: u64) {
        if let Some(p) = &self.promise {
            p.settle(bytes);
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
            private: Vec::new(),
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

    const GIB: u64 = 1 << 30;

    #[test]
    fn copies_side_by_side_keep_the_reserve_together() {
        let ledger = Arc::new(Ledger::default());
        let disk = Space {
            dev: 1,
            free: 20 * GIB,
        };
        let max = 100 * GIB;
        // 20 free, 1 kept: 19 may be written, by one copy or by several.
        assert_eq!(
            ledger.promise(disk, 19 * GIB + 1, max, GIB).unwrap_err(),
            Short::Reserve {
                need: 19 * GIB + 1,
                free: 20 * GIB,
                reserve: GIB,
            }
        );
        let (room, first) = ledger.promise(disk, 10 * GIB, max, GIB).unwrap();
        assert_eq!(room, 19 * GIB);
        assert!(matches!(
            ledger.promise(disk, 10 * GIB, max, GIB),
            Err(Short::Reserve { free, .. }) if free == 10 * GIB
        ));
        // Another filesystem is its own.
        let other = Space { dev: 2, ..disk };
        assert!(ledger.promise(other, 19 * GIB, max, GIB).is_ok());
        // What the first wrote is in the free space now, not promised.
        first.settle(4 * GIB);
        let written = Space {
            free: 16 * GIB,
            ..disk
        };
        let (room, second) = ledger.promise(written, 9 * GIB, max, GIB).unwrap();
        assert_eq!(room, 9 * GIB);
        drop((first, second));
        assert!(ledger.promised().is_empty(), "all settled when done");
        // And one copy is at most `max`.
        assert_eq!(
            ledger.promise(disk, 3 * GIB, 2 * GIB, GIB).unwrap_err(),
            Short::Ceiling {
                need: 3 * GIB,
                max: 2 * GIB
            }
        );
        let (room, _p) = ledger.promise(disk, GIB, 2 * GIB, GIB).unwrap();
        assert_eq!(room, 2 * GIB, "a budget of at most max");
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
