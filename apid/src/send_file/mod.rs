//! Sending a file's bytes over HTTP the way players and caches expect:
//! `ETag` and `Last-Modified`, the preconditions of RFC 9110 §13
//! (`If-Match`, `If-Unmodified-Since`, `If-None-Match`, `If-Modified-Since`,
//! `If-Range`), and byte ranges (one: `206` with `Content-Range`; several:
//! `multipart/byteranges`; none satisfiable: `416`). The body is streamed
//! from the open file in 256 KiB reads, the next read while the last
//! chunk is sent, so memory stays flat (two chunks) whatever the size.
//!
//! The validators come from the open file's `fstat`: the ETag is
//! `"<inode hex>-<mtime ns hex>-<size hex>"` (a strong validator: a file
//! replaced by another of the same size and mtime, as `rsync -t` or
//! `cp -p` leave it, has another inode), `Last-Modified` its mtime to the
//! second.
//!
//! [`rules`] decides what is sent (validators, preconditions, ranges),
//! [`body`] streams it, [`media`] names its content type; this module
//! builds the answer.

mod body;
mod media;
mod rules;

use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};

use body::{CHUNK, Piece, body_of};
pub(crate) use media::content_type;
use rules::{Decision, Ranges, Span, decide, header_str, parse_ranges};
pub(crate) use rules::{Validators, etag};

fn base(status: StatusCode, v: &Validators, content_type: &str) -> http::response::Builder {
    Response::builder()
        .status(status)
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::ETAG, &v.etag)
        .header(header::LAST_MODIFIED, &v.last_modified)
        .header(header::CONTENT_TYPE, content_type)
}

fn built(b: http::response::Builder, body: Body) -> Response {
    b.body(body).unwrap_or_else(|e| {
        metacore::error::ApiError::internal(format!("cannot build the answer: {e}")).into_response()
    })
}

/// The bytes of a short answer read ahead, beside the open and `fstat`
/// of the file on the blocking pool, so that answering costs no second
/// hand-off to it ([`Prefetched::read`]).
#[derive(Debug, Default)]
pub(crate) struct Prefetched(Option<(Span, Bytes)>);

impl Prefetched {
    /// Reads what a GET with `headers` will send of `file`, if that is
    /// one span of at most one chunk. Blocking.
    pub(crate) fn read(
        method: &Method,
        headers: &HeaderMap,
        file: &std::fs::File,
        meta: &std::fs::Metadata,
    ) -> Self {
        if *method != Method::GET {
            return Self(None);
        }
        let v = Validators::of(meta);
        let span = match decide(method, headers, &v) {
            Decision::Send { use_range } => match header_str(headers, header::RANGE) {
                Some(r) if use_range => match parse_ranges(r, v.size) {
                    Ranges::Spans(spans) if spans.len() == 1 => spans[0],
                    Ranges::Whole if v.size > 0 => Span {
                        first: 0,
                        last: v.size - 1,
                    },
                    _ => return Self(None),
                },
                _ if v.size > 0 => Span {
                    first: 0,
                    last: v.size - 1,
                },
                _ => return Self(None),
            },
            _ => return Self(None),
        };
        if span.len() > CHUNK as u64 {
            return Self(None);
        }
        let mut buf = vec![0u8; span.len() as usize];
        match std::os::unix::fs::FileExt::read_exact_at(file, &mut buf, span.first) {
            Ok(()) => Self(Some((span, Bytes::from(buf)))),
            Err(_) => Self(None),
        }
    }

    /// The piece that sends `span`: the bytes read ahead if they are it.
    fn take(&mut self, span: Span) -> Piece {
        match self.0.take() {
            Some((s, bytes)) if s == span => Piece::Text(bytes),
            _ => Piece::Span(span),
        }
    }
}

/// Answers a GET or HEAD of the open `file` (`meta` its `fstat`).
pub(crate) async fn send(
    method: &Method,
    headers: &HeaderMap,
    file: std::fs::File,
    meta: &std::fs::Metadata,
    content_type: &str,
) -> Response {
    send_with(
        method,
        headers,
        file,
        meta,
        content_type,
        Prefetched::default(),
    )
    .await
}

