//! The keeper: one task that looks at every mount every [`LOOK_EVERY`],
//! whenever rclone's state changes, when woken, and when a retry or a
//! polling scan falls due; it mounts what is wanted and not mounted,
//! records and mounts again what was lost, unmounts what is no longer
//! wanted, and starts the polling scans.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use metacore::api::mountd::MountConfig;
use metacore::clock::unix_ms;
use metacore::shutdown::Shutdown;

use super::outcome::{LOST, backoff};
use super::{Live, Manager};
use crate::system::{self, Probe};

/// How often every mount is looked at.
pub const LOOK_EVERY: Duration = Duration::from_secs(5);
/// A mount lost sooner than this after it was made is mounted again only
/// after a backoff that keeps growing (it would be lost again).
const STABLE_AFTER: Duration = Duration::from_secs(60);
/// The shortest wait between two looks.
const MIN_WAIT: Duration = Duration::from_millis(50);

impl Manager {
    /// Runs until shutdown (the caller unmounts everything after it).
    pub async fn keep(self: Arc<Self>, shutdown: Shutdown) {
        let mut rclone = self.rcd.subscribe();
        while !shutdown.is_triggered() {
            self.look().await;
            self.looks.fetch_add(1, Ordering::Relaxed);
            let wait = self.next_due();
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.wake.notified() => {}
                _ = rclone.changed() => {}
                () = shutdown.wait() => {}
            }
        }
    }

    /// Until the next look: [`LOOK_EVERY`], or sooner when a retry or a
    /// polling scan falls due first.
    fn next_due(&self) -> Duration {
        let (now_ms, now) = (unix_ms(), Instant::now());
        let inner = self.lock();
        let mut wait = LOOK_EVERY;
        for c in &inner.file.mounts {
            let Some(l) = inner.live.get(&c.id) else {
                continue;
            };
            if !(c.enabled && c.desired_mounted) || l.invalid.is_some() {
                continue;
            }
            let due = if l.mounted {
                l.next_scan_at
                    .filter(|_| c.polling_enabled && !l.scanning)
                    .map(|at| Duration::from_millis(at.saturating_sub(now_ms)))
            } else {
                l.retry_at.map(|at| at.saturating_duration_since(now))
            };
            if let Some(d) = due {
                wait = wait.min(d);
            }
        }
        wait.max(MIN_WAIT)
    }

    /// One look at every mount, each under its own operation lock.
    async fn look(self: &Arc<Self>) {
        let ids: Vec<String> = self
            .lock()
            .file
            .mounts
            .iter()
            .map(|c| c.id.clone())
            .collect();
        for id in ids {
            let op = self.op(&id);
            let _op = op.lock().await;
            // It may have changed, or gone, while the lock was awaited.
            let Some(c) = self.config(&id) else {
                continue;
            };
            self.look_at(&c).await;
        }
    }

    /// One mount, its operation lock held. The kernel's table is read
    /// here, under the lock: read before it, it could predate a mount the
    /// lock's last holder made.
    async fn look_at(self: &Arc<Self>, c: &MountConfig) {
        let generation = self.rcd.rc().map(|rc| rc.generation);
        let point = PathBuf::from(&c.mount_path);
        let present = system::mounted_at(&system::mounts(), &point).filter(system::is_rclone);
        let live = self.lock().live.get(&c.id).cloned().unwrap_or_default();
        if !(c.enabled && c.desired_mounted) {
            if present.is_some() {
                let _ = self.unmount_locked(&c.id).await;
            }
            return;
        }
        if live.mounted {
            let lost = match &present {
                None => Some(("it was unmounted from outside".to_owned(), false)),
                Some(_) if generation != Some(live.generation) => {
                    let why = self
                        .rcd
                        .unavailable()
                        .map_or_else(|| "rclone rcd was restarted".to_owned(), |u| u.to_string());
                    Some((why, true))
                }
                Some(entry) => match system::probe(entry).await {
                    Probe::Stale(why) => Some((why, false)),
                    Probe::Answers => None,
                },
            };
            let Some((why, rclone_ended)) = lost else {
                self.live(&c.id, |l| l.last_checked = Some(unix_ms()));
                self.maybe_scan(c, &live);
                return;
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
            return;
        }
        if generation.is_none() {
            // Tried again as soon as rclone runs (its state change wakes
            // the keeper); not a failure of the mount's own. A mount just
            // lost keeps the text of its loss.
            self.note_waiting_for_rclone(&c.id);
            return;
        }
        let _ = self.mount_locked(&c.id).await;
    }

    /// A mount found gone or stale: recorded, and mounted again at once
    /// when its rclone was restarted (rclone's restarts have their own
    /// backoff), after a backoff otherwise, which keeps growing while the
    /// mount is lost again within [`STABLE_AFTER`] of being made.
    fn lost(&self, id: &str, why: &str, rclone_ended: bool) {
        let text = format!("{LOST}{why}; mounting it again");
        tracing::warn!(mount = id, "{text}");
        self.note_error(id, &text);
        self.remounts.fetch_add(1, Ordering::Relaxed);
        self.live(id, |l| {
            l.mounted = false;
            l.remounts += 1;
            if rclone_ended {
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

    /// Starts a polling scan of `c` when one is due (marked as running
    /// before the task starts, so two looks never start two).
    fn maybe_scan(self: &Arc<Self>, c: &MountConfig, live: &Live) {
        if !c.polling_enabled || live.scanning {
            return;
        }
        if live.next_scan_at.is_none_or(|at| at > unix_ms()) {
            return;
        }
        self.live(&c.id, |l| l.scanning = true);
        let me = self.clone();
        let id = c.id.clone();
        tokio::spawn(async move {
            let _ = me.scan(&id, true).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::Mounts;
    use crate::rcd::Rcd;

    /// A manager over one mount that is mounted, with what the keeper
    /// would do next.
    fn manager(polling: bool) -> (tempfile::TempDir, Manager) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mounts.json");
        std::fs::write(
            &file,
            format!(
                r#"{{"version":1,"mounts":[{{"id":"m","name":"m","type":"rclone","enabled":true,"desiredMounted":true,"mountPath":"","rcloneRemote":":memory","pollingEnabled":{polling}}}]}}"#
            ),
        )
        .unwrap();
        let (mounts, _) = Mounts::open(&file, 1).unwrap();
        let m = Manager::new(
            dir.path().join("files"),
            dir.path().join("errors"),
            mounts,
            Arc::new(Rcd::new(dir.path().join("pid"))),
            metacore::api::watcherd::WatcherdClient::new(&dir.path().join("w.sock")),
            crate::confine::Places::new(&metacore::Config::from_lookup(|_| None).unwrap()),
        );
        let c = m.config("m").unwrap();
        m.cleared(&c, 1);
        (dir, m)
    }

    #[test]
    fn with_polling_off_the_keeper_waits_its_full_tick() {
        let (_dir, m) = manager(false);
        assert_eq!(m.next_due(), LOOK_EVERY);
        // Turned on: the scan is due at once; turned off again: not.
        m.edit("m", |c| {
            c.polling_enabled = true;
            Ok(())
        })
        .unwrap();
        assert_eq!(m.next_due(), MIN_WAIT);
        m.edit("m", |c| {
            c.polling_enabled = false;
            Ok(())
        })
        .unwrap();
        assert_eq!(m.next_due(), LOOK_EVERY);
    }

    #[test]
    fn a_retry_due_sooner_than_the_tick_shortens_the_wait() {
        let (_dir, m) = manager(false);
        m.live("m", |l| {
            l.mounted = false;
            l.retry_at = Some(Instant::now() + Duration::from_secs(1));
        });
        let wait = m.next_due();
        assert!(
            wait <= Duration::from_secs(1) && wait >= MIN_WAIT,
            "{wait:?}"
        );
        // A scanning mount's scan is not due again.
        let (_dir, m) = manager(true);
        assert_eq!(m.next_due(), MIN_WAIT);
        m.live("m", |l| l.scanning = true);
        assert_eq!(m.next_due(), LOOK_EVERY);
    }
}
