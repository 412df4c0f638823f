//! The lifecycle's facts, case by case: a start up to readiness, failures
//! counted and forgiven, the backoff and the crash-loop rule of both
//! kinds of daemon, health checks, and inputs that come too late.

use std::time::Duration;

use metacore::layout::Daemon;

use super::test_life::{Life, PID, kill};
use super::*;
use crate::policy::MISSED_HEALTH_CHECKS;
use crate::reason::{Cause, Ending, Exit, HealthMiss};

#[test]
fn a_start_spawns_then_waits_for_readiness_then_checks_health() {
    let mut life = Life::of(Daemon::Storaged);
    assert_eq!(life.on(Command::Start), [Action::Spawn]);
    assert_eq!(life.state.phase, Phase::Spawning);
    let timeout = life.policy.ready_timeout;
    assert_eq!(
        life.on(Fact::Spawned { pid: PID }),
        [
            Action::Note(Note::Started { pid: PID }),
            Action::Arm(Timer::Ready, timeout)
        ]
    );
    assert_eq!(life.state.pid(), Some(PID));
    assert!(!life.state.is_ready());
    assert_eq!(
        life.on(Fact::BecameReady),
        [
            Action::Cancel(Timer::Ready),
            Action::Note(Note::Ready { pid: PID }),
            Action::StartHealth
        ]
    );
    assert!(life.state.is_ready());
    assert_eq!(life.state.restarts, 0);
    assert_eq!(
        life.on(Command::Start),
        [],
        "a second start changes nothing"
    );
}

#[test]
fn the_first_crash_of_a_ready_daemon_restarts_it_at_once() {
    let mut life = Life::running(Daemon::Apid);
    life.wait(Duration::from_millis(1500));
    let actions = life.on(Fact::Exited(Exit::Signal(9)));
    let ending = Ending::on_its_own(Exit::Signal(9));
    assert_eq!(
        actions,
        [
            Action::StopHealth,
            kill(PID),
            Action::Note(Note::Restarting {
                ending: ending.clone(),
                delay: Duration::ZERO,
                failures: 1
            }),
            Action::Spawn
        ]
    );
    assert_eq!(life.state.phase, Phase::Spawning);
    assert_eq!((life.state.failures, life.state.restarts), (1, 1));
    assert_eq!(life.state.last, Some((ending, life.now)));
}

#[test]
fn a_start_that_never_gets_ready_backs_off_by_the_table_and_storaged_gives_up() {
    let mut life = Life::started(Daemon::Storaged);
    let mut delays = Vec::new();
    let mut last = Vec::new();
    for _ in 0..5 {
        life.on(Fact::Spawned { pid: PID });
        last = life.on(Fact::Exited(Exit::Code(1)));
        if let Some(d) = Life::backoff_in(&last) {
            assert!(matches!(
                life.state.phase,
                Phase::Backoff {
                    crash_loop: false,
                    ..
                }
            ));
            delays.push(d.as_millis());
            assert_eq!(life.wait(d).on(Fact::BackoffElapsed), [Action::Spawn]);
        }
    }
    assert_eq!(delays, [10, 40, 160, 640]);
    assert_eq!(life.state.phase, Phase::Failed);
    assert_eq!(
        last.last(),
        Some(&Action::GiveUp(GiveUp {
            daemon: Daemon::Storaged,
            failures: 5,
            last: Ending::on_its_own(Exit::Code(1)),
        }))
    );
    assert_eq!(life.state.restarts, 4);
}

#[test]
fn apids_crash_loop_keeps_retrying_at_the_longest_backoff() {
    let mut life = Life::started(Daemon::Apid);
    for failure in 1..=7 {
        life.on(Fact::Spawned { pid: PID });
        let actions = life.on(Fact::Exited(Exit::Code(1)));
        let delay = Life::backoff_in(&actions).expect("always restarted");
        let crash_loop = failure >= life.policy.crash_loop_after;
        assert_eq!(
            life.state.phase,
            Phase::Backoff {
                until: life.now + delay,
                crash_loop
            }
        );
        if crash_loop {
            assert_eq!(delay, life.policy.max_backoff);
        }
        assert!(!actions.iter().any(|a| matches!(a, Action::GiveUp(_))));
        life.wait(delay).on(Fact::BackoffElapsed);
    }
    assert_eq!(life.state.failures, 7);
}

