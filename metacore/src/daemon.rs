//! What every daemon binary's `main` does, once: read the configuration
//! (a malformed value exits 2 naming it), set up tracing, turn SIGTERM and
//! SIGINT into the shutdown signal, run the daemon, and map its result to
//! the exit status (an error is logged with its causes and exits 1), then
//! exit at once.
//!
//! Under the `meta-core` supervisor a daemon also binds its life to the
//! supervisor's (it is killed when the supervisor dies, even by SIGKILL, so
//! no orphan keeps the database open) and tells it when it is ready by
//! writing a line to the descriptor the supervisor passed (s6-style).

use std::future::Future;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::Config;
use crate::shutdown::{self, Shutdown};
use crate::telemetry;

/// Runs a daemon's `run(config, shutdown)` as the process's main.
pub async fn main<F, Fut, E>(name: &str, run: F) -> ExitCode
where
    F: FnOnce(Config, Shutdown) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::error::Error + 'static,
{
    // The command line first, before anything is opened or bound.
    let args: Vec<String> = std::env::args().skip(1).collect();
    match Args::parse(&args) {
        Args::Run => {}
        Args::Help => {
            print!("{}", usage(name));
            return ExitCode::SUCCESS;
        }
        Args::Version => {
            println!("{name} {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Args::Bad(arg) => {
            eprint!("{name}: unexpected argument {arg:?}\n\n{}", usage(name));
            return ExitCode::from(2);
        }
    }
    crate::files::private_by_default();
    if let Err(why) = bind_to_supervisor() {
        eprintln!("{name}: {why}");
        return ExitCode::FAILURE;
    }
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::from(2);
        }
    };
    telemetry::init(config.log_format);
    raise_open_file_limit();
    let (trigger, shutdown) = shutdown::channel();
    let signals = match shutdown::on_signals() {
        Ok(signals) => signals,
        Err(e) => {
            tracing::error!("cannot watch SIGTERM and SIGINT: {e}");
            return ExitCode::FAILURE;
        }
    };
    tokio::spawn(async move {
        signals.await;
        tracing::info!("stop requested; finishing in-flight work");
        trigger.fire();
        // Keep the trigger alive: dropping it is also a shutdown, already fired.
        std::future::pending::<()>().await;
    });
    let code = match run(config, shutdown).await {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!("{}", telemetry::report(&e));
            1
        }
    };
    exit_now(code)
}

/// What a daemon's command line asks.
#[derive(Debug, PartialEq, Eq)]
enum Args {
    Run,
    Help,
    Version,
    /// The first argument that means nothing to a daemon.
    Bad(String),
}

impl Args {
    fn parse(args: &[String]) -> Self {
        match args {
            [] => Args::Run,
            [a] if a == "--help" || a == "-h" || a == "help" => Args::Help,
            [a] if a == "--version" || a == "-V" => Args::Version,
            [a, ..] if (a == "--help" || a == "-h" || a == "--version" || a == "-V") => {
                Args::Bad(args[1].clone())
            }
            [a, ..] => Args::Bad(a.clone()),
        }
    }
}

fn usage(name: &str) -> String {
    format!(
        "{name} {version}: one of meta-core's daemons.\n\
         \n\
         Usage: {name} [--help | --version]\n\
         \n\
         It is started, watched and restarted by the `meta-core` supervisor\n\
         (`meta-core run`); run it alone only to debug it. It takes no\n\
         arguments: its configuration is the environment (META_CORE_PATH,\n\
         META_CORE_RUN_DIR, FILES_PATH, ...; see docs/configuration.md).\n",
        version = env!("CARGO_PKG_VERSION"),
    )
}

/// Ends the process once `run` has returned. Its work is done by then:
/// its servers have drained, storaged has committed and closed its store.
/// What is left is winding down the async runtime (waking each idle
/// worker and blocking thread and joining it), which a supervisor waiting
/// to stop the next daemon would only wait for; the kernel ends those
/// threads at once. stdout is flushed first (tracing writes stderr, which
/// is unbuffered).
fn exit_now(code: i32) -> ! {
    let _ = std::io::stdout().flush();
    std::process::exit(code)
}

/// Raises the soft limit of open descriptors to the hard limit: apid holds
/// one per HTTP connection and SSE follower (up to
/// `META_CORE_SSE_MAX_FOLLOWERS`), and the common soft default of 1,024
/// would refuse connections long before that. A failure is logged, not
/// fatal: the daemon still serves within the limit it has.
fn raise_open_file_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current == limit.maximum {
        return;
    }
    let raised = rustix::process::Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => tracing::debug!(open_files = ?limit.maximum, "raised the open-file limit"),
        Err(e) => tracing::warn!(
            "cannot raise the open-file limit from {:?} to {:?}: {e}",
            limit.current,
            limit.maximum
        ),
    }
}

/// The supervisor's pid, set in every daemon it starts.
pub const SUPERVISOR_PID_ENV: &str = "META_CORE_SUPERVISOR_PID";
/// The descriptor a daemon writes one line to once it serves.
pub const READY_FD_ENV: &str = "META_CORE_READY_FD";

/// When started by the supervisor: ask the kernel for SIGKILL when the
/// supervisor dies, then check it has not died already (between the fork
/// and this call nothing would have told us).
fn bind_to_supervisor() -> Result<(), String> {
    let Some(raw) = std::env::var(SUPERVISOR_PID_ENV).ok() else {
        return Ok(());
    };
    let pid: i32 = raw
        .trim()
        .parse()
        .map_err(|_| format!("{SUPERVISOR_PID_ENV}={raw:?} is not a pid"))?;
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        .map_err(|e| format!("cannot bind to the supervisor's life: {e}"))?;
    match rustix::process::getppid() {
        Some(parent) if parent.as_raw_nonzero().get() == pid => Ok(()),
        _ => Err(format!("the supervisor (pid {pid}) is gone; not starting")),
    }
}

static READY_SENT: AtomicBool = AtomicBool::new(false);

/// Tells the supervisor this daemon serves: writes a newline to the
/// descriptor named by `META_CORE_READY_FD` (once; a no-op when the daemon
/// runs on its own). It goes through `/proc/self/fd`, which opens the same
/// pipe without taking ownership of a raw descriptor.
pub fn notify_ready() {
    let Ok(fd) = std::env::var(READY_FD_ENV) else {
        return;
    };
    if READY_SENT.swap(true, Ordering::SeqCst) {
        return;
    }
    let Ok(fd) = fd.trim().parse::<u32>() else {
        tracing::warn!("{READY_FD_ENV}={fd:?} is not a descriptor number; readiness not signalled");
        return;
    };
    let sent = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/self/fd/{fd}"))
        .and_then(|mut pipe| pipe.write_all(b"\n"));
    if let Err(e) = sent {
        tracing::warn!("cannot signal readiness on descriptor {fd}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(a: &[&str]) -> Args {
        Args::parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn a_daemon_reads_its_command_line() {
        assert_eq!(parse(&[]), Args::Run);
        assert_eq!(parse(&["--help"]), Args::Help);
        assert_eq!(parse(&["-h"]), Args::Help);
        assert_eq!(parse(&["--version"]), Args::Version);
        assert_eq!(parse(&["-V"]), Args::Version);
        assert_eq!(parse(&["--port", "1"]), Args::Bad("--port".into()));
        assert_eq!(parse(&["--help", "x"]), Args::Bad("x".into()));
        assert_eq!(parse(&["run"]), Args::Bad("run".into()));
        assert!(usage("apid").contains("Usage: apid"));
    }
}
