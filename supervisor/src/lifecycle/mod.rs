//! A daemon's life as data: its [`State`], what can happen to it
//! ([`Fact`]) or be asked of it ([`Command`]), and the pure function
//! [`next`] that says, for one input, the new state and the [`Action`]s to
//! carry out. Nothing here does I/O or reads a clock: the runner
//! (`runner.rs`) turns events into inputs, passes the time, and carries the
//! actions out; the tests walk every transition.
//!
//! ```text
//! Idle ──Start──▶ Spawning ──Spawned──▶ Starting ──BecameReady──▶ Running
//!                    │                     │                         │
//!               SpawnFailed       Exited / ReadyTimedOut     Exited / 3 health misses
//!                    ▼                     ▼                         ▼
//!                 (a failure: Backoff, then Spawning again; or Failed: give up)
//! Starting, Running ──Restart / Stop──▶ Exiting (TERM, grace, KILL) ──Exited──▶ Spawning / Stopped
//! ```
//!
//! The full diagram, with the policy's rules, is in `docs/operations.md`.

mod next;

use std::time::{Duration, Instant};

pub(crate) use next::next;

use crate::reason::{Cause, Ending, Exit, GiveUp, HealthMiss};

/// Where a daemon is in its life, with what the policy needs to decide.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct State {
    pub(crate) phase: Phase,
    /// Failures in a row without a stable time ready in between.
    pub(crate) failures: u32,
    /// Starts after the first one (failures and operator restarts alike).
    pub(crate) restarts: u32,
    /// Operators waiting for the answer to a restart.
    pub(crate) waiting: u32,
    /// How the last process ended, and when.
    pub(crate) last: Option<(Ending, Instant)>,
    /// Whether a process has been started at least once.
    pub(crate) started_once: bool,
}

/// The phase of a daemon's life. Times are the runner's monotonic clock.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Phase {
    /// Not started yet: the tree starts it once what it depends on is ready.
    #[default]
    Idle,
    /// A process is being started; `Spawned` or `SpawnFailed` comes next.
    Spawning,
    /// Its process runs and has not signalled readiness yet.
    Starting { pid: i32, since: Instant },
    /// It signalled readiness; its health is checked. `misses` counts the
    /// health checks failed in a row.
    Running {
        pid: i32,
        since: Instant,
        ready_at: Instant,
        misses: u32,
    },
    /// The supervisor ended it (SIGTERM or SIGKILL sent) and waits for its
    /// exit, then does `then`. `ready_for`: how long it had been ready.
    Exiting {
        pid: i32,
        since: Instant,
        cause: Cause,
        then: Then,
        ready_for: Option<Duration>,
    },
    /// Waiting out the delay before the next start after a failure.
    /// `crash_loop`: the failures in a row reached the table's count.
    Backoff { until: Instant, crash_loop: bool },
    /// Given up on: the tree stops.
    Failed,
    /// Stopped for good; the runner has finished.
    Stopped,
}

/// What follows the exit of a process the supervisor is ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    /// Start it again at once (an operator's restart).
    Restart,
    /// Nothing: the runner finishes (the tree is stopping).
    Stop,
    /// It failed (hung, or not ready in time): the policy decides.
    Recover,
}

/// What happened: reported by the runner, never asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fact {
    /// The process `pid` was started (it leads its own process group).
    Spawned { pid: i32 },
    /// No process could be started: why, in words.
    SpawnFailed(String),
    /// The process wrote its readiness line.
    BecameReady,
    /// The ready timeout elapsed.
    ReadyTimedOut,
    /// One health check's result.
    HealthChecked(Result<(), HealthMiss>),
    /// The process ended.
    Exited(Exit),
    /// The stop grace elapsed after SIGTERM.
    GraceElapsed,
    /// The backoff delay elapsed.
    BackoffElapsed,
}

/// What the tree or an operator asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    /// Start it (the tree, once its dependencies are ready).
    Start,
    /// Stop it and start it again; answered once it is ready again.
    Restart,
    /// Stop it for good.
    Stop,
}

/// One input of [`next`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    Fact(Fact),
    Command(Command),
}

impl From<Fact> for Input {
    fn from(f: Fact) -> Self {
        Input::Fact(f)
    }
}

impl From<Command> for Input {
    fn from(c: Command) -> Self {
        Input::Command(c)
    }
}

/// The daemon's one timer (at most one is armed at a time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// From the start to the ready timeout.
    Ready,
    /// From SIGTERM to SIGKILL.
    Grace,
    /// From a failure to the next start.
    Backoff,
}

/// The signals the supervisor sends a daemon's process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    Term,
    Kill,
}

/// What the runner is told to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Start a process, and report `Spawned` or `SpawnFailed` before
    /// anything else.
    Spawn,
    /// Send a signal to the process group `group` leads.
    Signal {
        group: i32,
        signal: Signal,
    },
    /// Arm the timer (replacing any armed one).
    Arm(Timer, Duration),
    /// Disarm the timer if it is this one.
    Cancel(Timer),
    /// Check its `/health` every interval, reporting each result.
    StartHealth,
    StopHealth,
    /// Answer every operator waiting for a restart.
    Answer(Answer),
    /// Say what happened or was decided (a log line).
    Note(Note),
    /// Stop the tree: this daemon is given up on.
    GiveUp(GiveUp),
    /// The runner is done: answer the stops and end.
    Finish,
}

/// The answer to the operators waiting for a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// It is ready again.
    Ready,
    /// It failed before it was ready again.
    DidNotComeBack(Ending),
    /// The tree stopped it instead.
    StoppedInstead,
    /// It has been given up on; the tree is stopping.
    GivenUp,
    /// The tree has not started it yet.
    NotStarted,
}

/// What the operator is told, as it happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Note {
    Started {
        pid: i32,
    },
    Ready {
        pid: i32,
    },
    /// SIGKILL without grace: it failed (hung, or late).
    Killing {
        pid: i32,
        cause: Cause,
    },
    /// SIGKILL after the grace: it outlived its SIGTERM.
    StillRunning {
        pid: i32,
        grace: Duration,
    },
    /// It exited after the stop asked of it.
    Stopped {
        exit: Exit,
    },
    /// It failed; the next start comes after `delay`.
    Restarting {
        ending: Ending,
        delay: Duration,
        failures: u32,
    },
}

impl State {
    /// Whether it is ready now.
    pub(crate) fn is_ready(&self) -> bool {
        matches!(self.phase, Phase::Running { .. })
    }

    /// The pid of its live process, if there is one.
    pub(crate) fn pid(&self) -> Option<i32> {
        self.live().map(|(pid, _)| pid)
    }

    /// When its live process started, if there is one.
    pub(crate) fn started(&self) -> Option<Instant> {
        self.live().map(|(_, since)| since)
    }

    /// The pid and start of its live process, if there is one.
    fn live(&self) -> Option<(i32, Instant)> {
        match self.phase {
            Phase::Starting { pid, since }
            | Phase::Running { pid, since, .. }
            | Phase::Exiting { pid, since, .. } => Some((pid, since)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod commands_test;
#[cfg(test)]
mod failures_test;
#[cfg(test)]
mod test_life;
