//! [`Process`]: one spawned daemon binary as a test sees it: its pid, its
//! stderr log, signals, bounded waits for its exit, killed when the handle
//! drops (and its stderr printed when the test is panicking). [`Storaged`]
//! and [`Apid`] each hold one.
//!
//! [`Storaged`]: crate::Storaged
//! [`Apid`]: crate::Apid

use std::fs::File;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::daemon::binary;
use crate::wait::{self, DAEMON_DEADLINE};

/// Numbers the stderr logs, so several processes can share a dir.
static LAUNCHES: AtomicU32 = AtomicU32::new(0);

/// The daemon `name`'s binary, with every `META_CORE_*` and `BASE_URL`
/// variable of the test's own environment removed so an operator's
/// settings cannot leak into a test.
pub fn command(name: &str) -> Command {
    let mut cmd = Command::new(binary(name));
    scrub_env(&mut cmd);
    cmd
}

/// Removes from `cmd`'s environment every `META_CORE_*` and `BASE_URL`
/// variable the test process itself has.
pub fn scrub_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        if k.starts_with("META_CORE_") || k == "BASE_URL" {
            cmd.env_remove(&key);
        }
    }
}

/// One running (or exited) daemon process.
#[derive(Debug)]
pub struct Process {
    name: &'static str,
    dir: PathBuf,
    child: Child,
    exit: Option<ExitStatus>,
    stderr_path: PathBuf,
}

impl Process {
    /// Spawns `cmd` with its stderr in `<dir>/<name>-<n>.stderr`.
    pub fn spawn(name: &'static str, dir: &Path, mut cmd: Command) -> Self {
        let n = LAUNCHES.fetch_add(1, Ordering::Relaxed);
        let stderr_path = dir.join(format!("{name}-{n}.stderr"));
        let stderr = File::create(&stderr_path).expect("create the stderr log");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        Self {
            name,
            dir: dir.to_owned(),
            child,
            exit: None,
            stderr_path,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr_path(&self) -> &Path {
        &self.stderr_path
    }

    /// Everything the process has written to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// The exit status, if the process has exited (reaps it).
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().expect("poll the child");
        }
        self.exit
    }

    /// SIGKILL, then reap. Returns the exit status.
    pub fn kill9(&mut self) -> ExitStatus {
        if let Some(status) = self.try_exit() {
            return status;
        }
        self.child
            .kill()
            .unwrap_or_else(|e| panic!("SIGKILL {}: {e}", self.name));
        let status = self
            .child
            .wait()
            .unwrap_or_else(|e| panic!("reap {}: {e}", self.name));
        self.exit = Some(status);
        status
    }

    /// SIGTERM: an orderly stop. See [`Process::wait_exit`].
    pub fn sigterm(&self) {
        let pid = rustix::process::Pid::from_raw(self.pid() as i32).expect("a positive pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("send SIGTERM");
    }

    /// Polls `answers` until it says the process is ready; panics with the
    /// process's stderr if it exits first or the deadline passes.
    pub async fn wait_ready<F, Fut>(&mut self, mut answers: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let what = format!("{} to answer /health", self.name);
        let ready = wait::until(&what, DAEMON_DEADLINE, || {
            let exited = self.try_exit();
            let probe = answers();
            async move {
                match exited {
                    Some(status) => Some(Err(status)),
                    None => probe.await.then_some(Ok(())),
                }
            }
        })
        .await;
        if let Err(status) = ready {
            panic!(
                "{} exited ({status}) before it was ready; its stderr:\n{}",
                self.name,
                self.stderr()
            );
        }
    }

    /// Waits (bounded) for the process to exit and returns its status.
    pub async fn wait_exit(&mut self) -> ExitStatus {
        let what = format!("{} to exit", self.name);
        wait::until(&what, DAEMON_DEADLINE, || {
            std::future::ready(self.try_exit())
        })
        .await
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.exit.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "--- stderr of {} in {} ---\n{}",
                self.name,
                self.dir.display(),
                self.stderr()
            );
        }
    }
}
