//! [`next`]: the transition function of a daemon's lifecycle, one match
//! arm per (input, phase) pair that means something; any other pair
//! changes nothing.

use std::time::{Duration, Instant};

use super::{Action, Answer, Command, Fact, Input, Note, Phase, Signal, State, Then, Timer};
use crate::policy::{MISSED_HEALTH_CHECKS, OnCrashLoop, Policy};
use crate::reason::{Cause, Ending, Exit, GiveUp, HealthMiss};

/// The transition function: the state after `input` at `now`, and what to
/// do. An input that means nothing in the current phase (a timer of
/// another phase, a second start) changes nothing.
pub(crate) fn next(
    mut s: State,
    policy: &Policy,
    input: Input,
    now: Instant,
) -> (State, Vec<Action>) {
    let mut out = Vec::new();
    let phase = std::mem::take(&mut s.phase);
    s.phase = match input {
        Input::Command(c) => command(&mut s, policy, phase, c, now, &mut out),
        Input::Fact(f) => fact(&mut s, policy, phase, f, now, &mut out),
    };
    (s, out)
}

fn command(
    s: &mut State,
    policy: &Policy,
    phase: Phase,
    command: Command,
    now: Instant,
    out: &mut Vec<Action>,
) -> Phase {
    use Phase::*;
    match (command, phase) {
        (Command::Start, Idle) => spawn(s, out),
        (Command::Start, phase) => phase,

        (Command::Restart, phase) => {
            s.waiting += 1;
            match phase {
                Idle => {
                    answer(s, Answer::NotStarted, out);
                    Idle
                }
                Spawning => Spawning,
                Starting { .. } | Running { .. } => {
                    s.failures = 0;
                    end(
                        policy,
                        phase,
                        Cause::RestartRequested,
                        Then::Restart,
                        now,
                        out,
                    )
                }
                Exiting {
                    then: Then::Stop, ..
                } => {
                    answer(s, Answer::StoppedInstead, out);
                    phase
                }
                Exiting {
                    pid,
                    since,
                    cause,
                    ready_for,
                    ..
                } => {
                    s.failures = 0;
                    Exiting {
                        pid,
                        since,
                        cause,
                        then: Then::Restart,
                        ready_for,
                    }
                }
                Backoff { .. } => {
                    s.failures = 0;
                    out.push(Action::Cancel(Timer::Backoff));
                    spawn(s, out)
                }
                Failed => {
                    answer(s, Answer::GivenUp, out);
                    Failed
                }
                Stopped => {
                    answer(s, Answer::StoppedInstead, out);
                    Stopped
                }
            }
        }

        (Command::Stop, phase) => match phase {
            Idle | Spawning | Stopped => finish(s, out),
            Starting { .. } | Running { .. } => {
                end(policy, phase, Cause::StopRequested, Then::Stop, now, out)
            }
            Exiting {
                pid,
                since,
                cause,
                ready_for,
                then,
            } => {
                if then == Then::Restart {
                    answer(s, Answer::StoppedInstead, out);
                }
                Exiting {
                    pid,
                    since,
                    cause,
                    then: Then::Stop,
                    ready_for,
                }
            }
            Backoff { .. } => {
                out.push(Action::Cancel(Timer::Backoff));
                finish(s, out)
            }
            Failed => {
                out.push(Action::Finish);
                Failed
            }
        },
    }
}

fn fact(
    s: &mut State,
    policy: &Policy,
    phase: Phase,
    fact: Fact,
    now: Instant,
    out: &mut Vec<Action>,
) -> Phase {
    use Phase::*;
    match (fact, phase) {
        (Fact::Spawned { pid }, Spawning) => {
            out.push(Action::Note(Note::Started { pid }));
            out.push(Action::Arm(Timer::Ready, policy.ready_timeout));
            Starting { pid, since: now }
        }
        // A process nobody waits for any more.
        (Fact::Spawned { pid }, phase) => {
            out.push(Action::Signal {
                group: pid,
                signal: Signal::Kill,
            });
            phase
        }
        (Fact::SpawnFailed(why), Spawning) => {
            let ending = Ending {
                exit: Exit::NOT_STARTED,
                cause: Some(Cause::SpawnFailed(why)),
            };
            fail(s, policy, ending, None, now, out)
        }

        (Fact::BecameReady, Starting { pid, since }) => {
            out.push(Action::Cancel(Timer::Ready));
            out.push(Action::Note(Note::Ready { pid }));
            out.push(Action::StartHealth);
            if s.waiting > 0 {
                answer(s, Answer::Ready, out);
            }
            Running {
                pid,
                since,
                ready_at: now,
                misses: 0,
            }
        }
        (Fact::ReadyTimedOut, phase @ Starting { .. }) => {
            let cause = Cause::NotReady(policy.ready_timeout);
            end(policy, phase, cause, Then::Recover, now, out)
        }

        (Fact::HealthChecked(check), phase @ Running { .. }) => {
            health_checked(policy, phase, check, now, out)
        }

        (Fact::Exited(exit), Starting { pid, .. }) => {
            out.push(Action::Cancel(Timer::Ready));
            kill_leftovers(pid, out);
            fail(s, policy, Ending::on_its_own(exit), None, now, out)
        }
        (Fact::Exited(exit), Running { pid, ready_at, .. }) => {
            out.push(Action::StopHealth);
            kill_leftovers(pid, out);
            let ready_for = now.saturating_duration_since(ready_at);
            fail(
                s,
                policy,
                Ending::on_its_own(exit),
                Some(ready_for),
                now,
                out,
            )
        }
        (Fact::Exited(exit), phase @ Exiting { .. }) => ended(s, policy, phase, exit, now, out),

        (Fact::GraceElapsed, phase @ Exiting { pid, .. }) => {
            out.push(Action::Note(Note::StillRunning {
                pid,
                grace: policy.stop_grace,
            }));
            out.push(Action::Signal {
                group: pid,
                signal: Signal::Kill,
            });
            phase
        }
        (Fact::BackoffElapsed, Backoff { .. }) => spawn(s, out),

        // Late or foreign: a timer of another phase, a check after a kill.
        (_, phase) => phase,
    }
}

