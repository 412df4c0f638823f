//! watcherd's socket: `/health`, `/status`, `/metrics` and the watchers
//! API, which apid exposes under `/api/watchers` (the original's routes and
//! shapes).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path as UrlPath};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, extract::State as AxState};
use metacore::clock::unix_ms;
use metacore::error::{ApiError, ErrorCode};
use metacore::layout::Daemon;
use metacore::socket::Health;
use metacore::socket::body::{JsonBody, JsonReply, no_method, no_route};
use metacore::sync::Locked;
use tokio::sync::{mpsc, oneshot, watch};

use crate::engine::{EngineView, Input, Stats};
use crate::tree::max_user_watches;
use crate::watchers::Watchers;
use metacore::api::watcherd::{
    InotifyStatus, NewWatcher, RepairStatus, ScanDone, ScanRequest, WatcherConfig, WatcherDone,
    WatcherList, WatcherStatus, WatcherUpdate, WatcherdStatus,
};

/// How long a scan or reset request waits for the engine.
pub const ASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(25);
/// Longest a change of the watchers waits for the engine to take it in
/// (it wakes for it at once; a busy engine, waiting on storaged, answers
/// the API with what it last counted).
pub const TAKE_IN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Largest body the watchers API takes (a watcher is a path and two flags).
pub const MAX_BODY: usize = 16 * 1024;

/// What every handler shares.
#[derive(Debug)]
pub struct AppState {
    /// watchers.json, kept by the API alone; every change is sent to the
    /// engine on `configs`.
    pub watchers: Mutex<Watchers>,
    pub configs: watch::Sender<Vec<WatcherConfig>>,
    /// The engine; `None` when `ENABLE_FILE_WATCHER=false`.
    pub engine: Option<mpsc::Sender<Input>>,
    pub stats: Arc<Stats>,
    /// What the engine last published of itself.
    pub view: watch::Receiver<EngineView>,
    pub files: PathBuf,
    pub started: Instant,
}

type State = AxState<Arc<AppState>>;

pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route(
            "/health",
            get(|| async { Json(Health::ok(Daemon::Watcherd)) }),
        )
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .route("/watchers", get(list).post(create))
        .route("/watchers/scan-all", post(scan_all))
        .route("/watchers/reset-all", post(reset_all))
        .route("/watchers/{id}", get(get_one).put(update).delete(delete))
        .route("/watchers/{id}/scan", post(scan))
        .route("/watchers/{id}/reset", post(reset))
        .route("/scan", post(scan_path))
        .fallback(no_route)
        .method_not_allowed_fallback(no_method)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

async fn status(st: State) -> Json<WatcherdStatus> {
    Json(st.status())
}

/// The figures of `/status` and the events by type as OpenMetrics text.
async fn metrics(st: State) -> axum::response::Response {
    let rescans = st.stats.rescans.load(Ordering::Relaxed);
    metacore::metrics::answer(crate::metrics::render(
        &st.status(),
        &st.stats.events,
        rescans,
    ))
}

impl AppState {
    fn status(&self) -> WatcherdStatus {
        let st = self;
        let s = &st.stats;
        let v = st.view.borrow();
        let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        WatcherdStatus {
            daemon: Daemon::Watcherd,
            enabled: st.engine.is_some(),
            loaded: v.loaded,
            known_files: v.known_files,
            pending: v.pending,
            gone: v.gone,
            announced: n(&s.announced),
            refused: n(&s.refused),
            store_waits: n(&s.store_waits),
            refused_names: s.names.count(),
            repair: RepairStatus {
                due: s.repair_due.load(Ordering::Relaxed),
                passes: n(&s.repair_passes),
                promoted: n(&s.repair_promoted),
            },
            inotify: InotifyStatus {
                watched_dirs: v.watched_dirs,
                max_user_watches: max_user_watches(),
                limit_reached: v.limit_reached,
                polled_dirs: v.polled_dirs,
                overflows: n(&s.overflows),
            },
            watchers: st.watchers.locked().list().len(),
            uptime_ms: st.started.elapsed().as_millis() as u64,
        }
    }
}

