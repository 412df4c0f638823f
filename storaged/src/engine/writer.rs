//! The writer: one named thread that owns the write connection and commits
//! writes in groups.
//!
//! Writers enqueue a job and wait for its acknowledgement. The thread takes
//! the first queued job, keeps taking queued ones while [`batch::next`]
//! says so, then runs the group in one transaction, each job inside its own
//! SAVEPOINT: a job that fails (or panics) is rolled back alone and gets its
//! own error; the others commit. Acknowledgements go out only after COMMIT
//! returns; if COMMIT fails, every job of the group is told so and nothing
//! of it is applied. After each COMMIT the streams' heads are published.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
#[cfg(test)]
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use metacore::api::storaged::WriterStats;
use metacore::clock::unix_ms;
use metacore::record::Fields;
use metacore::rid::Rid;
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::engine::batch::{self, BatchLimits, Next};
use crate::engine::checkpointer::GapFlag;
use crate::engine::space::{self, Space};
use crate::engine::tx::{Tx, add_to_root_count};
use crate::error::{Result, StoreError};
use crate::streams::{HeadsPublisher, StreamState};

/// What a writer hears when its job was dropped unrun or panicked.
fn aborted() -> StoreError {
    StoreError::Unavailable("the write was aborted (see storaged's log)")
}

/// Told after the group's COMMIT: `None` when it committed, the reason when
/// it did not.
type Ack = Box<dyn FnOnce(Option<&str>) + Send>;

/// One write: runs inside its savepoint, says whether it succeeded, and
/// hands back its acknowledgement.
type Job = Box<dyn for<'a> FnOnce(&mut Tx<'a>) -> (bool, Ack) + Send>;

enum Msg {
    Job(Job),
    /// Finish what is queued before this, checkpoint, exit.
    Stop,
}

/// Counters shown in `/status` and `/metrics`.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    batches: AtomicU64,
    writes: AtomicU64,
    failed_writes: AtomicU64,
    failed_commits: AtomicU64,
    largest_batch: AtomicU64,
    committed_groups: AtomicU64,
    committed_writes: AtomicU64,
    /// Each committed group's time from BEGIN to COMMIT's return.
    commit_seconds: crate::metrics::CommitSeconds,
}

/// Named points where a test can make the writer fail (STYLE idea 11).
/// Checked once per group; compiled into test builds only.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct FailPoints {
    /// The group's COMMIT fails: every write of it must be refused and
    /// none of it applied.
    pub before_commit: AtomicBool,
}

/// Depth of the writer's queue; senders wait when it is full.
const QUEUE_DEPTH: usize = 4096;

/// The handle writers use.
#[derive(Debug)]
pub(crate) struct Writer {
    /// Jobs to the writer thread. Bounded so a flood of writes waits
    /// instead of growing memory.
    queue: mpsc::Sender<Msg>,
    thread: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// The writer thread, to unpark it when a write is queued.
    waker: std::thread::Thread,
    counters: Arc<Counters>,
    #[cfg(test)]
    fail: Arc<FailPoints>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Msg::Job(_) => "Job",
            Msg::Stop => "Stop",
        })
    }
}

impl Writer {
    /// Starts the writer thread on `conn`.
    pub(crate) fn start(
        conn: Connection,
        (gap, space): (GapFlag, Arc<Space>),
        index: Option<Arc<[String]>>,
        streams: StreamState,
        heads: HeadsPublisher,
        limits: BatchLimits,
    ) -> Result<Self> {
        let (queue, rx) = mpsc::channel(QUEUE_DEPTH);
        let counters = Arc::new(Counters::default());
        let c = counters.clone();
        #[cfg(test)]
        let fail = Arc::new(FailPoints::default());
        #[cfg(test)]
        let f = fail.clone();
        let thread = std::thread::Builder::new()
            .name("storaged-writer".into())
            .spawn(move || {
                WriterThread {
                    conn,
                    gap,
                    space,
                    index,
                    streams,
                    rx,
                    heads,
                    limits,
                    counters: c,
                    #[cfg(test)]
                    fail: f,
                }
                .run()
            })
            .map_err(|e| StoreError::Io {
                what: "spawn the writer thread for",
                path: "storaged".into(),
                source: e,
            })?;
        let waker = thread.thread().clone();
        Ok(Self {
            queue,
            thread: std::sync::Mutex::new(Some(thread)),
            waker,
            counters,
            #[cfg(test)]
            fail,
        })
    }

