//! Walks: the start-up scan, the polling watchers, folders that appeared,
//! rescans after an overflow, API scans, and the listing of folders past
//! the inotify limit; and how their results meet what events said since.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use metacore::clock::unix_ms;
use metacore::error::ApiError;
use metacore::sync::Locked;
use tokio::sync::oneshot;

use super::{Engine, Input, Scope, in_mounts};
use crate::debounce::Seen;
use crate::scan;
use crate::watchers::{DEFAULT_INTERVAL_MS, MIN_INTERVAL_MS};

/// A walk under way.
#[derive(Debug, Default)]
pub(super) struct Walk {
    pub(super) waiters: Vec<oneshot::Sender<Result<usize, ApiError>>>,
    pub(super) again: bool,
    pub(super) watch: bool,
    /// A rescan: a repair is due once what it found is committed.
    pub(super) repair: bool,
}

impl Engine {
    /// A walk that must see what happened since it was asked for (a
    /// folder that appeared, a queue overflow): if one of the folder is
    /// under way, it runs again when that one ends.
    pub(super) fn walk_again(&mut self, dir: PathBuf, repair: bool) {
        if let Some(w) = self.walks.under_way.get_mut(&dir) {
            w.again = true;
            w.watch = true;
            w.repair |= repair;
            return;
        }
        self.walk(dir, true, repair, None);
    }

    /// Walks a folder's tree on the blocking pool (after watching its
    /// folders when `watch`); the result comes back as [`Input::Walked`].
    /// One walk of a folder at a time: asked again meanwhile, the asker
    /// waits for the one under way. A rescan (`repair`) asks for a repair
    /// once it is taken in.
    pub(super) fn walk(
        &mut self,
        dir: PathBuf,
        watch: bool,
        repair: bool,
        done: Option<oneshot::Sender<Result<usize, ApiError>>>,
    ) {
        if let Some(w) = self.walks.under_way.get_mut(&dir) {
            w.waiters.extend(done);
            w.repair |= repair;
            return;
        }
        if repair {
            self.links.stats.rescans.fetch_add(1, Ordering::Relaxed);
        }
        let mut w = Walk {
            repair,
            ..Walk::default()
        };
        w.waiters.extend(done);
        self.walks.under_way.insert(dir.clone(), w);
        let tree = self.links.tree.clone();
        let files = self.settings.files.clone();
        let skip = self.settings.excluded.skipped_by_walk_of(&dir);
        let inputs = self.links.inputs.clone();
        let stats = self.links.stats.clone();
        let started = Instant::now();
        tokio::task::spawn_blocking(move || {
            if watch {
                tree.locked().watch_all(&dir);
            }
            let found = scan::walk(&dir, &files, &skip, &stats.names);
            let _ = inputs.blocking_send(Input::Walked {
                scope: Scope::Tree(dir),
                started,
                found,
            });
        });
    }

    /// Lists the folders past the inotify limit, in one task on the
    /// blocking pool, after the tree's upkeep: the watches of folders gone
    /// are dropped and those refused before are tried again (all calls into
    /// notify, so never on the engine's task).
    pub(super) fn list_unwatched(&mut self) {
        let forget = std::mem::take(&mut self.walks.forget);
        let tree = self.links.tree.clone();
        let files = self.settings.files.clone();
        let inputs = self.links.inputs.clone();
        let stats = self.links.stats.clone();
        tokio::task::spawn_blocking(move || {
            let dirs: Vec<PathBuf> = {
                let mut tree = tree.locked();
                for d in &forget {
                    tree.forget(d);
                }
                tree.retry_unwatched();
                tree.unwatched().cloned().collect()
            };
            for d in dirs {
                let started = Instant::now();
                let found = scan::list(&d, &files, &stats.names);
                // A folder made inside a polled one is polled too.
                if let Ok(entries) = std::fs::read_dir(&d) {
                    let mut tree = tree.locked();
                    for e in entries.flatten() {
                        if e.file_type().is_ok_and(|t| t.is_dir()) && !tree.knows(&e.path()) {
                            tree.watch_all(&e.path());
                        }
                    }
                }
                let walked = Input::Walked {
                    scope: Scope::Dir(d),
                    started,
                    found,
                };
                if inputs.blocking_send(walked).is_err() {
                    return;
                }
            }
        });
    }

