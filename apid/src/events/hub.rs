//! One upstream tail per stream, shared by every follower.
//!
//! The hub follows storaged's tail of its stream and puts each entry,
//! encoded once, into a broadcast ring of `META_CORE_SSE_QUEUE` frames. A
//! follower's unread window in that ring is its bounded queue: one that
//! falls a whole ring behind is told it lagged and is cut off, without
//! slowing the hub or the others, and without any memory of its own.
//!
//! The hub's promise, which followers rely on to switch from reading the
//! store to the ring without losing or repeating an entry: once
//! [`Hub::position`] is known, every entry after it is broadcast, in order,
//! exactly once. A storaged restart breaks the upstream tail; the hub
//! reconnects after the last entry it broadcast, so the promise holds
//! across it.

use std::time::Duration;

use futures_util::StreamExt;
use metacore::api::storaged::StoragedClient;
use metacore::shutdown::Shutdown;
use metacore::stream::{StreamId, StreamName};
use tokio::sync::{broadcast, watch};

use super::frame::Frame;

/// First wait before reconnecting to storaged; doubles up to the max.
const RETRY_FIRST: Duration = Duration::from_millis(20);
const RETRY_MAX: Duration = Duration::from_millis(500);

#[derive(Debug)]
pub(crate) struct Hub {
    stream: StreamName,
    ring: broadcast::Sender<Frame>,
    /// The ID after which every entry is broadcast: `None` until the hub
    /// has first reached storaged.
    position: watch::Sender<Option<StreamId>>,
}

impl Hub {
    pub(crate) fn new(stream: StreamName, ring: usize) -> Self {
        Self {
            stream,
            ring: broadcast::Sender::new(ring),
            position: watch::Sender::new(None),
        }
    }

    pub(crate) fn stream(&self) -> StreamName {
        self.stream
    }

    /// A receiver of every frame broadcast from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Frame> {
        self.ring.subscribe()
    }

    /// Followers reading the ring now.
    pub(crate) fn followers(&self) -> usize {
        self.ring.receiver_count()
    }

    /// Waits until the hub's position is known (it has reached storaged).
    pub(crate) async fn started(&self) {
        let mut rx = self.position.subscribe();
        // Only an error if the hub is dropped, and it lives as long as apid.
        let _ = rx.wait_for(Option::is_some).await;
    }

    /// Follows storaged until `shutdown`.
    pub(crate) async fn run(&self, store: StoragedClient, shutdown: Shutdown) {
        let mut retry = RETRY_FIRST;
        let mut last = None;
        loop {
            let step = async {
                let after = match last {
                    Some(id) => id,
                    None => {
                        let head = store.stream_info(self.stream).await?.last;
                        let head = head.unwrap_or(StreamId::ZERO);
                        last = Some(head);
                        self.position.send_replace(Some(head));
                        head
                    }
                };
                let tail = store.tail(self.stream, Some(after)).await?;
                retry = RETRY_FIRST;
                tracing::debug!(stream = %self.stream, %after, "following storaged");
                let mut tail = std::pin::pin!(tail);
                while let Some(entry) = tail.next().await {
                    let entry = entry?;
                    if Some(entry.id) <= last {
                        continue;
                    }
                    last = Some(entry.id);
                    // No receiver is not an error: nobody follows right now.
                    let _ = self.ring.send(Frame::of(&entry));
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