impl AppState {
    fn status_of(&self, c: &WatcherConfig) -> WatcherStatus {
        let dir = PathBuf::from(&c.path);
        let mounts = self.files.join(crate::exclude::MOUNTS_DIR);
        let v = self.view.borrow();
        WatcherStatus {
            active: c.enabled && self.engine.is_some(),
            last_scan: v.last_scan_of(&dir, &mounts),
            is_scanning: v.walking.contains(&dir),
            file_count: v.file_count(&dir),
            config: c.clone(),
        }
    }

    fn engine(&self) -> Result<&mpsc::Sender<Input>, ApiError> {
        self.engine.as_ref().ok_or_else(|| {
            ApiError::new(
                ErrorCode::Disabled,
                "the file watcher is off (ENABLE_FILE_WATCHER=false): nothing is scanned",
            )
        })
    }

    /// Asks the engine and waits for its answer, at most [`ASK_TIMEOUT`]
    /// (the engine waits for storaged while storaged is away).
    async fn ask(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<usize, ApiError>>) -> Input,
    ) -> Result<usize, ApiError> {
        let (tx, rx) = oneshot::channel();
        let gone = || ApiError::unavailable("the file watcher is stopping");
        let answer = async {
            self.engine()?.send(make(tx)).await.map_err(|_| gone())?;
            rx.await.map_err(|_| gone())?
        };
        tokio::time::timeout(ASK_TIMEOUT, answer)
            .await
            .unwrap_or_else(|_| {
                Err(ApiError::unavailable(format!(
                    "the file watcher did not finish within {} s (is storaged answering?); \
                     the scan goes on",
                    ASK_TIMEOUT.as_secs()
                )))
            })
    }

    fn config(&self, id: &str) -> Result<WatcherConfig, ApiError> {
        self.watchers.locked().get(id).cloned()
    }

    /// Changes watchers.json, tells the engine the watchers it has now and
    /// waits (at most [`TAKE_IN_TIMEOUT`]) until the view it publishes
    /// counts the files of each: an answer or a read right after a change
    /// shows the new watcher's `fileCount`, as it would later.
    async fn change<T>(
        &self,
        f: impl FnOnce(&mut Watchers) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let (done, paths) = {
            let mut w = self.watchers.locked();
            let done = f(&mut w)?;
            let list = w.list().to_vec();
            let paths: HashSet<PathBuf> = list.iter().map(|c| PathBuf::from(&c.path)).collect();
            self.configs.send_replace(list);
            (done, paths)
        };
        if self.engine.is_some() {
            let mut view = self.view.clone();
            // Before it has loaded, the engine counts nothing yet.
            let taken_in = view.wait_for(|v| {
                !v.loaded
                    || v.file_counts.len() == paths.len()
                        && paths.iter().all(|p| v.file_counts.contains_key(p))
            });
            let _ = tokio::time::timeout(TAKE_IN_TIMEOUT, taken_in).await;
        }
        Ok(done)
    }
}

async fn list(st: State) -> Json<WatcherList> {
    let configs: Vec<WatcherConfig> = st.watchers.locked().list().to_vec();
    let watchers: Vec<WatcherStatus> = configs.iter().map(|c| st.status_of(c)).collect();
    Json(WatcherList {
        count: watchers.len(),
        watchers,
    })
}

async fn create(
    st: State,
    JsonBody(new): JsonBody<NewWatcher>,
) -> Result<(StatusCode, Json<WatcherConfig>), ApiError> {
    let c = st.change(|w| w.create(new, unix_ms())).await?;
    Ok((StatusCode::CREATED, Json(c)))
}

async fn get_one(st: State, UrlPath(id): UrlPath<String>) -> JsonReply<WatcherStatus> {
    let c = st.config(&id)?;
    Ok(Json(st.status_of(&c)))
}

async fn update(
    st: State,
    UrlPath(id): UrlPath<String>,
    JsonBody(change): JsonBody<WatcherUpdate>,
) -> JsonReply<WatcherStatus> {
    let c = st.change(|w| w.update(&id, change)).await?;
    Ok(Json(st.status_of(&c)))
}

