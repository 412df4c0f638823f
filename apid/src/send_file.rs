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

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};

/// Most ranges one request may ask for; past it the whole file is sent
/// (as nginx's `max_ranges` does), so a request of a thousand tiny ranges
/// cannot cost a thousand seeks and part headers.
pub(crate) const MAX_RANGES: usize = 16;

/// Bytes read from the file per chunk of the body; a streaming answer
/// holds two (one sent, one read ahead). 256 KiB reads a cached 1 GiB
/// file at nginx's sendfile speed; 64 KiB did at 40% of it
/// (`bench/files.py`).
const CHUNK: usize = 256 * 1024;

/// What is known of the file being sent.
#[derive(Debug, Clone)]
pub(crate) struct Validators {
    pub size: u64,
    pub etag: String,
    /// Whole seconds since the epoch.
    pub modified_secs: u64,
    pub last_modified: String,
}

impl Validators {
    pub(crate) fn of(meta: &std::fs::Metadata) -> Self {
        let mtime = meta.modified().unwrap_or(UNIX_EPOCH);
        let since = mtime.duration_since(UNIX_EPOCH).unwrap_or_default();
        let modified_secs = since.as_secs();
        Self {
            size: meta.len(),
            etag: format!(
                "\"{}\"",
                etag(
                    std::os::unix::fs::MetadataExt::ino(meta),
                    since.as_nanos(),
                    meta.len()
                )
            ),
            modified_secs,
            last_modified: httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(modified_secs)),
        }
    }
}

/// The opaque part of the ETag of a file (inode, mtime in nanoseconds
/// since the epoch, size), unquoted; WebDAV's `getetag` is the same.
pub(crate) fn etag(ino: u64, mtime_ns: u128, size: u64) -> String {
    format!("{ino:x}-{mtime_ns:x}-{size:x}")
}

/// A byte range, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub first: u64,
    pub last: u64,
}

impl Span {
    fn len(self) -> u64 {
        self.last - self.first + 1
    }
}

/// What a `Range` header asks of a file of `size` bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ranges {
    /// No range header, one we do not understand, or more ranges than
    /// [`MAX_RANGES`]: the whole file.
    Whole,
    /// Satisfiable ranges, in the order asked.
    Spans(Vec<Span>),
    /// Well-formed, but none within the file: 416.
    Unsatisfiable,
}

/// Parses `bytes=a-b, c-, -n` against a file of `size` bytes.
pub(crate) fn parse_ranges(header: &str, size: u64) -> Ranges {
    let Some(set) = header.trim().strip_prefix("bytes=") else {
        return Ranges::Whole;
    };
    let mut spans = Vec::new();
    let mut asked = 0;
    for part in set.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        asked += 1;
        if asked > MAX_RANGES {
            return Ranges::Whole;
        }
        let Some((a, b)) = part.split_once('-') else {
            return Ranges::Whole;
        };
        let (a, b) = (a.trim(), b.trim());
        let span = if a.is_empty() {
            // The last `n` bytes.
            let Ok(n) = b.parse::<u64>() else {
                return Ranges::Whole;
            };
            if n == 0 || size == 0 {
                None
            } else {
                Some(Span {
                    first: size.saturating_sub(n),
                    last: size - 1,
                })
            }
        } else {
            let Ok(first) = a.parse::<u64>() else {
                return Ranges::Whole;
            };
            let last = if b.is_empty() {
                u64::MAX
            } else {
                match b.parse::<u64>() {
                    Ok(l) if l >= first => l,
                    _ => return Ranges::Whole,
                }
            };
            (first < size).then(|| Span {
                first,
                last: last.min(size - 1),
            })
        };
        spans.extend(span);
    }
    if asked == 0 {
        Ranges::Whole
    } else if spans.is_empty() {
        Ranges::Unsatisfiable
    } else if spans.len() > 1 && spans.iter().map(|s| s.len()).sum::<u64>() > size {
        // Overlapping ranges that add up to more than the file: the file
        // once, not parts of it many times.
        Ranges::Whole
    } else {
        Ranges::Spans(spans)
    }
}

/// The entity tags of an `If-Match` / `If-None-Match` value; `None` for
/// `*`.
fn tags(value: &str) -> Option<Vec<&str>> {
    let value = value.trim();
    if value == "*" || value.split(',').any(|t| t.trim() == "*") {
        return None;
    }
    Some(
        value
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect(),
    )
}

fn strong_match(tag: &str, etag: &str) -> bool {
    !tag.starts_with("W/") && tag == etag
}

fn weak_match(tag: &str, etag: &str) -> bool {
    tag.trim_start_matches("W/") == etag.trim_start_matches("W/")
}

fn header_str(h: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Every line of a list header (`If-Match`, `If-None-Match`), joined as one
/// comma-separated list, as RFC 9110 §5.3 reads repeated lines.
fn header_list(h: &HeaderMap, name: header::HeaderName) -> Option<String> {
    let lines: Vec<&str> = h
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!lines.is_empty()).then(|| lines.join(","))
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

fn date_secs(value: &str) -> Option<u64> {
    let t = httpdate::parse_http_date(value).ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_secs())
}