/// [`send`] with bytes read ahead.
pub(crate) async fn send_with(
    method: &Method,
    headers: &HeaderMap,
    file: std::fs::File,
    meta: &std::fs::Metadata,
    content_type: &str,
    mut ready: Prefetched,
) -> Response {
    let v = Validators::of(meta);
    let head = *method == Method::HEAD;
    let use_range = match decide(method, headers, &v) {
        Decision::Failed => {
            return built(
                Response::builder()
                    .status(StatusCode::PRECONDITION_FAILED)
                    .header(header::ETAG, &v.etag),
                Body::empty(),
            );
        }
        Decision::NotModified => {
            return built(
                Response::builder()
                    .status(StatusCode::NOT_MODIFIED)
                    .header(header::ETAG, &v.etag)
                    .header(header::LAST_MODIFIED, &v.last_modified),
                Body::empty(),
            );
        }
        Decision::Send { use_range } => use_range,
    };
    let ranges = match header_str(headers, header::RANGE) {
        Some(r) if use_range => parse_ranges(r, v.size),
        _ => Ranges::Whole,
    };
    match ranges {
        Ranges::Unsatisfiable => built(
            Response::builder()
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header(header::ACCEPT_RANGES, "bytes")
                .header(header::CONTENT_RANGE, format!("bytes */{}", v.size)),
            Body::empty(),
        ),
        Ranges::Whole => {
            let b = base(StatusCode::OK, &v, content_type).header(header::CONTENT_LENGTH, v.size);
            if head || v.size == 0 {
                return built(b, Body::empty());
            }
            let all = Span {
                first: 0,
                last: v.size - 1,
            };
            built(b, body_of(file, vec![ready.take(all)]))
        }
        Ranges::Spans(spans) if spans.len() == 1 => {
            let s = spans[0];
            let b = base(StatusCode::PARTIAL_CONTENT, &v, content_type)
                .header(header::CONTENT_LENGTH, s.len())
                .header(
                    header::CONTENT_RANGE,
                    format!("bytes {}-{}/{}", s.first, s.last, v.size),
                );
            if head {
                return built(b, Body::empty());
            }
            built(b, body_of(file, vec![ready.take(s)]))
        }
        Ranges::Spans(spans) => multipart(file, &spans, &v, content_type, head),
    }
}

/// Several spans: `206` with a `multipart/byteranges` body, each part
/// with its own `Content-Type` and `Content-Range`.
fn multipart(
    file: std::fs::File,
    spans: &[Span],
    v: &Validators,
    content_type: &str,
    head: bool,
) -> Response {
    let boundary = format!("meta-core-{:016x}", rand_u64());
    let part_head = |s: &Span| {
        format!(
            "\r\n--{boundary}\r\nContent-Type: {content_type}\r\nContent-Range: bytes {}-{}/{}\r\n\r\n",
            s.first, s.last, v.size
        )
    };
    let tail = format!("\r\n--{boundary}--\r\n");
    let length: u64 = spans
        .iter()
        .map(|s| part_head(s).len() as u64 + s.len())
        .sum::<u64>()
        + tail.len() as u64;
    let b = Response::builder()
        .status(StatusCode::PARTIAL_CONTENT)
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::ETAG, &v.etag)
        .header(header::LAST_MODIFIED, &v.last_modified)
        .header(
            header::CONTENT_TYPE,
            HeaderValue::from_str(&format!("multipart/byteranges; boundary={boundary}"))
                .expect("an ASCII boundary"),
        )
        .header(header::CONTENT_LENGTH, length);
    if head {
        return built(b, Body::empty());
    }
    let mut pieces = Vec::with_capacity(spans.len() * 2 + 1);
    for s in spans {
        pieces.push(Piece::Text(Bytes::from(part_head(s))));
        pieces.push(Piece::Span(*s));
    }
    pieces.push(Piece::Text(Bytes::from(tail)));
    built(b, body_of(file, pieces))
}

fn rand_u64() -> u64 {
    // A boundary only has to be absent from the parts; the clock's
    // nanoseconds and the process id make a fresh one per answer.
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64;
    t ^ (u64::from(std::process::id()) << 32)
}
