//! `meta-core`: the container's entrypoint and the operator's CLI.
//!
//! [`run`] goes through four stages: **prepare** (directories, subreaper,
//! reaper, the control socket), **elect** (the leader lock, or standby until
//! it frees), **lead** (the logs, the tree of daemons started in
//! dependency order and supervised by the policy table, `kv-leader.info`
//! once the public API answers) and **stop** (the info file, the daemons
//! in reverse order, the socket). The
//! other subcommands talk to a running supervisor: see [`cli`].
//!
//! ```text
//! cli          run | status | logs | restart | stop; only run has a runtime
//! tree         the runners in table order: start after dependencies, stop in reverse
//! runner       one task per daemon: events in, lifecycle::next, actions out
//! lifecycle    the pure state machine of one daemon (tested case by case)
//! policy       the restart policy table: one row per daemon
//! reason       exits, causes, health misses, give-ups, and their words
//! table        the status table the runners publish to
//! health       /health of a ready daemon, decoded, version-checked
//! child        spawn, the reaper (the only caller of wait), group signals
//! control      the control socket, one file per operation; the CLI's client
//! http1        one HTTP/1.1 exchange over a Unix socket, for one-shot callers
//! leader       the leader lock and kv-leader.info
//! logs         per-daemon log files with rotation, the stdout echo
//! ```

mod child;
pub mod cli;
mod control;
mod health;
mod http1;
mod leader;
mod lifecycle;
mod logs;
mod policy;
mod reason;
mod runner;
mod table;
mod tree;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use metacore::Config;
use metacore::api::supervisor::Role;
use metacore::config::LogFormat;
use metacore::shutdown::{self, Shutdown};
use metacore::urls::Urls;
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinHandle;

use crate::child::Reaper;
use crate::control::Control;
use crate::leader::LeaderLock;
use crate::logs::{Echo, Logs};
use crate::policy::TABLE;
pub use crate::reason::GiveUp;
use crate::runner::Ctx;
use crate::tree::Tree;

