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
//! [`hubs`] is the service the handlers take ([`Events`]: the hubs and
//! the slots); [`hub`] keeps one upstream tail per stream for all
//! followers; [`follower`] is one follower's way through snapshot,
//! catch-up and live; [`frame`] is the wire form; [`logs`] follows a
//! daemon's log file for the console, in a follower slot too.

mod follower;
mod frame;
mod hub;
pub(crate) mod hubs;
mod logs;

pub(crate) use logs::follow as logs;

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use metacore::error::{ApiError, ErrorCode};
use metacore::socket::body::QueryParams;
use metacore::stream::{StreamId, StreamName};
use serde::Deserialize;

use crate::conn::Conn;
use follower::{Follower, Slots, Start};
use hubs::Events;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EventsQuery {
    last_event_id: Option<String>,
}

pub(crate) async fn meta(
    State(events): State<Events>,
    conn: Option<Extension<Conn>>,
    headers: HeaderMap,
    QueryParams(q): QueryParams<EventsQuery>,
) -> Response {
    follow(&events, StreamName::Meta, conn.map(|c| c.0), &headers, q).await
}

pub(crate) async fn files(
    State(events): State<Events>,
    conn: Option<Extension<Conn>>,
    headers: HeaderMap,
    QueryParams(q): QueryParams<EventsQuery>,
) -> Response {
    follow(&events, StreamName::Files, conn.map(|c| c.0), &headers, q).await
}

async fn follow(
    events: &Events,
    stream: StreamName,
    conn: Option<Conn>,
    headers: &HeaderMap,
    q: EventsQuery,
) -> Response {
    match start(events, stream, conn.as_ref(), headers, q).await {
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
    events: &Events,
    stream: StreamName,
    conn: Option<&Conn>,
    headers: &HeaderMap,
    query: EventsQuery,
) -> Result<Follower, ApiError> {
    let requested = last_event_id(headers, query)?;
    let slots = take_slots(events, conn)?;
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
        events.store.stream_bounds(stream).await?
    };
    let head = bounds.last.unwrap_or(StreamId::ZERO);
    Ok(Follower::new(
        events,
        stream,
        start_at(stream, asked, head),
        slots,
    ))
}

/// The client's share of event streams, then one of all: a 429 past the
/// first, a 503 past the second.
pub(super) fn take_slots(events: &Events, conn: Option<&Conn>) -> Result<Slots, ApiError> {
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
    Ok(Slots {
        _slot: slot,
        _held: held,
    })
}

/// Where a follower of `stream` that asked for `asked` starts, with the
/// stream's head at `head`.
fn start_at(stream: StreamName, asked: Asked, head: StreamId) -> Start {
    match asked {
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
    }
}

fn sse(follower: Follower) -> Response {
    sse_body(follower.into_body())
}

/// `body` as an SSE answer: its type, no caching, no proxy buffering.
pub(super) fn sse_body(body: axum::body::Body) -> Response {
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}
