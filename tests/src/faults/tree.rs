//! The tree under test: a leader `meta-core` (and, for failover, a
//! standby on the same volume), what can be killed in it, how it is seen
//! to have recovered, and what must hold of the processes and mounts
//! meanwhile: never two storaged with the database open (sampled on a
//! thread of its own), no process left behind, no FUSE mount left stale.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use metacore::api::supervisor::Role;
use metacore::layout::Daemon;
use rustix::process::{Pid, Signal, kill_process};

use crate::mountd::{is_mounted, mounts_under};
use crate::supervisor::{Launch, MetaCore, alive, descendants, holders_of};
use crate::wait::{DAEMON_DEADLINE, until_or_none};

/// What the suite kills.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    Daemon(Daemon),
    /// The leader's supervisor: started again on the same volume, or,
    /// when the tree has a standby, taken over by it.
    Supervisor,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Daemon(d) => write!(f, "{d}"),
            Target::Supervisor => f.write_str("meta-core"),
        }
    }
}

/// Whether `pid` is `ancestor` or runs below it.
fn descends_from(mut pid: u32, ancestor: u32) -> bool {
    while pid > 1 {
        if pid == ancestor {
            return true;
        }
        let Some(parent) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let (_, rest) = stat.rsplit_once(") ")?;
                rest.split_whitespace().nth(1)?.parse().ok()
            })
        else {
            return false;
        };
        pid = parent;
    }
    false
}

/// Live processes other than this one whose command line or environment
/// names `dir`: what a tree under `dir` may have left behind.
pub fn processes_under(dir: &Path) -> Vec<String> {
    let needle = dir.as_os_str().as_encoded_bytes();
    let me = std::process::id();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me && alive(pid))
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let names = |b: &[u8]| b.windows(needle.len()).any(|w| w == needle);
            (names(&cmdline) || names(&environ)).then(|| {
                let cmd = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                format!("{pid}: {cmd}")
            })
        })
        .collect()
}

/// Whether `GET /health` on `port` answers 200 now (a blocking call, for
/// timing a takeover to the millisecond).
fn health_ok(port: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}

