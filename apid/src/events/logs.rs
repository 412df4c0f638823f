//! `GET /api/logs/{daemon}` (admin): a daemon's log as the supervisor
//! writes it (`<log dir>/<daemon>.log`), as Server-Sent Events: the last
//! [`TAIL_LINES`] lines (from at most [`TAIL_BYTES`] at the end of the
//! file), then each new line as it is written, one `event: line` each;
//! a rotation (the file shorter than what was read) starts again from its
//! top. Each event's data is `{"line": "..."}`, as the other streams send
//! one JSON object. Bounded like the event streams: it takes a follower slot (and one
//! of the client's), lines are cut at [`LINE_BYTES`], each check reads at
//! most [`READ_BYTES`], and a `:keep-alive` comment fills a silence.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::Extension;
use axum::extract::{Path as UrlPath, State};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use metacore::error::ApiError;
use metacore::layout::Daemon;
use metacore::shutdown::Shutdown;

use super::follower::Slots;
use super::frame::KEEPALIVE;
use super::hubs::Events;
use crate::conn::Conn;

/// Lines sent from the end of the file when a follower connects.
pub(crate) const TAIL_LINES: usize = 200;
/// Bytes read from the end of the file for them.
pub(crate) const TAIL_BYTES: u64 = 64 * 1024;
/// A longer line is cut here (and marked).
pub(crate) const LINE_BYTES: usize = 16 * 1024;
/// Bytes read at each check for growth.
const READ_BYTES: usize = 256 * 1024;
/// How often the file is looked at.
const POLL: Duration = Duration::from_millis(250);

/// The daemons whose logs may be followed.
fn daemon(name: &str) -> Result<Daemon, ApiError> {
    Daemon::ALL
        .iter()
        .copied()
        .find(|d| d.name() == name)
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "no daemon {name:?}: one of storaged, apid, watcherd, mountd"
            ))
        })
}

pub(crate) async fn follow(
    State(st): State<std::sync::Arc<crate::state::AppState>>,
    conn: Option<Extension<Conn>>,
    UrlPath(name): UrlPath<String>,
) -> Response {
    let daemon = match daemon(&name) {
        Ok(d) => d,
        Err(e) => return e.into_response(),
    };
    let slots = match super::take_slots(&st.events, conn.as_ref().map(|c| &c.0)) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let tail = Tail::open(
        st.config.log_dir.join(format!("{}.log", daemon.name())),
        &st.events,
        slots,
    );
    super::sse_body(tail.into_body())
}

/// One follower of a log file.
struct Tail {
    path: PathBuf,
    /// Bytes of the file read so far.
    offset: u64,
    /// The start of a line not ended yet.
    partial: Vec<u8>,
    /// The lines of the first answer, not sent yet.
    first: Option<Bytes>,
    keepalive: Duration,
    quiet: Duration,
    shutdown: Shutdown,
    _slots: Slots,
}

impl Tail {
    fn open(path: PathBuf, events: &Events, slots: Slots) -> Self {
        let (first, offset) = last_lines(&path);
        Self {
            path,
            offset,
            partial: Vec::new(),
            first: Some(first),
            keepalive: events.keepalive,
            quiet: Duration::ZERO,
            shutdown: events.shutdown.clone(),
            _slots: slots,
        }
    }

    fn into_body(self) -> axum::body::Body {
        let chunks = futures_util::stream::unfold(self, |mut t| async move {
            let chunk = t.next_chunk().await?;
            Some((Ok::<_, std::convert::Infallible>(chunk), t))
        });
        axum::body::Body::from_stream(chunks)
    }

