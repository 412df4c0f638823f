//! The mounts kept: each mount of `mounts.json` that is enabled and
//! wanted mounted is mounted through rclone's remote control, looked at
//! every [`LOOK_EVERY`] (and whenever rclone's state changes), and mounted
//! again with backoff when it is gone or stale. A failure's text is in the
//! mount's status and in `mounts/errors/<id>.error` until the mount works.
//! Mounted mounts with polling on are scanned by watcherd every
//! `pollingIntervalMs` (inotify sees nothing of a FUSE mount's remote).
//!
//! One mount operation runs at a time (the keeper's and the API's alike),
//! so the kernel's view and the status never disagree for long.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use metacore::clock::unix_ms;
use metacore::error::{ApiError, ErrorCode};
use metacore::shutdown::Shutdown;
use metacore::socket::client::SocketClient;
use serde::Serialize;

use crate::config::{MOUNTS_DIR, MountConfig, Mounts};
use crate::rcd::{Rcd, call_within};
use crate::request::{fs_string, go_duration_ns};
use crate::system::{self, Probe};

/// How often every mount is looked at.
pub const LOOK_EVERY: Duration = Duration::from_secs(5);
/// A failed mount is tried again after this, doubling up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(60);
/// A mount lost sooner than this after it was made is mounted again only
/// after a backoff (it would be lost again).
const STABLE_AFTER: Duration = Duration::from_secs(60);
/// How long rclone may take to mount or unmount.
const RC_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the remote may take to list its top folder before a mount
/// (what tells a remote that does not answer from one that does).
const LIST_TIMEOUT: Duration = Duration::from_secs(15);
/// What a stop spends unmounting through rclone before it detaches what
/// is left (the supervisor gives mountd 1 s in all).
const STOP_UNMOUNT_BUDGET: Duration = Duration::from_millis(500);

/// What is known of one mount besides its configuration.
#[derive(Debug, Clone, Default)]
struct Live {
    mounted: bool,
    /// When it was last mounted.
    since: Option<Instant>,
    /// The rclone start that made the mount.
    generation: u64,
    error: Option<String>,
    last_checked: Option<u64>,
    /// Times the mount was found lost and made again.
    remounts: u64,
    failures: u32,
    retry_at: Option<Instant>,
    scanning: bool,
    current_scan_started_at: Option<u64>,
    last_polled_scan: Option<u64>,
    last_scan_duration_ms: Option<u64>,
    last_scan_file_count: Option<usize>,
    last_scan_error: Option<String>,
    next_scan_at: Option<u64>,
}

/// A mount as the API shows it: its configuration (the obscured password
/// left out) and how it is doing. Times are Unix milliseconds.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MountStatus {
    #[serde(flatten)]
    pub config: MountConfig,
    pub mounted: bool,
    pub error: Option<String>,
    pub last_checked: Option<u64>,
    pub remounts: u64,
    pub polling_active: bool,
    pub last_polled_scan: Option<u64>,
    pub scanning: bool,
    pub current_scan_started_at: Option<u64>,
    pub last_scan_duration_ms: Option<u64>,
    pub last_scan_file_count: Option<usize>,
    pub last_scan_error: Option<String>,
    pub next_scan_at: Option<u64>,
}

#[derive(Debug)]
struct Inner {
    file: Mounts,
    live: HashMap<String, Live>,
}

/// The mounts, their state, and what drives them.
#[derive(Debug)]
pub struct Manager {
    files: PathBuf,
    errors: PathBuf,
    rcd: Arc<Rcd>,
    watcherd: SocketClient,
    inner: Mutex<Inner>,
    /// One mount operation at a time.
    ops: tokio::sync::Mutex<()>,
    wake: tokio::sync::Notify,
    allow_other: bool,
}

impl Manager {
    pub fn new(
        files: PathBuf,
        errors: PathBuf,
        file: Mounts,
        rcd: Arc<Rcd>,
        watcherd: SocketClient,
    ) -> Self {
        Self {
            files,
            errors,
            rcd,
            watcherd,
            inner: Mutex::new(Inner {
                file,
                live: HashMap::new(),
            }),
            ops: tokio::sync::Mutex::new(()),
            wake: tokio::sync::Notify::new(),
            allow_other: allow_other(),
        }
    }

