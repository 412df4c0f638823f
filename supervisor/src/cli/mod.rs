//! The `meta-core` command line: `run` (the default) starts the supervisor;
//! `status`, `logs`, `restart`, `stop` and `health` are for operators and talk to a
//! running supervisor through its control socket (logs are read from the
//! files directly, so they can be read even when it is down); `backup`
//! talks to storaged's socket. Only `run` and `backup` build an async
//! runtime: the other operator commands are one blocking call each
//! ([`ControlClient`]), so that a call costs little more than the process
//! start.
//!
//! Exit status: 0 done; 1 it failed (no supervisor answers, a restart did
//! not come back, the supervisor gave up, a backup failed); 2 the command
//! line is wrong (unknown subcommand, flag or daemon, a backup target
//! storaged refuses).

mod backup;
mod health;
mod logs;
mod status;

use std::process::ExitCode;
use std::time::Duration;

use metacore::Config;
use metacore::clock::unix_ms;
use metacore::layout::Daemon;
use metacore::shutdown::{self, Trigger};
use metacore::socket::client::ClientError;
use tokio::signal::unix::{SignalKind, signal};

use crate::control::client::ControlClient;
use crate::control::supervised;

const USAGE: &str = "\
usage: meta-core [run]                      run the supervisor (the container's entrypoint)
       meta-core status [--json]            the daemons of the running supervisor
       meta-core logs <daemon> [-f] [-n N]  the last N lines (default 50) of a daemon's log; -f follows it
       meta-core restart <daemon>           restart one daemon and wait until it is ready again
       meta-core stop                       stop the daemons in reverse order, then the supervisor
       meta-core admin-token                print the admin routes' bearer token (made if there is none)
       meta-core health                     exit 0 if this container is healthy: a standby waiting, or a leader whose API answers
       meta-core backup <file>              copy the live database to <file> while writes go on
Configuration comes from the environment (META_CORE_PATH, META_CORE_RUN_DIR, ...): see docs/operations.md.";

/// A command line that cannot be carried out as written.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BadArgs {
    /// Printed with the usage.
    Usage(String),
    /// A daemon this tree does not run: the message lists those it does.
    UnknownDaemon(String),
}

use BadArgs::Usage;

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Cli {
    Run,
    Status {
        json: bool,
    },
    Logs {
        daemon: Daemon,
        follow: bool,
        lines: usize,
    },
    Restart {
        daemon: Daemon,
    },
    Stop,
    AdminToken,
    Health,
    /// `backup <file>`, the file as given (relative to the current folder).
    Backup {
        file: std::path::PathBuf,
    },
    Help,
    Version,
}

impl Cli {
    pub(crate) fn parse(args: &[String]) -> Result<Cli, BadArgs> {
        let mut it = args.iter().map(String::as_str);
        let cmd = it.next();
        let rest: Vec<&str> = it.collect();
        let no_more = |cli: Cli, rest: &[&str]| match rest.first() {
            None => Ok(cli),
            Some(x) => Err(Usage(format!("unexpected argument {x:?}"))),
        };
        match cmd {
            None | Some("run") => no_more(Cli::Run, &rest),
            Some("help" | "--help" | "-h") => Ok(Cli::Help),
            Some("version" | "--version" | "-V") => Ok(Cli::Version),
            Some("stop") => no_more(Cli::Stop, &rest),
            Some("admin-token") => no_more(Cli::AdminToken, &rest),
            Some("health") => no_more(Cli::Health, &rest),
            Some("status") => match rest.as_slice() {
                [] => Ok(Cli::Status { json: false }),
                ["--json"] => Ok(Cli::Status { json: true }),
                [x, ..] => Err(Usage(format!("unexpected argument {x:?}"))),
            },
            Some("restart") => match rest.as_slice() {
                [d] if !d.starts_with('-') => Ok(Cli::Restart {
                    daemon: daemon_arg(d)?,
                }),
                [] => Err(Usage("restart needs a daemon name".into())),
                _ => Err(Usage("restart takes exactly one daemon name".into())),
            },
            Some("logs") => parse_logs(&rest),
            Some("backup") => match rest.as_slice() {
                [f] if !f.starts_with('-') && !f.is_empty() => Ok(Cli::Backup { file: f.into() }),
                [] => Err(Usage("backup needs the file to write".into())),
                [f] if f.starts_with('-') => Err(Usage(format!(
                    "unknown option {f:?} for backup (a file whose name starts with - is ./{f})"
                ))),
                _ => Err(Usage("backup takes exactly one file".into())),
            },
            Some(other) => Err(Usage(format!("unknown command {other:?}"))),
        }
    }
}

