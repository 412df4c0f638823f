//! The thin shell around a daemon's lifecycle: one task per daemon that
//! waits for what can happen (its process exits or signals readiness, its
//! timer fires, a health check ends, a request comes), turns it into an
//! input of [`lifecycle::next`], publishes the new state to the status
//! table, and carries out the actions. It decides nothing itself.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::{Duration, Instant};

use metacore::layout::{Daemon, Layout};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Sleep;

use crate::child::{self, Reaper};
use crate::health::{self, HealthWatch};
use crate::lifecycle::{self, Action, Answer, Command, Fact, Input, Note, Signal, State, Timer};
use crate::logs::Logs;
use crate::policy::Policy;
use crate::reason::{Exit, GiveUp};
use crate::table::Table;

/// Where the answer to one operator's restart goes.
pub(crate) type Reply = oneshot::Sender<Answer>;

/// What a runner is asked, with where its answer goes.
#[derive(Debug)]
pub(crate) enum Request {
    Start,
    Restart(Reply),
    /// Answered once the runner has finished (its process gone).
    Stop(oneshot::Sender<()>),
}

/// What runners share.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub(crate) bin_dir: PathBuf,
    pub(crate) layout: Layout,
    pub(crate) reaper: Reaper,
    pub(crate) logs: Logs,
    pub(crate) health_interval: Duration,
    pub(crate) table: Table,
}

/// A runner, as the tree holds it.
#[derive(Debug)]
pub(crate) struct Handle {
    pub(crate) daemon: Daemon,
    /// The runner's queue of requests (start, restarts, stop); a few at a
    /// time at most, so a small bound.
    pub(crate) requests: mpsc::Sender<Request>,
    /// True once the daemon has been ready at least once: what the
    /// daemons that depend on it wait for before they start.
    pub(crate) ready_once: watch::Receiver<bool>,
}

/// Starts the runner of `policy`'s daemon; it waits for `Request::Start`.
/// `gave_up` tells the tree when this daemon is given up on.
pub(crate) fn spawn(
    policy: &'static Policy,
    ctx: Ctx,
    gave_up: mpsc::UnboundedSender<GiveUp>,
) -> Handle {
    let (requests, rx) = mpsc::channel(8);
    let (ready_tx, ready_once) = watch::channel(false);
    let runner = Runner {
        policy,
        ctx,
        gave_up,
        state: State::default(),
        requests: rx,
        waiting: Vec::new(),
        stops: Vec::new(),
        process: None,
        timer: None,
        health: None,
        ready_once: ready_tx,
        finished: false,
    };
    tokio::spawn(runner.run());
    Handle {
        daemon: policy.daemon,
        requests,
        ready_once,
    }
}

struct Runner {
    policy: &'static Policy,
    ctx: Ctx,
    /// To the tree: this daemon's crash loop means "give up", and it
    /// reached it.
    gave_up: mpsc::UnboundedSender<GiveUp>,
    state: State,
    /// The tree's and the operators' requests (see [`Handle::requests`]).
    requests: mpsc::Receiver<Request>,
    /// The operators waiting for a restart (the lifecycle says when and
    /// what to answer them).
    waiting: Vec<Reply>,
    /// The stops waiting for the runner to finish.
    stops: Vec<oneshot::Sender<()>>,
    process: Option<Process>,
    timer: Option<(Timer, Pin<Box<Sleep>>)>,
    health: Option<HealthWatch>,
    /// Set once the daemon is first ready (see [`Handle::ready_once`]).
    ready_once: watch::Sender<bool>,
    finished: bool,
}

/// The live process, as far as the runner waits on it.
struct Process {
    /// Resolves when the reaper has collected its exit.
    exit: oneshot::Receiver<Exit>,
    /// Its readiness pipe, until it has said something or closed.
    ready: Option<pipe::Receiver>,
}

/// What the live process did.
enum ProcessEvent {
    Ready,
    /// The readiness pipe closed without a line: its exit follows.
    Unready,
    Exited(Exit),
}

impl Runner {
    async fn run(mut self) {
        while !self.finished {
            let input = self.next_input().await;
            self.apply(input);
        }
    }

    /// Waits for the next thing that happens or is asked.
    async fn next_input(&mut self) -> Input {
        loop {
            tokio::select! {
                event = process_event(&mut self.process) => match event {
                    ProcessEvent::Ready => return Fact::BecameReady.into(),
                    ProcessEvent::Unready => continue,
                    ProcessEvent::Exited(exit) => {
                        self.process = None;
                        return Fact::Exited(exit).into();
                    }
                },
                timer = fired(&mut self.timer) => {
                    self.timer = None;
                    return match timer {
                        Timer::Ready => Fact::ReadyTimedOut,
                        Timer::Grace => Fact::GraceElapsed,
                        Timer::Backoff => Fact::BackoffElapsed,
                    }
                    .into();
                }
                check = health_result(&mut self.health) => return Fact::HealthChecked(check).into(),
                request = self.requests.recv() => return match request {
                    Some(Request::Start) => Command::Start.into(),
                    Some(Request::Restart(reply)) => {
                        self.waiting.push(reply);
                        Command::Restart.into()
                    }
                    Some(Request::Stop(done)) => {
                        self.stops.push(done);
                        Command::Stop.into()
                    }
                    // The tree is gone without a stop: stop all the same.
                    None => Command::Stop.into(),
                },
            }
        }
    }