    pub fn rcd(&self) -> &Rcd {
        &self.rcd
    }

    pub fn files(&self) -> &Path {
        &self.files
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("mounts lock")
    }

    /// Looks at every mount now rather than at the next tick.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Every mount's status, in the file's order.
    pub fn list(&self) -> Vec<MountStatus> {
        let inner = self.lock();
        inner
            .file
            .mounts
            .iter()
            .map(|c| status_of(c, inner.live.get(&c.id)))
            .collect()
    }

    pub fn status(&self, id: &str) -> Option<MountStatus> {
        let inner = self.lock();
        let c = inner.file.mounts.iter().find(|c| c.id == id)?;
        Some(status_of(c, inner.live.get(&c.id)))
    }

    pub fn config(&self, id: &str) -> Option<MountConfig> {
        self.lock().file.mounts.iter().find(|c| c.id == id).cloned()
    }

    /// Changes a mount's configuration and writes the file; nothing
    /// changes when the file cannot be written.
    pub fn edit(
        &self,
        id: &str,
        change: impl FnOnce(&mut MountConfig),
    ) -> std::io::Result<Option<MountConfig>> {
        let mut inner = self.lock();
        let Some(at) = inner.file.mounts.iter().position(|c| c.id == id) else {
            return Ok(None);
        };
        let before = inner.file.mounts[at].clone();
        change(&mut inner.file.mounts[at]);
        if let Err(e) = inner.file.save() {
            inner.file.mounts[at] = before;
            return Err(e);
        }
        Ok(Some(inner.file.mounts[at].clone()))
    }

