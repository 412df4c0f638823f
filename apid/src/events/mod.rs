//! `GET /api/events/meta` and `GET /api/events/files`: the `meta:events`
//! and `file:events` streams as Server-Sent Events.
//!
//! Where a follower starts comes from `Last-Event-ID` (or the
//! `lastEventId` query parameter, for clients that cannot set headers; the
//! header wins):
//!
//! - none: the head captured at connect, new entries only;
//! - `<ms>-<seq>` (or `<ms>`): the entry after it; an ID older than the
//!   oldest entry kept gets one `gap` event, then the oldest onwards;
//! - `0` / `0-0`: on `meta`, the snapshot of every `file:` key, then the
//!   live tail from the head captured before it; on `files`, everything
//!   kept;
//! - anything else: 400 `bad_request`, before the stream starts.
//!
//! [`hub`] keeps one upstream tail per stream for all followers;
//! [`follower`] is one follower's way through snapshot, catch-up and live;
//! [`frame`] is the wire form.

mod follower;
mod frame;
mod hub;

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use metacore::api::apid::EventStreams;
use metacore::api::storaged::StoragedClient;
use metacore::error::{ApiError, ErrorCode};
use metacore::shutdown::Shutdown;
use metacore::socket::body::QueryParams;
use metacore::stream::{StreamId, StreamName};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use serde::Deserialize;
use tokio::sync::Semaphore;

use crate::conn::{Conn, PerClient};
use crate::state::AppState;
use follower::{Follower, Start};
use hub::Hub;

