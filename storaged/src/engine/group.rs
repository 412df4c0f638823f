//! One write group: a transaction that writes join as they arrive, each in
//! its own SAVEPOINT, then the derived rows, the root count and the stream
//! marks, one COMMIT, and the acknowledgements. A write that fails (or
//! panics) is rolled back alone; a failure of the group itself
//! ([`GroupFailure`]) is told to every write of it and applies nothing.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use metacore::clock::unix_ms;
use metacore::record::Fields;
use metacore::rid::Rid;
use rusqlite::Connection;

use crate::engine::derive::{Derive, Touched};
use crate::engine::faults::{Fault, Faults};
use crate::engine::space::Space;
use crate::engine::tx::{Tx, add_to_root_count};
use crate::error::{GroupFailure, Step, StoreError};
use crate::streams::{HeadsPublisher, StreamState};

/// Told after the group's COMMIT: `None` when it committed, the reason when
/// it did not.
pub(crate) type Ack = Box<dyn FnOnce(Option<&GroupFailure>) + Send>;

/// One write: runs inside its savepoint, says whether it succeeded, and
/// hands back its acknowledgement.
pub(crate) type Job = Box<dyn for<'a> FnOnce(&mut Tx<'a>) -> (bool, Ack) + Send>;

/// Counters shown in `/status` and `/metrics`.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub batches: AtomicU64,
    pub writes: AtomicU64,
    pub failed_writes: AtomicU64,
    pub failed_commits: AtomicU64,
    pub largest_batch: AtomicU64,
    pub committed_groups: AtomicU64,
    pub committed_writes: AtomicU64,
    /// Each committed group's time from BEGIN to COMMIT's return.
    pub commit_seconds: crate::metrics::CommitSeconds,
}

fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// What a group needs besides its connection and streams.
pub(crate) struct Context<'c> {
    pub derive: Option<&'c dyn Derive>,
    pub space: &'c Space,
    pub faults: &'c Faults,
    pub heads: &'c HeadsPublisher,
    pub counters: &'c Counters,
}

/// A group being filled, then committed once.
pub(crate) struct Group<'c> {
    conn: &'c Connection,
    streams: &'c mut StreamState,
    cx: &'c Context<'c>,
    now_ms: u64,
    opened: Instant,
    taken: usize,
    /// Writes of `taken` rolled back alone.
    failed: usize,
    /// Sum of the committed writes' root-count changes.
    roots_delta: i64,
    acks: Vec<Ack>,
    /// Records whose fields changed, as they were (see `Tx::touched`).
    touched: BTreeMap<Rid, Fields>,
    /// Set when the group can no longer commit; later writes are not run.
    failure: Option<GroupFailure>,
}

impl<'c> Group<'c> {
    /// Opens the group's transaction.
    pub(crate) fn open(
        conn: &'c Connection,
        streams: &'c mut StreamState,
        cx: &'c Context<'c>,
    ) -> Self {
        let failure = exec(conn, "BEGIN IMMEDIATE")
            .err()
            .map(|e| GroupFailure::at(Step::Begin, e));
        Self {
            conn,
            streams,
            cx,
            now_ms: unix_ms(),
            opened: Instant::now(),
            taken: 0,
            failed: 0,
            roots_delta: 0,
            acks: Vec::new(),
            touched: BTreeMap::new(),
            failure,
        }
    }

    /// Writes taken so far (run or not).
    pub(crate) fn taken(&self) -> usize {
        self.taken
    }

    /// When the group began.
    pub(crate) fn opened(&self) -> Instant {
        self.opened
    }

    /// Whether the group can no longer commit.
    pub(crate) fn has_failed(&self) -> bool {
        self.failure.is_some()
    }

    /// Fails the group (when it has not failed already).
    pub(crate) fn fail(&mut self, why: GroupFailure) {
        self.failure.get_or_insert(why);
    }

