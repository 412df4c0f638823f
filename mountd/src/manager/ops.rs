//! What the keeper and the API do to one mount, its operation lock held
//! or taken: mount it (after its remote lists, and once what it serves and
//! where it goes are judged: [`crate::confine`]), unmount it, wait for
//! what is open under it to close, and have watcherd walk it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use metacore::api::mountd::MountConfig;
use metacore::checked::RelPath;
use metacore::clock::unix_ms;
use metacore::error::ApiError;

use super::{LIST_TIMEOUT, Manager, RC_TIMEOUT, SCAN_TIMEOUT, not_found, stop};
use crate::config::MOUNTS_DIR;
use crate::confine;
use crate::rc::{Mount, MountOpt, Rc, VfsOpt};
use crate::request::fs_string;
use crate::system::{self, Probe};
use crate::units::go_duration_ns;

impl Manager {
    /// Mounts `id` now, if it is not mounted and answering already.
    pub async fn mount(&self, id: &str) -> Result<(), String> {
        let op = self.op(id);
        let _op = op.lock().await;
        self.mount_locked(id).await
    }

    /// [`Manager::mount`] with the mount's operation lock held.
    pub(super) async fn mount_locked(&self, id: &str) -> Result<(), String> {
        let Some(c) = self.config(id) else {
            return Err("no such mount".into());
        };
        // An unmount that came while this attempt waited for the lock won.
        if !(c.enabled && c.desired_mounted) {
            return Err("the mount was cancelled: it is no longer wanted".into());
        }
        let result = self.try_mount(&c).await;
        match &result {
            Ok(generation) => {
                tracing::info!(mount = id, path = %c.mount_path, "mounted");
                self.cleared(&c, *generation);
            }
            Err(why) => self.failed(id, why),
        }
        result.map(|_| ())
    }

    /// One attempt at mounting `c`: the start of rclone that made the
    /// mount, or why there is none.
    async fn try_mount(&self, c: &MountConfig) -> Result<u64, String> {
        if let Some(why) = self.lock().live.get(&c.id).and_then(|l| l.invalid.clone()) {
            return Err(format!("not mounted: mounts.json holds it as {why}"));
        }
        let rc = match self.rcd.rc() {
            Some(rc) => rc,
            None => {
                let why = self
                    .rcd
                    .unavailable()
                    .map(|u| u.to_string())
                    .unwrap_or_default();
                return Err(format!("cannot mount: {why}"));
            }
        };
        let point = PathBuf::from(&c.mount_path);
        if self.still_mounted(c, &rc, &point).await? {
            return Ok(rc.generation);
        }
        self.make_folder(&point)?;
        // The remote must answer before it is mounted: rclone mounts one
        // that does not (its errors come later, as EIO to every reader).
        let fs = fs_string(c);
        let cancel = self.cancel_signal(&c.id);
        tokio::select! {
            listed = rc.list_top(&fs, LIST_TIMEOUT) => {
                listed.map_err(|e| format!("the remote cannot be listed: {e}"))?;
            }
            () = cancel.notified() => return Err(cancelled()),
        }
        let _confined = self.judged(&rc, c, &cancel).await?;
        // Still wanted? (An unmount may have come while the remote was
        // listed or judged, and be waiting for this lock.)
        if !self
            .config(&c.id)
            .is_some_and(|now| now.enabled && now.desired_mounted)
        {
            return Err("the mount was cancelled: it is no longer wanted".into());
        }
        rc.mount(&mount_of(c, &fs, self.allow_other)?, RC_TIMEOUT)
            .await?;
        if system::mounted_at(&system::mounts(), &point).is_none() {
            return Err(format!(
                "rclone said it mounted {}, but the kernel has no mount there",
                point.display()
            ));
        }
        Ok(rc.generation)
    }

