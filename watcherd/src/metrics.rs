//! watcherd's metrics (`GET /metrics` on its socket): the figures of its
//! `/status` (files known, pending and gone, folders watched and polled,
//! queue overflows, refusals) read at scrape time, and the two it counts
//! for them alone: the `file:events` entries announced by type, and the
//! rescans begun.

use std::sync::atomic::{AtomicU64, Ordering};

use metacore::api::watcherd::WatcherdStatus;
use metacore::layout::Daemon;
use metacore::metrics::{Part, RenderError};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;

/// The type of a `file:events` entry, as a label: the five the watcher
/// appends, and one for anything else storaged might answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum EventType {
    Add,
    Change,
    Delete,
    Rename,
    Reset,
    Other,
}

impl EventType {
    const ALL: [EventType; 6] = [
        EventType::Add,
        EventType::Change,
        EventType::Delete,
        EventType::Rename,
        EventType::Reset,
        EventType::Other,
    ];

    fn name(self) -> &'static str {
        match self {
            EventType::Add => "add",
            EventType::Change => "change",
            EventType::Delete => "delete",
            EventType::Rename => "rename",
            EventType::Reset => "reset",
            EventType::Other => "other",
        }
    }

    fn of(name: &str) -> Self {
        Self::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .unwrap_or(EventType::Other)
    }
}

impl EncodeLabelValue for EventType {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.name(), encoder)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TypeLabels {
    r#type: EventType,
}

/// `file:events` entries announced, by type (one atomic each).
#[derive(Debug, Default)]
pub struct EventCounts([AtomicU64; 6]);

impl EventCounts {
    /// Counts one entry of the type storaged named.
    pub fn count(&self, name: &str) {
        self.0[EventType::of(name) as usize].fetch_add(1, Ordering::Relaxed);
    }

    fn get(&self, t: EventType) -> u64 {
        self.0[t as usize].load(Ordering::Relaxed)
    }
}

fn counter(n: u64) -> ConstCounter<u64> {
    ConstCounter::new(n)
}

fn gauge(n: u64) -> ConstGauge<i64> {
    ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX))
}

/// The exposition of the status `s` and the counts of `events` and
/// `rescans`.
pub fn render(
    s: &WatcherdStatus,
    events: &EventCounts,
    rescans: u64,
) -> Result<String, RenderError> {
    let mut r = metacore::metrics::registry();
    metacore::metrics::register_build_info(&mut r, Part::Daemon(Daemon::Watcherd));
    for (name, help, n) in gauges(s) {
        r.register(name, help, gauge(n));
    }
    let by_type = Family::<TypeLabels, Counter>::default();
    for t in EventType::ALL {
        by_type
            .get_or_create(&TypeLabels { r#type: t })
            .inc_by(events.get(t));
    }
    r.register(
        "watcherd_events",
        "file:events entries announced, by type",
        by_type,
    );
    for (name, help, n) in counters(s, rescans) {
        r.register(name, help, counter(n));
    }
    metacore::metrics::render(&[&r])
}

/// A metric's name, its help and its value.
type Figure = (&'static str, &'static str, u64);

/// The gauges of the status `s`, in the order they are shown.
fn gauges(s: &WatcherdStatus) -> [Figure; 7] {
    [
        (
            "watcherd_enabled",
            "1 when the file watcher runs (ENABLE_FILE_WATCHER)",
            u64::from(s.enabled),
        ),
        (
            "watcherd_files",
            "Files known (announced and present) under FILES_PATH",
            s.known_files as u64,
        ),
        (
            "watcherd_pending_files",
            "Files waiting to be quiet (DEBOUNCE_MS) before they are announced",
            s.pending,
        ),
        (
            "watcherd_gone_files",
            "Known files gone, waiting to be a delete or a rename",
            s.gone,
        ),
        (
            "watcherd_watched_dirs",
            "Folders with an inotify watch",
            s.inotify.watched_dirs,
        ),
        (
            "watcherd_polled_dirs",
            "Folders past the inotify limit, listed every WATCH_INTERVAL_MS instead",
            s.inotify.polled_dirs,
        ),
        (
            "watcherd_watchers",
            "Polling watchers in watchers.json",
            s.watchers as u64,
        ),
    ]
}

/// The counters of the status `s` and the `rescans` begun, in the order
/// they are shown.
fn counters(s: &WatcherdStatus, rescans: u64) -> [Figure; 6] {
    [
        (
            "watcherd_rescans",
            "Rescans begun: the start-up walk, API scans, queue-overflow rescans",
            rescans,
        ),
        (
            "watcherd_inotify_overflows",
            "inotify queue overflows, each followed by a rescan of the whole tree",
            s.inotify.overflows,
        ),
        (
            "watcherd_repairs",
            "Repairs run to their end after a rescan",
            s.repair.passes,
        ),
        (
            "watcherd_observations_refused",
            "Observations storaged refused (logged with their cause)",
            s.refused,
        ),
        (
            "watcherd_store_waits",
            "Times storaged could not be reached and the engine waited",
            s.store_waits,
        ),
        (
            "watcherd_refused_names",
            "Files and folders skipped because their name is not UTF-8",
            s.refused_names,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_counted_by_a_type_of_a_fixed_set() {
        let events = EventCounts::default();
        for name in ["add", "add", "rename", "a/path/that/is/no/type", "Other"] {
            events.count(name);
        }
        assert_eq!(events.get(EventType::Add), 2);
        assert_eq!(events.get(EventType::Rename), 1);
        assert_eq!(events.get(EventType::Other), 2);
        assert_eq!(events.get(EventType::Delete), 0);
    }
}