/// What the preconditions decide, before any byte is read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// 412 Precondition Failed.
    Failed,
    /// 304 Not Modified.
    NotModified,
    /// Send; honour the `Range` header or not.
    Send { use_range: bool },
}

/// RFC 9110 §13.2.2, in its order.
pub(crate) fn decide(method: &Method, h: &HeaderMap, v: &Validators) -> Decision {
    if let Some(im) = header_list(h, header::IF_MATCH) {
        let ok = match tags(&im) {
            None => true,
            Some(list) => list.iter().any(|t| strong_match(t, &v.etag)),
        };
        if !ok {
            return Decision::Failed;
        }
    } else if let Some(since) = header_str(h, header::IF_UNMODIFIED_SINCE).and_then(date_secs)
        && v.modified_secs > since
    {
        return Decision::Failed;
    }
    let read = *method == Method::GET || *method == Method::HEAD;
    if let Some(inm) = header_list(h, header::IF_NONE_MATCH) {
        let matched = match tags(&inm) {
            None => true,
            Some(list) => list.iter().any(|t| weak_match(t, &v.etag)),
        };
        if matched {
            return if read {
                Decision::NotModified
            } else {
                Decision::Failed
            };
        }
    } else if read
        && let Some(since) = header_str(h, header::IF_MODIFIED_SINCE).and_then(date_secs)
        && v.modified_secs <= since
    {
        return Decision::NotModified;
    }
    let use_range = match header_str(h, header::IF_RANGE) {
        None => true,
        Some(ir) if ir.trim_start().starts_with('"') || ir.trim_start().starts_with("W/") => {
            strong_match(ir.trim(), &v.etag)
        }
        // A date: only an exact match of Last-Modified, and only when that
        // is a strong validator (the file was last changed more than a
        // second before now: a second-resolution date of a file changed
        // this second may name two contents).
        Some(ir) => date_secs(ir) == Some(v.modified_secs) && v.modified_secs + 1 < now_secs(),
    };
    Decision::Send { use_range }
}

/// What a body is made of: literal bytes (part headers) and spans of the
/// file, sent in order.
enum Piece {
    Text(Bytes),
    Span(Span),
}

