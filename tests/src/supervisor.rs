//! [`MetaCore`]: one real `meta-core` supervisor for one test, running the
//! real daemons beside it, with the operator CLI and the control socket.
//!
//! ```text
//! <dir>/meta-core/                  META_CORE_PATH (shared by a standby)
//! <dir>/meta-core/logs/<daemon>.log what the supervisor captured
//! <run dir>/meta-core.sock          the control socket (one per supervisor)
//! <dir>/files/                      FILES_PATH
//! <dir>/meta-core-<n>.stderr        the supervisor's own log
//! ```
//!
//! The supervisor finds the daemons in the test's binary directory. Its
//! stdout (the daemons' lines, echoed) is not kept: the log files have it.

use std::ffi::OsString;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::Output;

use metacore::api::supervisor::{
    DaemonState, DaemonStatus, Role, SupervisorClient, SupervisorStatus,
};
use metacore::layout::Daemon;

use crate::apid::{Http, free_port};
use crate::daemon::bin_dir;
use crate::process::{self, Process};
use crate::wait::{DAEMON_DEADLINE, until};

/// How to start one supervisor.
#[derive(Debug, Clone)]
pub struct Launch {
    dir: PathBuf,
    run_dir: PathBuf,
    port: u16,
    env: Vec<(String, String)>,
}

impl Launch {
    /// `META_CORE_PATH=<dir>/meta-core`, run dir `<dir>/<run>`, a free port.
    pub fn in_dir(dir: &Path, run: &str) -> Self {
        Self {
            dir: dir.to_owned(),
            run_dir: dir.join(run),
            port: free_port(),
            env: Vec::new(),
        }
    }

    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// The environment the supervisor and the CLI get.
    fn apply(&self, cmd: &mut std::process::Command) {
        cmd.env("META_CORE_PATH", self.dir.join("meta-core"))
            .env("META_CORE_RUN_DIR", &self.run_dir)
            .env("FILES_PATH", self.dir.join("files"))
            .env("META_CORE_HTTP_HOST", "127.0.0.1")
            .env("META_CORE_HTTP_PORT", self.port.to_string())
            .env("META_CORE_BIN_DIR", bin_dir())
            .env("META_CORE_DB_READERS", "4")
            .env("LOG_FORMAT", "text")
            .env("RUST_LOG", "info");
        for (k, v) in &self.env {
            cmd.env(OsString::from(k), OsString::from(v));
        }
    }

    /// Spawns the supervisor (ready or not).
    pub fn spawn(self) -> MetaCore {
        self.spawn_command(process::command("meta-core"))
    }

    /// Spawns `cmd`, which runs the supervisor, with this launch's
    /// environment.
    fn spawn_command(self, mut cmd: std::process::Command) -> MetaCore {
        self.apply(&mut cmd);
        let process = Process::spawn("meta-core", &self.dir, cmd);
        let control = SupervisorClient::new(&self.run_dir.join("meta-core.sock"));
        MetaCore {
            http: Http::new(self.port),
            launch: self,
            process,
            control,
        }
    }

    /// Spawns the supervisor as PID 1 of a new PID namespace, as in a
    /// container: `unshare --pid --fork --mount-proc --kill-child meta-core
    /// run`. The handle's process is `unshare`; [`MetaCore::supervisor_pid`]
    /// finds the supervisor. Where this machine cannot make the namespace,
    /// the test that calls it is compiled as ignored (`tests/build.rs`).
    pub fn spawn_as_pid_1(self) -> MetaCore {
        let mut cmd = std::process::Command::new("unshare");
        process::scrub_env(&mut cmd);
        cmd.args(["--pid", "--fork", "--mount-proc", "--kill-child"])
            .arg(crate::daemon::binary("meta-core"))
            .arg("run");
        self.spawn_command(cmd)
    }

    /// Spawns the supervisor under the shell's `umask <mask>` (octal), to
    /// see what modes its files get whatever it is started with.
    pub fn spawn_with_umask(self, mask: &str) -> MetaCore {
        let mut cmd = std::process::Command::new("sh");
        process::scrub_env(&mut cmd);
        cmd.arg("-c")
            .arg(format!("umask {mask} && exec \"$0\" run"))
            .arg(crate::daemon::binary("meta-core"));
        self.spawn_command(cmd)
    }

    /// Spawns and waits until it leads with every daemon ready.
    pub async fn start(self) -> MetaCore {
        let mut mc = self.spawn();
        mc.wait_all_ready().await;
        mc
    }
}