/// Why the supervisor could not run, or stopped on its own.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot {what} {path}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot serve the control socket")]
    Bind(#[source] metacore::socket::server::BindError),
    #[error("cannot find the daemon binaries beside {0}: set META_CORE_BIN_DIR")]
    NoBinDir(String),
    #[error("{0}; the tree was stopped")]
    GaveUp(GiveUp),
    #[error("the admin routes cannot be guarded")]
    AdminToken(#[source] metacore::admin::TokenError),
}

fn io_err(what: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> RunError {
    let path = path.into();
    move |source| RunError::Io { what, path, source }
}

/// Runs the supervisor until `shutdown` fires or `meta-core stop` asks
/// (Ok), or a daemon is given up on (Err, after the tree was stopped).
pub async fn run(config: Config, shutdown: Shutdown) -> Result<(), RunError> {
    let prepared = prepare(&config, shutdown).await?;
    let result = match elect(&config, &prepared).await {
        Ok(Some(lock)) => match lead(&config, &prepared).await {
            Ok(led) => stop(&config, &prepared, led, lock).await,
            Err(e) => Err(e),
        },
        Ok(None) => {
            tracing::info!("stopped while standby");
            Ok(())
        }
        Err(e) => Err(e),
    };
    prepared.close();
    result
}

/// What the first stage leaves for the others.
struct Prepared {
    bin_dir: PathBuf,
    reaper: Reaper,
    control: Arc<Control>,
    /// Fires on the given shutdown or on `POST /stop`.
    stopping: Shutdown,
    socket: PathBuf,
    served: JoinHandle<std::io::Result<()>>,
}

impl Prepared {
    /// Stops serving the control socket and removes it.
    fn close(self) {
        self.served.abort();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Stage 1: the directories, the subreaper and the reaper, the control
/// socket (served from now on, standby included).
async fn prepare(config: &Config, shutdown: Shutdown) -> Result<Prepared, RunError> {
    let layout = config.layout();
    let bin_dir = bin_dir(config)?;
    use metacore::files::{PRIVATE_DIR, SHARED_DIR, ensure_dir};
    // META_CORE_PATH and locks/ are gone through by the services that read
    // kv-leader.info; FILES_PATH is the mesh's volume; the rest is ours.
    let mut dirs = vec![
        (layout.root.clone(), SHARED_DIR),
        (layout.locks_dir(), SHARED_DIR),
        (layout.run_dir.clone(), PRIVATE_DIR),
        (config.log_dir.clone(), PRIVATE_DIR),
    ];
    dirs.extend(layout.db.parent().map(|d| (d.to_path_buf(), PRIVATE_DIR)));
    for (dir, mode) in dirs {
        ensure_dir(&dir, mode).map_err(io_err("create", &dir))?;
    }
    // FILES_PATH and every folder made on its way: the mesh's services go
    // through them.
    metacore::files::ensure_dir_tree(&layout.files, SHARED_DIR)
        .map_err(io_err("create", &layout.files))?;
    // As PID 1 we inherit orphans anyway; otherwise ask for them, so that
    // nothing a daemon started outlives the tree unreaped.
    if std::process::id() != 1
        && let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
    {
        tracing::warn!("cannot become a child subreaper: {e}");
    }
    let reaper = Reaper::default();
    reaper
        .spawn_task()
        .map_err(io_err("watch SIGCHLD for", "meta-core"))?;

    let (stop, stopping) = shutdown::channel();
    let control = Arc::new(Control::new(
        layout.leader_info(),
        config.log_dir.clone(),
        layout.run_dir.clone(),
        stop,
    ));
    tokio::spawn({
        let control = control.clone();
        async move {
            shutdown.wait().await;
            control.stop.fire();
        }
    });
    reopen_logs_on_sighup(control.clone()).map_err(io_err("watch SIGHUP for", "meta-core"))?;
    let socket = layout.supervisor_socket();
    let listener = metacore::socket::server::bind(&socket)
        .await
        .map_err(RunError::Bind)?;
    let served = tokio::spawn({
        let (socket, router) = (socket.clone(), control::router(control.clone()));
        async move {
            metacore::socket::server::serve(listener, &socket, router, Shutdown::never()).await
        }
    });
    Ok(Prepared {
        bin_dir,
        reaper,
        control,
        stopping,
        socket,
        served,
    })
}

/// The directory the daemon binaries are taken from.
fn bin_dir(config: &Config) -> Result<PathBuf, RunError> {
    if let Some(dir) = &config.bin_dir {
        return Ok(dir.clone());
    }
    let exe = std::env::current_exe().map_err(|e| RunError::NoBinDir(e.to_string()))?;
    exe.parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| RunError::NoBinDir(exe.display().to_string()))
}

/// Stage 2: the leader lock, waiting as standby while another holds it.
/// None: stopped while standby.
async fn elect(config: &Config, p: &Prepared) -> Result<Option<LeaderLock>, RunError> {
    let layout = config.layout();
    let stopping = p.stopping.clone();
    leader::acquire(
        &layout.leader_lock(),
        &layout.leader_info(),
        config.election_retry,
        async move { stopping.wait().await },
    )
    .await
    .map_err(io_err("take the leader lock", layout.leader_lock()))
}

/// What leading leaves for the stop.
struct Led {
    tree: Tree,
    url: String,
    gave_up: Option<GiveUp>,
}

/// Stage 3: the logs, the tree started and supervised until a stop is
/// asked or a daemon is given up on; `kv-leader.info` once apid answers.
async fn lead(config: &Config, p: &Prepared) -> Result<Led, RunError> {
    let layout = config.layout();
    // The admin token exists before apid reads it (apid would make one
    // itself; the operator is told here, once, where it is).
    match metacore::admin::resolve(config).map_err(RunError::AdminToken)? {
        (metacore::admin::AdminAccess::Open, source) => tracing::warn!("{source}"),
        (_, source) => tracing::info!("{source}"),
    }
    let url = Urls::from_config(config).api_url;
    p.control.set_role(Role::Leader);
    tracing::info!(%url, "leader: starting the daemons");

    let names: Vec<_> = TABLE.iter().map(|p| p.daemon).collect();
    let echo = match config.log_format {
        LogFormat::Json => Echo::Json,
        LogFormat::Text => Echo::Prefixed,
    };
    let logs = Logs::open(
        &config.log_dir,
        &names,
        config.log_max_bytes,
        config.log_keep,
        echo,
    )
    .map_err(io_err("open the logs in", &config.log_dir))?;
    let _ = p.control.logs.set(logs.clone());
    let ctx = Ctx {
        bin_dir: p.bin_dir.clone(),
        layout: layout.clone(),
        reaper: p.reaper.clone(),
        logs,
        health_interval: config.health_check_interval,
        table: p.control.table.clone(),
    };
    let mut tree = Tree::new(&ctx);
    let _ = p.control.runners.set(tree.requests());
    // kv-leader.info once the public API answers (see `leader`).
    let announce = tree
        .ready_once(metacore::layout::Daemon::Apid)
        .map(|ready| {
            tokio::spawn(leader::announce(
                layout.leader_info(),
                url.clone(),
                leader::Probe::of(config),
                ready,
            ))
        });
    let gave_up = tree.supervise(&p.stopping).await;
    if let Some(task) = announce {
        task.abort();
    }
    Ok(Led { tree, url, gave_up })
}

/// Stage 4: the daemons stopped in reverse order, the info file removed;
/// Err when the tree stopped because a daemon was given up on.
async fn stop(config: &Config, p: &Prepared, led: Led, lock: LeaderLock) -> Result<(), RunError> {
    let Led { tree, url, gave_up } = led;
    p.control.set_role(Role::Stopping);
    match &gave_up {
        Some(why) => tracing::error!("{why}: stopping the tree"),
        None => tracing::info!("stopping the daemons in reverse order"),
    }
    // Clients learn that this leader is going before its API stops.
    leader::remove_info(&config.layout().leader_info(), &url);
    tree.stop().await;
    // The lock itself is released when the last process holding its
    // inherited descriptor has exited.
    drop(lock);
    match gave_up {
        Some(why) => Err(RunError::GaveUp(why)),
        None => {
            tracing::info!("stopped");
            Ok(())
        }
    }
}

/// SIGHUP reopens the log files once leader (for an external logrotate);
/// a standby has none and ignores it. The handler only sets the writer's
/// flag; the writer thread does the reopening.
fn reopen_logs_on_sighup(control: Arc<Control>) -> std::io::Result<()> {
    let mut hup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            if let Some(logs) = control.logs.get() {
                tracing::info!("SIGHUP: reopening the log files");
                logs.reopen_all();
            }
        }
    });
    Ok(())
}
