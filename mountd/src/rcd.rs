//! `rclone rcd`, mountd's child: started on a free loopback port with a
//! user and password made for this start, restarted with backoff when it
//! dies, stopped with mountd.
//!
//! - The credentials go to rclone in its environment (`RCLONE_RC_USER`,
//!   `RCLONE_RC_PASS`): a command line is readable by every user of the
//!   host, an environment only by the process's own user and root.
//! - rclone is bound to mountd's life: through `setpriv --pdeathsig KILL`
//!   when the host has it, so a mountd killed with SIGKILL takes rclone
//!   with it; in any case its pid is kept in `mountd-rclone.pid` in the
//!   run directory, and the next mountd kills what the last one left.
//! - Without `rclone` on the PATH, mountd stays up and its status says
//!   `not-installed`; it looks again every [`LOOK_AGAIN`].

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use metacore::api::mountd::{RcdState, RcdStatus};
use metacore::backoff::Backoff;
use metacore::shutdown::Shutdown;
use tokio::process::Command;

use crate::rc::Rc;
use metacore::sync::Locked;

/// How often mountd looks for rclone again when it is not installed.
const LOOK_AGAIN: Duration = Duration::from_secs(10);
/// How long rclone may take to answer its first request.
const READY_WITHIN: Duration = Duration::from_secs(10);
/// Between SIGTERM and SIGKILL when rclone is stopped (it ends at once on
/// SIGTERM; the supervisor gives mountd 1 s in all, unmounts included).
const STOP_GRACE: Duration = Duration::from_millis(300);
/// First restart delay; it doubles up to [`MAX_BACKOFF`], and starts over
/// after rclone has run [`STABLE_AFTER`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
const STABLE_AFTER: Duration = Duration::from_secs(60);

/// How often a running rclone is asked whether it answers, how long it
/// has, and how many misses in a row end it (it is then started again).
const LIVENESS_EVERY: Duration = Duration::from_secs(10);
const LIVENESS_TIMEOUT: Duration = Duration::from_secs(5);
const LIVENESS_MISSES: u32 = 3;

/// The variables of mountd's environment rclone is given (besides its
/// credentials): what it needs to find things and reach remotes, and its
/// own `RCLONE_*`. Nothing else of mountd's (the admin token) reaches it.
const PASSED_ON: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "TMPDIR",
    "LANG",
    "TZ",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// Why no rclone answers, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoRclone {
    /// Not on the PATH; looked for again every [`LOOK_AGAIN`].
    NotInstalled(String),
    /// Starting, restarting or stopped.
    NotRunning(String),
}

impl std::fmt::Display for NoRclone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotInstalled(why) | Self::NotRunning(why) => f.write_str(why),
        }
    }
}

/// The child and what is known of it.
#[derive(Debug)]
pub struct Rcd {
    pidfile: PathBuf,
    /// What `/status` shows; written by the keeping task, read by anyone.
    status: Mutex<RcdStatus>,
    /// Where the running rclone answers; `None` while none runs.
    rc: Mutex<Option<Rc>>,
    /// Starts so far (the generation of the next `Rc`).
    starts: std::sync::atomic::AtomicU64,
    /// Bumped at every change of state, so the mount keeper wakes.
    changed: tokio::sync::watch::Sender<u64>,
}

impl Rcd {
    pub fn new(pidfile: PathBuf) -> Self {
        Self {
            pidfile,
            status: Mutex::new(RcdStatus::default()),
            rc: Mutex::new(None),
            starts: std::sync::atomic::AtomicU64::new(0),
            changed: tokio::sync::watch::channel(0).0,
        }
    }

    /// Changes whenever rclone's state does.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Why mounts cannot be made now, when they cannot.
    pub fn unavailable(&self) -> Option<NoRclone> {
        if self.rc().is_some() {
            return None;
        }
        let s = self.status();
        Some(match (s.state, s.reason) {
            (RcdState::NotInstalled, Some(r)) => NoRclone::NotInstalled(r),
            (state, Some(r)) => NoRclone::NotRunning(format!("rclone rcd is {state}: {r}")),
            (state, None) => NoRclone::NotRunning(format!("rclone rcd is {state}")),
        })
    }

