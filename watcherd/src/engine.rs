//! The engine: one task that owns what watcherd knows and decides what to
//! announce. Its inputs are inotify events (through `notify`), the results
//! of walks (run on the blocking pool: the start-up scan, the polling
//! watchers, folders that appeared, rescans after a queue overflow) and
//! the API's commands.
//!
//! - A path that changed waits in the [`Debouncer`] until it has been
//!   quiet for `DEBOUNCE_MS` and a second `stat` agrees; a file whose mtime
//!   is older than that already (found by a walk, moved in with `mv`) is
//!   due at once.
//! - A known path that disappeared waits as long in [`Gone`]: if the same
//!   content (midhash) settles at another path meanwhile, the two are one
//!   `rename`; if not, it is a `delete`.
//! - Settled files are hashed on the blocking pool and sent to storaged in
//!   batches ([`Observation`]); storaged applies each with its record and
//!   its `file:events` entry in one transaction, and what it committed
//!   becomes what the engine knows. When storaged is away the engine waits
//!   and retries; events pile up meanwhile in the kernel's queue, and if it
//!   overflows, the rescan that follows finds everything.
//!
//! What is known is read back from storaged's `seen:` rows at start, so a
//! restart announces exactly what changed while watcherd was down.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use metacore::api::storaged::{
    FileState, MAX_OBSERVATIONS, Observation, ObserveBody, ObserveOutcome, ResetBody, SeenQuery,
    StoragedClient,
};
use metacore::checked::{FilePath, RelPath};
use metacore::cid::Cid;
use metacore::clock::unix_ms;
use metacore::error::ApiError;
use metacore::rid::Rid;
use metacore::shutdown::Shutdown;
use metacore::socket::client::ClientError;
use notify::EventKind;
use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use tokio::sync::{mpsc, oneshot};

use crate::debounce::{Debouncer, Seen, Settle};
use crate::scan;
use crate::tree::{MOUNTS_DIR, Tree};
use crate::watchers::{DEFAULT_INTERVAL_MS, MIN_INTERVAL_MS, Watchers};

/// Observations sent and what storaged did with each, in order.
type Sent = Vec<(Observation, ObserveOutcome)>;

/// A due file's second look: its `stat` now (`None`: gone) and, when that
/// is the `stat` it waited on, its midhash digest.
type Looked = (String, Option<Seen>, Option<[u8; 32]>);

/// Files hashed and sent to storaged per round.
const ROUND: usize = 512;

/// What the engine knows of a file it announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    pub seen: Seen,
    /// The midhash's SHA-256 digest (32 bytes, not the CID's 62 chars:
    /// this is kept for every file).
    pub midhash: [u8; 32],
    pub rid: Rid,
}

/// Every known file by its path relative to `FILES_PATH`; written by the
/// engine only, read by the API (file counts).
pub type KnownFiles = Arc<RwLock<BTreeMap<String, Known>>>;

/// Figures the API reads without asking the engine.
#[derive(Debug, Default)]
pub struct Stats {
    pub loaded: AtomicBool,
    pub pending: AtomicU64,
    pub gone: AtomicU64,
    pub watched_dirs: AtomicU64,
    pub polled_dirs: AtomicU64,
    pub limit_reached: AtomicBool,
    pub overflows: AtomicU64,
    pub announced: AtomicU64,
    pub refused: AtomicU64,
    pub store_waits: AtomicU64,
    /// Folders being walked now, and when each watcher root was last
    /// walked to the end (Unix ms).
    pub walking: Mutex<HashMap<PathBuf, usize>>,
    pub last_scan: Mutex<HashMap<PathBuf, u64>>,
}

