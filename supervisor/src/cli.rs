//! The `meta-core` command line: `run` (the default) starts the supervisor;
//! `status`, `logs`, `restart` and `stop` are for operators and talk to a
//! running supervisor through its control socket (logs are read from the
//! files directly, so they can be read even when it is down).
//!
//! Exit status: 0 done; 1 it failed (no supervisor answers, a restart did
//! not come back, the supervisor gave up); 2 the command line is wrong
//! (unknown subcommand, flag or daemon).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use metacore::Config;
use metacore::api::supervisor::{DaemonStatus, SupervisorClient, SupervisorStatus};
use metacore::clock::unix_ms;
use metacore::layout::Daemon;
use metacore::socket::client::ClientError;

use crate::control::supervised;

const USAGE: &str = "\
usage: meta-core [run]                      run the supervisor (the container's entrypoint)
       meta-core status [--json]            the daemons of the running supervisor
       meta-core logs <daemon> [-f] [-n N]  the last N lines (default 50) of a daemon's log; -f follows it
       meta-core restart <daemon>           restart one daemon and wait until it is ready again
       meta-core stop                       stop the daemons in reverse order, then the supervisor
Configuration comes from the environment (META_CORE_PATH, META_CORE_RUN_DIR, ...): see docs/operations.md.";

/// A command line that cannot be carried out as written.
#[derive(Debug, PartialEq, Eq)]
pub struct Usage(pub String);

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Cli {
    Run,
    Status {
        json: bool,
    },
    Logs {
        daemon: String,
        follow: bool,
        lines: usize,
    },
    Restart {
        daemon: String,
    },
    Stop,
    Help,
    Version,
}

impl Cli {
    pub fn parse(args: &[String]) -> Result<Cli, Usage> {
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
            Some("status") => match rest.as_slice() {
                [] => Ok(Cli::Status { json: false }),
                ["--json"] => Ok(Cli::Status { json: true }),
                [x, ..] => Err(Usage(format!("unexpected argument {x:?}"))),
            },
            Some("restart") => match rest.as_slice() {
                [d] if !d.starts_with('-') => Ok(Cli::Restart {
                    daemon: (*d).to_owned(),
                }),
                [] => Err(Usage("restart needs a daemon name".into())),
                _ => Err(Usage("restart takes exactly one daemon name".into())),
            },
            Some("logs") => parse_logs(&rest),
            Some(other) => Err(Usage(format!("unknown command {other:?}"))),
        }
    }
}

fn parse_logs(args: &[&str]) -> Result<Cli, Usage> {
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
    Ok(Cli::Logs {
        daemon,
        follow,
        lines,
    })
}

/// The binary's main.
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cli = match Cli::parse(&args) {
        Ok(c) => c,
        Err(Usage(why)) => {
            eprintln!("meta-core: {why}\n{USAGE}");
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
    // One thread: the supervisor forks its daemons from it (the kernel's
    // parent-death signal follows the forking thread), and it is all a
    // supervisor or a CLI call needs.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async move {
        match cli {
            Cli::Run => {
                metacore::telemetry::init(config.log_format);
                match crate::run(config).await {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        tracing::error!("{}", metacore::telemetry::report(&e));
                        ExitCode::FAILURE
                    }
                }
            }
            Cli::Status { json } => status(&config, json).await,
            Cli::Logs {
                daemon,
                follow,
                lines,
            } => logs(&config, &daemon, follow, lines).await,
            Cli::Restart { daemon } => restart(&config, &daemon).await,
            Cli::Stop => stop(&config).await,
            Cli::Help | Cli::Version => unreachable!("answered above"),
        }
    })
}

fn client(config: &Config) -> SupervisorClient {
    SupervisorClient::new(&config.layout().supervisor_socket())
}

/// Prints why a call to the supervisor failed; the exit status for it.
fn failed(config: &Config, e: ClientError) -> ExitCode {
    match e {
        ClientError::Unavailable { .. } => eprintln!(
            "meta-core: no supervisor answers on {} (is meta-core running with this META_CORE_RUN_DIR?)",
            config.layout().supervisor_socket().display()
        ),
        ClientError::Api(api) if api.code == metacore::ErrorCode::NotFound => {
            eprintln!("meta-core: {}", api.message);
            return ExitCode::from(2);
        }
        other => eprintln!("meta-core: {other}"),
    }
    ExitCode::FAILURE
}

