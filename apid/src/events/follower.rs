//! One follower's stream: what it is sent, in order, from where it starts.
//!
//! A follower goes through up to three phases:
//!
//! 1. **Snapshot** (`meta` from `0`): one `set` per `file:` key, read from
//!    the kv range a page at a time (flat memory whatever the store's
//!    size); only the last carries an `id:`, the head captured before the
//!    snapshot began.
//! 2. **Catch-up**: entries after its cursor, read from the store a page at
//!    a time. When a page comes back short, it registers with the hub and
//!    reads the store once more: whatever was committed before that read is
//!    in it, whatever after is in the ring (see [`super::hub`]). A page
//!    that shows retention trimmed past the cursor sends a `gap` first.
//! 3. **Live**: batches from the hub's ring, skipping what it has. One that
//!    falls a whole ring behind goes back to catching up. One that stopped
//!    reading is not polled at all; its connection's write stall
//!    (`crate::serve`) closes it, and it reconnects with its last ID.
//!
//! A follower without an ID starts live: it subscribed before the head was
//! read (see [`super::hub`]).
//!
//! Reads that fail because storaged is away are retried, with keep-alives
//! going out meanwhile (and while a read is slow), so a storaged restart is
//! a pause, not an end.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use metacore::api::storaged::{EntriesQuery, RangeQuery, StoragedClient};
use metacore::backoff::Backoff;
use metacore::error::ErrorCode;
use metacore::shutdown::Shutdown;
use metacore::socket::client::ClientError;
use metacore::stream::{StreamId, StreamName};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::frame::{self, KEEPALIVE};
use super::hub::{Hub, Item};
use super::hubs::{Events, Sent};

/// Entries read from the store per catch-up page.
const CATCH_UP_PAGE: u32 = 256;
/// A catch-up chunk stops growing past this many bytes (entries are up to
/// 64 KiB each); the rest of its page is read again next time. What a
/// follower that stops reading holds, as a snapshot page is.
const MAX_CHUNK: usize = 128 * 1024;
/// Keys read per snapshot page: about 100 KiB of events, held until the
/// follower's connection takes them (the next page is read only then: a
/// follower that stops reading holds one page and the 64 KiB hyper keeps
/// of a connection, `crate::serve`).
const SNAPSHOT_PAGE: u32 = 1000;
/// Garbled reads in a row after which a stream ends.
const MAX_GARBLED: u32 = 5;
/// Waits between reads while storaged is away.
const RETRY_FIRST: Duration = Duration::from_millis(20);
const RETRY_MAX: Duration = Duration::from_millis(500);

/// What the follower is doing.
#[derive(Debug)]
enum Phase {
    Snapshot(Snapshot),
    CatchUp,
    Live(broadcast::Receiver<Item>),
    Done,
}

/// Where a `meta` snapshot has got to.
#[derive(Debug)]
struct Snapshot {
    /// The last key read.
    after: Option<String>,
    /// The last key read but not sent yet: it may be the last of all,
    /// which carries the `id:`.
    held: Option<String>,
    /// The head captured before the snapshot: where live entries resume,
    /// and the `id:` of its last event (none when no entry was ever
    /// written: there is no ID to give).
    head: Option<StreamId>,
    /// The `ts` of every snapshot event: when it began.
    ts: String,
}

/// Why a read gave nothing to send.
enum Stall {
    /// storaged is away: wait and read again.
    Retry,
    /// storaged answered something unreadable (or a body broke off):
    /// read again a few times, then end the stream.
    Garbled,
    /// The read took as long as a silence may last: send a keep-alive,
    /// then read again.
    Quiet,
    /// Shutdown, or a refusal: end the stream.
    End,
}

#[derive(Debug)]
pub(crate) struct Follower {
    store: StoragedClient,
    hub: Arc<Hub>,
    shutdown: Shutdown,
    keepalive: Duration,
    /// Shared by all followers: store reads in flight.
    reads: Arc<Semaphore>,
    phase: Phase,
    /// The last entry sent (or the entry to start after).
    cursor: StreamId,
    /// The client's ID as sent, until the first page read (a `gap` for it
    /// echoes it).
    requested: Option<String>,
    /// Set while a catch-up has registered with the hub and does its
    /// final read.
    registered: Option<broadcast::Receiver<Item>>,
    last_write: Instant,
    retry: Backoff,
    /// Garbled reads in a row.
    garbled: u32,
    /// What is sent before anything else (the `gap` of an ID past the
    /// head).
    preface: Option<Bytes>,
    /// What this stream's followers were sent, counted per chunk.
    sent: Sent,
    _slots: Slots,
}

/// What a follower holds for its life: its place among all followers, and
/// among its client's (given back when it is dropped).
#[derive(Debug)]
pub(crate) struct Slots {
    pub(crate) _slot: OwnedSemaphorePermit,
    pub(crate) _held: Option<crate::conn::Held>,
}

