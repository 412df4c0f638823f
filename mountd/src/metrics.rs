//! mountd's metrics (`GET /metrics` on its socket): the mounts of
//! `mounts.json`, how many are wanted, up and failing, the remounts, and
//! rclone's state and restarts, read at scrape time from the manager (no
//! mount id is a label: ids are the operator's strings).

use metacore::api::mountd::{MountStatus, RcdState};
use metacore::layout::Daemon;
use metacore::metrics::{Part, RenderError};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::manager::Manager;

fn gauge(n: usize) -> ConstGauge<i64> {
    ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX))
}

/// The exposition of what `m` shows now.
pub fn render(m: &Manager) -> Result<String, RenderError> {
    let mounts = m.list();
    let rclone = m.rcd().status();
    let count = |f: &dyn Fn(&MountStatus) -> bool| mounts.iter().filter(|s| f(s)).count();
    let mut r = metacore::metrics::registry();
    metacore::metrics::register_build_info(&mut r, Part::Daemon(Daemon::Mountd));
    r.register(
        "mountd_mounts",
        "Mounts in mounts.json",
        gauge(mounts.len()),
    );
    r.register(
        "mountd_mounts_wanted",
        "Mounts enabled and wanted mounted",
        gauge(count(&|s| s.config.enabled && s.config.desired_mounted)),
    );
    r.register(
        "mountd_mounts_up",
        "Mounts mounted now",
        gauge(count(&|s| s.mounted)),
    );
    r.register(
        "mountd_mounts_failing",
        "Mounts wanted mounted that are not, with an error recorded",
        gauge(count(&|s| {
            s.config.enabled && s.config.desired_mounted && !s.mounted && s.error.is_some()
        })),
    );
    r.register(
        "mountd_remounts",
        "Mounts found lost and mounted again",
        ConstCounter::new(m.remounts()),
    );
    r.register(
        "mountd_rclone_up",
        "1 while rclone rcd runs (0 while starting, restarting, stopped or not installed)",
        gauge(usize::from(rclone.state == RcdState::Running)),
    );
    r.register(
        "mountd_rclone_restarts",
        "Times rclone rcd was started again after it ended",
        ConstCounter::new(rclone.restarts),
    );
    r.register(
        "mountd_keeper_passes",
        "The keeper's passes over the mounts",
        ConstCounter::new(m.looks()),
    );
    metacore::metrics::render(&[&r])
}