/// The supervised daemon a command line names, or exit 2 saying which
/// names there are.
fn daemon_arg(name: &str) -> Result<Daemon, ExitCode> {
    supervised(name).map_err(|e| {
        eprintln!("meta-core: {}", e.message);
        ExitCode::from(2)
    })
}

async fn status(config: &Config, json: bool) -> ExitCode {
    match client(config).status().await {
        Ok(s) if json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&s).expect("status serializes")
            );
            ExitCode::SUCCESS
        }
        Ok(s) => {
            print!("{}", render_status(&s, unix_ms()));
            ExitCode::SUCCESS
        }
        Err(e) => failed(config, e),
    }
}

async fn restart(config: &Config, daemon: &str) -> ExitCode {
    if let Err(code) = daemon_arg(daemon) {
        return code;
    }
    match client(config).restart(daemon).await {
        Ok(row) => {
            println!(
                "{daemon} restarted: pid {}, {}",
                row.pid.map_or("-".into(), |p| p.to_string()),
                row.state.as_str()
            );
            ExitCode::SUCCESS
        }
        Err(e) => failed(config, e),
    }
}

async fn stop(config: &Config) -> ExitCode {
    let client = client(config);
    if let Err(e) = client.stop().await {
        return failed(config, e);
    }
    // Answer once it is gone, so scripts can rely on it.
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if client.health().await.is_err() {
            println!("meta-core stopped");
            return ExitCode::SUCCESS;
        }
    }
}