/// The most processes seen holding the database at once, sampled on a
/// thread of its own until dropped.
#[derive(Debug)]
pub struct Holders {
    most: Arc<AtomicUsize>,
    samples: Arc<AtomicU64>,
    running: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Holders {
    pub fn sample(db: &Path) -> Self {
        let most = Arc::new(AtomicUsize::new(0));
        let samples = Arc::new(AtomicU64::new(0));
        let running = Arc::new(AtomicBool::new(true));
        let thread = {
            let (db, most, samples, running) = (
                db.to_owned(),
                most.clone(),
                samples.clone(),
                running.clone(),
            );
            std::thread::spawn(move || {
                while running.load(Ordering::SeqCst) {
                    most.fetch_max(holders_of(&db).len(), Ordering::SeqCst);
                    samples.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        Self {
            most,
            samples,
            running,
            thread: Some(thread),
        }
    }

    /// Stops sampling: the most holders seen at once, and the samples.
    pub fn finish(mut self) -> (usize, u64) {
        self.running.store(false, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().expect("the sampler panicked");
        }
        (
            self.most.load(Ordering::SeqCst),
            self.samples.load(Ordering::SeqCst),
        )
    }
}

/// The leader, a standby when failover is tested, and the two launches
/// they alternate between (each its own run dir and port, one volume).
#[derive(Debug)]
pub struct Tree {
    launches: [Launch; 2],
    /// Which launch the leader runs.
    at: usize,
    pub leader: MetaCore,
    pub standby: Option<MetaCore>,
    /// The FUSE mount made at the start, if this machine has FUSE.
    pub mount: Option<PathBuf>,
    /// Old tree's exit → the standby's `/health`, per takeover.
    pub takeovers: Vec<Duration>,
    /// Processes found left over from a killed tree.
    pub orphans: Vec<String>,
    /// Mounts found not serving once the tree had recovered.
    pub stale_mounts: Vec<String>,
    /// `kv-leader.info` not naming the standby that took over.
    pub misnamed: Vec<String>,
    dir: PathBuf,
}

impl Tree {
    /// Starts the leader of `launches[0]`, and with `standby` the second
    /// as its standby.
    pub async fn start(dir: &Path, launches: [Launch; 2], standby: bool) -> Self {
        let leader = launches[0].clone().start().await;
        let mut tree = Self {
            launches,
            at: 0,
            leader,
            standby: None,
            mount: None,
            takeovers: Vec::new(),
            orphans: Vec::new(),
            stale_mounts: Vec::new(),
            misnamed: Vec::new(),
            dir: dir.to_owned(),
        };
        if standby {
            tree.standby = Some(tree.spawn_standby().await);
        }
        tree
    }

    async fn spawn_standby(&self) -> MetaCore {
        let mut s = self.launches[1 - self.at].clone().spawn();
        s.wait_status("the standby to wait for the lock", |s| {
            s.role == Role::Standby
        })
        .await;
        s
    }

    /// Kills `target` with SIGKILL and waits until the tree serves again.
    pub async fn kill(&mut self, target: Target) {
        match target {
            Target::Daemon(d) => self.kill_daemon(d).await,
            Target::Supervisor => self.kill_supervisor().await,
        }
        self.check_mount().await;
    }

    async fn kill_daemon(&mut self, daemon: Daemon) {
        let old = self.leader.daemon(daemon).await.pid.expect("it runs");
        let _ = kill_process(Pid::from_raw(old as i32).expect("a pid"), Signal::KILL);
        self.leader
            .wait_status(&format!("{daemon} to be replaced"), |s| {
                s.daemons
                    .iter()
                    .any(|d| d.name == daemon && d.pid.is_some_and(|p| p != old) && d.ready)
            })
            .await;
        self.leader.wait_all_ready().await;
    }

    async fn kill_supervisor(&mut self) {
        let old = descendants(self.leader.process.pid());
        self.leader.process.kill9();
        let port = self.standby.as_ref().map(MetaCore::port);
        // Timed on a thread of its own, to the fraction of a millisecond:
        // the last of the old tree's processes gone, then the standby's
        // first `/health` 200.
        let (gone, served) = tokio::task::spawn_blocking(move || {
            let deadline = Instant::now() + DAEMON_DEADLINE;
            while old.iter().any(|p| alive(*p)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_micros(200));
            }
            let gone = old.iter().all(|p| !alive(*p)).then(Instant::now);
            let served = port.and_then(|port| {
                while !health_ok(port) && Instant::now() < deadline + DAEMON_DEADLINE {
                    std::thread::sleep(Duration::from_micros(200));
                }
                health_ok(port).then(Instant::now)
            });
            (gone, served)
        })
        .await
        .expect("the takeover timer");
        // Whatever of the killed tree outlived it (the standby and what
        // it has started since aside).
        let standby = self.standby.as_ref().map(|s| s.process.pid());
        self.orphans
            .extend(processes_under(&self.dir).into_iter().filter(|p| {
                let pid: u32 = p.split(':').next().unwrap_or("").parse().unwrap_or(0);
                !standby.is_some_and(|s| descends_from(pid, s))
            }));
        if gone.is_none() {
            self.orphans
                .push("the killed tree was not gone within the deadline".to_owned());
        }
        if let Some(next) = self.standby.take() {
            if let (Some(gone), Some(served)) = (gone, served) {
                self.takeovers.push(served.saturating_duration_since(gone));
            }
            let mut next = next;
            next.wait_all_ready().await;
            let named = std::fs::read_to_string(next.info_file()).unwrap_or_default();
            if named.trim() != next.api_url() {
                self.misnamed.push(format!(
                    "kv-leader.info says {:?} after {} took over",
                    named.trim(),
                    next.api_url()
                ));
            }
            self.leader = next;
            self.at = 1 - self.at;
            self.standby = Some(self.spawn_standby().await);
        } else {
            self.leader = self.launches[self.at].clone().start().await;
        }
    }

    /// A mount made at the start is mounted and answers a listing again
    /// once the tree has recovered (waited for: mountd mounts it anew
    /// after its own restart or the tree's).
    async fn check_mount(&mut self) {
        let Some(point) = self.mount.clone() else {
            return;
        };
        let served = until_or_none(DAEMON_DEADLINE, || {
            let point = point.clone();
            async move {
                tokio::task::spawn_blocking(move || {
                    (is_mounted(&point) && std::fs::read_dir(&point).is_ok()).then_some(())
                })
                .await
                .ok()
                .flatten()
            }
        })
        .await;
        if served.is_none() {
            self.stale_mounts
                .push(format!("{}: {:?}", point.display(), mounts_under(&point)));
        }
    }

    /// Stops every supervisor (SIGTERM), the standby first so that it does
    /// not take over, then looks for what is left of the tree and what is
    /// still mounted.
    pub async fn stop(mut self) -> Stopped {
        let mut bad_exits = Vec::new();
        for mut mc in [self.standby.take(), Some(self.leader)]
            .into_iter()
            .flatten()
        {
            mc.process.sigterm();
            let exit = mc.process.wait_exit().await;
            if !exit.success() {
                bad_exits.push(format!("meta-core stopped with {exit}"));
            }
        }
        let dir = self.dir.clone();
        let gone = until_or_none(DAEMON_DEADLINE, || {
            std::future::ready(processes_under(&dir).is_empty().then_some(()))
        })
        .await;
        if gone.is_none() {
            self.orphans.extend(processes_under(&self.dir));
        }
        self.stale_mounts.extend(
            mounts_under(&self.dir.join("files"))
                .into_iter()
                .map(|(p, t)| format!("{} ({t}) still mounted after the stop", p.display())),
        );
        Stopped {
            bad_exits,
            misnamed: self.misnamed,
            orphans: self.orphans,
            stale_mounts: self.stale_mounts,
            takeovers: self.takeovers,
        }
    }
}

/// What [`Tree::stop`] found.
#[derive(Debug)]
pub struct Stopped {
    /// Supervisors that did not exit 0 when asked to stop.
    pub bad_exits: Vec<String>,
    /// Takeovers after which `kv-leader.info` did not name the new leader.
    pub misnamed: Vec<String>,
    /// Processes of a killed or stopped tree still alive after it.
    pub orphans: Vec<String>,
    /// Mounts not serving after a recovery, or left after the stop.
    pub stale_mounts: Vec<String>,
    /// Old tree's exit → the standby's `/health`, per takeover.
    pub takeovers: Vec<Duration>,
}