/// A health check's result while running: a miss counts, and the last of
/// [`MISSED_HEALTH_CHECKS`] in a row ends the process as hung.
fn health_checked(
    policy: &Policy,
    phase: Phase,
    check: Result<(), HealthMiss>,
    now: Instant,
    out: &mut Vec<Action>,
) -> Phase {
    let Phase::Running {
        pid,
        since,
        ready_at,
        misses,
    } = phase
    else {
        return phase;
    };
    let running = |misses| Phase::Running {
        pid,
        since,
        ready_at,
        misses,
    };
    match check {
        Ok(()) => running(0),
        Err(_) if misses + 1 < MISSED_HEALTH_CHECKS => running(misses + 1),
        Err(last) => {
            let cause = Cause::Hung {
                misses: misses + 1,
                last,
            };
            end(policy, running(misses), cause, Then::Recover, now, out)
        }
    }
}

/// The exit of a process the supervisor was ending: then what it was
/// ended for.
fn ended(
    s: &mut State,
    policy: &Policy,
    phase: Phase,
    exit: Exit,
    now: Instant,
    out: &mut Vec<Action>,
) -> Phase {
    let Phase::Exiting {
        pid,
        cause,
        then,
        ready_for,
        ..
    } = phase
    else {
        return phase;
    };
    out.push(Action::Cancel(Timer::Grace));
    kill_leftovers(pid, out);
    let ending = Ending {
        exit,
        cause: Some(cause),
    };
    match then {
        Then::Restart => {
            s.last = Some((ending, now));
            spawn(s, out)
        }
        Then::Stop => {
            s.last = Some((ending, now));
            out.push(Action::Note(Note::Stopped { exit }));
            finish(s, out)
        }
        Then::Recover => fail(s, policy, ending, ready_for, now, out),
    }
}

/// Starts a process.
fn spawn(s: &mut State, out: &mut Vec<Action>) -> Phase {
    if s.started_once {
        s.restarts += 1;
    }
    s.started_once = true;
    out.push(Action::Spawn);
    Phase::Spawning
}

/// Ends the live process of `phase` (Starting or Running) for `cause`:
/// SIGTERM and the grace for a requested restart or stop, SIGKILL at once
/// for a failure.
fn end(
    policy: &Policy,
    phase: Phase,
    cause: Cause,
    then: Then,
    now: Instant,
    out: &mut Vec<Action>,
) -> Phase {
    let (pid, since, ready_for) = match phase {
        Phase::Starting { pid, since } => {
            out.push(Action::Cancel(Timer::Ready));
            (pid, since, None)
        }
        Phase::Running {
            pid,
            since,
            ready_at,
            ..
        } => {
            out.push(Action::StopHealth);
            (pid, since, Some(now.saturating_duration_since(ready_at)))
        }
        other => return other,
    };
    if then == Then::Recover {
        out.push(Action::Note(Note::Killing {
            pid,
            cause: cause.clone(),
        }));
        out.push(Action::Signal {
            group: pid,
            signal: Signal::Kill,
        });
    } else {
        out.push(Action::Signal {
            group: pid,
            signal: Signal::Term,
        });
        out.push(Action::Arm(Timer::Grace, policy.stop_grace));
    }
    Phase::Exiting {
        pid,
        since,
        cause,
        then,
        ready_for,
    }
}

/// A process failed: count it, answer the waiting restarts, and back off
/// or give up by the policy.
fn fail(
    s: &mut State,
    policy: &Policy,
    ending: Ending,
    ready_for: Option<Duration>,
    now: Instant,
    out: &mut Vec<Action>,
) -> Phase {
    s.failures = policy.count_failure(s.failures, ready_for);
    s.last = Some((ending.clone(), now));
    if s.waiting > 0 {
        answer(s, Answer::DidNotComeBack(ending.clone()), out);
    }
    let crash_loop = s.failures >= policy.crash_loop_after;
    if crash_loop && policy.on_crash_loop == OnCrashLoop::GiveUp {
        out.push(Action::GiveUp(GiveUp {
            daemon: policy.daemon,
            failures: s.failures,
            last: ending,
        }));
        return Phase::Failed;
    }
    let delay = policy.restart_delay(s.failures, ready_for.is_some());
    out.push(Action::Note(Note::Restarting {
        ending,
        delay,
        failures: s.failures,
    }));
    if delay.is_zero() {
        return spawn(s, out);
    }
    out.push(Action::Arm(Timer::Backoff, delay));
    Phase::Backoff {
        until: now + delay,
        crash_loop,
    }
}

/// Answers the waiting restarts.
fn answer(s: &mut State, answer: Answer, out: &mut Vec<Action>) {
    s.waiting = 0;
    out.push(Action::Answer(answer));
}

/// The runner ends: whoever still waits for a restart hears it stopped.
fn finish(s: &mut State, out: &mut Vec<Action>) -> Phase {
    if s.waiting > 0 {
        answer(s, Answer::StoppedInstead, out);
    }
    out.push(Action::Finish);
    Phase::Stopped
}

/// Whatever the daemon itself started goes with it.
fn kill_leftovers(group: i32, out: &mut Vec<Action>) {
    out.push(Action::Signal {
        group,
        signal: Signal::Kill,
    });
}
