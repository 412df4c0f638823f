//! The inotify side: one watch per folder of `FILES_PATH` (through
//! `notify`, each folder non-recursive, so we know every watch we hold),
//! up to the kernel's `max_user_watches`. Folders past the limit are kept
//! in a list the engine polls instead, and `/status` shows both.
//!
//! Folders are watched before they are walked, so a file written while a
//! folder is being set up is seen by the walk or by the watch, never by
//! neither. What [`Excluded`] leaves alone is not watched: `FILES_PATH/corn`
//! (the rclone mounts, left to the polling watchers and to mount scans) and
//! meta-core's own folders nested in `FILES_PATH`. A folder whose name is
//! not UTF-8 is not watched (the walks refuse it and say so:
//! `crate::names`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use notify::{ErrorKind, RecursiveMode, Watcher};

use crate::exclude::Excluded;

/// Where the kernel says how many watches a user may hold.
const MAX_USER_WATCHES: &str = "/proc/sys/fs/inotify/max_user_watches";

/// The kernel's per-user watch limit, when it can be read.
pub fn max_user_watches() -> Option<u64> {
    std::fs::read_to_string(MAX_USER_WATCHES)
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The folders watched and those left to polling.
#[derive(Debug)]
pub struct Tree {
    watcher: notify::RecommendedWatcher,
    root: PathBuf,
    excluded: Excluded,
    watched: BTreeSet<PathBuf>,
    /// Folders that could not be watched (the limit was reached).
    unwatched: BTreeSet<PathBuf>,
    /// Our own cap on watches (`META_CORE_WATCH_MAX_DIRS`), under the
    /// kernel's.
    max: Option<usize>,
    /// The limit was met at least once.
    pub limit_reached: bool,
    /// The operator was told (once until every folder is watched again).
    warned: bool,
}

impl Tree {
    /// `max`: most folders to watch (`None`: as many as the kernel allows);
    /// `excluded`: the folders never watched.
    pub fn new(
        watcher: notify::RecommendedWatcher,
        root: &Path,
        excluded: Excluded,
        max: Option<usize>,
    ) -> Self {
        Self {
            max,
            watcher,
            root: root.to_owned(),
            excluded,
            watched: BTreeSet::new(),
            unwatched: BTreeSet::new(),
            limit_reached: false,
            warned: false,
        }
    }

    /// Whether events and walks of `path` are the tree's (inside
    /// `FILES_PATH`, outside what [`Excluded`] leaves alone).
    pub fn covers(&self, path: &Path) -> bool {
        self.excluded.covers(path)
    }

    /// Whether `dir` is watched or polled already.
    pub fn knows(&self, dir: &Path) -> bool {
        self.watched.contains(dir) || self.unwatched.contains(dir)
    }

    pub fn watched(&self) -> usize {
        self.watched.len()
    }

    pub fn unwatched(&self) -> impl Iterator<Item = &PathBuf> {
        self.unwatched.iter()
    }

    pub fn unwatched_count(&self) -> usize {
        self.unwatched.len()
    }

    /// Watches `dir` and every folder under it (symlinks not followed),
    /// but those whose path under `FILES_PATH` is not UTF-8.
    /// Past the limit, the rest are listed for polling. `dir` itself is
    /// watched again even if it was (a folder made where one was removed
    /// has the old one's name, not its watch). Returns the folders newly
    /// watched.
    pub fn watch_all(&mut self, dir: &Path) -> usize {
        let mut added = 0;
        self.watched.remove(dir);
        let mut stack = vec![dir.to_owned()];
        while let Some(d) = stack.pop() {
            if !self.covers(&d) || crate::scan::relative(&d, &self.root).is_none() {
                continue;
            }
            if self.watch_one(&d) {
                added += 1;
            }
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
        }
        added
    }

    fn watch_one(&mut self, dir: &Path) -> bool {
        if self.watched.contains(dir) {
            return false;
        }
        if self.limit_reached || self.max.is_some_and(|m| self.watched.len() >= m) {
            if !self.warned {
                self.warned = true;
                tracing::warn!(
                    watched = self.watched.len(),
                    "META_CORE_WATCH_MAX_DIRS reached: the folders left are polled instead"
                );
            }
            self.limit_reached = true;
            self.unwatched.insert(dir.to_owned());
            return false;
        }
        match self.watcher.watch(dir, RecursiveMode::NonRecursive) {
            Ok(()) => {
                self.unwatched.remove(dir);
                self.watched.insert(dir.to_owned());
                true
            }
            Err(e) if matches!(e.kind, ErrorKind::MaxFilesWatch) => {
                if !std::mem::replace(&mut self.warned, true) {
                    tracing::warn!(
                    watched = self.watched.len(),
                    limit = ?max_user_watches(),
                    "inotify watch limit reached (fs.inotify.max_user_watches): \
                     the folders left are polled instead"
                    );
                }
                self.limit_reached = true;
                self.unwatched.insert(dir.to_owned());
                false
            }
            // Gone meanwhile, or unreadable: nothing to watch.
            Err(_) => false,
        }
    }

    /// A folder went away (deleted, or moved out): its watches and those
    /// under it are dropped (the kernel dropped them already).
    /// A folder there again (made anew since) is left to `watch_all`.
    pub fn forget(&mut self, dir: &Path) {
        if dir.is_dir() {
            return;
        }
        let under = |set: &BTreeSet<PathBuf>| -> Vec<PathBuf> {
            set.range(dir.to_owned()..)
                .take_while(|p| p.starts_with(dir))
                .cloned()
                .collect()
        };
        for p in under(&self.watched) {
            let _ = self.watcher.unwatch(&p);
            self.watched.remove(&p);
        }
        for p in under(&self.unwatched) {
            self.unwatched.remove(&p);
        }
    }

    /// After a limit was met, tries again to watch the polled folders
    /// (watches may have been freed since).
    pub fn retry_unwatched(&mut self) {
        if self.unwatched.is_empty() {
            self.warned = false;
            return;
        }
        if self.max.is_some_and(|m| self.watched.len() >= m) {
            return; // our own cap: no watch was freed for us
        }
        self.limit_reached = false;
        let dirs: Vec<PathBuf> = self.unwatched.iter().cloned().collect();
        for d in dirs {
            if d.is_dir() {
                self.watch_one(&d);
            } else {
                self.unwatched.remove(&d);
            }
        }
    }
}