/// One supervisor process, with an HTTP client of its apid (`Deref`).
#[derive(Debug)]
pub struct MetaCore {
    launch: Launch,
    pub process: Process,
    pub control: SupervisorClient,
    http: Http,
}

impl Deref for MetaCore {
    type Target = Http;

    fn deref(&self) -> &Http {
        &self.http
    }
}

impl MetaCore {
    pub fn meta_core_path(&self) -> PathBuf {
        self.launch.dir.join("meta-core")
    }

    pub fn log_dir(&self) -> PathBuf {
        self.meta_core_path().join("logs")
    }

    pub fn db(&self) -> PathBuf {
        self.meta_core_path().join("db/meta-core.db")
    }

    pub fn info_file(&self) -> PathBuf {
        self.meta_core_path().join("locks/kv-leader.info")
    }

    /// The URL this supervisor advertises in `kv-leader.info` (apid is
    /// bound to 127.0.0.1).
    pub fn api_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.launch.port)
    }

    pub fn run_dir(&self) -> &Path {
        &self.launch.run_dir
    }

    pub fn port(&self) -> u16 {
        self.launch.port
    }

    /// The status from the control socket; panics if it does not answer.
    pub async fn status(&self) -> SupervisorStatus {
        self.control.status().await.unwrap_or_else(|e| {
            panic!(
                "meta-core's control socket: {e}\nits stderr:\n{}",
                self.process.stderr()
            )
        })
    }

    /// The pids of the daemons running now.
    pub async fn daemon_pids(&self) -> Vec<u32> {
        self.status()
            .await
            .daemons
            .iter()
            .filter_map(|d| d.pid)
            .collect()
    }

    /// One daemon's row.
    pub async fn daemon(&self, daemon: Daemon) -> DaemonStatus {
        self.status()
            .await
            .daemons
            .into_iter()
            .find(|d| d.name == daemon)
            .expect("a row per daemon")
    }

    /// Polls the status until `ok` holds for it.
    pub async fn wait_status(
        &mut self,
        what: &str,
        ok: impl Fn(&SupervisorStatus) -> bool,
    ) -> SupervisorStatus {
        let control = self.control.clone();
        let process = &mut self.process;
        until(what, DAEMON_DEADLINE, || {
            let exited = process.try_exit();
            let control = control.clone();
            let ok = &ok;
            async move {
                if let Some(status) = exited {
                    panic!("meta-core exited ({status}) while waiting for {what}");
                }
                control.status().await.ok().filter(|s| ok(s))
            }
        })
        .await
    }

    /// Waits until it leads and every daemon is running and ready; then
    /// its admin token is known to [`Http::admin`].
    pub async fn wait_all_ready(&mut self) -> SupervisorStatus {
        let url = self.api_url();
        let status = self
            .wait_status(
                "every daemon running and ready, kv-leader.info naming this leader",
                |s| {
                    s.role == Role::Leader
                        && s.daemons
                            .iter()
                            .all(|d| d.state == DaemonState::Running && d.ready)
                        && s.leader_url.as_deref() == Some(url.as_str())
                },
            )
            .await;
        let token = crate::apid::admin_token(&self.launch.dir, &self.launch.env);
        self.http = self.http.clone().with_admin_token(token);
        status
    }

    /// The CLI with this supervisor's environment, to spawn.
    pub fn cli_command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = process::command("meta-core");
        self.launch.apply(&mut cmd);
        cmd.args(args);
        cmd
    }

    /// Runs the CLI with this supervisor's environment.
    pub fn cli(&self, args: &[&str]) -> Output {
        self.cli_command(args)
            .output()
            .expect("run the meta-core CLI")
    }
}

/// The pids of the children of `pid`, as the host sees them.
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(") ")
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                    == Some(&pid.to_string())
            })
        })
        .collect()
}

/// `pid` and the pids of every process below it.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        out.extend(children_of(out[i]));
        i += 1;
    }
    out
}

/// The pids of live (not zombie) processes that have `path` open: who
/// holds a database file, for instance.
pub fn holders_of(path: &Path) -> Vec<u32> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if !alive(pid) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l == path))
        {
            pids.push(pid);
        }
    }
    pids
}

/// Waits until none of `pids` is a live process.
pub async fn wait_gone(pids: &[u32], what: &str) {
    until(what, DAEMON_DEADLINE, || async {
        pids.iter().all(|p| !alive(*p)).then_some(())
    })
    .await;
}

/// Whether `pid` is a live process (a zombie is dead).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}
