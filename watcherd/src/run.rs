//! `run`: what the binary calls and the tests call. Open `watchers.json`,
//! start the engine (unless `ENABLE_FILE_WATCHER=false`), serve the socket
//! until shutdown.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use metacore::Config;
use metacore::api::storaged::StoragedClient;
use metacore::clock::unix_ms;
use metacore::layout::Daemon;
use metacore::shutdown::Shutdown;
use notify::Watcher;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::api::{self, AppState};
use crate::engine::{Engine, EngineView, Input, Links, Settings, Stats};
use crate::exclude::Excluded;
use crate::tree::Tree;
use crate::watchers::{OpenError, Watchers};

/// inotify events queued for the engine; past this, notify's thread
/// waits, the kernel's queue fills, and its overflow makes a rescan.
const EVENT_QUEUE: usize = 16 * 1024;

/// Why watcherd stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot make FILES_PATH {path}")]
    Files {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the watchers file")]
    Watchers(#[source] OpenError),
    #[error("cannot start inotify")]
    Inotify(#[source] notify::Error),
    #[error("cannot start the engine")]
    Engine(#[source] metacore::error::ApiError),
    #[error("the engine ended before shutdown")]
    EngineEnded(#[source] EngineEnd),
    #[error("cannot serve the socket")]
    Bind(#[source] metacore::socket::server::BindError),
    #[error("the socket server failed")]
    Serve(#[source] std::io::Error),
}

/// How the engine ended while the socket still served.
#[derive(Debug, thiserror::Error)]
pub enum EngineEnd {
    #[error("the engine panicked")]
    Panicked,
    #[error("the engine stopped")]
    Stopped,
}

pub async fn run(config: Config, shutdown: Shutdown) -> Result<(), RunError> {
    let files = files_path(&config)?;
    let watchers = open_watchers(&config, &files)?;
    let (configs, configs_rx) = watch::channel(watchers.list().to_vec());
    let (view_tx, view) = watch::channel(EngineView::default());
    let stats = Arc::new(Stats::default());
    let (engine, engine_task) = if config.enable_file_watcher {
        let (tx, rx) = mpsc::channel(EVENT_QUEUE);
        let settings = engine_settings(&config, &files);
        let tree = watch_tree(&config, &settings, tx.clone())?;
        let links = Links {
            store: StoragedClient::new(&config.layout().socket(Daemon::Storaged)),
            tree: Arc::new(Mutex::new(tree)),
            inputs: tx.clone(),
            configs: configs_rx,
            view: view_tx,
            stats: stats.clone(),
            shutdown: shutdown.clone(),
        };
        let engine = Engine::new(settings, links).map_err(RunError::Engine)?;
        (Some(tx), Some(tokio::spawn(engine.run(rx))))
    } else {
        tracing::warn!("ENABLE_FILE_WATCHER=false: nothing is watched or announced");
        (None, None)
    };
    let state = AppState {
        watchers: Mutex::new(watchers),
        configs,
        engine,
        stats,
        view,
        files,
        started: Instant::now(),
    };
    serve(&config, state, engine_task, shutdown).await
}

/// `FILES_PATH` made absolute, made if missing.
fn files_path(config: &Config) -> Result<PathBuf, RunError> {
    let files = std::path::absolute(&config.files_path).unwrap_or(config.files_path.clone());
    metacore::files::ensure_dir_tree(&files, metacore::files::SHARED_DIR).map_err(|source| {
        RunError::Files {
            path: files.clone(),
            source,
        }
    })?;
    Ok(files)
}

/// watchers.json, saying what was set aside or added to it.
fn open_watchers(config: &Config, files: &Path) -> Result<Watchers, RunError> {
    let (watchers, opened) =
        Watchers::open(&config.meta_core_path, files, unix_ms()).map_err(RunError::Watchers)?;
    if let Some((aside, why)) = &opened.set_aside {
        tracing::warn!(
            kept = %aside.display(),
            "watchers.json could not be read ({why}); it was set aside and the defaults start over"
        );
    }
    for path in &opened.seeded {
        tracing::info!(path, "added the default watcher");
    }
    Ok(watchers)
}

/// The tree of watches, its events queued for the engine on `events`.
fn watch_tree(
    config: &Config,
    settings: &Settings,
    events: mpsc::Sender<Input>,
) -> Result<Tree, RunError> {
    let watcher = notify::RecommendedWatcher::new(
        move |e: notify::Result<notify::Event>| {
            // notify watches IN_OPEN too: every read of a watched file
            // (ours while hashing, a player's, a WebDAV GET) is an
            // event. Dropped here, on notify's own thread, they never
            // take room in the queue, so reads cannot overflow it.
            if let Ok(ev) = &e
                && matches!(
                    ev.kind,
                    notify::EventKind::Access(
                        notify::event::AccessKind::Open(_)
                            | notify::event::AccessKind::Close(notify::event::AccessMode::Read)
                    )
                )
            {
                return;
            }
            let _ = events.blocking_send(Input::Fs(e));
        },
        notify::Config::default(),
    )
    .map_err(RunError::Inotify)?;
    Ok(Tree::new(
        watcher,
        &settings.files,
        settings.excluded.clone(),
        (config.watch_max_dirs > 0).then_some(config.watch_max_dirs),
    ))
}

/// The engine's settings, saying which of meta-core's own folders it
/// leaves alone.
fn engine_settings(config: &Config, files: &Path) -> Settings {
    let excluded = Excluded::of(files, config);
    for dir in excluded.own() {
        tracing::info!(
            dir = %dir.display(),
            "meta-core's own folder is inside FILES_PATH: it is neither watched nor announced"
        );
    }
    Settings {
        files: files.to_owned(),
        quiet: config.debounce,
        poll_unwatched: config.watch_interval,
        excluded,
    }
}

/// Serves the socket until shutdown, or until the engine ends before it.
async fn serve(
    config: &Config,
    state: AppState,
    engine_task: Option<JoinHandle<()>>,
    shutdown: Shutdown,
) -> Result<(), RunError> {
    let socket = config.layout().socket(Daemon::Watcherd);
    let listener = metacore::socket::server::bind(&socket)
        .await
        .map_err(RunError::Bind)?;
    tracing::info!(
        files = %state.files.display(),
        socket = %socket.display(),
        debounce_ms = config.debounce.as_millis() as u64,
        enabled = config.enable_file_watcher,
        "watcherd ready"
    );
    metacore::daemon::notify_ready();
    let router = api::router(Arc::new(state));
    let serve = metacore::socket::server::serve(listener, &socket, router, shutdown.clone());
    let Some(engine_task) = engine_task else {
        return serve.await.map_err(RunError::Serve);
    };
    // The engine ends only at shutdown. If it ends before (a panic, a bug),
    // watcherd exits so the supervisor restarts it: a watcher that answers
    // its health check while nothing is watched would hide it.
    tokio::select! {
        served = serve => served.map_err(RunError::Serve),
        ended = engine_task => {
            if shutdown.is_triggered() {
                return Ok(());
            }
            let why = match ended {
                Err(e) if e.is_panic() => EngineEnd::Panicked,
                _ => EngineEnd::Stopped,
            };
            Err(RunError::EngineEnded(why))
        }
    }
}
