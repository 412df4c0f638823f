//! The lifecycle's commands, case by case: operator restarts (several at
//! once, during a backoff, that do not come back, that cannot be done)
//! and stops in every phase.

use metacore::layout::Daemon;

use super::test_life::{Life, PID, kill, term};
use super::*;
use crate::reason::{Cause, Ending, Exit};

#[test]
fn an_operator_restart_terminates_then_starts_at_once_and_answers_when_ready() {
    let mut life = Life::running(Daemon::Apid);
    let grace = life.policy.stop_grace;
    assert_eq!(
        life.on(Command::Restart),
        [
            Action::StopHealth,
            term(PID),
            Action::Arm(Timer::Grace, grace)
        ]
    );
    assert_eq!(life.state.waiting, 1);
    assert_eq!(
        life.on(Fact::Exited(Exit::Code(0))),
        [Action::Cancel(Timer::Grace), kill(PID), Action::Spawn]
    );
    let ending = Ending {
        exit: Exit::Code(0),
        cause: Some(Cause::RestartRequested),
    };
    assert_eq!(life.state.last, Some((ending, life.now)));
    life.on(Fact::Spawned { pid: PID + 1 });
    let actions = life.on(Fact::BecameReady);
    assert_eq!(actions.last(), Some(&Action::Answer(Answer::Ready)));
    assert_eq!(
        (life.state.waiting, life.state.restarts, life.state.failures),
        (0, 1, 0)
    );
}

#[test]
fn several_concurrent_restarts_share_one_restart_and_are_all_answered() {
    let mut life = Life::running(Daemon::Apid);
    life.on(Command::Restart);
    assert_eq!(life.on(Command::Restart), [], "no second SIGTERM");
    assert_eq!(life.on(Command::Restart), []);
    assert_eq!(life.state.waiting, 3);
    let spawns = life
        .on(Fact::Exited(Exit::Code(0)))
        .into_iter()
        .filter(|a| *a == Action::Spawn)
        .count();
    assert_eq!(spawns, 1);
    life.on(Fact::Spawned { pid: PID + 1 });
    let answers: Vec<_> = life
        .on(Fact::BecameReady)
        .into_iter()
        .filter(|a| matches!(a, Action::Answer(_)))
        .collect();
    assert_eq!(
        answers,
        [Action::Answer(Answer::Ready)],
        "one answer for all"
    );
    assert_eq!(life.state.waiting, 0);
    assert_eq!(life.state.restarts, 1);
}

#[test]
fn a_restart_that_does_not_come_back_answers_with_the_error() {
    let mut life = Life::running(Daemon::Apid);
    life.on(Command::Restart);
    life.on(Fact::Exited(Exit::Code(0)));
    life.on(Fact::Spawned { pid: PID + 1 });
    let actions = life.on(Fact::Exited(Exit::Code(1)));
    assert!(
        actions.contains(&Action::Answer(Answer::DidNotComeBack(Ending::on_its_own(
            Exit::Code(1)
        )))),
        "{actions:?}"
    );
    assert_eq!(life.state.waiting, 0);
    assert_eq!(life.state.failures, 1);
    assert!(Life::backoff_in(&actions).is_some(), "never ready: backoff");

    // And when no process can be started at all.
    let mut life = Life::running(Daemon::Apid);
    life.on(Command::Restart);
    life.on(Fact::Exited(Exit::Code(0)));
    let actions = life.on(Fact::SpawnFailed("cannot start /nowhere/apid".into()));
    let ending = Ending {
        exit: Exit::NOT_STARTED,
        cause: Some(Cause::SpawnFailed("cannot start /nowhere/apid".into())),
    };
    assert!(actions.contains(&Action::Answer(Answer::DidNotComeBack(ending))));
}

#[test]
fn a_restart_during_backoff_resets_the_failures_and_starts_at_once() {
    let mut life = Life::started(Daemon::Apid);
    life.fail_unready(3);
    life.on(Fact::Spawned { pid: PID });
    life.on(Fact::Exited(Exit::Code(1)));
    assert!(matches!(life.state.phase, Phase::Backoff { .. }));
    assert_eq!(life.state.failures, 4);
    assert_eq!(
        life.on(Command::Restart),
        [Action::Cancel(Timer::Backoff), Action::Spawn]
    );
    assert_eq!(life.state.failures, 0);
    life.on(Fact::Spawned { pid: PID });
    assert!(
        life.on(Fact::BecameReady)
            .contains(&Action::Answer(Answer::Ready))
    );

    // Out of a crash loop just the same.
    let mut life = Life::started(Daemon::Apid);
    for _ in 0..5 {
        life.on(Fact::Spawned { pid: PID });
        let d = Life::backoff_in(&life.on(Fact::Exited(Exit::Code(1)))).unwrap();
        life.wait(d);
        if life.state.failures < 5 {
            life.on(Fact::BackoffElapsed);
        }
    }
    assert!(matches!(
        life.state.phase,
        Phase::Backoff {
            crash_loop: true,
            ..
        }
    ));
    assert_eq!(
        life.on(Command::Restart),
        [Action::Cancel(Timer::Backoff), Action::Spawn]
    );
    assert_eq!(life.state.failures, 0);
}

