//! The mounts kept: each mount of `mounts.json` that is enabled and
//! wanted mounted is mounted through rclone's remote control, looked at by
//! the keeper ([`keeper`]), and mounted again with backoff when it is gone
//! or stale. A failure's text is in the mount's status and in
//! `mounts/errors/<id>.error` until the mount works ([`outcome`]). Mounted mounts with
//! polling on are scanned by watcherd every `pollingIntervalMs` (inotify
//! sees nothing of a FUSE mount's remote). At a stop everything is
//! unmounted ([`stop`]).
//!
//! One operation at a time runs on a mount (the keeper's and the API's
//! alike); operations on different mounts do not wait for each other.

mod keeper;
mod ops;
mod outcome;
mod stop;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use metacore::api::mountd::{MountConfig, MountStatus};
use metacore::api::watcherd::WatcherdClient;
use metacore::clock::unix_ms;
use metacore::error::{ApiError, ErrorCode};

use crate::config::Mounts;
use crate::confine::{self, Judged, Places};
use crate::rc::Rc;
use crate::rcd::Rcd;
use crate::request::check_stored;
use metacore::sync::Locked;

pub use keeper::LOOK_EVERY;

/// How long rclone may take to mount or unmount.
pub const RC_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the remote may take to list its top folder before a mount
/// (what tells a remote that does not answer from one that does).
pub const LIST_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a scan may wait for watcherd (which answers within 25 s).
const SCAN_TIMEOUT: Duration = Duration::from_secs(30);

/// What is known of one mount besides its configuration.
#[derive(Debug, Clone, Default)]
struct Live {
    mounted: bool,
    /// When it was last mounted.
    since: Option<Instant>,
    /// The rclone start that made the mount.
    generation: u64,
    /// Why `mounts.json` holds it in a form that is never mounted.
    invalid: Option<String>,
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

#[derive(Debug)]
struct Inner {
    file: Mounts,
    live: HashMap<String, Live>,
}

impl Inner {
    /// What is seen of mount `id`, made empty the first time.
    fn live_mut(&mut self, id: &str) -> &mut Live {
        self.live.entry(id.to_owned()).or_default()
    }
}

/// The mounts, their state, and what drives them.
#[derive(Debug)]
pub struct Manager {
    files: PathBuf,
    errors: PathBuf,
    rcd: Arc<Rcd>,
    watcherd: WatcherdClient,
    /// The configurations and what is seen of each. Held for a few
    /// statements, never across an `.await`.
    inner: Mutex<Inner>,
    /// One operation lock per mount id, taken by the keeper and the API
    /// around anything that mounts or unmounts.
    ops: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Per mount id, what tells a mount attempt under way (waiting on a
    /// slow remote, its lock held) that an unmount or a delete wants it to
    /// stop.
    cancels: Mutex<HashMap<String, Arc<tokio::sync::Notify>>>,
    /// Wakes the keeper before its next tick.
    wake: tokio::sync::Notify,
    /// The keeper's passes over the mounts (in `/status`).
    looks: AtomicU64,
    /// Mounts found lost and made again, all mounts together (in
    /// `/metrics`: it never goes down, as a sum over today's mounts would).
    remounts: AtomicU64,
    allow_other: bool,
    /// meta-core's own places, which no mount serves or covers.
    places: Places,
    /// Held from the clear of rclone's cache of remotes that a judgement
    /// of what a mount serves starts with
    /// ([`crate::confine::judge_served`]) to
    /// the `mount/mount` of what was judged (and by a create's
    /// judgement): another clear between would make rclone build the
    /// remote anew from an rclone.conf changed since, unjudged. Held for
    /// one judgement and one mount at most (15 s and 20 s).
    confine: tokio::sync::Mutex<()>,
}

impl Manager {
    /// Takes the mounts as `mounts.json` holds them: each mount's folder is
    /// derived again from its name (a file of the original put them at
    /// `FILES_PATH/<name>`), one that breaks the rules of a new mount is
    /// kept but never mounted, and error files of mounts no longer wanted
    /// are removed.
    pub fn new(
        files: PathBuf,
        errors: PathBuf,
        mut file: Mounts,
        rcd: Arc<Rcd>,
        watcherd: WatcherdClient,
        places: Places,
    ) -> Self {
        let mut live = HashMap::new();
        for c in &mut file.mounts {
            let mut l = Live::default();
            match crate::config::mount_path(&files, &c.name) {
                Some(path) => {
                    let path = path.display().to_string();
                    if path != c.mount_path {
                        tracing::warn!(mount = %c.id, from = %c.mount_path, to = %path, "a mount's folder is under FILES_PATH/corn now");
                        c.mount_path = path;
                    }
                }
                None => l.invalid = Some(format!("the name {:?} names no folder", c.name)),
            }
            if let Err(why) = check_stored(c) {
                l.invalid.get_or_insert(why);
            }
            if let Some(why) = &l.invalid {
                tracing::error!(mount = %c.id, "mounts.json holds a mount that is never mounted: {why}");
                l.error = Some(format!("not mounted: mounts.json holds it as {why}"));
            }
            live.insert(c.id.clone(), l);
        }
        let wanted: Vec<String> = file
            .mounts
            .iter()
            .filter(|c| c.enabled && c.desired_mounted)
            .map(|c| format!("{}.error", c.id))
            .collect();
        for e in std::fs::read_dir(&errors).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".error") && !wanted.contains(&name) {
                let _ = std::fs::remove_file(e.path());
            }
        }
        Self {
            files,
            errors,
            rcd,
            watcherd,
            inner: Mutex::new(Inner { file, live }),
            ops: Mutex::new(HashMap::new()),
            cancels: Mutex::new(HashMap::new()),
            wake: tokio::sync::Notify::new(),
            looks: AtomicU64::new(0),
            remounts: AtomicU64::new(0),
            allow_other: allow_other(),
            places,
            confine: tokio::sync::Mutex::new(()),
        }
    }