    /// Runs `input` through the lifecycle and carries the actions out; a
    /// spawn's outcome is the next input, at once.
    fn apply(&mut self, input: Input) {
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            let state = std::mem::take(&mut self.state);
            let (state, actions) = lifecycle::next(state, self.policy, input, Instant::now());
            self.state = state;
            self.publish();
            for action in actions {
                inputs.extend(self.carry_out(action));
            }
        }
    }

    /// The state to the status table, and to the tree once ready.
    fn publish(&self) {
        self.ctx.table.set(self.policy.daemon, &self.state);
        if self.state.is_ready() {
            self.ready_once
                .send_if_modified(|r| !std::mem::replace(r, true));
        }
    }

    fn carry_out(&mut self, action: Action) -> Option<Input> {
        let daemon = self.policy.daemon;
        match action {
            Action::Spawn => return Some(self.spawn()),
            Action::Signal { group, signal } => child::signal_group(
                group,
                match signal {
                    Signal::Term => rustix::process::Signal::TERM,
                    Signal::Kill => rustix::process::Signal::KILL,
                },
            ),
            Action::Arm(timer, after) => {
                self.timer = Some((timer, Box::pin(tokio::time::sleep(after))));
            }
            Action::Cancel(timer) => {
                if self.timer.as_ref().is_some_and(|(t, _)| *t == timer) {
                    self.timer = None;
                }
            }
            Action::StartHealth => {
                let socket = self.ctx.layout.socket(daemon);
                self.health = Some(health::watch(daemon, socket, self.ctx.health_interval));
            }
            Action::StopHealth => self.health = None,
            Action::Answer(answer) => {
                for reply in self.waiting.drain(..) {
                    let _ = reply.send(answer.clone());
                }
            }
            Action::Note(note) => log(daemon, &note),
            Action::GiveUp(why) => {
                tracing::error!(
                    "{daemon} {}; it failed {} times in a row: giving up",
                    why.last,
                    why.failures
                );
                let _ = self.gave_up.send(why);
            }
            Action::Finish => {
                for done in self.stops.drain(..) {
                    let _ = done.send(());
                }
                self.finished = true;
            }
        }
        None
    }

    /// Starts the daemon's process; its outcome as a fact.
    fn spawn(&mut self) -> Input {
        let daemon = self.policy.daemon;
        match child::spawn(daemon, &self.ctx.bin_dir, &self.ctx.reaper) {
            Ok(child) => {
                self.ctx.logs.pump(daemon, child.output);
                self.process = Some(Process {
                    exit: child.exit,
                    ready: Some(child.ready),
                });
                Fact::Spawned { pid: child.pid }.into()
            }
            Err(e) => Fact::SpawnFailed(e.to_string()).into(),
        }
    }
}

/// The log line of a note.
fn log(daemon: Daemon, note: &Note) {
    match note {
        Note::Started { pid } => tracing::info!(pid, "{daemon} started"),
        Note::Ready { pid } => tracing::info!(pid, "{daemon} ready"),
        Note::Killing { pid, cause } => tracing::error!(pid, "{daemon} {cause}; killing it"),
        Note::StillRunning { pid, grace } => tracing::warn!(
            pid,
            "{daemon} still runs {} s after SIGTERM: SIGKILL",
            grace.as_secs()
        ),
        Note::Stopped { exit } => tracing::info!("{daemon} stopped: {exit}"),
        Note::Restarting {
            ending,
            delay,
            failures,
        } => tracing::warn!(
            "{daemon} {ending}; restarting in {} ms (failure {failures} in a row)",
            delay.as_millis()
        ),
    }
}

/// The next event of the live process; never, without one.
async fn process_event(process: &mut Option<Process>) -> ProcessEvent {
    let Some(p) = process else {
        return std::future::pending().await;
    };
    tokio::select! {
        ready = ready_line(&mut p.ready) => {
            p.ready = None;
            if ready { ProcessEvent::Ready } else { ProcessEvent::Unready }
        }
        exit = &mut p.exit => ProcessEvent::Exited(exit.unwrap_or(Exit::UNKNOWN)),
    }
}

/// Reads the readiness pipe until a line (true) or its close (false);
/// never, once it is gone.
async fn ready_line(pipe: &mut Option<pipe::Receiver>) -> bool {
    let Some(pipe) = pipe else {
        return std::future::pending().await;
    };
    let mut buf = [0u8; 64];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) if buf[..n].contains(&b'\n') => return true,
            Ok(_) => continue,
        }
    }
}

/// The armed timer, once it fires; never, without one.
async fn fired(timer: &mut Option<(Timer, Pin<Box<Sleep>>)>) -> Timer {
    match timer {
        Some((t, sleep)) => {
            sleep.as_mut().await;
            *t
        }
        None => std::future::pending().await,
    }
}

/// The next health check's result; never, without checks.
async fn health_result(health: &mut Option<HealthWatch>) -> Result<(), crate::reason::HealthMiss> {
    match health {
        Some(h) => match h.results.recv().await {
            Some(result) => result,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}