/// What the engine is asked to do.
#[derive(Debug)]
pub enum Input {
    Fs(notify::Result<notify::Event>),
    Walked {
        scope: Scope,
        /// When the walk began: what happened at a path since is newer
        /// than what the walk saw of it.
        started: Instant,
        found: io::Result<BTreeMap<String, Seen>>,
    },
    /// Walk a folder now; reply with the number of files found.
    Scan {
        dir: PathBuf,
        reply: oneshot::Sender<Result<usize, ApiError>>,
    },
    /// Forget what was seen under `dirs`, start `file:events` over with a
    /// `reset` entry naming `watcher_id`, walk them again.
    Reset {
        dirs: Vec<PathBuf>,
        watcher_id: String,
        reply: oneshot::Sender<Result<usize, ApiError>>,
    },
}

/// What a walk covered.
#[derive(Debug, Clone)]
pub enum Scope {
    /// A folder and everything under it.
    Tree(PathBuf),
    /// One folder's own files (a folder polled because it is not watched).
    Dir(PathBuf),
}

/// Known paths that disappeared, waiting to become a delete or a rename.
/// Each keeps what was known of it when it went (the index entries are
/// removed with the same values, whatever `known` says by then), and the
/// time it was first missed: seeing it missing again does not restart its
/// wait.
#[derive(Debug, Default)]
struct Gone {
    since: BTreeMap<String, (Instant, [u8; 32], Seen)>,
    by_hash: HashMap<[u8; 32], BTreeSet<String>>,
    by_seen: HashMap<Seen, usize>,
}

impl Gone {
    fn insert(&mut self, path: &str, known: &Known, now: Instant) {
        if self.since.contains_key(path) {
            return;
        }
        self.since
            .insert(path.to_owned(), (now, known.midhash, known.seen));
        self.by_hash
            .entry(known.midhash)
            .or_default()
            .insert(path.to_owned());
        *self.by_seen.entry(known.seen).or_default() += 1;
    }

    fn remove(&mut self, path: &str) -> bool {
        let Some((_, midhash, seen)) = self.since.remove(path) else {
            return false;
        };
        if let Some(set) = self.by_hash.get_mut(&midhash) {
            set.remove(path);
            if set.is_empty() {
                self.by_hash.remove(&midhash);
            }
        }
        if let Some(n) = self.by_seen.get_mut(&seen) {
            *n -= 1;
            if *n == 0 {
                self.by_seen.remove(&seen);
            }
        }
        true
    }

    /// When `path` was first missed, if it is waiting.
    fn since(&self, path: &str) -> Option<Instant> {
        self.since.get(path).map(|(t, _, _)| *t)
    }

    /// A gone path whose content was `midhash` (the first in path order).
    fn matching(&self, midhash: &[u8; 32]) -> Option<String> {
        self.by_hash.get(midhash)?.iter().next().cloned()
    }

    fn has_seen(&self, seen: &Seen) -> bool {
        self.by_seen.contains_key(seen)
    }

    fn next_due(&self, quiet: Duration) -> Option<Instant> {
        self.since.values().map(|(t, _, _)| *t + quiet).min()
    }

    fn due(&self, now: Instant, quiet: Duration) -> Vec<String> {
        self.since
            .iter()
            .filter(|(_, (t, _, _))| now >= *t + quiet)
            .map(|(p, _)| p.clone())
            .collect()
    }
}

/// A walk under way.
#[derive(Debug, Default)]
struct Walk {
    waiters: Vec<oneshot::Sender<Result<usize, ApiError>>>,
    again: bool,
    watch: bool,
}

/// The engine's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub files: PathBuf,
    pub quiet: Duration,
    /// How often folders past the inotify limit are listed.
    pub poll_unwatched: Duration,
}

