//! Unmounting at a stop, and what an earlier mountd left.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Manager;
use crate::config::MOUNTS_DIR;
use crate::rc::Rc;
use crate::system;

/// What a stop spends unmounting through rclone before it detaches what
/// is left (the supervisor gives mountd 1 s in all).
const STOP_UNMOUNT_BUDGET: Duration = Duration::from_millis(500);

impl Manager {
    /// The rclone mounts under `FILES_PATH/corn`, as the kernel names them.
    fn rclone_mounts(&self) -> Vec<PathBuf> {
        let corn = system::resolved(&self.files.join(MOUNTS_DIR));
        system::mounts()
            .into_iter()
            .filter(|e| e.point.starts_with(&corn) && system::is_rclone(e))
            .map(|e| e.point)
            .collect()
    }

    /// Detaches every rclone mount under `FILES_PATH/corn`: at start, what
    /// a mountd killed before it could unmount left (their rclone is
    /// gone); at a stop, what rclone did not unmount.
    pub async fn detach_leftovers(&self) {
        for point in self.rclone_mounts() {
            match system::detach(&point).await {
                Ok(()) => tracing::warn!(path = %point.display(), "detached a stale mount"),
                Err(why) => tracing::error!("{why}"),
            }
        }
    }

    /// At a stop, with the keeper stopped: every mount unmounted through
    /// rclone, by the folder it was mounted on (rclone knows its mounts by
    /// that name), within [`STOP_UNMOUNT_BUDGET`] in all; then whatever is
    /// left detached. No operation lock is taken: a request still running
    /// must not hold the stop up, and rclone's own stop unmounts what it
    /// mounts meanwhile.
    pub async fn unmount_all(&self) {
        let rc = self.rcd.rc();
        let points: Vec<String> = self
            .lock()
            .file
            .mounts
            .iter()
            .map(|c| c.mount_path.clone())
            .collect();
        let until = Instant::now() + STOP_UNMOUNT_BUDGET;
        let mut done = 0;
        for p in &points {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let unmounted =
                tokio::time::timeout(left, unmount_point(rc.clone(), Path::new(p), left));
            if matches!(unmounted.await, Ok(Ok(true))) {
                done += 1;
            }
        }
        self.detach_leftovers().await;
        for l in self.lock().live.values_mut() {
            l.mounted = false;
        }
        tracing::info!(unmounted = done, "unmounted everything");
    }
}

/// Unmounts the rclone mount at `point` through rclone when it runs, and
/// detaches it when it is still there after that: whether there was one.
pub(super) async fn unmount_point(
    rc: Option<Rc>,
    point: &Path,
    within: Duration,
) -> Result<bool, String> {
    let rclone_at = || system::mounted_at(&system::mounts(), point).filter(system::is_rclone);
    if rclone_at().is_none() {
        return Ok(false);
    }
    let mut said = None;
    if let Some(rc) = rc
        && let Err(e) = rc.unmount(point, within).await
    {
        said = Some(e);
    }
    if rclone_at().is_some() {
        system::detach(point).await.map_err(|e| match &said {
            Some(s) => format!("{s}; {e}"),
            None => e,
        })?;
    }
    Ok(true)
}