/// Where a follower starts.
#[derive(Debug)]
pub(crate) enum Start {
    /// Live at once: the receiver was subscribed before the head was read.
    Live(broadcast::Receiver<Item>, StreamId),
    /// After this entry (`ZERO`: from the oldest kept).
    After(StreamId),
    /// After the client's ID, as it sent it (a `gap` echoes it).
    Resume(StreamId, String),
    /// The `meta` snapshot, then after `head`.
    Snapshot { head: StreamId, ts_ms: u64 },
    /// The client's ID (as it sent it) is past the head: a `gap`, then
    /// after `head`.
    Ahead { head: StreamId, raw: String },
}

impl Follower {
    /// A follower of `stream`, from `start`, holding its follower `slot`.
    pub(crate) fn new(events: &Events, stream: StreamName, start: Start, slots: Slots) -> Self {
        let mut requested = None;
        let mut preface = None;
        let (phase, cursor) = match start {
            Start::Ahead { head, raw } => {
                preface = Some(frame::gap(&raw, head));
                (Phase::CatchUp, head)
            }
            Start::Live(rx, head) => (Phase::Live(rx), head),
            Start::After(id) => (Phase::CatchUp, id),
            Start::Resume(id, raw) => {
                requested = Some(raw);
                (Phase::CatchUp, id)
            }
            Start::Snapshot { head, ts_ms } => (
                Phase::Snapshot(Snapshot {
                    after: None,
                    held: None,
                    head: (head != StreamId::ZERO).then_some(head),
                    ts: ts_ms.to_string(),
                }),
                head,
            ),
        };
        Self {
            store: events.store.clone(),
            hub: events.hub(stream).clone(),
            shutdown: events.shutdown.clone(),
            keepalive: events.keepalive,
            reads: events.reads.clone(),
            phase,
            cursor,
            requested,
            registered: None,
            last_write: Instant::now(),
            retry: Backoff::doubling(RETRY_FIRST, RETRY_MAX),
            garbled: 0,
            preface,
            sent: events.sent(stream).clone(),
            _slots: slots,
        }
    }

    /// The response body: chunks until the follower is done.
    pub(crate) fn into_body(self) -> axum::body::Body {
        let chunks = futures_util::stream::unfold(self, |mut f| async move {
            let chunk = f.next_chunk().await?;
            f.last_write = Instant::now();
            Some((Ok::<_, std::convert::Infallible>(chunk), f))
        });
        axum::body::Body::from_stream(chunks)
    }