    /// The next bytes to send; `None` ends the stream (apid stops).
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if let Some(first) = self.first.take()
            && !first.is_empty()
        {
            return Some(first);
        }
        loop {
            tokio::select! {
                () = self.shutdown.wait() => return None,
                () = tokio::time::sleep(POLL) => {}
            }
            let new = self.read_new();
            if !new.is_empty() {
                self.quiet = Duration::ZERO;
                return Some(new);
            }
            self.quiet += POLL;
            if self.quiet >= self.keepalive {
                self.quiet = Duration::ZERO;
                return Some(Bytes::from_static(KEEPALIVE));
            }
        }
    }

    /// The whole lines written since the last read, as events.
    fn read_new(&mut self) -> Bytes {
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return Bytes::new();
        };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            // Rotated: the new file from its top.
            self.offset = 0;
            self.partial.clear();
        }
        if len == self.offset || file.seek(SeekFrom::Start(self.offset)).is_err() {
            return Bytes::new();
        }
        let mut buf = Vec::with_capacity(READ_BYTES.min((len - self.offset) as usize));
        let read = (&mut file)
            .take(READ_BYTES as u64)
            .read_to_end(&mut buf)
            .unwrap_or(0);
        self.offset += read as u64;
        let mut out = BytesMut::new();
        let mut rest = &buf[..];
        while let Some(end) = rest.iter().position(|b| *b == b'\n') {
            self.partial.extend_from_slice(&rest[..end]);
            line_event(&mut out, &self.partial);
            self.partial.clear();
            rest = &rest[end + 1..];
        }
        self.partial.extend_from_slice(rest);
        if self.partial.len() > LINE_BYTES {
            line_event(&mut out, &self.partial);
            self.partial.clear();
        }
        out.freeze()
    }
}

/// The last [`TAIL_LINES`] whole lines of `path` as events, and its length.
fn last_lines(path: &Path) -> (Bytes, u64) {
    let Ok(mut file) = std::fs::File::open(path) else {
        return (Bytes::new(), 0);
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let from = len.saturating_sub(TAIL_BYTES);
    let mut buf = Vec::new();
    if file.seek(SeekFrom::Start(from)).is_err()
        || (&mut file).take(len - from).read_to_end(&mut buf).is_err()
    {
        return (Bytes::new(), len);
    }
    let mut lines: Vec<&[u8]> = buf.split(|b| *b == b'\n').collect();
    // The first is cut when the read began inside the file; the last is
    // what follows the last newline (empty, or a line not ended yet).
    if from > 0 && !lines.is_empty() {
        lines.remove(0);
    }
    let unfinished = lines.pop().map_or(0, <[u8]>::len);
    let skip = lines.len().saturating_sub(TAIL_LINES);
    let mut out = BytesMut::new();
    for line in &lines[skip..] {
        line_event(&mut out, line);
    }
    (out.freeze(), len - unfinished as u64)
}

/// `event: line` with `{"line": <the line>}` as its data, cut at
/// [`LINE_BYTES`] (and marked); JSON escapes control characters, so one
/// line is always one event.
fn line_event(out: &mut BytesMut, line: &[u8]) {
    let cut = line.len() > LINE_BYTES;
    let mut text = String::from_utf8_lossy(&line[..line.len().min(LINE_BYTES)]).into_owned();
    if cut {
        text.push_str(" [cut]");
    }
    out.put_slice(b"event: line\ndata: ");
    out.put_slice(serde_json::json!({ "line": text }).to_string().as_bytes());
    out.put_slice(b"\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(bytes: &[u8]) -> Vec<String> {
        std::str::from_utf8(bytes)
            .unwrap()
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let data = e.strip_prefix("event: line\ndata: ").unwrap();
                assert!(!data.contains('\n') && !data.contains('\r'), "{data:?}");
                let v: serde_json::Value = serde_json::from_str(data).unwrap();
                v["line"].as_str().unwrap().to_owned()
            })
            .collect()
    }

    #[test]
    fn the_first_answer_is_the_last_whole_lines_and_a_line_is_one_event() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        let mut text = String::new();
        for i in 0..300 {
            text.push_str(&format!("line {i}\n"));
        }
        text.push_str("not ended\ra");
        std::fs::write(&path, &text).unwrap();
        let (first, offset) = last_lines(&path);
        let got = events(&first);
        assert_eq!(got.len(), TAIL_LINES);
        assert_eq!(got[0], "line 100");
        assert_eq!(got[TAIL_LINES - 1], "line 299");
        assert_eq!(offset as usize, text.len() - "not ended\ra".len());
        let mut out = BytesMut::new();
        line_event(&mut out, "a\rb\u{1b}[0m".as_bytes());
        assert_eq!(events(&out), ["a\rb\u{1b}[0m"]);
        let mut out = BytesMut::new();
        line_event(&mut out, &vec![b'x'; LINE_BYTES + 10]);
        assert!(events(&out)[0].ends_with(" [cut]"));
    }
}
