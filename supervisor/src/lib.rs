//! `meta-core`: the container's entrypoint and the operator's CLI.
//!
//! `meta-core run` takes the leader lock (or waits as standby), writes
//! `kv-leader.info`, starts the daemons of the policy table in dependency
//! order (each up only once it signals readiness), restarts them by the
//! table, reaps every zombie, writes each daemon's output to its own log,
//! serves the control socket, and on SIGTERM/SIGINT (or `meta-core stop`)
//! stops the daemons in reverse order and exits 0. The other subcommands
//! talk to a running supervisor: see [`cli`].

pub mod child;
pub mod cli;
pub mod control;
pub mod leader;
pub mod logs;
pub mod policy;
pub mod tree;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use metacore::Config;
use metacore::api::supervisor::Role;
use metacore::config::LogFormat;
use metacore::shutdown::Shutdown;
use metacore::urls::Urls;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use crate::child::Reaper;
use crate::control::Control;
use crate::logs::{Echo, Logs};
use crate::policy::TABLE;
use crate::tree::{Command, Ctx, Handle, Table};

/// Why the supervisor could not run.
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
    GaveUp(String),
}

fn io_err(what: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> RunError {
    let path = path.into();
    move |source| RunError::Io { what, path, source }
}

/// The directory the daemon binaries are taken from.
fn bin_dir(config: &Config) -> Result<PathBuf, RunError> {
    if let Some(dir) = &config.bin_dir {
        return Ok(dir.clone());
    }
    let exe = std::env::current_exe().map_err(|e| RunError::NoBinDir(e.to_string()))?;
    exe.parent()
        .map(|p| p.to_path_buf())
        .ok_or_else(|| RunError::NoBinDir(exe.display().to_string()))
}

/// Runs the supervisor until it is stopped (Ok) or gives up (Err).
pub async fn run(config: Config) -> Result<(), RunError> {
    let layout = config.layout();
    let bin_dir = bin_dir(&config)?;
    for dir in [
        layout.locks_dir(),
        layout.run_dir.clone(),
        config.log_dir.clone(),
        layout.files.clone(),
    ] {
        std::fs::create_dir_all(&dir).map_err(io_err("create", &dir))?;
    }
    if let Some(db_dir) = layout.db.parent() {
        std::fs::create_dir_all(db_dir).map_err(io_err("create", db_dir))?;
    }
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

    let (stop, stopped) = metacore::shutdown::channel();
    let control = Arc::new(Control {
        started: Instant::now(),
        role: Mutex::new(Role::Standby),
        table: Table::new(TABLE),
        info_path: layout.leader_info(),
        log_dir: config.log_dir.clone(),
        commands: Mutex::new(Default::default()),
        logs: Mutex::new(None),
        stop,
    });
    watch_signals(control.clone()).map_err(io_err("watch the signals of", "meta-core"))?;
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

    let lock = leader::acquire(
        &layout.leader_lock(),
        &layout.leader_info(),
        config.election_retry,
        {
            let stopped = stopped.clone();
            async move { stopped.wait().await }
        },
    )
    .await
    .map_err(io_err("take the leader lock", layout.leader_lock()))?;
    let Some(_lock) = lock else {
        tracing::info!("stopped while standby");
        served.abort();
        let _ = std::fs::remove_file(&socket);
        return Ok(());
    };
    let url = Urls::from_config(&config).api_url;
    leader::write_info(&layout.leader_info(), &url)
        .map_err(io_err("write", layout.leader_info()))?;
    control.set_role(Role::Leader);
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
    *control.logs.lock().expect("logs lock") = Some(logs.clone());
    let (fatal_tx, mut fatal) = mpsc::unbounded_channel();
    let ctx = Ctx {
        bin_dir,
        layout: layout.clone(),
        reaper,
        logs,
        health_interval: config.health_check_interval,
        table: control.table.clone(),
        fatal: fatal_tx,
    };

    let mut handles: Vec<Handle> = Vec::new();
    let mut gave_up: Option<String> = None;
    'start: for policy in TABLE {
        // Start only once what it depends on has been ready.
        for dep in policy.after {
            let Some(h) = handles.iter_mut().find(|h| h.daemon == *dep) else {
                continue;
            };
            tokio::select! {
                _ = h.ready_once.wait_for(|r| *r) => {}
                () = stopped.wait() => break 'start,
                why = fatal.recv() => { gave_up = why; break 'start }
            }
        }
        let handle = tree::start(policy, ctx.clone());
        control
            .commands
            .lock()
            .expect("commands lock")
            .insert(policy.daemon, handle.commands.clone());
        handles.push(handle);
    }
    if gave_up.is_none() {
        tokio::select! {
            () = stopped.wait() => {}
            why = fatal.recv() => gave_up = why,
        }
    }

    control.set_role(Role::Stopping);
    match &gave_up {
        Some(why) => tracing::error!("{why}: stopping the tree"),
        None => tracing::info!("stopping the daemons in reverse order"),
    }
    control.commands.lock().expect("commands lock").clear();
    for h in handles.iter().rev() {
        let (reply, done) = tokio::sync::oneshot::channel();
        if h.commands.send(Command::Stop(reply)).await.is_ok() {
            let _ = done.await;
        }
    }
    leader::remove_info(&layout.leader_info(), &url);
    served.abort();
    let _ = std::fs::remove_file(&socket);
    match gave_up {
        Some(why) => Err(RunError::GaveUp(why)),
        None => {
            tracing::info!("stopped");
            Ok(())
        }
    }
}

/// SIGTERM and SIGINT fire the orderly stop; SIGHUP reopens the log files.
fn watch_signals(control: Arc<Control>) -> std::io::Result<()> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = term.recv() => { tracing::info!("SIGTERM"); control.stop.fire() }
                _ = int.recv() => { tracing::info!("SIGINT"); control.stop.fire() }
                _ = hup.recv() => {
                    let logs = control.logs.lock().expect("logs lock").clone();
                    if let Some(logs) = logs {
                        tracing::info!("SIGHUP: reopening the log files");
                        logs.reopen_all();
                    }
                }
            }
        }
    });
    Ok(())
}