    /// The next bytes to send, or `None` when the stream ends.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if let Some(first) = self.preface.take() {
            self.sent.gaps.inc();
            return Some(first);
        }
        loop {
            if self.shutdown.is_triggered() {
                return None;
            }
            let read = match &mut self.phase {
                Phase::Done => return None,
                Phase::Live(_) => self.live().await,
                Phase::Snapshot(_) => self.snapshot_page().await,
                Phase::CatchUp => self.catch_up_page().await,
            };
            match read {
                Ok(Some(chunk)) => {
                    self.retry.reset();
                    self.garbled = 0;
                    return Some(chunk);
                }
                Ok(None) => {
                    self.garbled = 0;
                    continue;
                }
                Err(Stall::End) => {
                    self.phase = Phase::Done;
                    return None;
                }
                Err(Stall::Quiet) => return Some(Bytes::from_static(KEEPALIVE)),
                Err(Stall::Garbled) if self.garbled >= MAX_GARBLED => {
                    tracing::warn!(
                        "an SSE stream's reads of storaged failed {MAX_GARBLED} times in a row; ending it"
                    );
                    self.phase = Phase::Done;
                    return None;
                }
                Err(stall @ (Stall::Retry | Stall::Garbled)) => {
                    if matches!(stall, Stall::Garbled) {
                        self.garbled += 1;
                    }
                    if self.last_write.elapsed() >= self.keepalive {
                        return Some(Bytes::from_static(KEEPALIVE));
                    }
                    let wait = self.retry.fail();
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = self.shutdown.wait() => return None,
                    }
                }
            }
        }
    }

    /// One page of the snapshot; `Ok(None)` once it is over.
    async fn snapshot_page(&mut self) -> Result<Option<Bytes>, Stall> {
        let Phase::Snapshot(snap) = &self.phase else {
            unreachable!("called in the snapshot phase");
        };
        let q = RangeQuery {
            prefix: Some("file:".into()),
            after: snap.after.clone(),
            limit: Some(SNAPSHOT_PAGE),
            keys_only: true,
            ..RangeQuery::default()
        };
        let page = self.read(self.store.kv_range(&q)).await?;
        let Phase::Snapshot(snap) = &mut self.phase else {
            unreachable!("still in the snapshot phase");
        };
        let mut buf = BytesMut::with_capacity(page.rows.len() * 96);
        let last_page = page.next.is_none();
        let mut sets = 0;
        for row in page.rows {
            if let Some(held) = snap.held.replace(row.key) {
                frame::put_snapshot_set(&mut buf, &held, &snap.ts, None);
                sets += 1;
            }
        }
        snap.after = snap.held.clone();
        if last_page {
            if let Some(held) = snap.held.take() {
                frame::put_snapshot_set(&mut buf, &held, &snap.ts, snap.head);
                sets += 1;
            }
            self.phase = Phase::CatchUp;
        }
        self.sent.events.inc_by(sets);
        Ok((!buf.is_empty()).then(|| buf.freeze()))
    }

    /// A store read through the shared read slots; it gives way to a
    /// keep-alive when the silence would last too long (the read is made
    /// again next time) and to shutdown.
    async fn read<T>(
        &self,
        read: impl Future<Output = Result<T, ClientError>>,
    ) -> Result<T, Stall> {
        let slot_then_read = async {
            // The semaphore is never closed; if it were, the stream ends.
            let Ok(_slot) = self.reads.acquire().await else {
                return Err(Stall::End);
            };
            read.await.map_err(stall)
        };
        tokio::select! {
            r = slot_then_read => r,
            _ = tokio::time::sleep_until(self.last_write + self.keepalive) => Err(Stall::Quiet),
            _ = self.shutdown.wait() => Err(Stall::End),
        }
    }

    /// One page of entries after the cursor; `Ok(None)` when there was
    /// nothing, or when the follower has just gone live.
    async fn catch_up_page(&mut self) -> Result<Option<Bytes>, Stall> {
        let q = EntriesQuery {
            after: Some(self.cursor),
            limit: Some(CATCH_UP_PAGE),
        };
        let page = self
            .read(self.store.entries_page(self.hub.stream(), &q))
            .await?;
        let entries = page.entries;
        let mut short = entries.len() < CATCH_UP_PAGE as usize;
        let mut buf = BytesMut::new();
        // Retention trimmed past the cursor since it was placed (a burst
        // the follower then caught up from, a long snapshot): say so, as a
        // reconnect with that ID would. `ZERO` reads from the oldest.
        let requested = self.requested.take();
        if let Some(oldest) = page.first
            && self.cursor != StreamId::ZERO
            && self.cursor < oldest
        {
            let requested = requested.unwrap_or_else(|| self.cursor.to_string());
            buf.extend_from_slice(&frame::gap(&requested, oldest));
            self.sent.gaps.inc();
        }
        let mut put = 0;
        for e in &entries {
            if buf.len() >= MAX_CHUNK {
                short = false;
                break;
            }
            frame::put_entry(&mut buf, e);
            self.cursor = e.id;
            put += 1;
        }
        self.sent.events.inc_by(put);
        if short {
            match self.registered.take() {
                // The read after registering: everything from here on is
                // in the ring.
                Some(rx) => self.phase = Phase::Live(rx),
                // Register, then read once more.
                None => {
                    tokio::select! {
                        _ = self.hub.started() => {}
                        _ = self.shutdown.wait() => return Err(Stall::End),
                    }
                    self.registered = Some(self.hub.subscribe());
                }
            }
        }
        Ok((!buf.is_empty()).then(|| buf.freeze()))
    }

    /// Batches from the ring, each one write; a keep-alive after silence;
    /// `Ok(None)` when it goes back to catching up. Batches ready at once
    /// are taken one after another without waiting, and the connection
    /// writes them together.
    async fn live(&mut self) -> Result<Option<Bytes>, Stall> {
        let Phase::Live(rx) = &mut self.phase else {
            unreachable!("called in the live phase");
        };
        let quiet_until = self.last_write + self.keepalive;
        loop {
            let batch = tokio::select! {
                r = rx.recv() => r,
                _ = tokio::time::sleep_until(quiet_until) => return Ok(Some(Bytes::from_static(KEEPALIVE))),
                _ = self.shutdown.wait() => return Err(Stall::End),
            };
            match batch {
                Ok(Item::Batch(b)) => {
                    if let Some(bytes) = b.after(self.cursor) {
                        self.sent.events.inc_by(b.count_after(self.cursor) as u64);
                        self.cursor = b.last;
                        return Ok(Some(bytes));
                    }
                }
                Ok(Item::Resync) => {
                    self.phase = Phase::CatchUp;
                    return Ok(None);
                }
                Err(RecvError::Lagged(missed)) => {
                    // Outrun by a burst: what it missed is in the store. (A
                    // follower that stopped reading is not polled at all;
                    // its connection's write stall closes it.)
                    tracing::debug!(missed, cursor = %self.cursor, "a burst outran an SSE follower; catching up from the store");
                    self.phase = Phase::CatchUp;
                    return Ok(None);
                }
                Err(RecvError::Closed) => return Err(Stall::End),
            }
        }
    }
}

/// Whether a failed read is worth retrying.
fn stall(e: ClientError) -> Stall {
    match &e {
        ClientError::Unavailable { .. } => Stall::Retry,
        ClientError::Api(api) if api.code == ErrorCode::StorageUnavailable => Stall::Retry,
        // A body cut off by storaged dying mid-answer comes as this too.
        ClientError::Protocol { .. } => Stall::Garbled,
        ClientError::Api(_) => {
            tracing::warn!(error = %e, "an SSE stream's read failed; ending it");
            Stall::End
        }
    }
}