    pub fn status(&self) -> RcdStatus {
        self.status.locked().clone()
    }

    /// The running rclone's address and credentials, if it runs.
    pub fn rc(&self) -> Option<Rc> {
        self.rc.locked().clone()
    }

    fn set(&self, state: RcdState, reason: Option<String>, pid: Option<u32>, url: Option<String>) {
        let mut s = self.status.locked();
        s.state = state;
        s.reason = reason;
        s.pid = pid;
        s.url = url;
        drop(s);
        self.changed.send_modify(|n| *n += 1);
    }

    /// Runs rclone until shutdown, starting it again whenever it ends.
    pub async fn keep_running(self: Arc<Self>, shutdown: Shutdown) {
        kill_leftover(&self.pidfile);
        let mut backoff = Backoff::doubling(FIRST_BACKOFF, MAX_BACKOFF);
        while !shutdown.is_triggered() {
            let Some(rclone) = on_path("rclone") else {
                self.set(
                    RcdState::NotInstalled,
                    Some("rclone is not installed (not found on the PATH)".into()),
                    None,
                    None,
                );
                pause(LOOK_AGAIN, &shutdown).await;
                continue;
            };
            let started = Instant::now();
            let ended = self.run_once(&rclone, &shutdown).await;
            *self.rc.locked() = None;
            match ended {
                Ok(()) => break,
                Err(why) => {
                    tracing::warn!(reason = %why, "rclone rcd ended; starting it again");
                    let mut s = self.status.locked();
                    s.restarts += 1;
                    drop(s);
                    self.set(RcdState::Restarting, Some(why), None, None);
                }
            }
            // A life that lasted is not a loop: the next wait is the first.
            if started.elapsed() >= STABLE_AFTER {
                backoff.reset();
            }
            pause(backoff.fail(), &shutdown).await;
        }
        self.set(RcdState::Stopped, None, None, None);
    }

    /// One life of rclone: `Ok` when it was stopped for shutdown, the
    /// reason it ended otherwise.
    async fn run_once(&self, rclone: &Path, shutdown: &Shutdown) -> Result<(), String> {
        let port = free_port().map_err(|e| format!("no free loopback port: {e}"))?;
        let addr = format!("127.0.0.1:{port}");
        let rc = Rc {
            url: format!("http://{addr}"),
            user: "mountd".into(),
            pass: format!("{:032x}", rand::random::<u128>()),
            generation: self
                .starts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1,
        };
        let mut cmd = command(rclone, &addr, &rc);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start rclone: {e}"))?;
        let pid = child.id();
        if let Some(pid) = pid {
            // With its start time: a pid alone may name another process
            // by the time the next mountd reads it.
            let started = start_time(pid).unwrap_or_default();
            let _ = std::fs::write(&self.pidfile, format!("{pid} {started}"));
        }
        self.set(RcdState::Starting, None, pid, Some(rc.url.clone()));
        tracing::info!(pid, url = %rc.url, "started rclone rcd");
        let ready_by = Instant::now() + READY_WITHIN;
        let mut ready = false;
        let mut misses = 0;
        loop {
            tokio::select! {
                ended = child.wait() => {
                    let _ = std::fs::remove_file(&self.pidfile);
                    return Err(match ended {
                        Ok(status) => format!("rclone rcd exited ({status})"),
                        Err(e) => format!("cannot wait for rclone rcd: {e}"),
                    });
                }
                () = shutdown.wait() => {
                    stop(&mut child).await;
                    let _ = std::fs::remove_file(&self.pidfile);
                    return Ok(());
                }
                () = tokio::time::sleep(LIVENESS_EVERY), if ready => {
                    if rc.noop(LIVENESS_TIMEOUT).await.is_ok() {
                        misses = 0;
                    } else {
                        misses += 1;
                        tracing::warn!(pid, misses, "rclone rcd did not answer");
                        if misses >= LIVENESS_MISSES {
                            stop(&mut child).await;
                            let _ = std::fs::remove_file(&self.pidfile);
                            return Err(format!(
                                "rclone rcd stopped answering ({misses} checks in a row)"
                            ));
                        }
                    }
                }
                () = tokio::time::sleep(Duration::from_millis(50)), if !ready => {
                    if rc.noop(Duration::from_secs(1)).await.is_ok() {
                        ready = true;
                        *self.rc.locked() = Some(rc.clone());
                        self.set(RcdState::Running, None, pid, Some(rc.url.clone()));
                        tracing::info!(pid, "rclone rcd answers");
                    } else if Instant::now() > ready_by {
                        stop(&mut child).await;
                        let _ = std::fs::remove_file(&self.pidfile);
                        return Err(format!("rclone rcd did not answer within {READY_WITHIN:?}"));
                    }
                }
            }
        }
    }
}