    /// A job running `op`, and where its result arrives once committed.
    fn job<T, F>(op: F) -> (Job, oneshot::Receiver<Result<T>>)
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&mut Tx<'a>) -> Result<T> + Send + 'static,
    {
        let (done, wait) = oneshot::channel::<Result<T>>();
        let job: Job = Box::new(move |tx| {
            let result = op(tx);
            let ok = result.is_ok();
            let ack: Ack = Box::new(move |commit_error| {
                let _ = done.send(match commit_error {
                    None => result,
                    Some(why) => Err(StoreError::Commit(why.to_owned())),
                });
            });
            (ok, ack)
        });
        (job, wait)
    }

    /// Queues a job and wakes the writer if it lingers for more writes
    /// (see `batch`).
    async fn enqueue(&self, job: Job) -> Result<()> {
        self.queue
            .send(Msg::Job(job))
            .await
            .map_err(|_| StoreError::Unavailable("storaged is shutting down"))?;
        self.waker.unpark();
        Ok(())
    }

    /// Runs `op` in the next group and returns its result once committed.
    pub(crate) async fn write<T, F>(&self, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&mut Tx<'a>) -> Result<T> + Send + 'static,
    {
        let (job, wait) = Self::job(op);
        self.enqueue(job).await?;
        wait.await.map_err(|_| aborted())?
    }

    /// Runs every op as a write of its own (its own savepoint: one failing
    /// leaves the others be), queued together so that they share groups,
    /// and returns their results in order once committed.
    pub(crate) async fn write_all<T, F>(&self, ops: Vec<F>) -> Vec<Result<T>>
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&mut Tx<'a>) -> Result<T> + Send + 'static,
    {
        let mut waits = Vec::with_capacity(ops.len());
        for op in ops {
            let (job, wait) = Self::job(op);
            match self.enqueue(job).await {
                Ok(()) => waits.push(Ok(wait)),
                Err(e) => waits.push(Err(e)),
            }
        }
        let mut results = Vec::with_capacity(waits.len());
        for wait in waits {
            results.push(match wait {
                Ok(wait) => wait.await.unwrap_or_else(|_| Err(aborted())),
                Err(e) => Err(e),
            });
        }
        results
    }

    /// Lets queued writes finish, checkpoints and joins the thread.
    pub(crate) async fn close(&self) {
        let _ = self.queue.send(Msg::Stop).await;
        let handle = self.thread.lock().expect("writer handle lock").take();
        if let Some(h) = handle {
            let _ = tokio::task::spawn_blocking(move || h.join()).await;
        }
    }

    /// The failure points of this writer (for tests).
    #[cfg(test)]
    pub(crate) fn fail_points(&self) -> &FailPoints {
        &self.fail
    }

    pub(crate) fn stats(&self) -> WriterStats {
        let c = &self.counters;
        WriterStats {
            batches: c.batches.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            failed_writes: c.failed_writes.load(Ordering::Relaxed),
            failed_commits: c.failed_commits.load(Ordering::Relaxed),
            largest_batch: c.largest_batch.load(Ordering::Relaxed),
            queued: (QUEUE_DEPTH - self.queue.capacity()) as u64,
            committed_groups: c.committed_groups.load(Ordering::Relaxed),
            committed_writes: c.committed_writes.load(Ordering::Relaxed),
        }
    }

    /// The histogram of commit times (shared, not copied).
    pub(crate) fn commit_seconds(&self) -> crate::metrics::CommitSeconds {
        self.counters.commit_seconds.clone()
    }
}

/// What the writer thread owns.
struct WriterThread {
    conn: Connection,
    gap: GapFlag,
    space: Arc<Space>,
    /// The excluded prefixes of the search index it keeps (none kept: a
    /// benchmark's store).
    index: Option<Arc<[String]>>,
    streams: StreamState,
    rx: mpsc::Receiver<Msg>,
    heads: HeadsPublisher,
    limits: BatchLimits,
    counters: Arc<Counters>,
    #[cfg(test)]
    fail: Arc<FailPoints>,
}

impl WriterThread {
    fn run(self) {
        let WriterThread {
            conn,
            gap,
            space,
            index,
            mut streams,
            mut rx,
            heads,
            limits,
            counters,
            #[cfg(test)]
            fail,
        } = self;
        let (gap, space, counters) = (&gap, &*space, &*counters);
        let mut stop = false;
        // Size of the last group: about how many writers will be back soon.
        let mut expected = 1;
        while !stop {
            let Some(first) = rx.blocking_recv() else {
                break;
            };
            let Msg::Job(first) = first else { break };
            let refuse = still_stuck(&conn, space);
            let mut group = Group::open(&conn, &mut streams, index.is_some());
            group.run(first, counters);
            loop {
                if group.failure.is_some() {
                    break;
                }
                let next = batch::next(
                    &limits,
                    group.taken,
                    group.opened.elapsed(),
                    rx.is_empty(),
                    expected,
                );
                match next {
                    Next::Take => match rx.try_recv() {
                        Ok(Msg::Job(j)) => group.run(j, counters),
                        Ok(Msg::Stop) => {
                            stop = true;
                            break;
                        }
                        Err(_) => continue,
                    },
                    // Senders unpark this thread after each send.
                    Next::Wait(d) => std::thread::park_timeout(d),
                    Next::Commit => break,
                }
            }
            expected = group.taken;
            #[cfg(test)]
            if fail.before_commit.load(Ordering::Relaxed) && group.failure.is_none() {
                group.failure = Some("failure point before_commit".into());
            }
            if refuse && group.failure.is_none() {
                group.failure = Some(space::STUCK.into());
            }
            group.commit(&heads, counters, index.as_deref());
            checkpoint_after_group(&conn, gap, space);
        }
        match conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
            Ok(()) => tracing::info!("writer stopped; WAL checkpointed"),
            Err(e) => tracing::warn!(error = %e, "writer stopped; WAL checkpoint failed"),
        }
    }
}