#[derive(Debug)]
pub struct Engine {
    settings: Settings,
    root: FilePath,
    store: StoragedClient,
    known: KnownFiles,
    debounce: Debouncer,
    gone: Gone,
    tree: Arc<Mutex<Tree>>,
    inputs: mpsc::Sender<Input>,
    watchers: Arc<Mutex<Watchers>>,
    next_poll: HashMap<String, Instant>,
    next_unwatched_poll: Instant,
    /// Folders gone whose watches the tree should drop (when it is free).
    forget: Vec<PathBuf>,
    /// Walks under way, by folder: who waits for each, and whether it
    /// must run again when it ends (asked again meanwhile).
    walks: HashMap<PathBuf, Walk>,
    /// Paths of the batch being committed, and those of them something
    /// happened to meanwhile (looked at again once it is applied).
    inflight_paths: HashSet<String>,
    dirty: BTreeSet<String>,
    /// The batch storaged is committing now.
    inflight: Option<tokio::task::JoinHandle<Option<Sent>>>,
    stats: Arc<Stats>,
    shutdown: Shutdown,
}

impl Engine {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        settings: Settings,
        store: StoragedClient,
        known: KnownFiles,
        tree: Arc<Mutex<Tree>>,
        inputs: mpsc::Sender<Input>,
        watchers: Arc<Mutex<Watchers>>,
        stats: Arc<Stats>,
        shutdown: Shutdown,
    ) -> Result<Self, ApiError> {
        let root = FilePath::new(settings.files.display().to_string())?;
        Ok(Self {
            debounce: Debouncer::new(settings.quiet),
            next_unwatched_poll: Instant::now() + settings.poll_unwatched,
            settings,
            root,
            store,
            known,
            gone: Gone::default(),
            tree,
            inputs,
            watchers,
            next_poll: HashMap::new(),
            forget: Vec::new(),
            walks: HashMap::new(),
            inflight_paths: HashSet::new(),
            dirty: BTreeSet::new(),
            inflight: None,
            stats,
            shutdown,
        })
    }

    /// Loads what is known, starts the first scan and runs until shutdown.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Input>) {
        if !self.load().await {
            return;
        }
        let files = self.settings.files.clone();
        self.walk(files, true, None);
        loop {
            self.publish_stats();
            let wake = self.next_wake();
            let inflight = async {
                match self.inflight.as_mut() {
                    Some(h) => Some(h.await),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = self.shutdown.wait() => return,
                input = rx.recv() => match input {
                    Some(input) => self.handle(input).await,
                    None => return,
                },
                done = inflight => {
                    self.inflight = None;
                    match done {
                        Some(Ok(Some(sent))) => self.apply(sent),
                        _ => return,
                    }
                }
                () = tokio::time::sleep_until(wake.into()) => {}
            }
            // Take whatever else is queued before settling: a burst of
            // events is one pass of the debouncer, not one per event.
            while let Ok(input) = rx.try_recv() {
                self.handle(input).await;
            }
            self.poll_watchers();
            self.settle_round().await;
        }
    }

    /// Reads the `seen:` rows; false when shutdown came first.
    async fn load(&mut self) -> bool {
        let mut map = BTreeMap::new();
        let mut after: Option<String> = None;
        loop {
            let q = SeenQuery {
                after: after.clone(),
                limit: Some(10_000),
            };
            let page = loop {
                match self.store.seen(&q).await {
                    Ok(p) => break p,
                    Err(e) => {
                        tracing::warn!("cannot read what was seen from storaged, retrying: {e}");
                        if !self.pause(Duration::from_millis(500)).await {
                            return false;
                        }
                    }
                }
            };
            for row in page.rows {
                map.insert(
                    row.path.to_string(),
                    Known {
                        seen: Seen {
                            size: row.file.size,
                            mtime_ns: row.file.mtime_ns,
                        },
                        midhash: digest_of(&row.file.midhash),
                        rid: row.rid,
                    },
                );
            }
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        tracing::info!(files = map.len(), "loaded what was announced before");
        *self.known.write().expect("known lock") = map;
        self.stats.loaded.store(true, Ordering::Relaxed);
        true
    }

    /// Sleeps unless shutdown comes first; false on shutdown.
    async fn pause(&self, d: Duration) -> bool {
        tokio::select! {
            () = self.shutdown.wait() => false,
            () = tokio::time::sleep(d) => true,
        }
    }

    /// Copies the figures the API shows. Never calls into notify (see
    /// [`Engine::covers`]): only counts, and only if no walk holds the tree.
    fn publish_stats(&mut self) {
        let s = &self.stats;
        s.pending
            .store(self.debounce.len() as u64, Ordering::Relaxed);
        s.gone
            .store(self.gone.since.len() as u64, Ordering::Relaxed);
        self.with_tree(|tree| {
            s.watched_dirs
                .store(tree.watched() as u64, Ordering::Relaxed);
            s.polled_dirs
                .store(tree.unwatched_count() as u64, Ordering::Relaxed);
            s.limit_reached.store(tree.limit_reached, Ordering::Relaxed);
        });
    }

    fn next_wake(&self) -> Instant {
        let mut wake = Instant::now() + Duration::from_secs(1);
        for t in [
            self.debounce.next_due(),
            self.gone.next_due(self.settings.quiet),
            self.next_poll.values().min().copied(),
        ]
        .into_iter()
        .flatten()
        {
            wake = wake.min(t);
        }
        wake
    }

    async fn handle(&mut self, input: Input) {
        match input {
            Input::Fs(Ok(event)) => self.on_event(event),
            Input::Fs(Err(e)) => {
                tracing::warn!("inotify: {e}");
            }
            Input::Walked {
                scope,
                started,
                found,
            } => self.on_walked(scope, started, found),
            Input::Scan { dir, reply } => self.walk(dir, false, Some(reply)),
            Input::Reset {
                dirs,
                watcher_id,
                reply,
            } => self.reset(dirs, watcher_id, reply).await,
        }
    }

    /// Inside `FILES_PATH`, outside the mounts folder (what inotify
    /// watches). Never takes the tree's lock: a walk holding it may be
    /// waiting on notify's thread, which may be waiting on this engine to
    /// take its events.
    fn covers(&self, path: &Path) -> bool {
        path.starts_with(&self.settings.files)
            && !path.starts_with(self.settings.files.join(MOUNTS_DIR))
    }

    /// Runs `f` on the tree if no walk holds it now (see [`Engine::covers`]).
    fn with_tree<T>(&self, f: impl FnOnce(&mut Tree) -> T) -> Option<T> {
        match self.tree.try_lock() {
            Ok(mut t) => Some(f(&mut t)),
            Err(_) => None,
        }
    }

    fn rel(&self, path: &Path) -> Option<String> {
        scan::relative(path, &self.settings.files).filter(|r| !r.is_empty())
    }

    fn on_event(&mut self, event: notify::Event) {
        if event.need_rescan() {
            self.stats.overflows.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("inotify queue overflowed: rescanning the whole tree");
            let files = self.settings.files.clone();
            self.walk_again(files);
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

    fn on_present(&mut self, path: &Path) {
        if !self.covers(path) {
            return;
        }
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            self.on_absent(path);
            return;
        };
        if meta.is_dir() {
            // A folder made or moved in: watch it, then walk it.
            self.walk_again(path.to_owned());
        } else if meta.is_file()
            && !hidden(path)
            && let Some(rel) = self.rel(path)
        {
            self.touch(rel, scan::seen_of(&meta));
        }
    }

    fn on_absent(&mut self, path: &Path) {
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
        self.forget.push(path.to_owned());
        self.mark_gone(&rel);
        // A folder: everything known under it.
        let prefix = format!("{rel}/");
        let under: Vec<String> = self
            .known
            .read()
            .expect("known lock")
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .map(|(p, _)| p.clone())
            .collect();
        for p in under {
            self.mark_gone(&p);
        }
    }

    /// Something happened at a file that `stat`s as `seen`.
    fn touch(&mut self, rel: String, seen: Seen) {
        if self.inflight_paths.contains(&rel) {
            self.dirty.insert(rel.clone());
        }
        self.gone.remove(&rel);
        let same = self
            .known
            .read()
            .expect("known lock")
            .get(&rel)
            .is_some_and(|k| k.seen == seen);
        if same {
            self.debounce.forget(&rel);
            return;
        }
        let mtime_ms = u64::try_from(seen.mtime_ns / 1_000_000).unwrap_or(0);
        let quiet_already =
            unix_ms().saturating_sub(mtime_ms) >= self.settings.quiet.as_millis() as u64;
        let due_now = quiet_already || self.gone.has_seen(&seen);
        self.debounce
            .touch_owned(rel, seen, Instant::now(), due_now);
    }

    fn mark_gone(&mut self, rel: &str) {
        if self.inflight_paths.contains(rel) {
            self.dirty.insert(rel.to_owned());
        }
        self.debounce.forget(rel);
        let known = self.known.read().expect("known lock").get(rel).cloned();
        if let Some(k) = known {
            self.gone.insert(rel, &k, Instant::now());
        }
    }

    /// A walk that must see what happened since it was asked for (a
    /// folder that appeared, a queue overflow): if one of the folder is
    /// under way, it runs again when that one ends.
    fn walk_again(&mut self, dir: PathBuf) {
        if let Some(w) = self.walks.get_mut(&dir) {
            w.again = true;
            w.watch = true;
            return;
        }
        self.walk(dir, true, None);
    }

    /// Walks a folder's tree on the blocking pool (after watching its
    /// folders when `watch`); the result comes back as [`Input::Walked`].
    /// One walk of a folder at a time: asked again meanwhile, the asker
    /// waits for the one under way.
    fn walk(
        &mut self,
        dir: PathBuf,
        watch: bool,
        done: Option<oneshot::Sender<Result<usize, ApiError>>>,
    ) {
        if let Some(w) = self.walks.get_mut(&dir) {
            w.waiters.extend(done);
            return;
        }
        let mut w = Walk::default();
        w.waiters.extend(done);
        self.walks.insert(dir.clone(), w);
        self.stats
            .walking
            .lock()
            .expect("walking lock")
            .insert(dir.clone(), 1);
        let tree = self.tree.clone();
        let files = self.settings.files.clone();
        let inputs = self.inputs.clone();
        let started = Instant::now();
        tokio::task::spawn_blocking(move || {
            let skip = files.join(MOUNTS_DIR);
            if watch {
                tree.lock().expect("tree lock").watch_all(&dir);
            }
            let skip = (!dir.starts_with(&skip)).then_some(skip);
            let found = scan::walk(&dir, &files, skip.as_deref());
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
    fn list_unwatched(&mut self) {
        let forget = std::mem::take(&mut self.forget);
        let tree = self.tree.clone();
        let files = self.settings.files.clone();
        let inputs = self.inputs.clone();
        tokio::task::spawn_blocking(move || {
            let dirs: Vec<PathBuf> = {
                let mut tree = tree.lock().expect("tree lock");
                for d in &forget {
                    tree.forget(d);
                }
                tree.retry_unwatched();
                tree.unwatched().cloned().collect()
            };
            for d in dirs {
                let started = Instant::now();
                let found = scan::list(&d, &files);
                // A folder made inside a polled one is polled too.
                if let Ok(entries) = std::fs::read_dir(&d) {
                    let mut tree = tree.lock().expect("tree lock");
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
        self.debounce.touched_at(rel).is_some_and(|t| t > started)
            || self.gone.since(rel).is_some_and(|t| t > started)
    }

    fn on_walked(
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
            self.stats
                .walking
                .lock()
                .expect("walking lock")
                .remove(&dir);
            self.walks.remove(&dir).unwrap_or_default()
        };
        let found = match found {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), "cannot walk: {e}");
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
            let known = self.known.read().expect("known lock");
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
            self.stats
                .last_scan
                .lock()
                .expect("scan lock")
                .insert(dir.clone(), unix_ms());
        }
        for done in walk.waiters {
            let _ = done.send(Ok(count));
        }
        if walk.again {
            self.walk(dir, walk.watch, None);
        }
    }

    /// Starts the walks of the polling watchers that are due, and the
    /// listing of folders past the inotify limit.
    fn poll_watchers(&mut self) {
        let now = Instant::now();
        let configs: Vec<(String, PathBuf, Duration)> = self
            .watchers
            .lock()
            .expect("watchers lock")
            .list()
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
        self.next_poll
            .retain(|id, _| configs.iter().any(|(i, _, _)| i == id));
        for (id, path, every) in configs {
            let due = self.next_poll.entry(id).or_insert(now + every);
            if now >= *due {
                *due = now + every;
                self.walk(path, false, None);
            }
        }
        if now >= self.next_unwatched_poll {
            self.next_unwatched_poll = now + self.settings.poll_unwatched;
            self.list_unwatched();
        }
    }

    /// Settles one round of what is due: hash, pair renames, and send,
    /// while the round before is still being committed (hashing this one
    /// overlaps storaged's work on that one). One round a turn of the
    /// loop, so events are taken between rounds of a long backlog.
    async fn settle_round(&mut self) {
        {
            let now = Instant::now();
            // The second look is the hashing thread's fstat of the open
            // file: no stat here, on the engine's task.
            let due = self.debounce.due(now, ROUND);
            // A backlog of due files may hold the new paths of files that
            // vanished: they pair into renames before the old paths can
            // become deletes.
            let backlog = due.len() == ROUND;
            let looked = self.hash(due).await;
            let mut hashed = Vec::with_capacity(looked.len());
            for (rel, now_seen, digest) in looked {
                if let Settle::Settled(seen) = self.debounce.settle(&rel, now_seen, now) {
                    let unchanged = self
                        .known
                        .read()
                        .expect("known lock")
                        .get(&rel)
                        .is_some_and(|k| k.seen == seen);
                    if let (false, Some(digest)) = (unchanged, digest) {
                        hashed.push((rel, seen, digest));
                    }
                }
            }
            let mut gone_due = if backlog {
                Vec::new()
            } else {
                self.gone.due(now, self.settings.quiet)
            };
            gone_due.truncate(ROUND);
            if hashed.is_empty() && gone_due.is_empty() {
                return;
            }
            let mut observations = Vec::with_capacity(hashed.len() + gone_due.len());
            for (rel, seen, midhash) in hashed {
                let Ok(path) = RelPath::new(rel.clone()) else {
                    continue;
                };
                let file = FileState {
                    size: seen.size,
                    mtime_ns: seen.mtime_ns,
                    midhash: Cid::midhash256(&midhash),
                };
                let is_known = self.known.read().expect("known lock").contains_key(&rel);
                let from = if is_known {
                    None
                } else {
                    self.gone.matching(&midhash)
                };
                match from {
                    Some(from) => {
                        self.gone.remove(&from);
                        match RelPath::new(from) {
                            Ok(from) => observations.push(Observation::Moved { from, path, file }),
                            Err(_) => observations.push(Observation::Present { path, file }),
                        }
                    }
                    None => observations.push(Observation::Present { path, file }),
                }
            }
            for rel in gone_due {
                if !self.gone.remove(&rel) {
                    continue; // taken by a rename just now
                }
                let abs = self.settings.files.join(&rel);
                if abs.exists() {
                    self.on_present(&abs);
                } else if let Ok(path) = RelPath::new(rel) {
                    observations.push(Observation::Gone { path });
                }
            }
            if observations.is_empty() {
                return;
            }
            if !self.finish_inflight().await {
                return;
            }
            let sender = Sender {
                store: self.store.clone(),
                root: self.root.clone(),
                stats: self.stats.clone(),
                shutdown: self.shutdown.clone(),
            };
            self.inflight_paths = observations
                .iter()
                .flat_map(|o| match o {
                    Observation::Moved { from, path, .. } => {
                        vec![from.to_string(), path.to_string()]
                    }
                    other => vec![other.path().to_string()],
                })
                .collect();
            self.inflight = Some(tokio::spawn(sender.send(observations)));
        }
    }

    /// Waits for the batch being committed, if any, and makes what it
    /// committed known. False on shutdown.
    async fn finish_inflight(&mut self) -> bool {
        match self.inflight.take() {
            None => true,
            Some(h) => match h.await {
                Ok(Some(sent)) => {
                    self.apply(sent);
                    true
                }
                _ => false,
            },
        }
    }

    /// The second look at each due file and its midhash, on the blocking
    /// pool: open it, `fstat` the open file, and hash it only when the
    /// `stat` is the one it waited on (`None`: gone or unreadable).
    async fn hash(&self, due: Vec<(String, Seen)>) -> Vec<Looked> {
        if due.is_empty() {
            return Vec::new();
        }
        let root = self.settings.files.clone();
        tokio::task::spawn_blocking(move || {
            due.into_iter()
                .map(|(rel, waited)| {
                    let Ok(f) = std::fs::File::open(root.join(&rel)) else {
                        return (rel, None, None);
                    };
                    let now = f
                        .metadata()
                        .ok()
                        .filter(|m| m.is_file())
                        .map(|m| scan::seen_of(&m));
                    let Some(now) = now else {
                        return (rel, None, None);
                    };
                    if now != waited {
                        return (rel, Some(now), None);
                    }
                    match crate::midhash::digest_of_file(&f, now.size) {
                        Ok(d) => (rel, Some(now), Some(d)),
                        Err(e) => {
                            tracing::debug!(path = %rel, "not hashed: {e}");
                            (rel, None, None)
                        }
                    }
                })
                .collect()
        })
        .await
        .unwrap_or_default()
    }

    /// What storaged committed becomes known. A path something happened
    /// to while its observation was on the way is looked at again, now
    /// against what is known.
    fn apply(&mut self, sent: Sent) {
        self.apply_outcomes(sent);
        self.inflight_paths.clear();
        for rel in std::mem::take(&mut self.dirty) {
            let abs = self.settings.files.join(&rel);
            match std::fs::symlink_metadata(&abs) {
                Ok(m) if m.is_file() => self.touch(rel, scan::seen_of(&m)),
                _ => self.mark_gone(&rel),
            }
        }
    }

    fn apply_outcomes(&mut self, sent: Sent) {
        let mut known = self.known.write().expect("known lock");
        for (o, out) in sent {
            if let Some(e) = out.error {
                self.stats.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(path = %o.path(), "storaged refused an observation: {e}");
                continue;
            }
            if out.event.is_some() {
                self.stats.announced.fetch_add(1, Ordering::Relaxed);
            }
            match (o, out.rid) {
                (Observation::Present { path, file }, Some(rid)) => {
                    known.insert(path.into(), known_of(&file, rid));
                }
                (Observation::Moved { from, path, file }, Some(rid)) => {
                    known.remove(from.as_str());
                    known.insert(path.into(), known_of(&file, rid));
                }
                (Observation::Gone { path }, _) => {
                    known.remove(path.as_str());
                }
                _ => {}
            }
        }
    }

    async fn reset(
        &mut self,
        dirs: Vec<PathBuf>,
        watcher_id: String,
        reply: oneshot::Sender<Result<usize, ApiError>>,
    ) {
        // FILES_PATH itself is "" (everything); a folder outside it (a
        // hand-edited watchers.json) is refused, never taken for it.
        let mut rels = Vec::with_capacity(dirs.len());
        for d in &dirs {
            match self.rel(d) {
                Some(r) => rels.push(r),
                None if *d == self.settings.files => rels.push(String::new()),
                None => {
                    let _ = reply.send(Err(ApiError::bad_request(
                        "the watcher's folder is not under FILES_PATH",
                    )));
                    return;
                }
            }
        }
        let body = ResetBody {
            dirs: rels.clone(),
            watcher_id,
        };
        // What is being committed lands before the reset, not after it.
        if !self.finish_inflight().await {
            return;
        }
        if let Err(e) = self.store.reset_files(&body).await {
            let _ = reply.send(Err(e.into()));
            return;
        }
        // What vanished under the reset folders is forgotten with them; a
        // delete pending elsewhere still comes.
        let gone: Vec<String> = self
            .gone
            .since
            .keys()
            .filter(|p| {
                rels.iter()
                    .any(|r| r.is_empty() || RelPath::new(p.as_str()).is_ok_and(|p| p.is_under(r)))
            })
            .cloned()
            .collect();
        for p in gone {
            self.gone.remove(&p);
        }
        {
            let mut known = self.known.write().expect("known lock");
            known.retain(|p, _| {
                !rels.iter().any(|r| {
                    r.is_empty()
                        || p.strip_prefix(r.as_str())
                            .is_some_and(|x| x.starts_with('/'))
                })
            });
        }
        // Walk each again; the reply sums what they found.
        let mut waits = Vec::new();
        for d in dirs {
            let (tx, rx) = oneshot::channel();
            self.walk(d, false, Some(tx));
            waits.push(rx);
        }
        tokio::spawn(async move {
            let mut total = 0;
            for w in waits {
                match w.await {
                    Ok(Ok(n)) => total += n,
                    Ok(Err(e)) => {
                        let _ = reply.send(Err(e));
                        return;
                    }
                    Err(_) => {}
                }
            }
            let _ = reply.send(Ok(total));
        });
    }
}

/// Sends a batch to storaged off the engine's task, waiting while storaged
/// is away (the engine goes on taking events meanwhile).
struct Sender {
    store: StoragedClient,
    root: FilePath,
    stats: Arc<Stats>,
    shutdown: Shutdown,
}

impl Sender {
    /// Each observation with what storaged did with it; `None` on shutdown.
    async fn send(self, observations: Vec<Observation>) -> Option<Sent> {
        let mut out = Vec::with_capacity(observations.len());
        for chunk in observations.chunks(MAX_OBSERVATIONS) {
            let body = ObserveBody {
                root: self.root.clone(),
                observations: chunk.to_vec(),
            };
            let mut wait = Duration::from_millis(50);
            let outcomes = loop {
                match self.store.observe(&body).await {
                    Ok(o) => break o.outcomes,
                    // Refused as a whole: sending it again will not help.
                    // Each observation is reported refused; the files are
                    // looked at again by the next walk of their folder.
                    Err(ClientError::Api(e)) if e.code.status().is_client_error() => {
                        tracing::error!("storaged refused a batch of observations: {e}");
                        let refused = ObserveOutcome {
                            error: Some(e.to_string()),
                            ..ObserveOutcome::default()
                        };
                        break vec![refused; body.observations.len()];
                    }
                    Err(e) => {
                        self.stats.store_waits.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!("storaged did not take the observations, retrying: {e}");
                        tokio::select! {
                            () = self.shutdown.wait() => return None,
                            () = tokio::time::sleep(wait) => {}
                        }
                        wait = (wait * 2).min(Duration::from_secs(5));
                    }
                }
            };
            out.extend(body.observations.into_iter().zip(outcomes));
        }
        Some(out)
    }
}

fn known_of(file: &FileState, rid: Rid) -> Known {
    Known {
        seen: Seen {
            size: file.size,
            mtime_ns: file.mtime_ns,
        },
        midhash: digest_of(&file.midhash),
        rid,
    }
}

/// The digest of a midhash CID (any other CID gives one no file matches).
fn digest_of(cid: &Cid) -> [u8; 32] {
    cid.digest().try_into().unwrap_or([0; 32])
}

fn hidden(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
}

/// Whether a relative path lies under the mounts folder.
fn in_mounts(rel: &str) -> bool {
    rel == MOUNTS_DIR || rel.starts_with(&format!("{MOUNTS_DIR}/"))
}
