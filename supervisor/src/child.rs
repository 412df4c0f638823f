//! Starting a daemon process and learning how it ended.
//!
//! A child gets: its own process group (so a terminal's Ctrl-C reaches only
//! the supervisor, which stops the tree in order, and so a stop reaches the
//! daemon's own children too); one pipe for both stdout and stderr (lines
//! stay in order); a readiness pipe whose descriptor number it finds in
//! `META_CORE_READY_FD`; and the supervisor's pid in
//! `META_CORE_SUPERVISOR_PID`, with which it asks the kernel to be killed
//! when the supervisor dies. It also inherits the leader lock's descriptor
//! (see `leader`), so the lock outlives the supervisor until the last
//! process of the tree is gone.
//!
//! Exits are collected by [`Reaper`], the only caller of `wait`: as PID 1
//! or as a subreaper the supervisor also inherits orphans, and reaps them.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use metacore::daemon::{READY_FD_ENV, SUPERVISOR_PID_ENV};
use metacore::layout::Daemon;
use rustix::io::{FdFlags, fcntl_setfd};
use rustix::pipe::{PipeFlags, pipe_with};
use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};
use tokio::net::unix::pipe;
use tokio::sync::oneshot;

use crate::reason::Exit;
use metacore::sync::Locked;

/// How a process ended, from what `wait` said (None: it only stopped or
/// continued).
fn exit_of(status: WaitStatus) -> Option<Exit> {
    if let Some(code) = status.exit_status() {
        Some(Exit::Code(code))
    } else {
        status.terminating_signal().map(Exit::Signal)
    }
}

/// Collects the exit of every child and orphan.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reaper {
    /// Where each child's exit goes, by pid: filled by `spawn` on the
    /// supervisor's thread, emptied by the reaper on SIGCHLD.
    waiting: Arc<Mutex<HashMap<i32, oneshot::Sender<Exit>>>>,
}

impl Reaper {
    /// Reaps everything that has ended, delivering the exits of our own
    /// children. Called on SIGCHLD (and once at start for safety).
    pub(crate) fn reap(&self) {
        loop {
            match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some((pid, status))) => {
                    let Some(exit) = exit_of(status) else {
                        continue;
                    };
                    let pid = pid.as_raw_nonzero().get();
                    let waiter = self.waiting.locked().remove(&pid);
                    match waiter {
                        Some(tx) => {
                            let _ = tx.send(exit);
                        }
                        None => tracing::debug!(pid, "reaped an orphan ({exit})"),
                    }
                }
                Ok(None) => return,
                Err(rustix::io::Errno::CHILD) => return,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    tracing::warn!("wait failed: {e}");
                    return;
                }
            }
        }
    }

    /// Reaps on every SIGCHLD, for the supervisor's whole life.
    pub(crate) fn spawn_task(&self) -> io::Result<()> {
        let mut sigchld = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())?;
        let reaper = self.clone();
        tokio::spawn(async move {
            loop {
                reaper.reap();
                if sigchld.recv().await.is_none() {
                    return;
                }
            }
        });
        Ok(())
    }

    fn watch(&self, pid: i32) -> oneshot::Receiver<Exit> {
        let (tx, rx) = oneshot::channel();
        self.waiting.locked().insert(pid, tx);
        rx
    }
}

/// A started daemon process.
#[derive(Debug)]
pub(crate) struct Child {
    pub(crate) pid: i32,
    /// Resolves when the process has ended (and been reaped).
    pub(crate) exit: oneshot::Receiver<Exit>,
    /// Its stdout and stderr, one stream.
    pub(crate) output: pipe::Receiver,
    /// Its readiness pipe.
    pub(crate) ready: pipe::Receiver,
}

/// Starts `daemon` from `bin_dir`. Must be called on the supervisor's main
/// thread: the kernel's parent-death signal follows the thread that forked.
pub(crate) fn spawn(daemon: Daemon, bin_dir: &Path, reaper: &Reaper) -> io::Result<Child> {
    let bin = bin_dir.join(daemon.name());
    let (out_r, out_w) = pipe_with(PipeFlags::CLOEXEC)?;
    let (ready_r, ready_w) = pipe_with(PipeFlags::CLOEXEC)?;
    // The one descriptor the child must inherit beyond stdio. The supervisor
    // forks from this thread only, so no other child can inherit it before
    // it is closed below.
    fcntl_setfd(&ready_w, FdFlags::empty())?;
    let err_w = out_w.try_clone()?;
    let child = Command::new(&bin)
        .env(SUPERVISOR_PID_ENV, std::process::id().to_string())
        .env(READY_FD_ENV, ready_w.as_raw_fd().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::from(out_w))
        .stderr(Stdio::from(err_w))
        .process_group(0)
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot start {}: {e}", bin.display())))?;
    drop(ready_w);
    let pid = child.id() as i32;
    // No await since the fork: the reaper cannot have seen this pid yet.
    let exit = reaper.watch(pid);
    // `child` is dropped without waiting: the reaper owns every exit.
    drop(child);
    Ok(Child {
        pid,
        exit,
        output: receiver(out_r)?,
        ready: receiver(ready_r)?,
    })
}

fn receiver(fd: OwnedFd) -> io::Result<pipe::Receiver> {
    pipe::Receiver::from_owned_fd(fd)
}

/// Sends `sig` to the daemon's process group (the daemon and anything it
/// started); a group already gone is not an error.
pub(crate) fn signal_group(pid: i32, sig: Signal) {
    let Some(pid) = Pid::from_raw(pid) else {
        return;
    };
    if let Err(e) = rustix::process::kill_process_group(pid, sig)
        && e != rustix::io::Errno::SRCH
    {
        tracing::warn!("cannot signal process group {pid:?}: {e}");
    }
}
