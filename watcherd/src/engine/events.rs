//! inotify events: what a created, written, moved or removed path means
//! for what is known, pending and gone.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use metacore::clock::unix_ms;
use notify::EventKind;
use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};

use super::{Engine, hidden};
use crate::debounce::Seen;
use crate::scan;

impl Engine {
    pub(super) fn on_event(&mut self, event: notify::Event) {
        if event.need_rescan() {
            self.links.stats.overflows.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("inotify queue overflowed: rescanning the whole tree");
            let files = self.settings.files.clone();
            self.walk_again(files, true);
            return;
        }
        match event.kind {
            // Our own reads (hashing) and other readers: nothing changed.
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
            EventKind::Access(_) => return,
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => return,
            _ => {}
        }
        let gone = matches!(
            event.kind,
            EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(RenameMode::From))
        );
        for path in &event.paths {
            if gone {
                self.on_absent(path);
            } else {
                self.on_present(path);
            }
        }
    }

    pub(super) fn on_present(&mut self, path: &Path) {
        if !self.covers(path) {
            return;
        }
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            self.on_absent(path);
            return;
        };
        let announceable = meta.is_dir() || (meta.is_file() && !hidden(path));
        if !announceable {
            return;
        }
        if scan::relative(path, &self.settings.files).is_none() {
            // A name that is not UTF-8: never watched nor announced.
            self.links.stats.names.refuse(path);
            return;
        }
        if meta.is_dir() {
            // A folder made or moved in: watch it, then walk it.
            self.walk_again(path.to_owned(), false);
        } else if let Some(rel) = self.rel(path) {
            self.touch(rel, scan::seen_of(&meta));
        }
    }

    pub(super) fn on_absent(&mut self, path: &Path) {
        if path.exists() {
            // Replaced at once (an editor's save, a move over it).
            if std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_dir()) {
                self.on_present(path);
            }
            return;
        }
        let Some(rel) = self.rel(path) else {
            return;
        };
        self.walks.forget.push(path.to_owned());
        self.mark_gone(&rel);
        // A folder: everything known under it.
        let prefix = format!("{rel}/");
        let under: Vec<String> = self
            .knows
            .known
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .map(|(p, _)| p.clone())
            .collect();
        for p in under {
            self.mark_gone(&p);
        }
    }

    /// Something happened at a file that `stat`s as `seen`.
    pub(super) fn touch(&mut self, rel: String, seen: Seen) {
        if self.batch.paths.contains(&rel) {
            self.batch.dirty.insert(rel.clone());
        }
        self.knows.gone.remove(&rel);
        let same = self.knows.known.get(&rel).is_some_and(|k| k.seen == seen);
        if same {
            self.knows.debounce.forget(&rel);
            return;
        }
        let mtime_ms = u64::try_from(seen.mtime_ns / 1_000_000).unwrap_or(0);
        let quiet_already =
            unix_ms().saturating_sub(mtime_ms) >= self.settings.quiet.as_millis() as u64;
        let due_now = quiet_already || self.knows.gone.has_seen(&seen);
        self.knows
            .debounce
            .touch_owned(rel, seen, Instant::now(), due_now);
    }

    pub(super) fn mark_gone(&mut self, rel: &str) {
        if self.batch.paths.contains(rel) {
            self.batch.dirty.insert(rel.to_owned());
        }
        self.knows.debounce.forget(rel);
        let known = self.knows.known.get(rel).cloned();
        if let Some(k) = known {
            self.knows.gone.insert(rel, &k, Instant::now());
        }
    }
}