    /// Adds a mount and writes the file; a second mount on the same
    /// folder is refused.
    pub fn add(&self, c: MountConfig) -> Result<(), ApiError> {
        let mut inner = self.lock();
        if let Some(other) = inner
            .file
            .mounts
            .iter()
            .find(|m| m.mount_path == c.mount_path)
        {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!(
                    "the mount {:?} already uses {}: choose another name",
                    other.name, c.mount_path
                ),
            ));
        }
        inner.file.mounts.push(c);
        if let Err(e) = inner.file.save() {
            inner.file.mounts.pop();
            return Err(ApiError::internal(format!("cannot write mounts.json: {e}")));
        }
        Ok(())
    }

    /// Removes a mount from the file, its error file with it.
    pub fn remove(&self, id: &str) -> std::io::Result<()> {
        let mut inner = self.lock();
        let Some(at) = inner.file.mounts.iter().position(|c| c.id == id) else {
            return Ok(());
        };
        let gone = inner.file.mounts.remove(at);
        if let Err(e) = inner.file.save() {
            inner.file.mounts.insert(at, gone);
            return Err(e);
        }
        inner.live.remove(id);
        drop(inner);
        let _ = std::fs::remove_file(self.error_file(id));
        // The empty folder it was mounted on.
        let _ = std::fs::remove_dir(&gone.mount_path);
        Ok(())
    }

    fn error_file(&self, id: &str) -> PathBuf {
        self.errors.join(format!("{id}.error"))
    }

    fn live(&self, id: &str, f: impl FnOnce(&mut Live)) {
        f(self.lock().live.entry(id.to_owned()).or_default());
    }

    /// Records why a mount is not mounted, in its status and its error
    /// file.
    fn note_error(&self, id: &str, why: &str) {
        self.live(id, |l| l.error = Some(why.to_owned()));
        let _ = metacore::files::ensure_dir(&self.errors, 0o700);
        let _ = metacore::files::write_atomic(
            &self.error_file(id),
            format!("{why}\n").as_bytes(),
            0o600,
        );
    }

    /// A mount attempt failed: recorded, and tried again after a backoff.
    fn failed(&self, id: &str, why: &str) {
        tracing::warn!(mount = id, "{why}");
        self.note_error(id, why);
        self.live(id, |l| {
            l.failures = l.failures.saturating_add(1);
            l.retry_at = Some(Instant::now() + backoff(l.failures));
        });
    }

    fn cleared(&self, id: &str, generation: u64) {
        self.live(id, |l| {
            l.mounted = true;
            l.since = Some(Instant::now());
            l.generation = generation;
            l.error = None;
            l.failures = 0;
            l.retry_at = None;
            l.last_checked = Some(unix_ms());
            if l.next_scan_at.is_none() {
                l.next_scan_at = Some(unix_ms());
            }
        });
        let _ = std::fs::remove_file(self.error_file(id));
    }

    /// Mounts `id` now, if it is not mounted and answering already.
    /// Holds the operation lock.
    pub async fn mount(&self, id: &str) -> Result<(), String> {
        let _op = self.ops.lock().await;
        self.mount_locked(id).await
    }

    async fn mount_locked(&self, id: &str) -> Result<(), String> {
        let Some(c) = self.config(id) else {
            return Err("no such mount".into());
        };
        let result = self.try_mount(&c).await;
        match &result {
            Ok(generation) => {
                tracing::info!(mount = id, path = %c.mount_path, "mounted");
                self.cleared(id, *generation);
            }
            Err(why) => self.failed(id, why),
        }
        result.map(|_| ())
    }

    async fn try_mount(&self, c: &MountConfig) -> Result<u64, String> {
        let rc = match self.rcd.rc() {
            Some(rc) => rc,
            None => {
                let (_, why) = self.rcd.unavailable().unwrap_or_default();
                return Err(format!("cannot mount: {why}"));
            }
        };
        let point = PathBuf::from(&c.mount_path);
        if !point.starts_with(self.files.join(MOUNTS_DIR)) {
            return Err(format!("{} is not under FILES_PATH/corn", c.mount_path));
        }
        if let Some(existing) = system::mounted_at(&system::mounts(), &point) {
            if !system::is_rclone(&existing) {
                return Err(format!(
                    "another filesystem ({}) is mounted at {}: it is left alone",
                    existing.fstype,
                    point.display()
                ));
            }
            let mine = self.lock().live.get(&c.id).map(|l| l.generation) == Some(rc.generation);
            if mine && system::probe(&point).await == Probe::Answers {
                return Ok(rc.generation);
            }
            system::detach(&point).await?;
        }
        metacore::files::ensure_dir(&self.files.join(MOUNTS_DIR), 0o755)
            .map_err(|e| format!("cannot make FILES_PATH/{MOUNTS_DIR}: {e}"))?;
        metacore::files::ensure_dir(&point, 0o755)
            .map_err(|e| format!("cannot make {}: {e}", point.display()))?;
        if std::fs::read_dir(&point).is_ok_and(|mut d| d.next().is_some()) {
            return Err(format!(
                "{} is not empty: files there would be hidden by the mount",
                point.display()
            ));
        }
        // The remote must answer before it is mounted: rclone mounts one
        // that does not (its errors come later, as EIO to every reader).
        let list = serde_json::json!({
            "fs": fs_string(c),
            "remote": "",
            "opt": { "dirsOnly": true },
        });
        call_within(&rc, "operations/list", &list.to_string(), LIST_TIMEOUT)
            .await
            .map_err(|e| format!("the remote cannot be listed: {e}"))?;
        let ns = |member: &str, v: &str| {
            go_duration_ns(v).ok_or_else(|| format!("{member} {v:?} is not a duration"))
        };
        let body = serde_json::json!({
            "fs": fs_string(c),
            "mountPoint": c.mount_path,
            "mountType": "mount",
            "vfsOpt": {
                "CacheMode": "full",
                "CacheMaxSize": c.cache_max_size,
                "CacheMaxAge": ns("cacheMaxAge", &c.cache_max_age)?,
                "DirCacheTime": ns("dirCacheTime", &c.dir_cache_time)?,
            },
            "mountOpt": { "AllowOther": self.allow_other },
        });
        call_within(&rc, "mount/mount", &body.to_string(), RC_TIMEOUT).await?;
        if system::mounted_at(&system::mounts(), &point).is_none() {
            return Err(format!(
                "rclone said it mounted {}, but the kernel has no mount there",
                point.display()
            ));
        }
        Ok(rc.generation)
    }

    /// Unmounts `id` (through rclone; detached when rclone cannot). Holds
    /// the operation lock.
    pub async fn unmount(&self, id: &str) -> Result<(), String> {
        let _op = self.ops.lock().await;
        self.unmount_locked(id).await
    }

    async fn unmount_locked(&self, id: &str) -> Result<(), String> {
        let Some(c) = self.config(id) else {
            return Ok(());
        };
        let point = PathBuf::from(&c.mount_path);
        unmount_point(self.rcd.rc(), &point, RC_TIMEOUT).await?;
        self.live(id, |l| {
            l.mounted = false;
            l.error = None;
            l.failures = 0;
            l.retry_at = None;
            l.next_scan_at = None;
        });
        let _ = std::fs::remove_file(self.error_file(id));
        tracing::info!(mount = id, path = %c.mount_path, "unmounted");
        Ok(())
    }

    /// Waits until nothing under the mount is open, at most `timeout`,
    /// then calls `before` and unmounts it; the open paths when the wait
    /// ran out (it stays mounted then, and `before` is not called).
    pub async fn safe_unmount(
        &self,
        id: &str,
        timeout: Duration,
        before: impl FnOnce() -> Result<(), String>,
    ) -> Result<Vec<PathBuf>, String> {
        let Some(c) = self.config(id) else {
            return Ok(Vec::new());
        };
        let point = PathBuf::from(&c.mount_path);
        let until = Instant::now() + timeout;
        loop {
            let p = point.clone();
            let open = tokio::task::spawn_blocking(move || system::open_under(&p, 20))
                .await
                .unwrap_or_default();
            if open.is_empty() {
                break;
            }
            if Instant::now() >= until {
                return Ok(open);
            }
            tokio::time::sleep(Duration::from_millis(100).min(until - Instant::now())).await;
        }
        before()?;
        self.unmount(id).await.map(|()| Vec::new())
    }

    /// The keeper: looks at every mount every [`LOOK_EVERY`], when woken
    /// and when rclone's state changes, until shutdown; then unmounts
    /// everything.
    pub async fn keep(self: Arc<Self>, shutdown: Shutdown) {
        let mut rclone = self.rcd.subscribe();
        while !shutdown.is_triggered() {
            self.look().await;
            let wait = self.next_scan_due().min(LOOK_EVERY);
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.wake.notified() => {}
                _ = rclone.changed() => {}
                () = shutdown.wait() => {}
            }
        }
    }

    /// Time until the first polling scan is due.
    fn next_scan_due(&self) -> Duration {
        let now = unix_ms();
        self.lock()
            .live
            .values()
            .filter(|l| l.mounted && !l.scanning)
            .filter_map(|l| l.next_scan_at)
            .map(|at| Duration::from_millis(at.saturating_sub(now)))
            .min()
            .unwrap_or(LOOK_EVERY)
            .max(Duration::from_millis(50))
    }

    /// One look at every mount.
    async fn look(self: &Arc<Self>) {
        let _op = self.ops.lock().await;
        let configs: Vec<MountConfig> = self.lock().file.mounts.clone();
        let generation = self.rcd.rc().map(|rc| rc.generation);
        let entries = system::mounts();
        for c in configs {
            let point = PathBuf::from(&c.mount_path);
            let present = system::mounted_at(&entries, &point).filter(system::is_rclone);
            let live = self.lock().live.get(&c.id).cloned().unwrap_or_default();
            if !(c.enabled && c.desired_mounted) {
                if present.is_some() {
                    let _ = self.unmount_locked(&c.id).await;
                }
                continue;
            }
            if live.mounted {
                let lost = if present.is_none() {
                    Some(("it was unmounted from outside".to_owned(), false))
                } else if generation != Some(live.generation) {
                    let why = self
                        .rcd
                        .unavailable()
                        .map_or_else(|| "rclone rcd was restarted".to_owned(), |(_, why)| why);
                    Some((why, true))
                } else if let Probe::Stale(why) = system::probe(&point).await {
                    Some((why, false))
                } else {
                    None
                };
                let Some((why, rclone_ended)) = lost else {
                    self.live(&c.id, |l| l.last_checked = Some(unix_ms()));
                    self.maybe_scan(&c, &live);
                    continue;
                };
                self.lost(&c.id, &why, rclone_ended);
            }
            let due = self
                .lock()
                .live
                .get(&c.id)
                .and_then(|l| l.retry_at)
                .is_none_or(|at| Instant::now() >= at);
            if !due {
                continue;
            }
            if generation.is_none() {
                // Tried again as soon as rclone runs (its state change
                // wakes the keeper); not a failure of the mount's own.
                // A mount just lost keeps the text of its loss.
                let noted = self
                    .lock()
                    .live
                    .get(&c.id)
                    .is_some_and(|l| l.error.is_some());
                if !noted {
                    let (_, why) = self.rcd.unavailable().unwrap_or_default();
                    self.note_error(&c.id, &format!("cannot mount: {why}"));
                }
                continue;
            }
            let _ = self.mount_locked(&c.id).await;
        }
    }

    /// A mount found gone or stale: recorded, and mounted again at once
    /// when its rclone was restarted (rclone's restarts have their own
    /// backoff), after a backoff otherwise, which keeps growing while the
    /// mount is lost again within [`STABLE_AFTER`] of being made.
    fn lost(&self, id: &str, why: &str, rclone_ended: bool) {
        let text = format!("mount lost: {why}; mounting it again");
        tracing::warn!(mount = id, "{text}");
        self.note_error(id, &text);
        self.live(id, |l| {
            l.mounted = false;
            l.remounts += 1;
            if rclone_ended {
                // rclone's own restarts are paced by its backoff.
                l.retry_at = None;
                return;
            }
            if l.since.is_none_or(|t| t.elapsed() >= STABLE_AFTER) {
                l.failures = 0;
            }
            l.failures = l.failures.saturating_add(1);
            l.retry_at = Some(Instant::now() + backoff(l.failures));
        });
    }

    /// Starts a polling scan of `c` when one is due.
    fn maybe_scan(self: &Arc<Self>, c: &MountConfig, live: &Live) {
        if !c.polling_enabled || live.scanning {
            return;
        }
        let now = unix_ms();
        if live.next_scan_at.is_some_and(|at| at > now) {
            return;
        }
        let me = self.clone();
        let c = c.clone();
        tokio::spawn(async move {
            let _ = me.scan(&c.id, true).await;
        });
    }

    /// Asks watcherd to walk the mount's folder, and records how it went:
    /// the files found.
    pub async fn scan(&self, id: &str, polled: bool) -> Result<usize, ApiError> {
        let Some(c) = self.config(id) else {
            return Err(ApiError::not_found("mount not found"));
        };
        let started = unix_ms();
        self.live(id, |l| {
            l.scanning = true;
            l.current_scan_started_at = Some(started);
        });
        let body = serde_json::json!({ "path": c.mount_path });
        let answer: Result<serde_json::Value, _> = self
            .watcherd
            .call(http::Method::POST, "/scan", Some(&body))
            .await;
        let done = unix_ms();
        let result = answer
            .map(|v| v["fileCount"].as_u64().unwrap_or(0) as usize)
            .map_err(ApiError::from);
        self.live(id, |l| {
            l.scanning = false;
            l.current_scan_started_at = None;
            l.last_scan_duration_ms = Some(done.saturating_sub(started));
            match &result {
                Ok(n) => {
                    l.last_scan_file_count = Some(*n);
                    l.last_scan_error = None;
                }
                Err(e) => l.last_scan_error = Some(e.message.clone()),
            }
            if polled {
                l.last_polled_scan = Some(done);
            }
            if l.mounted {
                l.next_scan_at = Some(done + c.polling_interval_ms);
            }
        });
        result
    }

    /// Detaches every rclone mount under `FILES_PATH/corn` (what a mountd
    /// killed before it could unmount left: their rclone is gone).
    pub async fn detach_leftovers(&self) {
        let corn = system::real(&self.files.join(MOUNTS_DIR));
        for e in system::mounts() {
            if e.point.starts_with(&corn) && system::is_rclone(&e) {
                match system::detach(&e.point).await {
                    Ok(()) => tracing::warn!(
                        path = %e.point.display(),
                        "detached a mount an earlier mountd left"
                    ),
                    Err(why) => tracing::error!("{why}"),
                }
            }
        }
    }

    /// At stop: every mount unmounted through rclone (within
    /// [`STOP_UNMOUNT_BUDGET`]), then whatever is left detached.
    pub async fn unmount_all(&self) {
        let _op = self.ops.lock().await;
        let rc = self.rcd.rc();
        let corn = system::real(&self.files.join(MOUNTS_DIR));
        let points: Vec<PathBuf> = system::mounts()
            .into_iter()
            .filter(|e| e.point.starts_with(&corn) && system::is_rclone(e))
            .map(|e| e.point)
            .collect();
        let through_rclone = async {
            for p in &points {
                let _ = unmount_point(rc.clone(), p, STOP_UNMOUNT_BUDGET).await;
            }
        };
        let _ = tokio::time::timeout(STOP_UNMOUNT_BUDGET, through_rclone).await;
        self.detach_leftovers().await;
        let mut inner = self.lock();
        for l in inner.live.values_mut() {
            l.mounted = false;
        }
        tracing::info!(mounts = points.len(), "unmounted everything");
    }
}

