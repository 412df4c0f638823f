//! The supervised tree: one runner task per daemon, which starts its
//! process, waits for its readiness, watches its health, and restarts it
//! by the policy table when it ends; the status table they keep; and the
//! commands (restart, stop) the control socket sends them.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use metacore::api::supervisor::{DaemonState, DaemonStatus, LastExit};
use metacore::clock::unix_ms;
use metacore::layout::{Daemon, Layout};
use metacore::socket::client::SocketClient;
use metacore::{ApiError, ErrorCode};
use rustix::process::Signal;
use tokio::sync::{mpsc, oneshot, watch};

use crate::child::{self, Exit, Reaper};
use crate::logs::Logs;
use crate::policy::{HEALTH_TIMEOUT, MISSED_HEALTH_CHECKS, OnCrashLoop, Policy};

/// Where the answer to a restart goes.
type Reply = oneshot::Sender<Result<DaemonStatus, ApiError>>;

/// What a runner can be asked.
#[derive(Debug)]
pub enum Command {
    /// Stop the process (SIGTERM, SIGKILL after the grace) and start it
    /// again; the answer comes once it is ready.
    Restart(Reply),
    /// Stop the process and the runner; the answer comes once it has exited.
    Stop(oneshot::Sender<()>),
}

/// What runners share.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub bin_dir: PathBuf,
    pub layout: Layout,
    pub reaper: Reaper,
    pub logs: Logs,
    pub health_interval: Duration,
    pub table: Table,
    /// Told when a daemon whose crash loop means "give up" gives up.
    pub fatal: mpsc::UnboundedSender<String>,
}

/// The status table, one slot per daemon of the policy table.
#[derive(Debug, Clone)]
pub struct Table(Arc<Mutex<Vec<Slot>>>);

#[derive(Debug)]
struct Slot {
    status: DaemonStatus,
    started: Option<Instant>,
    next_start: Option<Instant>,
}

impl Table {
    pub fn new(policies: &[Policy]) -> Self {
        let slots = policies
            .iter()
            .map(|p| Slot {
                status: DaemonStatus {
                    name: p.daemon.name().to_owned(),
                    pid: None,
                    state: DaemonState::Stopped,
                    ready: false,
                    uptime_ms: None,
                    restarts: 0,
                    failures: 0,
                    last_exit: None,
                    next_start_in_ms: None,
                },
                started: None,
                next_start: None,
            })
            .collect();
        Self(Arc::new(Mutex::new(slots)))
    }

    fn update(&self, daemon: Daemon, f: impl FnOnce(&mut Slot)) {
        let mut slots = self.0.lock().expect("status table lock");
        if let Some(slot) = slots.iter_mut().find(|s| s.status.name == daemon.name()) {
            f(slot);
        }
    }

    /// The table as it is now, with uptimes and delays computed.
    pub fn snapshot(&self) -> Vec<DaemonStatus> {
        let now = Instant::now();
        let slots = self.0.lock().expect("status table lock");
        slots
            .iter()
            .map(|s| DaemonStatus {
                uptime_ms: s.started.map(|t| now.duration_since(t).as_millis() as u64),
                next_start_in_ms: s
                    .next_start
                    .map(|t| t.saturating_duration_since(now).as_millis() as u64),
                ..s.status.clone()
            })
            .collect()
    }

    pub fn row(&self, daemon: Daemon) -> Option<DaemonStatus> {
        self.snapshot()
            .into_iter()
            .find(|r| r.name == daemon.name())
    }
}

/// A running runner, as the tree's owner holds it.
#[derive(Debug)]
pub struct Handle {
    pub daemon: Daemon,
    pub commands: mpsc::Sender<Command>,
    /// True once the daemon has been ready at least once.
    pub ready_once: watch::Receiver<bool>,
}

/// Starts the runner of `policy`'s daemon.
pub fn start(policy: &'static Policy, ctx: Ctx) -> Handle {
    let (commands, rx) = mpsc::channel(8);
    let (ready_tx, ready_once) = watch::channel(false);
    let runner = Runner {
        policy,
        ctx,
        commands: rx,
        ready_once: ready_tx,
    };
    tokio::spawn(runner.run());
    Handle {
        daemon: policy.daemon,
        commands,
        ready_once,
    }
}

struct Runner {
    policy: &'static Policy,
    ctx: Ctx,
    commands: mpsc::Receiver<Command>,
    ready_once: watch::Sender<bool>,
}

/// How one process's life ended.
enum Ended {
    /// It ended on its own, or the supervisor ended it for `reason`.
    /// `ready_for` is how long it had been ready, if it ever was.
    Failed {
        exit: Exit,
        reason: Option<String>,
        ready_for: Option<Duration>,
    },
    /// A restart was asked: start again at once, answer when ready.
    Restart(Reply),
    /// A stop was asked: the runner ends, answering once the process and
    /// its group are gone.
    Stopped(Option<oneshot::Sender<()>>),
}