    /// Judges what a new mount would serve before it is stored, within
    /// `until`: a 400 naming `rcloneRemote` for a remote that is not
    /// configured, is of type `local`, serves one of meta-core's places
    /// or has a root that holds one (a 400 naming `rclonePath` for a
    /// path out of the remote's root); 503 when rclone cannot read its
    /// configuration by then. What it serves, when that cannot be known
    /// by `until` (or is a folder that does not exist yet), is judged at
    /// each mount attempt instead.
    pub async fn judge_new(
        &self,
        rc: &Rc,
        c: &MountConfig,
        until: tokio::time::Instant,
    ) -> Result<(), ApiError> {
        let typed = tokio::time::timeout_at(until, confine::judge_type(rc, c, LIST_TIMEOUT))
            .await
            .unwrap_or_else(|_| Err(Judged::NoType("no answer in time".into())));
        let refused = |judged: Result<(), Judged>| match judged {
            Err(Judged::Refused(r)) if r.refuses_create() => {
                Err(ApiError::bad_request(r.to_string()))
            }
            Err(Judged::NoType(why)) => Err(ApiError::unavailable(format!(
                "rclone could not read its configuration: {why}"
            ))),
            _ => Ok(()),
        };
        refused(typed)?;
        let served = tokio::time::timeout_at(until, async {
            let _confined = self.confine.lock().await;
            confine::judge_served(rc, c, &self.places, LIST_TIMEOUT).await
        })
        .await;
        served.map_or(Ok(()), refused)
    }

    pub fn rcd(&self) -> &Rcd {
        &self.rcd
    }

    pub fn files(&self) -> &Path {
        &self.files
    }

    /// The keeper's passes so far.
    pub fn looks(&self) -> u64 {
        self.looks.load(Ordering::Relaxed)
    }

    /// Mounts found lost and made again so far.
    pub fn remounts(&self) -> u64 {
        self.remounts.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.locked()
    }