fn parse_logs(args: &[&str]) -> Result<Cli, BadArgs> {
    let (mut daemon, mut follow, mut lines) = (None, false, 50usize);
    let mut i = 0;
    while i < args.len() {
        match args[i] {
            "-f" | "--follow" => follow = true,
            "-n" | "--lines" => {
                i += 1;
                let v = args
                    .get(i)
                    .ok_or_else(|| Usage("-n needs a number of lines".into()))?;
                lines = v
                    .parse()
                    .map_err(|_| Usage(format!("-n needs a number of lines, not {v:?}")))?;
            }
            x if x.starts_with('-') => return Err(Usage(format!("unknown option {x:?} for logs"))),
            x if daemon.is_none() => daemon = Some(x.to_owned()),
            x => return Err(Usage(format!("unexpected argument {x:?}"))),
        }
        i += 1;
    }
    let daemon = daemon.ok_or_else(|| Usage("logs needs a daemon name".into()))?;
    let daemon = daemon_arg(&daemon)?;
    Ok(Cli::Logs {
        daemon,
        follow,
        lines,
    })
}

/// The supervised daemon a command line names.
fn daemon_arg(name: &str) -> Result<Daemon, BadArgs> {
    supervised(name).map_err(|e| BadArgs::UnknownDaemon(e.message))
}

/// The binary's main.
pub fn main() -> ExitCode {
    metacore::files::private_by_default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cli = match Cli::parse(&args) {
        Ok(c) => c,
        Err(BadArgs::Usage(why)) => {
            eprintln!("meta-core: {why}\n{USAGE}");
            return ExitCode::from(2);
        }
        Err(BadArgs::UnknownDaemon(why)) => {
            eprintln!("meta-core: {why}");
            return ExitCode::from(2);
        }
    };
    match cli {
        Cli::Help => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Cli::Version => {
            println!("meta-core {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("meta-core: {e}");
            return ExitCode::from(2);
        }
    };
    match cli {
        Cli::Run => run(config),
        Cli::Status { json } => status(&config, json),
        Cli::Logs {
            daemon,
            follow,
            lines,
        } => logs::logs(&config, daemon, follow, lines),
        Cli::Restart { daemon } => restart(&config, daemon),
        Cli::Stop => stop(&config),
        Cli::AdminToken => admin_token(&config),
        Cli::Health => health::health(&config),
        Cli::Backup { file } => backup::backup(&config, &file),
        Cli::Help | Cli::Version => ExitCode::SUCCESS,
    }
}

/// `meta-core admin-token`: the token the admin routes ask for, on
/// stdout alone (`curl -H "Authorization: Bearer $(meta-core admin-token)"`),
/// read where apid reads it; made, as the first start would, when there
/// is none yet. Exit 1 when the admin routes are open or it cannot be had.
fn admin_token(config: &Config) -> ExitCode {
    match metacore::admin::resolve(config) {
        Ok((metacore::admin::AdminAccess::Token(t), _)) => {
            println!("{}", t.reveal());
            ExitCode::SUCCESS
        }
        Ok((metacore::admin::AdminAccess::Open, source)) => {
            eprintln!("meta-core: no token: {source}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("meta-core: {}", metacore::telemetry::report(&e));
            ExitCode::FAILURE
        }
    }
}

/// `meta-core run`: the supervisor, on one thread (it forks its daemons
/// from it, and the kernel's parent-death signal follows the forking
/// thread), until SIGTERM, SIGINT or `meta-core stop`.
fn run(config: Config) -> ExitCode {
    metacore::telemetry::init(config.log_format);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let (trigger, shutdown) = shutdown::channel();
        if let Err(e) = stop_on_signals(trigger) {
            tracing::error!("cannot watch SIGTERM and SIGINT: {e}");
            return Err(None);
        }
        crate::run(config, shutdown).await.map_err(Some)
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Some(e)) => {
            tracing::error!("{}", metacore::telemetry::report(&e));
            ExitCode::FAILURE
        }
        Err(None) => ExitCode::FAILURE,
    }
}