/// Unmounts `point` through rclone when it runs, and detaches it when it
/// is still there after that.
async fn unmount_point(
    rc: Option<crate::rcd::Rc>,
    point: &Path,
    within: Duration,
) -> Result<(), String> {
    let rclone_at = || system::mounted_at(&system::mounts(), point).filter(system::is_rclone);
    if rclone_at().is_none() {
        return Ok(());
    }
    let mut said = None;
    if let Some(rc) = rc {
        let body = serde_json::json!({ "mountPoint": point });
        if let Err(e) = call_within(&rc, "mount/unmount", &body.to_string(), within).await {
            said = Some(e);
        }
    }
    if rclone_at().is_some() {
        system::detach(point).await.map_err(|e| match &said {
            Some(s) => format!("{s}; {e}"),
            None => e,
        })?;
    }
    Ok(())
}

/// The wait after `failures` failures in a row: 1 s, doubling, at most
/// [`MAX_RETRY`].
fn backoff(failures: u32) -> Duration {
    FIRST_RETRY
        .saturating_mul(1 << failures.saturating_sub(1).min(6))
        .min(MAX_RETRY)
}

fn status_of(c: &MountConfig, live: Option<&Live>) -> MountStatus {
    let l = live.cloned().unwrap_or_default();
    let mut config = c.clone();
    config.smb_password_obscured = String::new();
    MountStatus {
        polling_active: l.mounted && c.polling_enabled,
        config,
        mounted: l.mounted,
        error: l.error,
        last_checked: l.last_checked,
        remounts: l.remounts,
        last_polled_scan: l.last_polled_scan,
        scanning: l.scanning,
        current_scan_started_at: l.current_scan_started_at,
        last_scan_duration_ms: l.last_scan_duration_ms,
        last_scan_file_count: l.last_scan_file_count,
        last_scan_error: l.last_scan_error,
        next_scan_at: l.next_scan_at.filter(|_| l.mounted && c.polling_enabled),
    }
}

/// Whether mounts can be opened by other users: always as root, and
/// otherwise when `/etc/fuse.conf` allows it (`user_allow_other`).
fn allow_other() -> bool {
    rustix::process::geteuid().is_root()
        || std::fs::read_to_string("/etc/fuse.conf").is_ok_and(|t| {
            t.lines()
                .any(|l| l.split('#').next().unwrap_or("").trim() == "user_allow_other")
        })
}