impl Runner {
    fn daemon(&self) -> Daemon {
        self.policy.daemon
    }

    fn update(&self, f: impl FnOnce(&mut Slot)) {
        self.ctx.table.update(self.daemon(), f);
    }

    async fn run(mut self) {
        let mut failures = 0u32;
        let mut first = true;
        // Operators waiting for a restart to be ready (several may ask at once).
        let mut pending_restart: Vec<Reply> = Vec::new();
        loop {
            if !first {
                self.update(|s| s.status.restarts += 1);
            }
            first = false;
            let ended = self.live(&mut pending_restart).await;
            let (exit, reason, ready_for) = match ended {
                Ended::Stopped(reply) => {
                    if let Some(reply) = reply {
                        let _ = reply.send(());
                    }
                    return;
                }
                Ended::Restart(reply) => {
                    failures = 0;
                    self.update(|s| s.status.failures = 0);
                    pending_restart.push(reply);
                    continue;
                }
                Ended::Failed {
                    exit,
                    reason,
                    ready_for,
                } => (exit, reason, ready_for),
            };
            failures = self.policy.count_failure(failures, ready_for);
            let name = self.daemon().name();
            let why = match &reason {
                Some(r) => format!("{r}; {}", exit.describe()),
                None => exit.describe(),
            };
            for reply in pending_restart.drain(..) {
                let _ = reply.send(Err(ApiError::internal(format!(
                    "{name} did not come back: {why}"
                ))));
            }
            let crash_loop = failures >= self.policy.crash_loop_after;
            if crash_loop && self.policy.on_crash_loop == OnCrashLoop::GiveUp {
                tracing::error!("{name} {why}; it failed {failures} times in a row: giving up");
                self.update(|s| {
                    s.status.state = DaemonState::Failed;
                    s.status.failures = failures;
                });
                let _ = self
                    .ctx
                    .fatal
                    .send(format!("{name} failed {failures} times in a row ({why})"));
                self.idle_until_stopped().await;
                return;
            }
            let delay = if crash_loop {
                self.policy.max_backoff
            } else {
                self.policy.backoff(failures)
            };
            let state = if crash_loop {
                DaemonState::CrashLoop
            } else {
                DaemonState::Backoff
            };
            tracing::warn!(
                "{name} {why}; restarting in {} ms (failure {failures} in a row)",
                delay.as_millis()
            );
            self.update(|s| {
                s.status.state = state;
                s.status.failures = failures;
                s.next_start = Some(Instant::now() + delay);
            });
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                cmd = self.commands.recv() => match cmd {
                    Some(Command::Restart(reply)) => {
                        failures = 0;
                        self.update(|s| s.status.failures = 0);
                        pending_restart.push(reply);
                    }
                    Some(Command::Stop(reply)) => {
                        self.update(|s| {
                            s.status.state = DaemonState::Stopped;
                            s.next_start = None;
                        });
                        let _ = reply.send(());
                        return;
                    }
                    None => return,
                },
            }
            self.update(|s| s.next_start = None);
        }
    }

    /// After giving up: refuse restarts, answer the stop.
    async fn idle_until_stopped(&mut self) {
        while let Some(cmd) = self.commands.recv().await {
            match cmd {
                Command::Restart(reply) => {
                    let _ = reply.send(Err(ApiError::new(
                        ErrorCode::Conflict,
                        format!(
                            "{} has been given up on; meta-core is stopping",
                            self.daemon().name()
                        ),
                    )));
                }
                Command::Stop(reply) => {
                    let _ = reply.send(());
                    return;
                }
            }
        }
    }

    /// One process's life: start, readiness, health, end.
    async fn live(&mut self, pending_restart: &mut Vec<Reply>) -> Ended {
        let daemon = self.daemon();
        let name = daemon.name();
        let child = match child::spawn(daemon, &self.ctx.bin_dir, &self.ctx.reaper) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("{e}");
                self.record_exit(Exit::Code(127), Some(e.to_string()));
                return Ended::Failed {
                    exit: Exit::Code(127),
                    reason: Some(e.to_string()),
                    ready_for: None,
                };
            }
        };
        let pid = child.pid;
        self.update(|s| {
            s.status.pid = Some(pid as u32);
            s.status.state = DaemonState::Starting;
            s.status.ready = false;
            s.started = Some(Instant::now());
        });
        tracing::info!(pid, "{name} started");
        self.ctx.logs.pump(daemon, child.output);
        let mut exit = child.exit;
        let ready = child::wait_ready(child.ready);
        tokio::pin!(ready);
        let deadline = tokio::time::sleep(self.policy.ready_timeout);
        tokio::pin!(deadline);
        let mut readying = true;
        let mut ready_at: Option<Instant> = None;
        let mut reason: Option<String> = None;
        let (hung_tx, mut hung_rx) = mpsc::channel::<String>(1);
        let mut health: Option<tokio::task::JoinHandle<()>> = None;
        let ended = loop {
            tokio::select! {
                ok = &mut ready, if readying => {
                    readying = false;
                    if ok {
                        self.update(|s| {
                            s.status.state = DaemonState::Running;
                            s.status.ready = true;
                        });
                        tracing::info!(pid, "{name} ready");
                        let _ = self.ready_once.send(true);
                        ready_at = Some(Instant::now());
                        for reply in pending_restart.drain(..) {
                            let _ = reply.send(self.ctx.table.row(daemon).ok_or_else(|| ApiError::internal("no row")));
                        }
                        health = Some(self.watch_health(hung_tx.clone()));
                    }
                    // Else the pipe closed unready: the exit follows.
                }
                () = &mut deadline, if readying => {
                    readying = false;
                    let r = format!("not ready after {} s", self.policy.ready_timeout.as_secs());
                    tracing::error!(pid, "{name} {r}; killing it");
                    reason = Some(r);
                    child::signal_group(pid, Signal::KILL);
                }
                Some(why) = hung_rx.recv() => {
                    tracing::error!(pid, "{name} {why}; killing it");
                    self.update(|s| s.status.ready = false);
                    reason = Some(why);
                    child::signal_group(pid, Signal::KILL);
                }
                e = &mut exit => {
                    let ready_for = ready_at.map(|t| t.elapsed());
                    break Ended::Failed { exit: e.unwrap_or(Exit::Code(-1)), reason: reason.take(), ready_for };
                }
                cmd = self.commands.recv() => {
                    let (ended, why) = match cmd {
                        Some(Command::Restart(reply)) => (Ended::Restart(reply), "restart requested"),
                        Some(Command::Stop(reply)) => (Ended::Stopped(Some(reply)), "stop requested"),
                        None => (Ended::Stopped(None), "the supervisor is going away"),
                    };
                    let e = self.terminate(pid, &mut exit).await;
                    self.record_exit(e, Some(why.to_owned()));
                    if matches!(ended, Ended::Stopped(_)) {
                        tracing::info!(pid, "{name} stopped: {}", e.describe());
                        self.update(|s| s.status.state = DaemonState::Stopped);
                    }
                    break ended;
                }
            }
        };
        if let Some(h) = health {
            h.abort();
        }
        // Whatever the daemon itself started goes with it.
        child::signal_group(pid, Signal::KILL);
        if let Ended::Failed { exit, reason, .. } = &ended {
            self.record_exit(*exit, reason.clone());
        }
        ended
    }

    fn record_exit(&self, exit: Exit, reason: Option<String>) {
        let (code, signal) = match exit {
            Exit::Code(c) => (Some(c), None),
            Exit::Signal(s) => (None, Some(s)),
        };
        let reason = match reason {
            Some(r) => format!("{} ({r})", exit.describe()),
            None => exit.describe(),
        };
        self.update(|s| {
            s.status.pid = None;
            s.status.ready = false;
            s.started = None;
            s.status.last_exit = Some(LastExit {
                code,
                signal,
                at: unix_ms(),
                reason,
            });
        });
    }

    /// SIGTERM to the daemon's group, SIGKILL after the grace period;
    /// returns once it has exited.
    async fn terminate(&self, pid: i32, exit: &mut oneshot::Receiver<Exit>) -> Exit {
        self.update(|s| s.status.state = DaemonState::Stopping);
        child::signal_group(pid, Signal::TERM);
        tokio::select! {
            e = &mut *exit => return e.unwrap_or(Exit::Code(-1)),
            () = tokio::time::sleep(self.policy.stop_grace) => {}
        }
        tracing::warn!(
            pid,
            "{} still runs {} s after SIGTERM: SIGKILL",
            self.daemon().name(),
            self.policy.stop_grace.as_secs()
        );
        child::signal_group(pid, Signal::KILL);
        exit.await.unwrap_or(Exit::Signal(9))
    }

    /// Calls the daemon's `/health` every interval; reports a hang after
    /// too many misses in a row.
    fn watch_health(&self, hung: mpsc::Sender<String>) -> tokio::task::JoinHandle<()> {
        // A client of this process's own: no pooled connection of a
        // previous process is reused.
        let client =
            SocketClient::new(self.daemon().name(), &self.ctx.layout.socket(self.daemon()));
        let interval = self.ctx.health_interval;
        tokio::spawn(async move {
            let mut misses = 0;
            loop {
                tokio::time::sleep(interval).await;
                let ok = matches!(
                    tokio::time::timeout(
                        HEALTH_TIMEOUT,
                        client.get::<serde_json::Value>("/health")
                    )
                    .await,
                    Ok(Ok(_))
                );
                misses = if ok { 0 } else { misses + 1 };
                if misses >= MISSED_HEALTH_CHECKS {
                    let _ = hung
                        .send(format!("did not answer /health {misses} times in a row"))
                        .await;
                    return;
                }
            }
        })
    }
}
