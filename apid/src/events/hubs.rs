//! The event-stream side of apid as a service: a hub per stream, the
//! follower slots (in all and per client), the slots of the followers'
//! store reads, and what the followers were sent. [`crate::state`] holds
//! it and the SSE handlers take it; it knows neither.

use std::sync::Arc;

use metacore::api::apid::EventStreams;
use metacore::api::storaged::StoragedClient;
use metacore::shutdown::Shutdown;
use metacore::stream::StreamName;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use tokio::sync::Semaphore;

use super::hub::Hub;
use crate::conn::PerClient;

/// Store reads (connects, catch-up and snapshot pages) in flight for all
/// followers.
const CONCURRENT_READS: usize = 8;
/// The follower limit: `META_CORE_SSE_MAX_FOLLOWERS`, but never more than
/// seven eighths of `META_CORE_HTTP_MAX_CONNECTIONS`, so that event streams
/// cannot take the connections `/health` and the other requests need.
fn follower_limit(max_followers: usize, max_connections: usize) -> usize {
    let reserve = (max_connections / 8).max(1);
    max_followers.min(max_connections.saturating_sub(reserve))
}

/// What the followers of one stream were sent (added to once per chunk,
/// for `/metrics`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Sent {
    /// Events with data: entries, and `meta` snapshot sets.
    pub(crate) events: Counter,
    /// `gap` events: retention had passed a follower's cursor.
    pub(crate) gaps: Counter,
}

/// The event-stream side of apid: a hub per stream and the follower slots.
/// Cloned for each stream that opens (its parts are shared).
#[derive(Debug, Clone)]
pub(crate) struct Events {
    /// By stream, in [`StreamName::ALL`]'s order.
    sent: [Sent; 2],
    meta: Arc<Hub>,
    files: Arc<Hub>,
    /// storaged's socket, for the hubs' tails and the followers' reads.
    pub(super) store: StoragedClient,
    /// One permit an open stream, in any phase: at most [`follower_limit`].
    pub(super) slots: Arc<Semaphore>,
    pub(super) max_followers: usize,
    /// Streams per client, at most `META_CORE_SSE_MAX_FOLLOWERS_PER_CLIENT`.
    pub(super) per_client: Arc<PerClient>,
    /// Reads of the store by followers catching up, at most
    /// [`CONCURRENT_READS`] at once: a thousand followers resuming after an
    /// apid restart queue here instead of opening a thousand connections
    /// to storaged.
    pub(super) reads: Arc<Semaphore>,
    pub(super) keepalive: std::time::Duration,
    pub(super) shutdown: Shutdown,
}

impl Events {
    pub(crate) fn new(
        config: &metacore::Config,
        store: StoragedClient,
        shutdown: Shutdown,
    ) -> Self {
        let max_followers = follower_limit(config.sse_max_followers, config.http_max_connections);
        Self {
            sent: Default::default(),
            meta: Arc::new(Hub::new(
                StreamName::Meta,
                config.sse_queue,
                config.sse_batch,
            )),
            files: Arc::new(Hub::new(
                StreamName::Files,
                config.sse_queue,
                config.sse_batch,
            )),
            slots: Arc::new(Semaphore::new(max_followers)),
            reads: Arc::new(Semaphore::new(CONCURRENT_READS)),
            max_followers,
            per_client: PerClient::new(config.sse_max_followers_per_client),
            keepalive: config.sse_keepalive,
            store,
            shutdown,
        }
    }

    /// Starts both hubs' upstream tails; they end with the shutdown.
    pub(crate) fn spawn(&self) {
        for hub in [&self.meta, &self.files] {
            let (hub, store, shutdown) = (hub.clone(), self.store.clone(), self.shutdown.clone());
            tokio::spawn(async move { hub.run(store, shutdown).await });
        }
    }

    pub(super) fn hub(&self, stream: StreamName) -> &Arc<Hub> {
        match stream {
            StreamName::Meta => &self.meta,
            StreamName::Files => &self.files,
        }
    }

    /// What the followers of `stream` were sent.
    pub(crate) fn sent(&self, stream: StreamName) -> &Sent {
        match stream {
            StreamName::Meta => &self.sent[0],
            StreamName::Files => &self.sent[1],
        }
    }

    /// The followers and what they were sent, into a scrape's registry.
    pub(crate) fn register_metrics(&self, r: &mut prometheus_client::registry::Registry) {
        use metacore::metrics::StreamLabels;
        let s = self.status();
        r.register(
            "apid_sse_followers",
            "Event streams open now, in any phase (snapshot, catch-up, live)",
            ConstGauge::new(i64::try_from(s.open).unwrap_or(i64::MAX)),
        );
        r.register(
            "apid_sse_max_followers",
            "The most event streams apid serves at once",
            ConstGauge::new(i64::try_from(s.max).unwrap_or(i64::MAX)),
        );
        let live = Family::<StreamLabels, Gauge>::default();
        let (events, gaps) = (
            Family::<StreamLabels, Counter>::default(),
            Family::<StreamLabels, Counter>::default(),
        );
        for (stream, n) in [
            (StreamName::Meta, s.live_meta),
            (StreamName::Files, s.live_files),
        ] {
            let labels = StreamLabels { stream };
            live.get_or_create(&labels)
                .set(i64::try_from(n).unwrap_or(i64::MAX));
            let sent = self.sent(stream);
            events.get_or_create(&labels).inc_by(sent.events.get());
            gaps.get_or_create(&labels).inc_by(sent.gaps.get());
        }
        r.register(
            "apid_sse_live_followers",
            "Followers reading a stream live (past their snapshot and catch-up)",
            live,
        );
        r.register(
            "apid_sse_events_sent",
            "Events sent to followers, all followers together (each event once per follower)",
            events,
        );
        r.register(
            "apid_sse_gaps_sent",
            "gap events sent: retention had passed a follower's cursor",
            gaps,
        );
    }

    /// Open streams and live followers, for apid's `/status`.
    pub(crate) fn status(&self) -> EventStreams {
        EventStreams {
            open: self.max_followers - self.slots.available_permits(),
            max: self.max_followers,
            live_meta: self.meta.followers(),
            live_files: self.files.followers(),
        }
    }
}