async fn delete(st: State, UrlPath(id): UrlPath<String>) -> JsonReply<WatcherDone> {
    st.change(|w| w.delete(&id)).await?;
    Ok(Json(WatcherDone::ok("Watcher deleted")))
}

async fn scan(st: State, UrlPath(id): UrlPath<String>) -> JsonReply<WatcherDone> {
    let dir = PathBuf::from(st.config(&id)?.path);
    walk(&st, dir).await
}

/// Walks `dir` now: `Scan triggered` with the files found.
async fn walk(st: &AppState, dir: PathBuf) -> JsonReply<WatcherDone> {
    let n = st.ask(|reply| Input::Scan { dir, reply }).await?;
    Ok(Json(WatcherDone {
        file_count: Some(n),
        ..WatcherDone::ok("Scan triggered")
    }))
}

/// `POST /scan` `{path}`: one walk of a folder under `FILES_PATH` that is
/// not a watcher's (mountd's scans of its mounts), answered when the walk
/// is done.
async fn scan_path(st: State, JsonBody(body): JsonBody<ScanRequest>) -> JsonReply<ScanDone> {
    // The path is looked at on the blocking pool: it is a FUSE mount,
    // which may hang.
    let files = st.files.clone();
    let checked = tokio::task::spawn_blocking(move || {
        crate::watchers::check_path(&files, body.path.as_str())
    });
    let dir = match tokio::time::timeout(ASK_TIMEOUT, checked).await {
        Ok(Ok(checked)) => PathBuf::from(checked?),
        Ok(Err(e)) => return Err(ApiError::internal(format!("the path check failed: {e}"))),
        Err(_) => {
            return Err(ApiError::unavailable(
                "the folder did not answer (a hung mount?); retry shortly",
            ));
        }
    };
    let n = st.ask(|reply| Input::Scan { dir, reply }).await?;
    Ok(Json(ScanDone {
        status: "ok".into(),
        message: "Scan triggered".into(),
        file_count: n,
    }))
}

async fn scan_all(st: State) -> JsonReply<WatcherDone> {
    st.engine()?;
    let dirs: Vec<PathBuf> = enabled_dirs(&st);
    let mut total = 0;
    for dir in dirs {
        total += st.ask(|reply| Input::Scan { dir, reply }).await?;
    }
    Ok(Json(WatcherDone {
        total_files: Some(total),
        ..WatcherDone::ok("Scan triggered for all watchers")
    }))
}

fn enabled_dirs(st: &AppState) -> Vec<PathBuf> {
    st.watchers
        .locked()
        .list()
        .iter()
        .filter(|c| c.enabled)
        .map(|c| PathBuf::from(&c.path))
        .collect()
}

async fn reset(st: State, UrlPath(id): UrlPath<String>) -> JsonReply<WatcherDone> {
    let c = st.config(&id)?;
    let dirs = vec![PathBuf::from(&c.path)];
    let watcher_id = c.id.clone();
    let n = st
        .ask(|reply| Input::Reset {
            dirs,
            watcher_id,
            reply,
        })
        .await?;
    Ok(Json(WatcherDone {
        watcher_id: Some(c.id),
        file_count: Some(n),
        ..WatcherDone::ok("Reset complete")
    }))
}

/// One `reset` entry (naming the first enabled watcher, as the original
/// did), everything forgotten, the whole tree walked again.
async fn reset_all(st: State) -> JsonReply<WatcherDone> {
    let first = st
        .watchers
        .locked()
        .list()
        .iter()
        .find(|c| c.enabled)
        .map(|c| c.id.clone())
        .unwrap_or_default();
    let dirs = vec![st.files.clone()];
    let n = st
        .ask(|reply| Input::Reset {
            dirs,
            watcher_id: first,
            reply,
        })
        .await?;
    Ok(Json(WatcherDone {
        total_files: Some(n),
        ..WatcherDone::ok("All watchers reset")
    }))
}