/// Store reads (connects, catch-up and snapshot pages) in flight for all
/// followers.
const CONCURRENT_READS: usize = 8;
/// The follower limit: `META_CORE_SSE_MAX_FOLLOWERS`, but never more than
/// seven eighths of `META_CORE_HTTP_MAX_CONNECTIONS`, so that event streams
/// cannot take the connections `/health` and the other requests need.
pub(crate) fn follower_limit(max_followers: usize, max_connections: usize) -> usize {
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
#[derive(Debug)]
pub struct Events {
    /// By stream, in [`StreamName::ALL`]'s order.
    sent: [Sent; 2],
    meta: Arc<Hub>,
    files: Arc<Hub>,
    slots: Arc<Semaphore>,
    max_followers: usize,
    /// Streams per client, at most `META_CORE_SSE_MAX_FOLLOWERS_PER_CLIENT`.
    per_client: Arc<PerClient>,
    /// Reads of the store by followers catching up, at most
    /// [`CONCURRENT_READS`] at once: a thousand followers resuming after an
    /// apid restart queue here instead of opening a thousand connections
    /// to storaged.
    reads: Arc<Semaphore>,
    keepalive: std::time::Duration,
    shutdown: Shutdown,
}

impl Events {
    pub fn new(config: &metacore::Config, shutdown: Shutdown) -> Self {
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
            shutdown,
        }
    }

    /// Starts both hubs' upstream tails; they end with the shutdown.
    pub fn spawn(&self, store: &StoragedClient) {
        for hub in [&self.meta, &self.files] {
            let (hub, store, shutdown) = (hub.clone(), store.clone(), self.shutdown.clone());
            tokio::spawn(async move { hub.run(store, shutdown).await });
        }
    }

    fn hub(&self, stream: StreamName) -> &Arc<Hub> {
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

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EventsQuery {
    last_event_id: Option<String>,
}

pub(crate) async fn meta(
    st: State<Arc<AppState>>,
    conn: Option<Extension<Conn>>,
    headers: HeaderMap,
    QueryParams(q): QueryParams<EventsQuery>,
) -> Response {
    follow(&st, StreamName::Meta, conn.map(|c| c.0), &headers, q).await
}

pub(crate) async fn files(
    st: State<Arc<AppState>>,
    conn: Option<Extension<Conn>>,
    headers: HeaderMap,
    QueryParams(q): QueryParams<EventsQuery>,
) -> Response {
    follow(&st, StreamName::Files, conn.map(|c| c.0), &headers, q).await
}

async fn follow(
    st: &AppState,
    stream: StreamName,
    conn: Option<Conn>,
    headers: &HeaderMap,
    q: EventsQuery,
) -> Response {
    match start(st, stream, conn.as_ref(), headers, q).await {
        Ok(follower) => sse(follower),
        Err(e) => e.into_response(),
    }
}

/// The client's `Last-Event-ID`: the header, else the query parameter; an
/// empty value is no ID. The ID parsed, and as it was sent (a `gap` echoes
/// it).
fn last_event_id(
    headers: &HeaderMap,
    query: EventsQuery,
) -> Result<Option<(StreamId, String)>, ApiError> {
    let text = match headers.get("last-event-id") {
        Some(v) => Some(
            v.to_str()
                .map_err(|_| ApiError::bad_request("Last-Event-ID is not text"))?
                .to_owned(),
        ),
        None => query.last_event_id,
    };
    match text.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(t) => match StreamId::parse(t) {
            Ok(id) => Ok(Some((id, echoed(t)))),
            Err(_) => Err(ApiError::bad_request(format!(
                "Last-Event-ID {:?} is not an event ID: expected <ms>-<seq>, <ms>, 0 or 0-0",
                echoed(t)
            ))),
        },
    }
}

/// Most characters of a client's ID said back to it (in a 400, or a
/// `gap`'s `requested`): an ID is at most 35, and a client's header
/// should not come back whole in an answer or a log.
const ECHOED: usize = 64;

/// `id` as said back: its first [`ECHOED`] characters, then `...`.
fn echoed(id: &str) -> String {
    match id.char_indices().nth(ECHOED) {
        None => id.to_owned(),
        Some((at, _)) => format!("{}...", &id[..at]),
    }
}

/// What the client asked for.
enum Asked {
    /// No ID: the head, with the receiver subscribed before it was read.
    Head(tokio::sync::broadcast::Receiver<hub::Item>),
    /// An ID, parsed and as sent.
    Id(StreamId, String),
}

/// How long a connect waits for a hub that has not reached storaged yet
/// (apid just started) before it answers 503.
const HUB_START_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Works out where the follower starts, and takes its slot.
async fn start(
    st: &AppState,
    stream: StreamName,
    conn: Option<&Conn>,
    headers: &HeaderMap,
    query: EventsQuery,
) -> Result<Follower, ApiError> {
    let requested = last_event_id(headers, query)?;
    let events = &st.events;
    let held = match conn {
        Some(c) => Some(events.per_client.try_take(c.client).ok_or_else(|| {
            ApiError::new(
                ErrorCode::TooManyRequests,
                format!(
                    "this client has {} event streams open, the most one client may hold \
                     (META_CORE_SSE_MAX_FOLLOWERS_PER_CLIENT); close one or retry shortly",
                    events.per_client.cap()
                ),
            )
        })?),
        None => None,
    };
    let slot = events.slots.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            ErrorCode::Overloaded,
            format!(
                "{} event streams are open, the most this server serves \
                 (META_CORE_SSE_MAX_FOLLOWERS, at most 7/8 of META_CORE_HTTP_MAX_CONNECTIONS); \
                 retry shortly",
                events.max_followers
            ),
        )
    })?;
    // A hub that has not reached storaged yet (apid just started) gets a
    // moment: followers reconnecting after a restart should not see a 503.
    let hub = events.hub(stream);
    if tokio::time::timeout(HUB_START_WAIT, hub.started())
        .await
        .is_err()
    {
        return Err(ApiError::new(
            ErrorCode::StorageUnavailable,
            "storaged has not answered since apid started; retry shortly",
        ));
    }
    // Without an ID: subscribe, then read the head from storaged. Every
    // entry after that head commits after the subscription, so the hub
    // broadcasts it to this receiver: the follower goes live at once.
    let asked = match requested {
        None => Asked::Head(hub.subscribe()),
        Some((id, raw)) => Asked::Id(id, raw),
    };
    let bounds = {
        let _read = events
            .reads
            .acquire()
            .await
            .map_err(|_| ApiError::unavailable("apid is stopping"))?;
        st.store.stream_bounds(stream).await?
    };
    let head = bounds.last.unwrap_or(StreamId::ZERO);
    let start = match asked {
        Asked::Head(rx) => Start::Live(rx, head),
        Asked::Id(StreamId::ZERO, _) if stream == StreamName::Meta => Start::Snapshot {
            head,
            ts_ms: metacore::clock::unix_ms(),
        },
        Asked::Id(StreamId::ZERO, _) => Start::After(StreamId::ZERO),
        // An ID past the head (a store restored from an older copy, a
        // client of another meta-core) is told as one retention passed:
        // a `gap`, then the head onwards. Following on from it would skip
        // every entry until the IDs caught up with it.
        Asked::Id(id, raw) if id > head => Start::Ahead { head, raw },
        // Whether retention trimmed past it is told by the first page read,
        // in the same transaction as the page: no trim can fall between.
        Asked::Id(id, raw) => Start::Resume(id, raw),
    };
    let slots = follower::Slots {
        _slot: slot,
        _held: held,
    };
    Ok(Follower::new(
        events,
        st.store.clone(),
        stream,
        start,
        slots,
    ))
}

fn sse(follower: Follower) -> Response {
    let mut resp = follower.into_body().into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}
