//! What a mount's attempts leave for the operator: why it is not mounted,
//! in its status and in `mounts/errors/<id>.error`, kept in step, and the
//! backoff before the next attempt.
//!
//! The file and the status change together under the state's lock, the
//! file first: two attempts ending at once cannot leave the file saying
//! one thing and the status another, and whoever reads an error in the
//! status finds the file already saying it (and a cleared status, the file
//! already gone).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use metacore::api::mountd::MountConfig;
use metacore::backoff::Backoff;
use metacore::clock::unix_ms;

use super::{Live, Manager};

/// How the text of a mount found lost begins; it is kept until the mount
/// is made again, not replaced by a wait for rclone.
pub(super) const LOST: &str = "mount lost: ";

/// A failed mount is tried again after this, doubling up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(60);

impl Manager {
    fn error_file(&self, id: &str) -> PathBuf {
        self.errors.join(format!("{id}.error"))
    }

    fn write_error_file(&self, id: &str, why: &str) {
        let _ = metacore::files::ensure_dir(&self.errors, 0o700);
        let _ = metacore::files::write_atomic(
            &self.error_file(id),
            format!("{why}\n").as_bytes(),
            0o600,
        );
    }

    pub(super) fn remove_error_file(&self, id: &str) {
        let _ = std::fs::remove_file(self.error_file(id));
    }

    /// Records why a mount is not mounted, in its error file and its status.
    pub(super) fn note_error(&self, id: &str, why: &str) {
        let mut inner = self.lock();
        self.record(inner.live_mut(id), id, why);
    }

    /// The file, then the status, unless the status says so already (the
    /// keeper notes the same wait for rclone at every look: no rewrite).
    fn record(&self, live: &mut Live, id: &str, why: &str) {
        if live.error.as_deref() == Some(why) {
            return;
        }
        self.write_error_file(id, why);
        live.error = Some(why.to_owned());
    }

    /// Records that a mount waits for rclone, unless it was just lost
    /// (it keeps the text of its loss) or rclone runs by now. Judged under
    /// the state's lock: an attempt that began once rclone answered records
    /// its own outcome after this, so a stale "rclone rcd is starting"
    /// never replaces the real reason a mount failed.
    pub(super) fn note_waiting_for_rclone(&self, id: &str) {
        let mut inner = self.lock();
        let live = inner.live_mut(id);
        if live.error.as_deref().is_some_and(|e| e.starts_with(LOST)) {
            return;
        }
        let Some(why) = self.rcd.unavailable() else {
            return;
        };
        self.record(live, id, &format!("cannot mount: {why}"));
    }

    /// Clears a mount's error, its file first, and applies `f` to what is
    /// seen of it under the same lock.
    pub(super) fn clear_error(&self, id: &str, f: impl FnOnce(&mut Live)) {
        let mut inner = self.lock();
        self.remove_error_file(id);
        let live = inner.live_mut(id);
        live.error = None;
        f(live);
    }

    /// A mount attempt failed: recorded, and tried again after a backoff.
    pub(super) fn failed(&self, id: &str, why: &str) {
        tracing::warn!(mount = id, "{why}");
        self.note_error(id, why);
        self.live(id, |l| {
            l.failures = l.failures.saturating_add(1);
            l.retry_at = Some(Instant::now() + backoff(l.failures));
        });
    }

    /// A mount attempt worked: mounted since now by rclone's start
    /// `generation`, its error and backoff cleared.
    pub(super) fn cleared(&self, c: &MountConfig, generation: u64) {
        self.clear_error(&c.id, |l| {
            l.mounted = true;
            l.since = Some(Instant::now());
            l.generation = generation;
            l.failures = 0;
            l.retry_at = None;
            l.last_checked = Some(unix_ms());
            if c.polling_enabled && l.next_scan_at.is_none() {
                l.next_scan_at = Some(unix_ms());
            }
        });
    }
}

/// The wait after `failures` failures in a row: 1 s, doubling, at most
/// [`MAX_RETRY`].
pub(super) fn backoff(failures: u32) -> Duration {
    Backoff::doubling(FIRST_RETRY, MAX_RETRY).after(failures)
}
