//! [`Life`]: one daemon's lifecycle driven input by input in a test, with
//! the policy table's real rows and a clock the test moves.

use std::time::{Duration, Instant};

use metacore::layout::Daemon;

use super::{Action, Command, Fact, Input, Signal, State, Timer, next};
use crate::policy::Policy;
use crate::reason::Exit;

pub(super) const PID: i32 = 4242;

/// One daemon's life driven input by input, with a clock the test moves.
pub(super) struct Life {
    pub(super) state: State,
    pub(super) policy: &'static Policy,
    pub(super) now: Instant,
}

impl Life {
    pub(super) fn of(daemon: Daemon) -> Self {
        Self {
            state: State::default(),
            policy: Policy::of(daemon).expect("in the table"),
            now: Instant::now(),
        }
    }

    pub(super) fn on(&mut self, input: impl Into<Input>) -> Vec<Action> {
        let state = std::mem::take(&mut self.state);
        let (state, actions) = next(state, self.policy, input.into(), self.now);
        self.state = state;
        actions
    }

    pub(super) fn wait(&mut self, d: Duration) -> &mut Self {
        self.now += d;
        self
    }

    /// Asked to start (not spawned yet).
    pub(super) fn started(daemon: Daemon) -> Self {
        let mut life = Self::of(daemon);
        life.on(Command::Start);
        life
    }

    /// Started and ready.
    pub(super) fn running(daemon: Daemon) -> Self {
        let mut life = Self::started(daemon);
        life.on(Fact::Spawned { pid: PID });
        life.on(Fact::BecameReady);
        assert!(life.state.is_ready());
        life
    }

    /// `n` starts in a row that exit with status 1 before they are ready,
    /// each waited out to the end of its backoff.
    pub(super) fn fail_unready(&mut self, n: usize) -> &mut Self {
        for _ in 0..n {
            self.on(Fact::Spawned { pid: PID });
            let d = Self::backoff_in(&self.on(Fact::Exited(Exit::Code(1))))
                .expect("a failure backs off");
            self.wait(d).on(Fact::BackoffElapsed);
        }
        self
    }

    /// The delay of the backoff the last actions armed, if any.
    pub(super) fn backoff_in(actions: &[Action]) -> Option<Duration> {
        actions.iter().find_map(|a| match a {
            Action::Arm(Timer::Backoff, d) => Some(*d),
            _ => None,
        })
    }
}

pub(super) fn kill(group: i32) -> Action {
    Action::Signal {
        group,
        signal: Signal::Kill,
    }
}

pub(super) fn term(group: i32) -> Action {
    Action::Signal {
        group,
        signal: Signal::Term,
    }
}
