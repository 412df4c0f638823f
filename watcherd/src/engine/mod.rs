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
//!
//! A rescan (the start-up walk, an API scan, a queue overflow's) asks for
//! a [`repair`] of the records whose `filePath` names no live file; it runs
//! once what the rescan found is committed (the watcher has settled, or,
//! on a tree that never does, 2 × `DEBOUNCE_MS` later once nothing is due).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::{Duration, Instant};

use metacore::api::storaged::{FileState, Observation, ObserveOutcome, SeenQuery, StoragedClient};
use metacore::api::watcherd::WatcherConfig;
use metacore::checked::FilePath;
use metacore::cid::Cid;
use metacore::error::ApiError;
use metacore::rid::Rid;
use metacore::shutdown::Shutdown;
use tokio::sync::{mpsc, oneshot, watch};

use crate::debounce::{Debouncer, Seen};
use crate::exclude::{Excluded, MOUNTS_DIR};
use crate::names::RefusedNames;
use crate::scan;
use crate::tree::Tree;

mod events;
mod gone;
mod pairing;
mod repair;
mod reset;
mod settle;
mod view;
mod walks;

pub use view::EngineView;

use gone::Gone;
use repair::Repair;
use walks::Walk;

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

/// Counters the engine and its tasks add to and the API reads (the rest
/// of what the API shows is the engine's [`EngineView`]).
#[derive(Debug, Default)]
pub struct Stats {
    pub overflows: AtomicU64,
    pub announced: AtomicU64,
    /// What was announced, by the type of its entry.
    pub events: crate::metrics::EventCounts,
    /// Rescans begun (walks that ask for a repair).
    pub rescans: AtomicU64,
    pub refused: AtomicU64,
    pub store_waits: AtomicU64,
    /// File and folder names that are not UTF-8, skipped.
    pub names: RefusedNames,
    /// A rescan asked for a repair that has not run to its end.
    pub repair_due: AtomicBool,
    pub repair_passes: AtomicU64,
    pub repair_promoted: AtomicU64,
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

/// The engine's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub files: PathBuf,
    pub quiet: Duration,
    /// How often folders past the inotify limit are listed.
    pub poll_unwatched: Duration,
    /// What is left alone under `files`.
    pub excluded: Excluded,
}

/// The engine's links outside: the store, the watch tree, the channels
/// to and from the API, the counters and the shutdown.
#[derive(Debug)]
pub struct Links {
    pub store: StoragedClient,
    /// Shared with the engine's own walks on the blocking pool only.
    pub tree: Arc<Mutex<Tree>>,
    /// The engine's own queue, for walks to send what they found.
    pub inputs: mpsc::Sender<Input>,
    /// The watchers as the API sets them.
    pub configs: watch::Receiver<Vec<WatcherConfig>>,
    /// What the API shows: published once a turn, when a batch is
    /// applied, and before a walk's reply.
    pub view: watch::Sender<EngineView>,
    pub stats: Arc<Stats>,
    pub shutdown: Shutdown,
}

/// What the engine knows of the files.
#[derive(Debug)]
struct Knowledge {
    /// Every known file by its path relative to `FILES_PATH`.
    known: BTreeMap<String, Known>,
    /// `known` has been read back from storaged.
    loaded: bool,
    debounce: Debouncer,
    gone: Gone,
}

/// The walks: under way, due, and what they left.
#[derive(Debug)]
struct Walks {
    /// Walks under way, by folder: who waits for each, and whether it
    /// must run again when it ends (asked again meanwhile).
    under_way: HashMap<PathBuf, Walk>,
    /// The watchers as the API last set them.
    watchers: Vec<WatcherConfig>,
    next_poll: HashMap<String, Instant>,
    next_unwatched_poll: Instant,
    /// Folders gone whose watches the tree should drop (when it is free).
    forget: Vec<PathBuf>,
    /// When each folder was last walked to the end (Unix ms).
    last_scan: HashMap<PathBuf, u64>,
}

/// The batch storaged is committing.
#[derive(Debug, Default)]
struct Batch {
    inflight: Option<tokio::task::JoinHandle<Option<Sent>>>,
    /// Its paths, and those of them something happened to meanwhile
    /// (looked at again once it is applied).
    paths: HashSet<String>,
    dirty: BTreeSet<String>,
}

/// What the last [`EngineView`] was made of that is kept between turns.
#[derive(Debug, Default)]
struct Shown {
    /// `known` or the watchers changed since the file counts were made.
    stale: bool,
    counts: HashMap<PathBuf, usize>,
    /// The tree's figures when it was last free: (watched, polled, limit
    /// reached).
    tree: (u64, u64, bool),
}

#[derive(Debug)]
pub struct Engine {
    settings: Settings,
    root: FilePath,
    links: Links,
    knows: Knowledge,
    walks: Walks,
    batch: Batch,
    /// The repair rescans asked for.
    repair: Repair,
    shown: Shown,
}