    /// Runs one write inside its savepoint; a failure or a panic rolls back
    /// that write alone.
    pub(crate) fn run(&mut self, job: Job) {
        self.taken += 1;
        if self.failure.is_some() {
            // Dropping the job tells its caller the write was aborted.
            return;
        }
        if let Err(e) = exec(self.conn, "SAVEPOINT w") {
            self.fail(GroupFailure::at(Step::Savepoint, e));
            return;
        }
        let mut tx = Tx {
            conn: self.conn,
            streams: &mut *self.streams,
            now_ms: self.now_ms,
            roots_delta: 0,
            touched: self.cx.derive.map(|d| Touched::new(d, &mut self.touched)),
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| job(&mut tx)));
        let roots_delta = tx.roots_delta;
        let ok = match outcome {
            Ok((ok, ack)) => {
                self.acks.push(ack);
                ok
            }
            Err(_) => {
                // The job and its sender are gone: its caller hears "aborted".
                tracing::error!("a write panicked; it was rolled back alone");
                false
            }
        };
        if !ok {
            self.failed += 1;
            self.cx
                .counters
                .failed_writes
                .fetch_add(1, Ordering::Relaxed);
        }
        let end = if ok {
            exec(self.conn, "RELEASE w")
        } else {
            exec(self.conn, "ROLLBACK TO w").and(exec(self.conn, "RELEASE w"))
        };
        match end {
            Ok(()) if ok => self.roots_delta += roots_delta,
            Ok(()) => {}
            Err(e) => self.fail(GroupFailure::at(Step::Savepoint, e)),
        }
    }

    /// The derived rows of the records the group changed. Their own
    /// failure (but for want of space) does not fail the group: the rows
    /// are marked stale, and the writes commit.
    fn derive(&mut self) {
        let Some(derive) = self.cx.derive else { return };
        let touched = std::mem::take(&mut self.touched);
        let derived = exec(self.conn, "SAVEPOINT derive")
            .map_err(Into::into)
            .and_then(|()| derive.apply(self.conn, touched));
        let failure = match derived {
            Ok(()) => exec(self.conn, "RELEASE derive")
                .err()
                .map(|e| GroupFailure::at(Step::Derive, e)),
            Err(StoreError::DiskFull) => Some(GroupFailure::DiskFull(Step::Derive)),
            Err(e) => {
                let undone = exec(self.conn, "ROLLBACK TO derive")
                    .and_then(|()| exec(self.conn, "RELEASE derive"));
                if let Err(u) = undone {
                    Some(GroupFailure::at(Step::UndoDerive, u))
                } else if let Err(m) = derive.mark_stale(self.conn) {
                    Some(GroupFailure::at(Step::MarkStale, m))
                } else {
                    tracing::error!(error = %e, "cannot update the search index; search scans until storaged restarts and rebuilds it");
                    None
                }
            }
        };
        if let Some(f) = failure {
            self.fail(f);
        }
    }

    /// The derived rows, the root count and the stream marks, then COMMIT.
    fn finish(&mut self) {
        if self.failure.is_none() {
            self.derive();
        }
        if self.failure.is_none()
            && let Err(e) = add_to_root_count(self.conn, self.roots_delta)
        {
            self.fail(GroupFailure::at(Step::CountRoots, e));
        }
        if self.failure.is_none()
            && let Err(e) = self.streams.finish_group(self.conn)
        {
            self.fail(GroupFailure::at(Step::StreamMarks, e));
        }
        if self.failure.is_none()
            && let Err(e) = exec(self.conn, "COMMIT")
        {
            self.fail(GroupFailure::at(Step::Commit, e));
        }
        if self.failure.is_some() && !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }

    /// Commits, publishes the streams' heads, counts, and acknowledges.
    pub(crate) fn commit(mut self) {
        let size = self.taken as u64;
        let counters = self.cx.counters;
        counters.batches.fetch_add(1, Ordering::Relaxed);
        counters.writes.fetch_add(size, Ordering::Relaxed);
        counters.largest_batch.fetch_max(size, Ordering::Relaxed);
        self.finish();
        match &self.failure {
            None => {
                self.cx.space.note_committed();
                self.cx.heads.publish(self.streams.heads());
                counters.committed_groups.fetch_add(1, Ordering::Relaxed);
                let applied = (self.taken - self.failed) as u64;
                counters
                    .committed_writes
                    .fetch_add(applied, Ordering::Relaxed);
                counters.commit_seconds.observe(self.opened.elapsed());
            }
            Some(why) => {
                counters.failed_commits.fetch_add(1, Ordering::Relaxed);
                if why.is_disk_full() {
                    // `space` says so once when it begins.
                    self.cx.space.note_full();
                    tracing::debug!(writes = size, reason = %why, "a write group refused: the volume is full");
                } else if matches!(why, GroupFailure::Refused(_)) {
                    // `faults` said why once, when it was raised.
                    tracing::debug!(writes = size, reason = %why, "a write group refused");
                } else {
                    match why {
                        GroupFailure::Damaged(_, what) => {
                            self.cx.faults.compare_files();
                            self.cx.faults.raise(Fault::Damaged(what.clone()));
                        }
                        GroupFailure::Io(_, what) => {
                            // A changed file fails I/O too (see `faults`).
                            self.cx.faults.compare_files();
                            self.cx.faults.raise(Fault::VolumeFailed(what.clone()));
                        }
                        _ => {}
                    }
                    tracing::error!(reason = %why, writes = size, "a write group failed; none of it was applied");
                }
            }
        }
        for ack in self.acks {
            ack(self.failure.as_ref());
        }
    }
}