    /// Whether what a walk begun at `started` saw of `rel` is older than
    /// what happened to it since (an event touched or missed it).
    fn newer_than(&self, rel: &str, started: Instant) -> bool {
        self.knows
            .debounce
            .touched_at(rel)
            .is_some_and(|t| t > started)
            || self.knows.gone.since(rel).is_some_and(|t| t > started)
    }

    pub(super) fn on_walked(
        &mut self,
        scope: Scope,
        started: Instant,
        found: io::Result<BTreeMap<String, Seen>>,
    ) {
        let (dir, one_level) = match &scope {
            Scope::Tree(d) => (d.clone(), false),
            Scope::Dir(d) => (d.clone(), true),
        };
        let walk = if one_level {
            Walk::default()
        } else {
            self.walks.under_way.remove(&dir).unwrap_or_default()
        };
        let found = match found {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), "cannot walk: {e}");
                self.publish();
                for done in walk.waiters {
                    let _ = done.send(Err(ApiError::bad_request(
                        "cannot scan the watcher's folder (is it still there?)",
                    )));
                }
                return;
            }
        };
        let prefix = match self.rel(&dir) {
            Some(r) => format!("{r}/"),
            None => String::new(),
        };
        // Removals first, so a file moved within the scope pairs up; then
        // the found paths, moved (not copied) into the debouncer.
        let removed: Vec<String> = {
            let known = &self.knows.known;
            known
                .range(prefix.clone()..)
                .take_while(|(p, _)| p.starts_with(&prefix))
                .filter(|(p, _)| !one_level || !p[prefix.len()..].contains('/'))
                .filter(|(p, _)| !in_mounts(p) || in_mounts(&prefix))
                .filter(|(p, _)| !found.contains_key(*p))
                .map(|(p, _)| p.clone())
                .collect()
        };
        // What happened at a path after the walk began is newer than what
        // the walk saw: it is left as the events made it.
        for p in removed {
            if !self.newer_than(&p, started) {
                self.mark_gone(&p);
            }
        }
        let count = found.len();
        for (path, seen) in found {
            if !self.newer_than(&path, started) {
                self.touch(path, seen);
            }
        }
        if !one_level {
            self.walks.last_scan.insert(dir.clone(), unix_ms());
        }
        // Published before the replies: who was told the walk is done
        // sees it done.
        self.publish();
        if walk.repair {
            self.request_repair();
        }
        for done in walk.waiters {
            let _ = done.send(Ok(count));
        }
        if walk.again {
            self.walk(dir, walk.watch, walk.repair, None);
        }
    }

    /// Starts the walks of the polling watchers that are due, and the
    /// listing of folders past the inotify limit.
    pub(super) fn poll_watchers(&mut self) {
        let now = Instant::now();
        let configs: Vec<(String, PathBuf, Duration)> = self
            .walks
            .watchers
            .iter()
            .filter(|c| c.enabled && Path::new(&c.path).starts_with(&self.settings.files))
            .map(|c| {
                // As the original: under the minimum (a hand-edited file),
                // the default.
                let ms = if c.interval_ms < MIN_INTERVAL_MS {
                    DEFAULT_INTERVAL_MS
                } else {
                    c.interval_ms
                };
                (
                    c.id.clone(),
                    PathBuf::from(&c.path),
                    Duration::from_millis(ms),
                )
            })
            .collect();
        self.walks
            .next_poll
            .retain(|id, _| configs.iter().any(|(i, _, _)| i == id));
        for (id, path, every) in configs {
            let due = self.walks.next_poll.entry(id).or_insert(now + every);
            if now >= *due {
                *due = now + every;
                self.walk(path, false, false, None);
            }
        }
        if now >= self.walks.next_unwatched_poll {
            self.walks.next_unwatched_poll = now + self.settings.poll_unwatched;
            self.list_unwatched();
        }
    }
}
