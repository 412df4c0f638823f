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

use std::sync::Arc;
#[cfg(test)]
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use metacore::api::storaged::WriterStats;
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::engine::batch::{self, BatchLimits, Next};
use crate::engine::checkpointer::GapFlag;
use crate::engine::derive::Derive;
use crate::engine::faults::Faults;
use crate::engine::group::{Ack, Context, Counters, Group, Job};
use crate::engine::space::Space;
use crate::engine::tx::Tx;
use crate::error::{GroupFailure, Result, StoreError};
use crate::streams::{HeadsPublisher, StreamState};
use metacore::sync::Locked;

/// What a writer hears when its job was dropped unrun or panicked.
fn aborted() -> StoreError {
    StoreError::Unavailable("the write was aborted (see storaged's log)")
}

enum Msg {
    Job(Job),
    /// Finish what is queued before this, checkpoint, exit.
    Stop,
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
    /// Says whether the last TRUNCATE checkpoint copied the whole WAL.
    thread: std::sync::Mutex<Option<JoinHandle<bool>>>,
    /// The writer thread, to unpark it when a write is queued.
    waker: std::thread::Thread,
    counters: Arc<Counters>,
    /// A raised fault refuses writes before they are queued.
    faults: Arc<Faults>,
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
        (gap, space, faults): (GapFlag, Arc<Space>, Arc<Faults>),
        derive: Option<Arc<dyn Derive>>,
        streams: StreamState,
        heads: HeadsPublisher,
        limits: BatchLimits,
    ) -> Result<Self> {
        let (queue, rx) = mpsc::channel(QUEUE_DEPTH);
        let counters = Arc::new(Counters::default());
        let c = counters.clone();
        let raised = faults.clone();
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
                    faults,
                    derive,
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
            faults: raised,
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
                    Some(why) => Err(why.to_error()),
                });
            });
            (ok, ack)
        });
        (job, wait)
    }

    /// Queues a job and wakes the writer if it lingers for more writes
    /// (see `batch`); refused while a fault of the files is raised.
    async fn enqueue(&self, job: Job) -> Result<()> {
        if let Some(fault) = self.faults.raised() {
            return Err(StoreError::Commit(GroupFailure::Refused(fault.reason())));
        }
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
        wait.await.map_err(|_| self.not_run())?
    }

    /// What a caller hears when its job was dropped unrun: the fault's
    /// reason when one is raised (the writer drops what was queued before
    /// it), else that it was aborted.
    fn not_run(&self) -> StoreError {
        match self.faults.raised() {
            Some(fault) => StoreError::Commit(GroupFailure::Refused(fault.reason())),
            None => aborted(),
        }
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
                Ok(wait) => wait.await.unwrap_or_else(|_| Err(self.not_run())),
                Err(e) => Err(e),
            });
        }
        results
    }

    /// Lets queued writes finish, checkpoints and joins the thread: true
    /// when the last checkpoint copied the whole WAL into the database
    /// (false too when closed already).
    pub(crate) async fn close(&self) -> bool {
        let _ = self.queue.send(Msg::Stop).await;
        let handle = self.thread.locked().take();
        let Some(h) = handle else { return false };
        matches!(
            tokio::task::spawn_blocking(move || h.join()).await,
            Ok(Ok(true))
        )
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
    faults: Arc<Faults>,
    /// What each group derives from the records it changed (nothing: a
    /// benchmark's store).
    derive: Option<Arc<dyn Derive>>,
    streams: StreamState,
    rx: mpsc::Receiver<Msg>,
    heads: HeadsPublisher,
    limits: BatchLimits,
    counters: Arc<Counters>,
    #[cfg(test)]
    fail: Arc<FailPoints>,
}

