//! One upstream tail per stream, shared by every follower.
//!
//! The hub follows storaged's tail of its stream, gathers the entries that
//! arrive within one batch window (`META_CORE_SSE_BATCH_MS`, at most
//! [`MAX_BATCH_ENTRIES`] entries or [`MAX_BATCH_BYTES`]), and puts the
//! batch, encoded once, into a broadcast ring of `META_CORE_SSE_QUEUE`
//! batches. A follower then makes one write per batch whatever the commit
//! rate: on loopback most of the cost of a delivery is the kernel's TCP
//! send path, paid per write. A follower's unread window in that ring is
//! its bounded queue: one that falls a whole ring behind is told it lagged,
//! without slowing the hub or the others, and without any memory of its
//! own.
//!
//! The hub's promise, which followers rely on to switch from reading the
//! store to the ring without losing or repeating an entry: once
//! [`Hub::head`] is known, every entry after it is broadcast, in order,
//! exactly once. A storaged restart breaks the upstream tail; the hub
//! reconnects after the last entry it broadcast, so the promise holds
//! across it.

use std::time::Duration;

use futures_util::StreamExt;
use metacore::api::storaged::StoragedClient;
use metacore::shutdown::Shutdown;
use metacore::stream::{Entry, StreamId, StreamName};
use tokio::sync::{broadcast, watch};

use super::frame::{Batch, BatchBuilder};

/// A batch is sent once it holds this many entries, even within its window.
pub(crate) const MAX_BATCH_ENTRIES: usize = 1024;
/// ... or this many bytes of events; with the ring's length this bounds the
/// ring's memory.
pub(crate) const MAX_BATCH_BYTES: usize = 64 * 1024;

/// First wait before reconnecting to storaged; doubles up to the max.
const RETRY_FIRST: Duration = Duration::from_millis(20);
const RETRY_MAX: Duration = Duration::from_millis(500);

#[derive(Debug)]
pub(crate) struct Hub {
    stream: StreamName,
    ring: broadcast::Sender<Batch>,
    /// How long a batch gathers entries after its first.
    window: Duration,
    /// The last entry broadcast (at first, the head found when the hub
    /// first reached storaged; `None` until then). Every entry after it
    /// will be broadcast, which makes it the head a new follower starts
    /// from.
    head: watch::Sender<Option<StreamId>>,
}

impl Hub {
    pub(crate) fn new(stream: StreamName, ring: usize, window: Duration) -> Self {
        Self {
            stream,
            ring: broadcast::Sender::new(ring),
            window,
            head: watch::Sender::new(None),
        }
    }

    pub(crate) fn stream(&self) -> StreamName {
        self.stream
    }

    /// A receiver of every frame broadcast from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Batch> {
        self.ring.subscribe()
    }

    /// Followers reading the ring now.
    pub(crate) fn followers(&self) -> usize {
        self.ring.receiver_count()
    }

    /// The last entry broadcast (or about to be); `None` before the hub
    /// first reached storaged. Read after [`Hub::subscribe`], every entry
    /// after it reaches that receiver.
    pub(crate) fn head(&self) -> Option<StreamId> {
        *self.head.borrow()
    }

    /// Waits until the hub's head is known (it has reached storaged).
    pub(crate) async fn started(&self) {
        let mut rx = self.head.subscribe();
        // Only an error if the hub is dropped, and it lives as long as apid.
        let _ = rx.wait_for(Option::is_some).await;
    }

    /// Follows storaged until `shutdown`.
    pub(crate) async fn run(&self, store: StoragedClient, shutdown: Shutdown) {
        let mut retry = RETRY_FIRST;
        // The last entry broadcast: where a reconnect resumes. A batch cut
        // short by a broken tail is dropped and read again.
        let mut last = None;
        loop {
            let step = async {
                let after = match last {
                    Some(id) => id,
                    None => {
                        let head = store.stream_bounds(self.stream).await?.last;
                        let head = head.unwrap_or(StreamId::ZERO);
                        last = Some(head);
                        self.head.send_replace(Some(head));
                        head
                    }
                };
                let tail = store.tail(self.stream, Some(after)).await?;
                retry = RETRY_FIRST;
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
                        // The head moves before the batch goes out: a
                        // follower that subscribes, then reads the head,
                        // gets every entry after it from the ring.
                        self.head.send_replace(last);
                        // No receiver is not an error: nobody follows now.
                        let _ = self.ring.send(batch);
                    }
                }
                Ok::<_, metacore::socket::client::ClientError>(())
            };
            tokio::select! {
                r = step => {
                    if let Err(e) = r {
                        tracing::debug!(stream = %self.stream, error = %e, "storaged tail broke; reconnecting");
                    }
                }
                _ = shutdown.wait() => return,
            }
            tokio::select! {
                _ = tokio::time::sleep(retry) => {}
                _ = shutdown.wait() => return,
            }
            retry = (retry * 2).min(RETRY_MAX);
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
