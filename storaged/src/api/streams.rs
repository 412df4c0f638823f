//! Stream routes: append, read a range, info, and the tail that streams
//! newline-delimited JSON entries as they are committed.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use metacore::api::storaged::{
    AppendBody, Appended, Entries, EntriesQuery, StreamBounds, StreamInfo, TailQuery,
};
use metacore::checked::CheckedEntry;
use metacore::error::ApiError;
use metacore::socket::body::{JsonBody, JsonReply, PathParams, QueryParams};
use metacore::stream::{Entry, StreamId, StreamName};

use super::{AppState, State, page};
use crate::streams::head_of;

/// Entries read per round trip of a tail.
const TAIL_BATCH: u32 = 512;
/// A blank line after this much silence, so a gone reader is noticed.
const TAIL_HEARTBEAT: Duration = Duration::from_secs(15);

fn stream_name(s: &str) -> Result<StreamName, ApiError> {
    s.parse()
        .map_err(|e: metacore::stream::UnknownStream| ApiError::not_found(e.to_string()))
}

pub(super) async fn append(
    st: State,
    PathParams(stream): PathParams<String>,
    JsonBody(body): JsonBody<AppendBody>,
) -> JsonReply<Appended> {
    let entry = CheckedEntry::new(stream_name(&stream)?, body.fields)?;
    let id = st.store.append(entry).await?;
    Ok(Json(Appended { id }))
}

pub(super) async fn entries(
    st: State,
    PathParams(stream): PathParams<String>,
    QueryParams(q): QueryParams<EntriesQuery>,
) -> JsonReply<Entries> {
    let page = st
        .store
        .entries_page(stream_name(&stream)?, q.after, page(q.limit, 1000))
        .await?;
    Ok(Json(page))
}

pub(super) async fn bounds(
    st: State,
    PathParams(stream): PathParams<String>,
) -> JsonReply<StreamBounds> {
    Ok(Json(st.store.stream_bounds(stream_name(&stream)?).await?))
}

pub(super) async fn info(
    st: State,
    PathParams(stream): PathParams<String>,
) -> JsonReply<StreamInfo> {
    Ok(Json(st.store.stream_info(stream_name(&stream)?).await?))
}

/// State of one tail between two items.
struct Tail {
    app: Arc<AppState>,
    stream: StreamName,
    cursor: StreamId,
    buffered: VecDeque<Entry>,
    heads: tokio::sync::watch::Receiver<crate::streams::Heads>,
}

fn line(entry: &Entry) -> Bytes {
    let mut v = serde_json::to_vec(entry).expect("entries serialize");
    v.push(b'\n');
    Bytes::from(v)
}

pub(super) async fn tail(
    st: State,
    PathParams(stream): PathParams<String>,
    QueryParams(q): QueryParams<TailQuery>,
) -> Result<Response, ApiError> {
    let stream = stream_name(&stream)?;
    let mut heads = st.store.subscribe();
    let head = head_of(&heads.borrow_and_update(), stream);
    let cursor = q.after.unwrap_or(head.unwrap_or(StreamId::ZERO));
    let state = Tail {
        app: st.0.clone(),
        stream,
        cursor,
        buffered: VecDeque::new(),
        heads,
    };
    let body = futures_util::stream::unfold(state, |mut t| async move {
        loop {
            if let Some(e) = t.buffered.pop_front() {
                t.cursor = e.id;
                return Some((Ok::<_, Infallible>(line(&e)), t));
            }
            if t.app.shutdown.is_triggered() {
                return None;
            }
            // Mark the heads seen before reading, so a commit that lands
            // after the read still wakes us.
            t.heads.borrow_and_update();
            match t
                .app
                .store
                .entries(t.stream, Some(t.cursor), TAIL_BATCH)
                .await
            {
                Ok(list) if !list.is_empty() => {
                    t.buffered.extend(list);
                    continue;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "tail read failed; closing the tail");
                    return None;
                }
            }
            let shutdown = t.app.shutdown.clone();
            tokio::select! {
                changed = t.heads.changed() => if changed.is_err() { return None },
                _ = shutdown.wait() => return None,
                _ = tokio::time::sleep(TAIL_HEARTBEAT) => return Some((Ok(Bytes::from_static(b"\n")), t)),
            }
        }
    });
    Ok((
        [(http::header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(body),
    )
        .into_response())
}