/// One positioned read of up to `want` bytes at `at`, on the blocking pool.
fn read_chunk(
    file: &std::sync::Arc<std::fs::File>,
    at: u64,
    want: usize,
) -> tokio::task::JoinHandle<std::io::Result<Vec<u8>>> {
    let file = file.clone();
    tokio::task::spawn_blocking(move || {
        let mut buf = vec![0u8; want];
        let mut got = 0;
        while got < want {
            match std::os::unix::fs::FileExt::read_at(&*file, &mut buf[got..], at + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(got);
        Ok(buf)
    })
}

/// The body of `pieces`, read from `file` one chunk at a time, each chunk
/// one positioned read (`pread`) on the blocking pool. The next chunk of
/// a span is read while the last one is being sent, so the disk and the
/// socket work at once; memory stays at two chunks.
fn body_of(file: std::fs::File, pieces: Vec<Piece>) -> Body {
    struct State {
        file: std::sync::Arc<std::fs::File>,
        pieces: std::collections::VecDeque<Piece>,
        /// The span being sent: next offset and bytes left.
        at: u64,
        left: u64,
        /// The read of the chunk at this offset, under way.
        ahead: Option<(u64, tokio::task::JoinHandle<std::io::Result<Vec<u8>>>)>,
    }
    let state = State {
        file: std::sync::Arc::new(file),
        pieces: pieces.into(),
        at: 0,
        left: 0,
        ahead: None,
    };
    let stream = futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if st.left > 0 {
                let read = match st.ahead.take() {
                    Some((at, h)) if at == st.at => h,
                    _ => read_chunk(&st.file, st.at, st.left.min(CHUNK as u64) as usize),
                };
                let read = read.await.unwrap_or_else(|e| Err(std::io::Error::other(e)));
                let out = match read {
                    Ok(buf) if !buf.is_empty() => {
                        st.left -= (buf.len() as u64).min(st.left);
                        st.at += buf.len() as u64;
                        if st.left > 0 {
                            let want = st.left.min(CHUNK as u64) as usize;
                            st.ahead = Some((st.at, read_chunk(&st.file, st.at, want)));
                        }
                        return Some((Ok(Bytes::from(buf)), st));
                    }
                    // The file shrank while it was sent: the body ends
                    // short of its Content-Length and the client retries.
                    Ok(_) => std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
                    Err(e) => e,
                };
                st.pieces.clear();
                st.left = 0;
                return Some((Err(out), st));
            }
            match st.pieces.pop_front()? {
                Piece::Text(b) => return Some((Ok(b), st)),
                Piece::Span(s) => {
                    st.at = s.first;
                    st.left = s.len();
                }
            }
        }
    });
    Body::from_stream(stream)
}

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
        Ranges::Spans(spans) => {
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
            for s in &spans {
                pieces.push(Piece::Text(Bytes::from(part_head(s))));
                pieces.push(Piece::Span(*s));
            }
            pieces.push(Piece::Text(Bytes::from(tail)));
            built(b, body_of(file, pieces))
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn span(first: u64, last: u64) -> Span {
        Span { first, last }
    }

    #[test]
    fn ranges_are_read_as_rfc_9110_says() {
        let size = 100;
        assert_eq!(
            parse_ranges("bytes=0-9", size),
            Ranges::Spans(vec![span(0, 9)])
        );
        assert_eq!(
            parse_ranges("bytes=90-", size),
            Ranges::Spans(vec![span(90, 99)])
        );
        assert_eq!(
            parse_ranges("bytes=-5", size),
            Ranges::Spans(vec![span(95, 99)])
        );
        assert_eq!(
            parse_ranges("bytes=-500", size),
            Ranges::Spans(vec![span(0, 99)])
        );
        assert_eq!(
            parse_ranges("bytes=95-200", size),
            Ranges::Spans(vec![span(95, 99)])
        );
        assert_eq!(
            parse_ranges("bytes=0-1, 5-6 ,200-300", size),
            Ranges::Spans(vec![span(0, 1), span(5, 6)])
        );
        assert_eq!(
            parse_ranges("bytes=0-,0-,0-", size),
            Ranges::Whole,
            "overlapping"
        );
        assert_eq!(parse_ranges("bytes=100-", size), Ranges::Unsatisfiable);
        assert_eq!(parse_ranges("bytes=-0", size), Ranges::Unsatisfiable);
        assert_eq!(parse_ranges("bytes=0-0", 0), Ranges::Unsatisfiable);
        for odd in ["items=0-1", "bytes=5-1", "bytes=a-b", "bytes=1", "bytes="] {
            assert_eq!(parse_ranges(odd, size), Ranges::Whole, "{odd}");
        }
        let many = format!("bytes={}", vec!["0-0"; MAX_RANGES + 1].join(","));
        assert_eq!(parse_ranges(&many, size), Ranges::Whole);
        // Past 4 GiB.
        let big = 5u64 << 30;
        assert_eq!(
            parse_ranges(&format!("bytes={}-", big - 3), big),
            Ranges::Spans(vec![span(big - 3, big - 1)])
        );
    }

    fn v() -> Validators {
        Validators {
            size: 10,
            etag: "\"abc-a\"".into(),
            modified_secs: 1_700_000_000,
            last_modified: httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
        }
    }

    fn with(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, val) in pairs {
            h.insert(k.clone(), HeaderValue::from_str(val).unwrap());
        }
        h
    }

    #[test]
    fn preconditions_decide_in_the_rfcs_order() {
        let v = v();
        let get = Method::GET;
        let send = Decision::Send { use_range: true };
        assert_eq!(decide(&get, &HeaderMap::new(), &v), send);
        assert_eq!(
            decide(&get, &with(&[(header::IF_MATCH, "\"abc-a\"")]), &v),
            send
        );
        assert_eq!(decide(&get, &with(&[(header::IF_MATCH, "*")]), &v), send);
        assert_eq!(
            decide(
                &get,
                &with(&[(header::IF_MATCH, "\"other\", W/\"abc-a\"")]),
                &v
            ),
            Decision::Failed,
            "If-Match compares strongly"
        );
        let earlier = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(1_600_000_000));
        assert_eq!(
            decide(&get, &with(&[(header::IF_UNMODIFIED_SINCE, &earlier)]), &v),
            Decision::Failed
        );
        assert_eq!(
            decide(&get, &with(&[(header::IF_NONE_MATCH, "W/\"abc-a\"")]), &v),
            Decision::NotModified,
            "If-None-Match compares weakly"
        );
        assert_eq!(
            decide(&Method::PUT, &with(&[(header::IF_NONE_MATCH, "*")]), &v),
            Decision::Failed
        );
        assert_eq!(
            decide(
                &get,
                &with(&[(header::IF_MODIFIED_SINCE, &v.last_modified)]),
                &v
            ),
            Decision::NotModified
        );
        assert_eq!(
            decide(&get, &with(&[(header::IF_MODIFIED_SINCE, &earlier)]), &v),
            send
        );
        // If-None-Match wins over If-Modified-Since.
        assert_eq!(
            decide(
                &get,
                &with(&[
                    (header::IF_NONE_MATCH, "\"other\""),
                    (header::IF_MODIFIED_SINCE, &v.last_modified)
                ]),
                &v
            ),
            send
        );
        let no_range = Decision::Send { use_range: false };
        assert_eq!(
            decide(&get, &with(&[(header::IF_RANGE, "\"abc-a\"")]), &v),
            send
        );
        assert_eq!(
            decide(&get, &with(&[(header::IF_RANGE, "\"old\"")]), &v),
            no_range
        );
        assert_eq!(
            decide(&get, &with(&[(header::IF_RANGE, "W/\"abc-a\"")]), &v),
            no_range
        );
        assert_eq!(
            decide(&get, &with(&[(header::IF_RANGE, &v.last_modified)]), &v),
            send
        );
        assert_eq!(
            decide(&get, &with(&[(header::IF_RANGE, &earlier)]), &v),
            no_range
        );
    }
}