impl Engine {
    pub fn new(settings: Settings, mut links: Links) -> Result<Self, ApiError> {
        let root = FilePath::new(settings.files.display().to_string())?;
        let watchers = links.configs.borrow_and_update().clone();
        Ok(Self {
            knows: Knowledge {
                known: BTreeMap::new(),
                loaded: false,
                debounce: Debouncer::new(settings.quiet),
                gone: Gone::default(),
            },
            walks: Walks {
                under_way: HashMap::new(),
                watchers,
                next_poll: HashMap::new(),
                next_unwatched_poll: Instant::now() + settings.poll_unwatched,
                forget: Vec::new(),
                last_scan: HashMap::new(),
            },
            settings,
            root,
            links,
            batch: Batch::default(),
            repair: Repair::default(),
            shown: Shown {
                stale: true,
                ..Shown::default()
            },
        })
    }

    /// Loads what is known, starts the first scan and runs until shutdown.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Input>) {
        if !self.load().await {
            return;
        }
        let files = self.settings.files.clone();
        self.walk(files, true, true, None);
        loop {
            self.publish();
            let wake = self.next_wake();
            let inflight = async {
                match self.batch.inflight.as_mut() {
                    Some(h) => Some(h.await),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = self.links.shutdown.wait() => return,
                input = rx.recv() => match input {
                    Some(input) => self.handle(input).await,
                    None => return,
                },
                done = inflight => {
                    self.batch.inflight = None;
                    match done {
                        Some(Ok(Some(sent))) => self.apply(sent),
                        _ => return,
                    }
                }
                // A change of the watchers, the one place they are taken
                // in: the publish at the top counts them for the API.
                Ok(()) = self.links.configs.changed() => {
                    self.walks.watchers = self.links.configs.borrow_and_update().clone();
                    self.shown.stale = true;
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
            self.repair_step().await;
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
                match self.links.store.seen(&q).await {
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
        self.knows.known = map;
        self.shown.stale = true;
        self.knows.loaded = true;
        true
    }

    /// Sleeps unless shutdown comes first; false on shutdown.
    async fn pause(&self, d: Duration) -> bool {
        tokio::select! {
            () = self.links.shutdown.wait() => false,
            () = tokio::time::sleep(d) => true,
        }
    }

    /// Publishes what the API shows. Never calls into notify (see
    /// [`Engine::covers`]): the tree's figures are taken only if no walk
    /// holds it, else those of the last time it was free.
    fn publish(&mut self) {
        if self.shown.stale {
            self.shown.counts = view::file_counts(
                &self.knows.known,
                &self.walks.watchers,
                &self.settings.files,
            );
            self.shown.stale = false;
        }
        if let Some(f) = self.with_tree(|t| {
            (
                t.watched() as u64,
                t.unwatched_count() as u64,
                t.limit_reached,
            )
        }) {
            self.shown.tree = f;
        }
        let (watched_dirs, polled_dirs, limit_reached) = self.shown.tree;
        let view = EngineView {
            loaded: self.knows.loaded,
            known_files: self.knows.known.len(),
            file_counts: self.shown.counts.clone(),
            pending: self.knows.debounce.len() as u64,
            gone: self.knows.gone.since.len() as u64,
            watched_dirs,
            polled_dirs,
            limit_reached,
            walking: self.walks.under_way.keys().cloned().collect(),
            last_scan: self.walks.last_scan.clone(),
        };
        self.links.view.send_replace(view);
    }

    fn next_wake(&self) -> Instant {
        let mut wake = Instant::now() + Duration::from_secs(1);
        for t in [
            self.knows.debounce.next_due(),
            self.knows.gone.next_due(self.settings.quiet),
            self.walks.next_poll.values().min().copied(),
            self.repair_wake(),
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
            Input::Scan { dir, reply } => self.walk(dir, false, true, Some(reply)),
            Input::Reset {
                dirs,
                watcher_id,
                reply,
            } => self.reset(dirs, watcher_id, reply).await,
        }
    }

    /// Inside `FILES_PATH`, outside the mounts folder and meta-core's own
    /// folders (what inotify watches). Never takes the tree's lock: a walk
    /// holding it may be waiting on notify's thread, which may be waiting
    /// on this engine to take its events.
    fn covers(&self, path: &Path) -> bool {
        self.settings.excluded.covers(path)
    }

    /// Runs `f` on the tree if no walk holds it now (see [`Engine::covers`]).
    fn with_tree<T>(&self, f: impl FnOnce(&mut Tree) -> T) -> Option<T> {
        // Taken as it was left if a holder panicked (metacore::sync).
        match self.links.tree.try_lock() {
            Ok(mut t) => Some(f(&mut t)),
            Err(TryLockError::Poisoned(p)) => Some(f(&mut p.into_inner())),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    fn rel(&self, path: &Path) -> Option<String> {
        scan::relative(path, &self.settings.files).filter(|r| !r.is_empty())
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