    /// The operation lock of mount `id`.
    fn op(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.ops.locked().entry(id.to_owned()).or_default().clone()
    }

    /// The cancel signal of mount `id`'s attempts.
    fn cancel_signal(&self, id: &str) -> Arc<tokio::sync::Notify> {
        self.cancels
            .locked()
            .entry(id.to_owned())
            .or_default()
            .clone()
    }

    /// Stops a mount attempt of `id` that is waiting on its remote, so an
    /// unmount or a delete does not wait for it (its lock is let go at
    /// once; the attempt is recorded as cancelled).
    pub fn cancel_attempt(&self, id: &str) {
        self.cancel_signal(id).notify_waiters();
    }

    /// No longer wanted mounted: `desiredMounted` false, an attempt under
    /// way stopped, and unmounted (409 `mount_failed` when it cannot be).
    pub async fn take_down(&self, id: &str) -> Result<(), ApiError> {
        self.edit(id, |m| {
            m.desired_mounted = false;
            Ok(())
        })?;
        self.cancel_attempt(id);
        self.unmount(id).await.map_err(mount_failed)
    }

    /// Looks at every mount now rather than at the next tick.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// How many mounts `mounts.json` holds.
    pub fn count(&self) -> usize {
        self.lock().file.mounts.len()
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

    /// Changes a mount's configuration and writes the file: 404 when there
    /// is no such mount, the change's own refusal, or 500 when the file
    /// cannot be written (and nothing changes).
    pub fn edit(
        &self,
        id: &str,
        change: impl FnOnce(&mut MountConfig) -> Result<(), ApiError>,
    ) -> Result<MountConfig, ApiError> {
        let mut inner = self.lock();
        let Some(at) = inner.file.mounts.iter().position(|c| c.id == id) else {
            return Err(not_found(id));
        };
        let mut changed = inner.file.mounts[at].clone();
        change(&mut changed)?;
        let before = std::mem::replace(&mut inner.file.mounts[at], changed.clone());
        if let Err(e) = inner.file.save() {
            inner.file.mounts[at] = before;
            return Err(ApiError::internal(format!("cannot write mounts.json: {e}")));
        }
        if let Some(l) = inner.live.get_mut(id) {
            if !changed.polling_enabled {
                l.next_scan_at = None;
            } else if l.mounted && l.next_scan_at.is_none() {
                l.next_scan_at = Some(unix_ms());
            }
        }
        Ok(changed)
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

    /// Unmounts a mount and forgets it (its error file and its empty
    /// folder with it), all under its operation lock, so nothing mounts it
    /// between. 409 `mount_failed` when it cannot be unmounted: it is kept then, no longer
    /// wanted mounted.
    pub async fn delete(&self, id: &str) -> Result<(), ApiError> {
        self.edit(id, |m| {
            m.desired_mounted = false;
            Ok(())
        })?;
        self.cancel_attempt(id);
        let op = self.op(id);
        let _op = op.lock().await;
        self.unmount_locked(id).await.map_err(mount_failed)?;
        let mut inner = self.lock();
        let Some(at) = inner.file.mounts.iter().position(|c| c.id == id) else {
            return Ok(());
        };
        let gone = inner.file.mounts.remove(at);
        if let Err(e) = inner.file.save() {
            inner.file.mounts.insert(at, gone);
            return Err(ApiError::internal(format!("cannot write mounts.json: {e}")));
        }
        inner.live.remove(id);
        drop(inner);
        self.ops.locked().remove(id);
        self.cancels.locked().remove(id);
        self.remove_error_file(id);
        let _ = std::fs::remove_dir(&gone.mount_path);
        Ok(())
    }

    fn live(&self, id: &str, f: impl FnOnce(&mut Live)) {
        f(self.lock().live_mut(id));
    }
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("mount not found: {id}"))
}

/// rclone could not do what was asked: 409 `mount_failed`, with its words.
pub fn mount_failed(why: String) -> ApiError {
    ApiError::new(ErrorCode::MountFailed, why)
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
