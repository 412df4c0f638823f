//! One upstream tail per stream, shared by every follower.
//!
//! The hub follows storaged's tail of its stream, gathers the entries that
//! arrive within one batch window (`META_CORE_SSE_BATCH_MS`, at most
//! [`MAX_BATCH_ENTRIES`] entries or [`MAX_BATCH_BYTES`]), and puts the
//! batch, encoded once, into a broadcast ring of `META_CORE_SSE_QUEUE`
//! batches. A follower then makes one write per batch whatever the commit
//! rate: on loopback most of the cost of a delivery is the kernel's TCP
//! send path, paid per write. A follower's unread window in that ring is
//! its bounded queue: one that falls a whole ring behind is told it lagged
//! and catches up from the store, without slowing the hub or the others,
//! and without any memory of its own.
//!
//! The hub's promise, which followers rely on to switch from reading the
//! store to the ring without losing or repeating an entry: once it has
//! [`Hub::started`], every entry after its head is broadcast, in order,
//! exactly once. A follower that subscribes and then reads the store
//! therefore misses nothing: whatever commits after its read is broadcast
//! after its subscription. A storaged restart breaks the upstream tail;
//! the hub reconnects after the last entry it broadcast, so the promise
//! holds across it (and when retention trimmed past that entry meanwhile,
//! it sends [`Item::Resync`]: followers go back to the store, which tells
//! each whether it lost entries).

use std::time::Duration;

use futures_util::StreamExt;
use metacore::api::storaged::StoragedClient;
use metacore::backoff::Backoff;
use metacore::shutdown::Shutdown;
use metacore::stream::{Entry, StreamId, StreamName};
use tokio::sync::{broadcast, watch};

use super::frame::{Batch, BatchBuilder};

/// A batch is sent once it holds this many entries, even within its window.
pub(crate) const MAX_BATCH_ENTRIES: usize = 1024;
/// ... or this many bytes of events; with the ring's length this bounds the
/// ring's memory.
pub(crate) const MAX_BATCH_BYTES: usize = 64 * 1024;

/// Failed reconnects in a row after which the hub logs a warning.
const FAILURES_WORTH_A_WARNING: u32 = 20;

/// First wait before reconnecting to storaged; doubles up to the max.
const RETRY_FIRST: Duration = Duration::from_millis(20);
const RETRY_MAX: Duration = Duration::from_millis(500);

/// What the ring carries.
#[derive(Debug, Clone)]
pub(crate) enum Item {
    Batch(Batch),
    /// The hub could not resume right after its last entry (retention
    /// trimmed past it while it was away from storaged): live followers
    /// go back to the store, which tells each whether it missed entries.
    Resync,
}

#[derive(Debug)]
pub(crate) struct Hub {
    stream: StreamName,
    ring: broadcast::Sender<Item>,
    /// How long a batch gathers entries after its first.
    window: Duration,
    /// Set once the hub has first reached storaged: from then on every
    /// entry after the head it found is broadcast.
    started: watch::Sender<bool>,
}

impl Hub {
    pub(crate) fn new(stream: StreamName, ring: usize, window: Duration) -> Self {
        Self {
            stream,
            ring: broadcast::Sender::new(ring),
            window,
            started: watch::Sender::new(false),
        }
    }

    pub(crate) fn stream(&self) -> StreamName {
        self.stream
    }

    /// A receiver of every frame broadcast from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Item> {
        self.ring.subscribe()
    }

    /// Followers reading the ring now.
    pub(crate) fn followers(&self) -> usize {
        self.ring.receiver_count()
    }

    /// Waits until the hub has first reached storaged.
    pub(crate) async fn started(&self) {
        let mut rx = self.started.subscribe();
        // Only an error if the hub is dropped, and it lives as long as apid.
        let _ = rx.wait_for(|started| *started).await;
    }

    /// Follows storaged until `shutdown`.
    pub(crate) async fn run(&self, store: StoragedClient, shutdown: Shutdown) {
        let mut backoff = Backoff::doubling(RETRY_FIRST, RETRY_MAX);
        let mut failures = 0u32;
        // The last entry broadcast: where a reconnect resumes. A batch cut
        // short by a broken tail is dropped and read again.
        let mut last = None;
        loop {
            let step = async {
                let after = match last {
                    Some(id) => {
                        let oldest = store.stream_bounds(self.stream).await?.first;
                        if oldest.is_some_and(|oldest| id < oldest) {
                            tracing::warn!(
                                stream = %self.stream,
                                last = %id,
                                "the stream was trimmed past the hub's last entry while it \
                                 was away; live followers go back to the store"
                            );
                            let _ = self.ring.send(Item::Resync);
                        }
                        id
                    }
                    None => {
                        let head = store.stream_bounds(self.stream).await?.last;
                        let head = head.unwrap_or(StreamId::ZERO);
                        last = Some(head);
                        self.started.send_replace(true);
                        head
                    }
                };
                let tail = store.tail(self.stream, Some(after)).await?;
                backoff.reset();
                tracing::debug!(stream = %self.stream, %after, "following storaged");
                let mut tail = std::pin::pin!(tail);
                while let Some(entry) = tail.next().await {
                    let mut batch = BatchBuilder::default();
                    add(&mut batch, last, &entry?);
                    let window_ends = tokio::time::Instant::now() + self.window;
                    while batch.entries() < MAX_BATCH_ENTRIES && batch.bytes() < MAX_BATCH_BYTES {
                        match tokio::time::timeout_at(window_ends, tail.next()).await {
                            Ok(Some(entry)) => add(&mut batch, last, &entry?),
                            // The window is over, or the tail ended (storaged
                            // stopping): send what is gathered.
                            Err(_) | Ok(None) => break,
                        }
                    }
                    if let Some(batch) = batch.finish() {
                        last = Some(batch.last);
                        // No receiver is not an error: nobody follows now.
                        let _ = self.ring.send(Item::Batch(batch));
                    }
                }
                Ok::<_, metacore::socket::client::ClientError>(())
            };
            tokio::select! {
                r = step => match r {
                    Ok(()) => failures = 0,
                    Err(e) => {
                        failures += 1;
                        // A restart of storaged is a few failures; more in a
                        // row is worth an operator's look.
                        if failures == FAILURES_WORTH_A_WARNING {
                            tracing::warn!(stream = %self.stream, error = %e, failures, "cannot follow storaged's stream; still retrying");
                        } else {
                            tracing::debug!(stream = %self.stream, error = %e, "storaged tail broke; reconnecting");
                        }
                    }
                },
                _ = shutdown.wait() => return,
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff.fail()) => {}
                _ = shutdown.wait() => return,
            }
        }
    }
}

/// Adds an entry newer than both `last` and the batch's own last one (a
/// tail re-read after a reconnect may repeat entries).
fn add(batch: &mut BatchBuilder, last: Option<StreamId>, entry: &Entry) {
    let newest = batch.last().or(last);
    if Some(entry.id) > newest {
        batch.push(entry);
    }
}