#[test]
fn a_start_that_hangs_past_the_ready_timeout_is_a_failure_never_stable() {
    let mut life = Life::started(Daemon::Storaged);
    life.fail_unready(4);
    life.on(Fact::Spawned { pid: PID });
    // Far longer than `stable_after`, never ready.
    let timeout = life.policy.ready_timeout;
    assert!(timeout > life.policy.stable_after);
    let cause = Cause::NotReady(timeout);
    assert_eq!(
        life.wait(timeout).on(Fact::ReadyTimedOut),
        [
            Action::Cancel(Timer::Ready),
            Action::Note(Note::Killing {
                pid: PID,
                cause: cause.clone()
            }),
            kill(PID)
        ]
    );
    let actions = life.on(Fact::Exited(Exit::Signal(9)));
    assert_eq!(life.state.failures, 5, "the hang added to the count");
    assert_eq!(life.state.phase, Phase::Failed);
    assert!(actions.contains(&Action::GiveUp(GiveUp {
        daemon: Daemon::Storaged,
        failures: 5,
        last: Ending {
            exit: Exit::Signal(9),
            cause: Some(cause)
        },
    })));
}

#[test]
fn only_time_spent_ready_forgives_failures() {
    // Four quick failures, then a start that takes long to get ready and
    // crashes soon after: still the fifth failure in a row.
    let mut life = Life::started(Daemon::Apid);
    life.fail_unready(4);
    life.on(Fact::Spawned { pid: PID });
    life.wait(Duration::from_secs(25)).on(Fact::BecameReady);
    life.wait(Duration::from_secs(10))
        .on(Fact::Exited(Exit::Code(1)));
    assert_eq!(life.state.failures, 5, "10 s ready is not stable");
    assert!(matches!(
        life.state.phase,
        Phase::Backoff {
            crash_loop: true,
            ..
        }
    ));

    // Ready for `stable_after`: the failures before are forgiven.
    let d = life.policy.max_backoff;
    life.wait(d).on(Fact::BackoffElapsed);
    life.on(Fact::Spawned { pid: PID });
    life.on(Fact::BecameReady);
    let stable = life.policy.stable_after;
    let actions = life.wait(stable).on(Fact::Exited(Exit::Code(1)));
    assert_eq!(life.state.failures, 1);
    assert_eq!(
        actions.last(),
        Some(&Action::Spawn),
        "a first failure after being ready restarts at once"
    );
}

#[test]
fn three_health_misses_in_a_row_kill_a_hung_daemon_without_grace() {
    let mut life = Life::running(Daemon::Storaged);
    for _ in 1..MISSED_HEALTH_CHECKS {
        assert_eq!(life.on(Fact::HealthChecked(Err(HealthMiss::NoAnswer))), []);
    }
    assert_eq!(life.on(Fact::HealthChecked(Ok(()))), [], "an answer resets");
    for _ in 1..MISSED_HEALTH_CHECKS {
        life.on(Fact::HealthChecked(Err(HealthMiss::NoAnswer)));
    }
    let cause = Cause::Hung {
        misses: MISSED_HEALTH_CHECKS,
        last: HealthMiss::NoAnswer,
    };
    assert_eq!(
        life.wait(Duration::from_secs(40))
            .on(Fact::HealthChecked(Err(HealthMiss::NoAnswer))),
        [
            Action::StopHealth,
            Action::Note(Note::Killing {
                pid: PID,
                cause: cause.clone()
            }),
            kill(PID)
        ]
    );
    assert!(!life.state.is_ready());
    assert_eq!(life.state.pid(), Some(PID), "until it has exited");
    let actions = life.on(Fact::Exited(Exit::Signal(9)));
    let ending = Ending {
        exit: Exit::Signal(9),
        cause: Some(cause),
    };
    assert_eq!(life.state.last, Some((ending, life.now)));
    assert_eq!(life.state.failures, 1, "it had been ready for 40 s");
    assert_eq!(actions.last(), Some(&Action::Spawn));
}

#[test]
fn a_daemon_speaking_another_protocol_fails_its_health_checks() {
    let mut life = Life::running(Daemon::Apid);
    let miss = HealthMiss::OtherProtocol("apid 9.0.0 speaks socket protocol 9".into());
    for _ in 1..MISSED_HEALTH_CHECKS {
        life.on(Fact::HealthChecked(Err(miss.clone())));
    }
    life.on(Fact::HealthChecked(Err(miss.clone())));
    assert!(matches!(
        &life.state.phase,
        Phase::Exiting { cause: Cause::Hung { last, .. }, then: Then::Recover, .. } if *last == miss
    ));
}

#[test]
fn late_inputs_change_nothing() {
    let mut life = Life::running(Daemon::Apid);
    let before = life.state.clone();
    for late in [
        Fact::ReadyTimedOut,
        Fact::BackoffElapsed,
        Fact::GraceElapsed,
        Fact::BecameReady,
        Fact::SpawnFailed("late".into()),
    ] {
        assert_eq!(life.on(late.clone()), [], "{late:?}");
        assert_eq!(life.state, before, "{late:?}");
    }
    // A process reported for a phase that no longer wants one is killed.
    assert_eq!(life.on(Fact::Spawned { pid: 7 }), [kill(7)]);
    let mut life = Life::started(Daemon::Apid);
    life.on(Fact::Spawned { pid: PID });
    assert_eq!(life.on(Fact::HealthChecked(Err(HealthMiss::NoAnswer))), []);
}
