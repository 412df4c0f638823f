//! Why things ended, as types: how a process exited ([`Exit`]), why the
//! supervisor ended it or could not start it ([`Cause`]), the two together
//! ([`Ending`]), why a health check failed ([`HealthMiss`]) and why the tree
//! gives up ([`GiveUp`]). Their `Display` is the wording operators read in
//! the logs and in `lastExit.reason`, so it is written once, here.

use std::fmt;
use std::time::Duration;

use metacore::layout::Daemon;

/// How a process ended, as `wait` reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    /// What a start that failed before any process ran is recorded as: the
    /// status a shell gives a command it cannot run.
    pub(crate) const NOT_STARTED: Exit = Exit::Code(127);
    /// What an exit the reaper lost is recorded as (it should not happen).
    pub(crate) const UNKNOWN: Exit = Exit::Code(-1);
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Exit::Code(c) => write!(f, "exited with status {c}"),
            Exit::Signal(s) => write!(f, "killed by {}", SignalName(s)),
        }
    }
}

/// A signal number as its name (`SIGKILL`), or `signal N`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SignalName(pub(crate) i32);

impl fmt::Display for SignalName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.0 {
            1 => "SIGHUP",
            2 => "SIGINT",
            3 => "SIGQUIT",
            4 => "SIGILL",
            6 => "SIGABRT",
            7 => "SIGBUS",
            8 => "SIGFPE",
            9 => "SIGKILL",
            11 => "SIGSEGV",
            13 => "SIGPIPE",
            14 => "SIGALRM",
            15 => "SIGTERM",
            n => return write!(f, "signal {n}"),
        };
        f.write_str(name)
    }
}

/// Why a health check did not count as an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HealthMiss {
    /// No answer within the timeout, an error status, or a body that is not
    /// a `Health`.
    NoAnswer,
    /// It answered in another socket protocol: `Health::mismatch`'s words.
    OtherProtocol(String),
    /// Another daemon answered on its socket.
    OtherDaemon(Daemon),
}

impl fmt::Display for HealthMiss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HealthMiss::NoAnswer => f.write_str("no answer"),
            HealthMiss::OtherProtocol(why) => f.write_str(why),
            HealthMiss::OtherDaemon(d) => write!(f, "{d} answered on its socket"),
        }
    }
}

/// Why the supervisor ended a process itself, or could not start it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cause {
    /// The program could not be started: the error, in words.
    SpawnFailed(String),
    /// No readiness line within the policy's ready timeout.
    NotReady(Duration),
    /// Its health checks failed this many times in a row, the last one so.
    Hung { misses: u32, last: HealthMiss },
    /// An operator asked for a restart.
    RestartRequested,
    /// The tree is stopping (SIGTERM, `meta-core stop`, or a give-up).
    StopRequested,
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::SpawnFailed(why) => f.write_str(why),
            Cause::NotReady(after) => write!(f, "not ready after {} s", after.as_secs()),
            Cause::Hung {
                misses,
                last: HealthMiss::NoAnswer,
            } => write!(f, "did not answer /health {misses} times in a row"),
            Cause::Hung { misses, last } => {
                write!(f, "failed /health {misses} times in a row: {last}")
            }
            Cause::RestartRequested => f.write_str("restart requested"),
            Cause::StopRequested => f.write_str("stop requested"),
        }
    }
}

/// How one process's life ended: its exit and, when the supervisor ended
/// it (or never got it started), why. Shown as `lastExit.reason`:
/// "killed by SIGKILL (did not answer /health 3 times in a row)".
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ending {
    pub(crate) exit: Exit,
    pub(crate) cause: Option<Cause>,
}

impl Ending {
    /// An exit nobody asked for.
    pub(crate) fn on_its_own(exit: Exit) -> Self {
        Self { exit, cause: None }
    }
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cause {
            None => write!(f, "{}", self.exit),
            Some(cause) => write!(f, "{} ({cause})", self.exit),
        }
    }
}

/// Why the supervisor stops the tree by itself: a daemon whose crash loop
/// means "give up" reached it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{daemon} failed {failures} times in a row ({last})")]
pub struct GiveUp {
    pub(crate) daemon: Daemon,
    pub(crate) failures: u32,
    pub(crate) last: Ending,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_operators_and_tests_read() {
        assert_eq!(Exit::Code(0).to_string(), "exited with status 0");
        assert_eq!(Exit::Signal(9).to_string(), "killed by SIGKILL");
        assert_eq!(Exit::Signal(64).to_string(), "killed by signal 64");
        let hung = Ending {
            exit: Exit::Signal(9),
            cause: Some(Cause::Hung {
                misses: 3,
                last: HealthMiss::NoAnswer,
            }),
        };
        assert_eq!(
            hung.to_string(),
            "killed by SIGKILL (did not answer /health 3 times in a row)"
        );
        let restarted = Ending {
            exit: Exit::Code(0),
            cause: Some(Cause::RestartRequested),
        };
        assert_eq!(
            restarted.to_string(),
            "exited with status 0 (restart requested)"
        );
        let late = Cause::NotReady(Duration::from_secs(120));
        assert_eq!(late.to_string(), "not ready after 120 s");
        let other = Cause::Hung {
            misses: 3,
            last: HealthMiss::OtherProtocol("storaged 0.2.0 speaks socket protocol 2".into()),
        };
        assert!(other.to_string().contains("/health"), "{other}");
        let gave_up = GiveUp {
            daemon: Daemon::Storaged,
            failures: 5,
            last: Ending::on_its_own(Exit::Code(1)),
        };
        assert_eq!(
            gave_up.to_string(),
            "storaged failed 5 times in a row (exited with status 1)"
        );
    }
}