/// The first SIGTERM or SIGINT fires the orderly stop. The handlers only
/// fire the trigger: the stages of `run` act on it.
fn stop_on_signals(trigger: Trigger) -> std::io::Result<()> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM"),
            _ = int.recv() => tracing::info!("SIGINT"),
        }
        trigger.fire();
        // Keep the trigger: dropping it fires it too, already done.
        std::future::pending::<()>().await;
    });
    Ok(())
}

fn client(config: &Config) -> ControlClient {
    ControlClient::new(&config.layout().supervisor_socket())
}

/// Prints why a call to the supervisor failed; the exit status for it.
fn failed(client: &ControlClient, e: ClientError) -> ExitCode {
    match e {
        ClientError::Unavailable { .. } => eprintln!(
            "meta-core: no supervisor answers on {} (is meta-core running with this META_CORE_RUN_DIR?)",
            client.socket().display()
        ),
        ClientError::Api(api) if api.code == metacore::ErrorCode::NotFound => {
            eprintln!("meta-core: {}", api.message);
            return ExitCode::from(2);
        }
        other => eprintln!("meta-core: {other}"),
    }
    ExitCode::FAILURE
}

fn status(config: &Config, json: bool) -> ExitCode {
    let client = client(config);
    let s = match client.status() {
        Ok(s) => s,
        Err(e) => return failed(&client, e),
    };
    if !json {
        print!("{}", status::render_status(&s, unix_ms()));
        return ExitCode::SUCCESS;
    }
    match serde_json::to_string_pretty(&s) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("meta-core: cannot print the status: {e}");
            ExitCode::FAILURE
        }
    }
}

fn restart(config: &Config, daemon: Daemon) -> ExitCode {
    let client = client(config);
    match client.restart(daemon) {
        Ok(row) => {
            println!(
                "{daemon} restarted: pid {}, {}",
                row.pid.map_or("-".into(), |p| p.to_string()),
                row.state.as_str()
            );
            ExitCode::SUCCESS
        }
        Err(e) => failed(&client, e),
    }
}

fn stop(config: &Config) -> ExitCode {
    let client = client(config);
    if let Err(e) = client.stop() {
        return failed(&client, e);
    }
    // Answer once it is gone, so scripts can rely on it.
    loop {
        std::thread::sleep(Duration::from_millis(20));
        if client.health().is_err() {
            println!("meta-core stopped");
            return ExitCode::SUCCESS;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_the_commands() {
        assert_eq!(Cli::parse(&args("")), Ok(Cli::Run));
        assert_eq!(Cli::parse(&args("run")), Ok(Cli::Run));
        assert_eq!(
            Cli::parse(&args("status --json")),
            Ok(Cli::Status { json: true })
        );
        assert_eq!(
            Cli::parse(&args("logs apid -f -n 5")),
            Ok(Cli::Logs {
                daemon: Daemon::Apid,
                follow: true,
                lines: 5
            })
        );
        assert_eq!(
            Cli::parse(&args("restart storaged")),
            Ok(Cli::Restart {
                daemon: Daemon::Storaged
            })
        );
        assert_eq!(Cli::parse(&args("admin-token")), Ok(Cli::AdminToken));
        assert_eq!(Cli::parse(&args("health")), Ok(Cli::Health));
        assert_eq!(
            Cli::parse(&args("backup b.db")),
            Ok(Cli::Backup {
                file: "b.db".into()
            })
        );
        for bad in [
            "admin-token x",
            "health --now",
            "frobnicate",
            "status --yaml",
            "logs",
            "logs apid -n",
            "logs apid -n x",
            "restart",
            "stop now",
            "backup",
            "backup -f",
            "backup a.db b.db",
        ] {
            assert!(
                matches!(Cli::parse(&args(bad)), Err(BadArgs::Usage(_))),
                "{bad:?} must be refused"
            );
        }
        for unknown in ["logs nope", "restart nope", "logs redis"] {
            let Err(BadArgs::UnknownDaemon(why)) = Cli::parse(&args(unknown)) else {
                panic!("{unknown:?} names no daemon of the tree");
            };
            assert!(why.contains("storaged, apid, watcherd, mountd"), "{why}");
        }
    }
}