    /// Whether an rclone mount made by this start of rclone is at `point`
    /// and answers (nothing to do then). A stale one is detached; another
    /// filesystem there is left alone, and the mount refused.
    async fn still_mounted(&self, c: &MountConfig, rc: &Rc, point: &Path) -> Result<bool, String> {
        let Some(existing) = system::mounted_at(&system::mounts(), point) else {
            return Ok(false);
        };
        if !system::is_rclone(&existing) {
            return Err(format!(
                "another filesystem ({}) is mounted at {}: it is left alone",
                existing.fstype,
                point.display()
            ));
        }
        let mine = self.lock().live.get(&c.id).map(|l| l.generation) == Some(rc.generation);
        if mine && system::probe(&existing).await == Probe::Answers {
            return Ok(true);
        }
        system::detach(point).await?;
        Ok(false)
    }

    /// Judges the remote's type and what it serves, as rclone.conf is now
    /// (it may have changed since the create); what it holds is the
    /// `confine` lock, kept until the mount is made so that no other
    /// judgement's cache clear comes between (`None` for the on-the-fly
    /// backends, which are not judged).
    async fn judged(
        &self,
        rc: &Rc,
        c: &MountConfig,
        cancel: &tokio::sync::Notify,
    ) -> Result<Option<tokio::sync::MutexGuard<'_, ()>>, String> {
        if !confine::needs_judging(c) {
            return Ok(None);
        }
        let not_mounted = |j: confine::Judged| format!("not mounted: {j}");
        tokio::select! {
            judged = confine::judge_type(rc, c, LIST_TIMEOUT) => judged.map_err(not_mounted)?,
            () = cancel.notified() => return Err(cancelled()),
        }
        let confined = tokio::select! {
            confined = self.confine.lock() => confined,
            () = cancel.notified() => return Err(cancelled()),
        };
        tokio::select! {
            judged = confine::judge_served(rc, c, &self.places, LIST_TIMEOUT) => {
                judged.map_err(not_mounted)?;
            }
            () = cancel.notified() => return Err(cancelled()),
        }
        Ok(Some(confined))
    }

    /// Makes the mount's folder (and `FILES_PATH/corn`, and `FILES_PATH`,
    /// 0755): a real, empty folder, never a symlink (which would put the
    /// mount elsewhere), and neither it nor `corn/` resolving into one of
    /// meta-core's places (META_CORE_PATH nested under `corn/`, FILES_PATH
    /// a symlink into META_CORE_PATH).
    fn make_folder(&self, point: &Path) -> Result<(), String> {
        let corn = self.files.join(MOUNTS_DIR);
        // Judged before anything is made (a missing part resolves as
        // written).
        confine::target(&self.places, &corn, point)?;
        for dir in [&self.files, &corn, &point.to_path_buf()] {
            metacore::files::ensure_dir(dir, 0o755)
                .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        }
        for dir in [&corn, &point.to_path_buf()] {
            let real_dir = std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir());
            if !real_dir {
                return Err(format!(
                    "{} is not a folder (a symlink?): nothing is mounted there",
                    dir.display()
                ));
            }
        }
        if std::fs::read_dir(point).is_ok_and(|mut d| d.next().is_some()) {
            return Err(format!(
                "{} is not empty: files there would be hidden by the mount",
                point.display()
            ));
        }
        Ok(())
    }

    /// Unmounts `id` (through rclone; detached when rclone cannot).
    pub async fn unmount(&self, id: &str) -> Result<(), String> {
        let op = self.op(id);
        let _op = op.lock().await;
        self.unmount_locked(id).await
    }

    /// [`Manager::unmount`] with the mount's operation lock held.
    pub(super) async fn unmount_locked(&self, id: &str) -> Result<(), String> {
        let Some(c) = self.config(id) else {
            return Ok(());
        };
        stop::unmount_point(self.rcd.rc(), Path::new(&c.mount_path), RC_TIMEOUT).await?;
        self.clear_error(id, |l| {
            l.mounted = false;
            l.failures = 0;
            l.retry_at = None;
            l.next_scan_at = None;
        });
        tracing::info!(mount = id, path = %c.mount_path, "unmounted");
        Ok(())
    }

    /// Waits until nothing under the mount is open, at most `timeout`: the
    /// paths still open when the wait ran out (none when it did not).
    pub async fn wait_closed(&self, id: &str, timeout: Duration) -> Vec<PathBuf> {
        let Some(c) = self.config(id) else {
            return Vec::new();
        };
        // `/proc/<pid>/fd` names files with every symlink resolved.
        let point = system::real(Path::new(&c.mount_path));
        let until = Instant::now() + timeout;
        let mut said = false;
        loop {
            let p = point.clone();
            let open = tokio::task::spawn_blocking(move || system::open_under(&p, 20))
                .await
                .unwrap_or_default();
            if open.is_empty() || Instant::now() >= until {
                return open;
            }
            if !said {
                said = true;
                tracing::info!(
                    mount = id,
                    open = open.len(),
                    "waiting for the files open under the mount to close"
                );
            }
            tokio::time::sleep(Duration::from_millis(100).min(until - Instant::now())).await;
        }
    }

    /// Asks watcherd to walk the mount's folder, and records how it went:
    /// the files found.
    pub async fn scan(&self, id: &str, polled: bool) -> Result<usize, ApiError> {
        let Some(c) = self.config(id) else {
            return Err(not_found(id));
        };
        let started = unix_ms();
        self.live(id, |l| {
            l.scanning = true;
            l.current_scan_started_at = Some(started);
        });
        let result = match self.relative(&c) {
            Ok(folder) => self.walk(&folder).await,
            Err(e) => Err(e),
        };
        let done = unix_ms();
        let polling = self.config(id).is_some_and(|c| c.polling_enabled);
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
            l.next_scan_at = (l.mounted && polling).then(|| done + c.polling_interval_ms);
        });
        result
    }

    /// The mount's folder relative to `FILES_PATH`, as watcherd is asked
    /// to walk it.
    fn relative(&self, c: &MountConfig) -> Result<RelPath, ApiError> {
        Path::new(&c.mount_path)
            .strip_prefix(&self.files)
            .ok()
            .and_then(Path::to_str)
            .ok_or_else(|| ApiError::internal(format!("{} is not under FILES_PATH", c.mount_path)))
            .and_then(RelPath::new)
    }

    /// Has watcherd walk `folder`: the files it found.
    async fn walk(&self, folder: &RelPath) -> Result<usize, ApiError> {
        match tokio::time::timeout(SCAN_TIMEOUT, self.watcherd.scan(folder)).await {
            Ok(done) => Ok(done?.file_count),
            Err(_) => Err(ApiError::unavailable(
                "watcherd did not finish the walk in time; retry shortly",
            )),
        }
    }
}

/// Why an attempt stopped when an unmount or a delete asked.
fn cancelled() -> String {
    "the mount was cancelled: an unmount or a delete asked".into()
}

/// rclone's `mount/mount` of `c` at its folder, serving `fs`.
fn mount_of<'a>(c: &'a MountConfig, fs: &'a str, allow_other: bool) -> Result<Mount<'a>, String> {
    let ns = |member: &str, v: &str| {
        go_duration_ns(v).ok_or_else(|| format!("{member} {v:?} is not a duration"))
    };
    Ok(Mount {
        fs,
        mount_point: &c.mount_path,
        mount_type: "mount",
        vfs_opt: VfsOpt {
            cache_mode: "full",
            cache_max_size: &c.cache_max_size,
            cache_max_age: ns("cacheMaxAge", &c.cache_max_age)?,
            dir_cache_time: ns("dirCacheTime", &c.dir_cache_time)?,
            // What the services read: folders 0755, files 0644, whatever
            // umask mountd runs with.
            umask: 0o022,
            dir_perms: 0o777,
            file_perms: 0o666,
        },
        mount_opt: MountOpt { allow_other },
    })
}
