//! storaged's metrics (`GET /metrics` on its socket): the writer's figures
//! of `/status` (writes and groups committed or failed, the queue), the
//! commit-time histogram the writer keeps, the database's and WAL's bytes,
//! the roots and the reader pool, read at scrape time into one registry.

use std::time::Duration;

use metacore::api::storaged::WriterStats;
use metacore::layout::Daemon;
use metacore::metrics::{Part, RenderError};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Unit;

/// Upper bounds of the commit-time buckets, in seconds: 100 µs to 5 s.
const COMMIT_BUCKETS: [f64; 15] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// How long committed write groups took, from their opening to COMMIT's
/// return: the wait a write adds once the writer has taken it. Owned by
/// the writer (one per store, no static); a clone shares the counts.
#[derive(Debug, Clone)]
pub(crate) struct CommitSeconds(Histogram);

impl Default for CommitSeconds {
    fn default() -> Self {
        Self(Histogram::new(COMMIT_BUCKETS))
    }
}

impl CommitSeconds {
    pub(crate) fn observe(&self, took: Duration) {
        self.0.observe(took.as_secs_f64());
    }
}

/// What one scrape shows.
#[derive(Debug)]
pub(crate) struct Figures {
    pub writer: WriterStats,
    pub commit_seconds: CommitSeconds,
    pub roots: u64,
    pub db_bytes: u64,
    pub wal_bytes: u64,
    pub readers: u32,
    pub disk_full: bool,
}

fn counter(n: u64) -> ConstCounter<u64> {
    ConstCounter::new(n)
}

fn gauge(n: u64) -> ConstGauge<i64> {
    ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX))
}

/// The exposition of `f`.
pub(crate) fn render(f: Figures) -> Result<String, RenderError> {
    let w = &f.writer;
    let mut r = metacore::metrics::registry();
    metacore::metrics::register_build_info(&mut r, Part::Daemon(Daemon::Storaged));
    r.register(
        "storaged_writes_committed",
        "Writes committed (each acknowledged only after its group's COMMIT)",
        counter(w.committed_writes),
    );
    r.register(
        "storaged_writes_failed",
        "Writes rolled back alone for their own error (the rest of their group committed)",
        counter(w.failed_writes),
    );
    r.register(
        "storaged_groups_committed",
        "Write groups committed (one transaction each)",
        counter(w.committed_groups),
    );
    r.register(
        "storaged_groups_failed",
        "Write groups whose COMMIT did not happen: none of their writes was applied",
        counter(w.failed_commits),
    );
    r.register(
        "storaged_group_largest_writes",
        "The most writes one group has held since storaged started",
        gauge(w.largest_batch),
    );
    r.register(
        "storaged_queued_writes",
        "Writes queued for the writer thread now",
        gauge(w.queued),
    );
    // Named in seconds without a UNIT line: the OpenMetrics parser the
    // tests hold the output to refuses units on histograms.
    r.register(
        "storaged_commit_duration_seconds",
        "Committed write groups by their time from opening to COMMIT's return",
        f.commit_seconds.0,
    );
    r.register_with_unit(
        "storaged_database",
        "Size of the database file",
        Unit::Bytes,
        gauge(f.db_bytes),
    );
    r.register_with_unit(
        "storaged_wal",
        "Size of the database's write-ahead log",
        Unit::Bytes,
        gauge(f.wal_bytes),
    );
    r.register(
        "storaged_roots",
        "Records (roots) in the store",
        gauge(f.roots),
    );
    r.register(
        "storaged_readers",
        "Connections of the reader pool",
        gauge(u64::from(f.readers)),
    );
    r.register(
        "storaged_disk_full",
        "1 while the database's volume is full and writes fail",
        gauge(u64::from(f.disk_full)),
    );
    metacore::metrics::render(&[&r])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_figures_are_named_and_typed_as_prometheus_expects() {
        let commit_seconds = CommitSeconds::default();
        commit_seconds.observe(Duration::from_micros(300));
        let text = render(Figures {
            writer: WriterStats {
                committed_writes: 7,
                committed_groups: 3,
                queued: 2,
                ..WriterStats::default()
            },
            commit_seconds,
            roots: 5,
            db_bytes: 4096,
            wal_bytes: 8192,
            readers: 4,
            disk_full: false,
        })
        .expect("renders");
        for line in [
            "# TYPE metacore_storaged_writes_committed counter",
            "metacore_storaged_writes_committed_total 7",
            "metacore_storaged_groups_committed_total 3",
            "metacore_storaged_queued_writes 2",
            "# TYPE metacore_storaged_commit_duration_seconds histogram",
            "metacore_storaged_commit_duration_seconds_bucket{le=\"0.0005\"} 1",
            "metacore_storaged_commit_duration_seconds_bucket{le=\"0.00025\"} 0",
            "metacore_storaged_commit_duration_seconds_count 1",
            "metacore_storaged_database_bytes 4096",
            "metacore_storaged_wal_bytes 8192",
            "metacore_storaged_roots 5",
            "# EOF",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