/// "850ms", "42s", "3m 12s", "5h 02m", "3d 04h".
pub fn human(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// The status as the operator reads it.
pub fn render_status(s: &SupervisorStatus, now_ms: u64) -> String {
    let mut out = format!(
        "meta-core {} (pid {}, up {})",
        s.role.as_str(),
        s.pid,
        human(s.uptime_ms)
    );
    if let Some(url) = &s.leader_url {
        out.push_str(&format!(", leader {url}"));
    }
    out.push_str(&format!(", logs in {}\n", s.log_dir));
    let rows: Vec<[String; 7]> = s.daemons.iter().map(|d| row(d, now_ms)).collect();
    let header = [
        "DAEMON",
        "PID",
        "STATE",
        "READY",
        "UPTIME",
        "RESTARTS",
        "LAST EXIT",
    ]
    .map(String::from);
    let mut widths = header.clone().map(|h| h.len());
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    for r in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (c, w)) in r.iter().zip(widths).enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn row(d: &DaemonStatus, now_ms: u64) -> [String; 7] {
    let state = match d.next_start_in_ms {
        Some(ms) => format!("{} (next start in {})", d.state.as_str(), human(ms)),
        None => d.state.as_str().to_owned(),
    };
    let last = match &d.last_exit {
        Some(e) => format!("{}, {} ago", e.reason, human(now_ms.saturating_sub(e.at))),
        None => "-".into(),
    };
    [
        d.name.clone(),
        d.pid.map_or("-".into(), |p| p.to_string()),
        state,
        if d.ready { "yes" } else { "no" }.into(),
        d.uptime_ms.map_or("-".into(), human),
        d.restarts.to_string(),
        last,
    ]
}

async fn logs(config: &Config, daemon: &str, follow: bool, lines: usize) -> ExitCode {
    let d = match daemon_arg(daemon) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let path = crate::logs::path_of(&config.log_dir, d);
    let mut out = io::stdout().lock();
    let opened = match File::open(&path) {
        Ok(mut f) => match print_tail(&mut f, lines, &mut out) {
            Ok(end) => Some((f, end)),
            Err(e) => {
                eprintln!("meta-core: cannot read {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound && follow => None,
        Err(e) => {
            eprintln!("meta-core: cannot read {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    };
    if !follow {
        return ExitCode::SUCCESS;
    }
    drop(out);
    follow_file(&path, opened).await
}

/// Writes the last `n` lines of `f`; returns the offset of its end.
fn print_tail(f: &mut File, n: usize, out: &mut impl Write) -> io::Result<u64> {
    let end = f.seek(SeekFrom::End(0))?;
    let mut start = end;
    let mut newlines = 0;
    let mut chunk = vec![0u8; 64 * 1024];
    // Walk back until n + 1 newlines are behind us (the last byte is
    // usually the last line's own newline).
    'back: while start > 0 {
        let len = chunk.len().min(start as usize);
        start -= len as u64;
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut chunk[..len])?;
        for (i, &b) in chunk[..len].iter().enumerate().rev() {
            if b == b'\n' && start + i as u64 + 1 != end {
                newlines += 1;
                if newlines == n {
                    start += i as u64 + 1;
                    break 'back;
                }
            }
        }
    }
    if n == 0 {
        return Ok(end);
    }
    f.seek(SeekFrom::Start(start))?;
    io::copy(&mut f.take(end - start), out)?;
    out.flush()?;
    Ok(end)
}

/// Prints what is appended to `path`, starting with the file already
/// open at `pos`, and follows it across rotations: when another file (or a
/// shorter one) is at the path, the open one is read to its end once more,
/// then the new one from its start.
async fn follow_file(path: &Path, opened: Option<(File, u64)>) -> ExitCode {
    let mut current = opened;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if let Some((f, pos)) = current.as_mut()
            && copy_new(f, pos, &mut buf).is_err()
        {
            return ExitCode::SUCCESS; // the reader went away
        }
        let replaced = match (std::fs::metadata(path), &current) {
            (Ok(meta), Some((f, pos))) => {
                f.metadata().map(|m| m.ino()).ok() != Some(meta.ino()) || meta.len() < *pos
            }
            (Ok(_), None) => true,
            (Err(_), _) => false,
        };
        if replaced && let Ok(f) = File::open(path) {
            // What was appended to the old file since the read above.
            if let Some((old, pos)) = current.as_mut()
                && copy_new(old, pos, &mut buf).is_err()
            {
                return ExitCode::SUCCESS;
            }
            current = Some((f, 0));
            continue;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Copies what `f` holds past `pos` to stdout; an error means stdout is gone.
fn copy_new(f: &mut File, pos: &mut u64, buf: &mut [u8]) -> io::Result<()> {
    f.seek(SeekFrom::Start(*pos))?;
    loop {
        match f.read(buf) {
            Ok(0) | Err(_) => return Ok(()),
            Ok(n) => {
                let mut out = io::stdout().lock();
                out.write_all(&buf[..n])?;
                out.flush()?;
                *pos += n as u64;
            }
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
                daemon: "apid".into(),
                follow: true,
                lines: 5
            })
        );
        assert_eq!(
            Cli::parse(&args("restart storaged")),
            Ok(Cli::Restart {
                daemon: "storaged".into()
            })
        );
        for bad in [
            "frobnicate",
            "status --yaml",
            "logs",
            "logs apid -n",
            "logs apid -n x",
            "restart",
            "stop now",
        ] {
            assert!(Cli::parse(&args(bad)).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn tail_prints_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.log");
        let text: String = (0..100_000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&p, &text).unwrap();
        let mut out = Vec::new();
        let end = print_tail(&mut File::open(&p).unwrap(), 3, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "line 99997\nline 99998\nline 99999\n"
        );
        assert_eq!(end, text.len() as u64);
        let mut out = Vec::new();
        print_tail(&mut File::open(&p).unwrap(), 200_000, &mut out).unwrap();
        assert_eq!(
            out.len(),
            text.len(),
            "asking for more lines than there are prints the file"
        );
    }

    #[test]
    fn durations_read_like_a_human_wrote_them() {
        assert_eq!(human(850), "850ms");
        assert_eq!(human(42_000), "42s");
        assert_eq!(human(192_000), "3m 12s");
        assert_eq!(human(5 * 3_600_000 + 120_000), "5h 02m");
    }
}