/// Between two groups, when the checkpointer asks or the volume is nearly
/// full (see `space`): a PASSIVE checkpoint on the writer's own connection.
/// The checkpointer has already copied most frames, so this copies the few
/// left, and the next transaction restarts the WAL from its beginning.
fn checkpoint_after_group(conn: &Connection, gap: &GapFlag, space: &Space) {
    // A statvfs per group (about a microsecond): the checkpointer's tick
    // would let a fast filling volume get 200 ms ahead.
    space.measure();
    if !gap.is_raised() && !space.is_low() {
        return;
    }
    match space.checkpoint(conn) {
        // Busy: the checkpointer is copying right now; try after the next group.
        Ok((true, _, _)) => {}
        Ok((false, _, _)) => gap.lower(),
        Err(e) if crate::error::is_disk_full(&e) => {}
        Err(e) => tracing::warn!(error = %e, "writer checkpoint failed"),
    }
}

/// Before a group, while a checkpoint could not copy the WAL for want of
/// space: tries one; true when the group must be refused (see `space`).
fn still_stuck(conn: &Connection, space: &Space) -> bool {
    if !space.is_stuck() {
        return false;
    }
    let _ = space.checkpoint(conn);
    space.is_stuck()
}

/// Before COMMIT: the search rows and the schema counters of the records
/// a group changed, from their fields before and after it.
fn derive(conn: &Connection, touched: BTreeMap<Rid, Fields>, exclude: &[String]) -> Result<()> {
    let mut deltas = BTreeMap::new();
    for (rid, before) in touched {
        let after = crate::records::fields(conn, rid)?;
        crate::schema::counts::changes(&before, &after, &mut deltas);
        let exists = !after.is_empty();
        crate::search::index::refresh(
            conn,
            rid,
            crate::search::visible(after, exclude),
            exists,
            exclude,
        )?;
    }
    crate::schema::counts::apply(conn, &deltas)
}

fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// One group: a transaction that writes join as they arrive, each in its
/// own savepoint, committed once.
struct Group<'c> {
    conn: &'c Connection,
    streams: &'c mut StreamState,
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
    /// Whether search rows and schema counters are kept.
    indexed: bool,
    /// Set when the group can no longer commit; later writes are not run.
    failure: Option<String>,
}

impl<'c> Group<'c> {
    fn open(conn: &'c Connection, streams: &'c mut StreamState, indexed: bool) -> Self {
        let failure = exec(conn, "BEGIN IMMEDIATE")
            .err()
            .map(|e| format!("cannot begin: {e}"));
        Self {
            conn,
            streams,
            now_ms: unix_ms(),
            opened: Instant::now(),
            taken: 0,
            failed: 0,
            roots_delta: 0,
            acks: Vec::new(),
            touched: BTreeMap::new(),
            indexed,
            failure,
        }
    }