impl WriterThread {
    fn run(self) -> bool {
        let WriterThread {
            conn,
            gap,
            space,
            faults,
            derive,
            mut streams,
            mut rx,
            heads,
            limits,
            counters,
            #[cfg(test)]
            fail,
        } = self;
        let cx = Context {
            derive: derive.as_deref(),
            space: &space,
            faults: &faults,
            heads: &heads,
            counters: &counters,
        };
        // Size of the last group: about how many writers will be back soon.
        let mut expected = 1;
        loop {
            let Some(Msg::Job(first)) = rx.blocking_recv() else {
                break;
            };
            faults.group_begins();
            if faults.raised().is_some() {
                // Queued before the fault (`Writer::write` refuses after
                // it): not run, so nothing touches the files; their
                // callers hear the write was aborted.
                drop(first);
                let stop = drop_queued(&mut rx);
                faults.group_ends();
                if stop {
                    break;
                }
                continue;
            }
            let refuse = still_stuck(&conn, &space);
            let mut group = Group::open(&conn, &mut streams, &cx);
            group.run(first);
            let stop = fill(&mut group, &mut rx, &limits, expected);
            expected = group.taken();
            // Run, so that each write is told why it was refused (a 507).
            if refuse {
                group.fail(GroupFailure::Stuck);
            }
            if let Some(fault) = faults.raised() {
                group.fail(GroupFailure::Refused(fault.reason()));
            }
            #[cfg(test)]
            if fail.before_commit.load(Ordering::Relaxed) {
                group.fail(GroupFailure::FailPoint("before_commit"));
            }
            group.commit();
            checkpoint_after_group(&conn, &gap, &space, &faults);
            faults.group_ends();
            if stop {
                break;
            }
        }
        // A file changed since the last tick is put back now, not emptied
        // into by the TRUNCATE (and once more after it, for one changed
        // while it ran: the database then holds everything).
        faults.check_files(true);
        if faults.frozen() {
            tracing::info!("writer stopped; the files are left as they are for the next start");
            return false;
        }
        let truncated = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((
                r.get::<_, i64>(0)? != 0,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        });
        faults.check_files(true);
        match truncated {
            Ok((false, log, copied)) if copied >= log => {
                tracing::info!("writer stopped; WAL checkpointed");
                true
            }
            Ok((busy, log, copied)) => {
                tracing::warn!(
                    busy,
                    wal_frames = log,
                    copied,
                    "writer stopped; the WAL was not wholly checkpointed"
                );
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "writer stopped; WAL checkpoint failed");
                false
            }
        }
    }
}

/// Takes queued writes into `group` while [`batch::next`] says so; true
/// when a stop was asked for (after this group).
fn fill(
    group: &mut Group<'_>,
    rx: &mut mpsc::Receiver<Msg>,
    limits: &BatchLimits,
    expected: usize,
) -> bool {
    while !group.has_failed() {
        let next = batch::next(
            limits,
            group.taken(),
            group.opened().elapsed(),
            rx.is_empty(),
            expected,
        );
        match next {
            Next::Take => match rx.try_recv() {
                Ok(Msg::Job(j)) => group.run(j),
                Ok(Msg::Stop) => return true,
                Err(_) => continue,
            },
            // Senders unpark this thread after each send.
            Next::Wait(d) => std::thread::park_timeout(d),
            Next::Commit => break,
        }
    }
    false
}

/// Between two groups, when the checkpointer asks or the volume is nearly
/// full (see `space`): a PASSIVE checkpoint on the writer's own connection.
/// The checkpointer has already copied most frames, so this copies the few
/// left, and the next transaction restarts the WAL from its beginning.
fn checkpoint_after_group(conn: &Connection, gap: &GapFlag, space: &Space, faults: &Faults) {
    // A statvfs per group (about a microsecond): the checkpointer's tick
    // would let a fast filling volume get 200 ms ahead.
    space.measure();
    if (!gap.is_raised() && !space.is_low()) || faults.frozen() {
        return;
    }
    match space.checkpoint(conn) {
        // Busy: the checkpointer is copying right now; try after the next group.
        Ok((true, _, _)) => {}
        Ok((false, _, _)) => gap.lower(),
        Err(e) if crate::error::is_disk_full(&e) => {}
        Err(e) => {
            faults.note_error(&e);
            tracing::warn!(error = %e, "writer checkpoint failed");
        }
    }
}

/// Drops every queued job (their callers hear the write was aborted); true
/// when a stop was queued.
fn drop_queued(rx: &mut mpsc::Receiver<Msg>) -> bool {
    while let Ok(msg) = rx.try_recv() {
        if let Msg::Stop = msg {
            return true;
        }
    }
    false
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

#[cfg(test)]
#[path = "writer_test.rs"]
mod tests;