/// `rclone rcd` on `addr`, bound to mountd's life when `setpriv` is
/// there, with only the environment it needs and `rc`'s credentials.
fn command(rclone: &Path, addr: &str, rc: &Rc) -> Command {
    let mut cmd = match on_path("setpriv") {
        Some(setpriv) => {
            let mut c = Command::new(setpriv);
            c.args(["--pdeathsig", "KILL", "--"]).arg(rclone);
            c
        }
        None => Command::new(rclone),
    };
    cmd.args(["rcd", "--rc-addr", addr])
        .env_clear()
        .envs(std::env::vars_os().filter(|(k, _)| {
            let k = k.to_string_lossy();
            PASSED_ON.contains(&k.as_ref())
                || k.starts_with("RCLONE_")
                || k.starts_with("LC_")
                || k.starts_with("XDG_")
        }))
        .env("RCLONE_RC_USER", &rc.user)
        .env("RCLONE_RC_PASS", &rc.pass)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// SIGTERM, then SIGKILL after [`STOP_GRACE`].
async fn stop(child: &mut tokio::process::Child) {
    if let Some(pid) = child
        .id()
        .and_then(|p| rustix::process::Pid::from_raw(p as i32))
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    if tokio::time::timeout(STOP_GRACE, child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}

/// Kills the rclone a previous mountd left running (one killed with
/// SIGKILL on a host without `setpriv`), if the process the file names is
/// still that rclone: the same pid, started at the same time.
fn kill_leftover(pidfile: &Path) {
    let Ok(text) = std::fs::read_to_string(pidfile) else {
        return;
    };
    let _ = std::fs::remove_file(pidfile);
    let mut parts = text.split_whitespace();
    let (Some(pid), Some(started)) = (
        parts.next().and_then(|p| p.parse::<u32>().ok()),
        parts.next().and_then(|s| s.parse::<u64>().ok()),
    ) else {
        return;
    };
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    if comm.trim() != "rclone" || start_time(pid) != Some(started) {
        return;
    }
    if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
        tracing::warn!(pid, "killing the rclone a previous mountd left");
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
}

/// When process `pid` started, in clock ticks after boot (`/proc/<pid>/stat`,
/// field 22): with the pid, it names one process for good.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after_name) = stat.rsplit_once(')')?;
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// The first executable `name` on the PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            })
        })
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Waits `d`, or less when shutdown comes.
async fn pause(d: Duration, shutdown: &Shutdown) {
    tokio::select! {
        () = tokio::time::sleep(d) => {}
        () = shutdown.wait() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leftover_is_named_by_pid_and_start_time() {
        let Some(rclone) = on_path("rclone") else {
            eprintln!("rclone is not installed: the leftover test has nothing to kill");
            return;
        };
        let mut child = std::process::Command::new(rclone)
            .args(["rcd", "--rc-no-auth", "--rc-addr", "127.0.0.1:0"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        let started = start_time(pid).expect("its start time");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pid");
        // Another start time (the pid was reused): left alone.
        std::fs::write(&file, format!("{pid} {}", started + 1)).unwrap();
        kill_leftover(&file);
        assert!(!file.exists(), "the file is removed once read");
        assert!(child.try_wait().unwrap().is_none(), "not killed");
        // The same process: killed.
        std::fs::write(&file, format!("{pid} {started}")).unwrap();
        kill_leftover(&file);
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9), "{status}");
    }
}