#[test]
fn a_restart_while_a_failed_process_is_killed_starts_it_without_backoff() {
    let mut life = Life::started(Daemon::Apid);
    life.on(Fact::Spawned { pid: PID });
    let timeout = life.policy.ready_timeout;
    life.wait(timeout).on(Fact::ReadyTimedOut);
    assert_eq!(life.on(Command::Restart), [], "the SIGKILL is on its way");
    let actions = life.on(Fact::Exited(Exit::Signal(9)));
    assert_eq!(actions.last(), Some(&Action::Spawn));
    assert_eq!(life.state.failures, 0);
}

#[test]
fn stop_in_every_phase() {
    // Not started, or between two processes: done at once.
    let mut life = Life::of(Daemon::Apid);
    assert_eq!(life.on(Command::Stop), [Action::Finish]);
    assert_eq!(life.state.phase, Phase::Stopped);

    let mut life = Life::started(Daemon::Apid);
    life.on(Fact::Spawned { pid: PID });
    life.on(Fact::Exited(Exit::Code(1)));
    assert!(matches!(life.state.phase, Phase::Backoff { .. }));
    assert_eq!(
        life.on(Command::Stop),
        [Action::Cancel(Timer::Backoff), Action::Finish]
    );
    assert_eq!(life.state.phase, Phase::Stopped);

    // Starting or running: SIGTERM, the grace, and done once it exited.
    let grace = Life::of(Daemon::Apid).policy.stop_grace;
    let mut life = Life::started(Daemon::Apid);
    life.on(Fact::Spawned { pid: PID });
    assert_eq!(
        life.on(Command::Stop),
        [
            Action::Cancel(Timer::Ready),
            term(PID),
            Action::Arm(Timer::Grace, grace)
        ]
    );
    let mut life = Life::running(Daemon::Apid);
    assert_eq!(
        life.on(Command::Stop),
        [
            Action::StopHealth,
            term(PID),
            Action::Arm(Timer::Grace, grace)
        ]
    );
    assert_eq!(
        life.on(Command::Stop),
        [],
        "a second stop waits with the first"
    );
    assert_eq!(
        life.on(Fact::Exited(Exit::Code(0))),
        [
            Action::Cancel(Timer::Grace),
            kill(PID),
            Action::Note(Note::Stopped {
                exit: Exit::Code(0)
            }),
            Action::Finish
        ]
    );
    assert_eq!(life.state.phase, Phase::Stopped);
    assert_eq!(life.state.pid(), None);

    // Being killed for a failure: the stop waits for that exit.
    let mut life = Life::started(Daemon::Apid);
    life.on(Fact::Spawned { pid: PID });
    life.wait(life.policy.ready_timeout).on(Fact::ReadyTimedOut);
    assert_eq!(life.on(Command::Stop), []);
    assert_eq!(
        life.on(Fact::Exited(Exit::Signal(9))).last(),
        Some(&Action::Finish)
    );

    // Given up on: the runner finishes, the state stays failed.
    let mut life = Life::of(Daemon::Storaged);
    life.state.phase = Phase::Failed;
    assert_eq!(life.on(Command::Stop), [Action::Finish]);
    assert_eq!(life.state.phase, Phase::Failed);
}

#[test]
fn a_stop_during_a_restart_answers_the_restart_stopped_instead() {
    let mut life = Life::running(Daemon::Apid);
    life.on(Command::Restart);
    assert_eq!(
        life.on(Command::Stop),
        [Action::Answer(Answer::StoppedInstead)]
    );
    assert_eq!(
        life.on(Fact::Exited(Exit::Code(0))).last(),
        Some(&Action::Finish)
    );
    assert_eq!(
        life.on(Command::Restart),
        [Action::Answer(Answer::StoppedInstead)],
        "and any restart after it"
    );
}

#[test]
fn a_daemon_that_ignores_sigterm_is_killed_after_its_grace() {
    let mut life = Life::running(Daemon::Apid);
    life.on(Command::Stop);
    let grace = life.policy.stop_grace;
    assert_eq!(
        life.wait(grace).on(Fact::GraceElapsed),
        [
            Action::Note(Note::StillRunning { pid: PID, grace }),
            kill(PID)
        ]
    );
    life.on(Fact::Exited(Exit::Signal(9)));
    let ending = Ending {
        exit: Exit::Signal(9),
        cause: Some(Cause::StopRequested),
    };
    assert_eq!(life.state.last, Some((ending, life.now)));
}

#[test]
fn restarts_that_cannot_be_done_are_refused_at_once() {
    let mut life = Life::of(Daemon::Apid);
    assert_eq!(
        life.on(Command::Restart),
        [Action::Answer(Answer::NotStarted)]
    );
    assert_eq!(life.state.waiting, 0);
    let mut life = Life::of(Daemon::Storaged);
    life.state.phase = Phase::Failed;
    assert_eq!(life.on(Command::Restart), [Action::Answer(Answer::GivenUp)]);
}