    /// Runs one write inside its savepoint; a failure or a panic rolls back
    /// that write alone.
    fn run(&mut self, job: Job, counters: &Counters) {
        self.taken += 1;
        if self.failure.is_some() {
            // Dropping the job tells its caller the write was aborted.
            return;
        }
        if let Err(e) = exec(self.conn, "SAVEPOINT w") {
            self.failure = Some(format!("cannot open a savepoint: {e}"));
            return;
        }
        let mut tx = Tx {
            conn: self.conn,
            streams: &mut *self.streams,
            now_ms: self.now_ms,
            roots_delta: 0,
            touched: self.indexed.then_some(&mut self.touched),
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
            counters.failed_writes.fetch_add(1, Ordering::Relaxed);
        }
        let end = if ok {
            exec(self.conn, "RELEASE w")
        } else {
            exec(self.conn, "ROLLBACK TO w").and(exec(self.conn, "RELEASE w"))
        };
        match end {
            Ok(()) if ok => self.roots_delta += roots_delta,
            Ok(()) => {}
            Err(e) => self.failure = Some(format!("cannot close a savepoint: {e}")),
        }
    }

    /// Stream marks, COMMIT, then the acknowledgements.
    fn commit(mut self, heads: &HeadsPublisher, counters: &Counters, index: Option<&[String]>) {
        let size = self.taken as u64;
        counters.batches.fetch_add(1, Ordering::Relaxed);
        counters.writes.fetch_add(size, Ordering::Relaxed);
        counters.largest_batch.fetch_max(size, Ordering::Relaxed);
        if self.failure.is_none()
            && let Some(exclude) = index
        {
            let touched = std::mem::take(&mut self.touched);
            let derived = exec(self.conn, "SAVEPOINT derive")
                .map_err(StoreError::from)
                .and_then(|()| derive(self.conn, touched, exclude));
            match derived {
                Ok(()) => {
                    if let Err(e) = exec(self.conn, "RELEASE derive") {
                        self.failure = Some(format!("cannot update the search index: {e}"));
                    }
                }
                // No room: nothing can be written, the group fails (507).
                Err(StoreError::Sqlite(e)) if crate::error::is_disk_full(&e) => {
                    self.failure = Some(format!("cannot update the search index: {e}"));
                }
                // Anything else is the index's own fault: the writes
                // commit, and search scans until the next start rebuilds.
                Err(e) => {
                    let undone = exec(self.conn, "ROLLBACK TO derive")
                        .and_then(|()| exec(self.conn, "RELEASE derive"));
                    if let Err(u) = undone {
                        self.failure = Some(format!("cannot undo a failed index update: {u}"));
                    } else if let Err(m) = crate::search::index::mark_stale(self.conn) {
                        self.failure = Some(format!("cannot mark the search index stale: {m}"));
                    } else {
                        tracing::error!(error = %e, "cannot update the search index; search scans until storaged restarts and rebuilds it");
                    }
                }
            }
        }
        if self.failure.is_none()
            && let Err(e) = add_to_root_count(self.conn, self.roots_delta)
        {
            self.failure = Some(format!("cannot count roots: {e}"));
        }
        if self.failure.is_none()
            && let Err(e) = self.streams.finish_group(self.conn)
        {
            self.failure = Some(format!("cannot record stream marks: {e}"));
        }
        if self.failure.is_none()
            && let Err(e) = exec(self.conn, "COMMIT")
        {
            self.failure = Some(format!("COMMIT failed: {e}"));
        }
        if self.failure.is_some() && !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        match &self.failure {
            None => {
                crate::error::DISK_FULL.store(false, Ordering::Relaxed);
                heads.publish(self.streams.heads());
                counters.committed_groups.fetch_add(1, Ordering::Relaxed);
                let applied = (self.taken - self.failed) as u64;
                counters
                    .committed_writes
                    .fetch_add(applied, Ordering::Relaxed);
                counters.commit_seconds.observe(self.opened.elapsed());
            }
            Some(why) => {
                counters.failed_commits.fetch_add(1, Ordering::Relaxed);
                if why == space::STUCK {
                    // `space` said so once when it began.
                    tracing::debug!(writes = size, "a write group refused: the volume is full");
                } else {
                    tracing::error!(reason = %why, writes = size, "a write group failed; none of it was applied");
                }
            }
        }
        for ack in self.acks {
            ack(self.failure.as_deref());
        }
    }
}

#[cfg(test)]
#[path = "writer_test.rs"]
mod tests;
