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
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::Duration;

use axum::Extension;
use axum::extract::{Path as UrlPath, State};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use metacore::error::ApiError;
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

pub(crate) async fn follow(
    State(st): State<std::sync::Arc<crate::state::AppState>>,
    conn: Option<Extension<Conn>>,
    UrlPath(name): UrlPath<String>,
) -> Response {
    let daemon = match crate::routes::daemons::daemon(&name) {
        Ok(d) => d,
        Err(e) => return e.into_response(),
    };
    let path = st.config.log_dir.join(format!("{}.log", daemon.name()));
    if !path.is_file() {
        return ApiError::not_found(format!(
            "{} has no log here (apid runs without the supervisor?)",
            daemon.name()
        ))
        .into_response();
    }
    let slots = match super::take_slots(&st.events, conn.as_ref().map(|c| &c.0)) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let tail = Tail::open(path, &st.events, slots);
    super::sse_body(tail.into_body())
}

/// One follower of a log file.
struct Tail {
    reader: Reader,
    /// The lines of the first answer, not sent yet.
    first: Option<Bytes>,
    keepalive: Duration,
    quiet: Duration,
    shutdown: Shutdown,
    _slots: Slots,
}

/// Where a follower is in a log file.
struct Reader {
    path: PathBuf,
    /// The file being read, held open: a rotation renames it, and what
    /// was written to it before is read to its end before the new one.
    file: Option<std::fs::File>,
    /// Bytes of `file` read so far.
    offset: u64,
    /// The start of a line not ended yet (at most [`LINE_BYTES`]).
    partial: Vec<u8>,
    /// A line past [`LINE_BYTES`] was sent cut; the rest of it is skipped.
    skipping: bool,
}

impl Tail {
    fn open(path: PathBuf, events: &Events, slots: Slots) -> Self {
        let (reader, first) = Reader::open(path);
        Self {
            reader,
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
            let new = self.reader.read_new();
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
}

impl Reader {
    /// At the end of `path`'s last whole line; the last lines, as events.
    fn open(path: PathBuf) -> (Self, Bytes) {
        let file = std::fs::File::open(&path).ok();
        let (first, offset) = file.as_ref().map_or((Bytes::new(), 0), last_lines);
        let reader = Self {
            path,
            file,
            offset,
            partial: Vec::new(),
            skipping: false,
        };
        (reader, first)
    }

    /// The whole lines written since the last read, as events: from the
    /// held file to its end, then, once the path holds another file (a
    /// rotation), from that one's top.
    fn read_new(&mut self) -> Bytes {
        let mut out = BytesMut::new();
        if let Some(file) = self.file.as_mut() {
            let mut buf = Vec::new();
            let read = file
                .seek(SeekFrom::Start(self.offset))
                .and_then(|_| file.take(READ_BYTES as u64).read_to_end(&mut buf))
                .unwrap_or(0);
            self.offset += read as u64;
            self.lines(&buf, &mut out);
            if read == READ_BYTES {
                return out.freeze();
            }
        }
        let held = self.file.as_ref().and_then(|f| f.metadata().ok());
        let at_path = std::fs::metadata(&self.path).ok();
        let rotated = match (&held, &at_path) {
            (Some(h), Some(p)) => (h.dev(), h.ino()) != (p.dev(), p.ino()) || p.len() < self.offset,
            (None, Some(_)) => true,
            _ => false,
        };
        if rotated && let Ok(next) = std::fs::File::open(&self.path) {
            self.file = Some(next);
            self.offset = 0;
            self.partial.clear();
            self.skipping = false;
        }
        out.freeze()
    }

    /// Events for the whole lines of `buf` (after what `partial` holds).
    fn lines(&mut self, mut buf: &[u8], out: &mut BytesMut) {
        while let Some(end) = buf.iter().position(|b| *b == b'\n') {
            if !self.skipping {
                self.take(&buf[..end], out);
                if !self.skipping {
                    line_event(out, &self.partial);
                }
            }
            self.partial.clear();
            self.skipping = false;
            buf = &buf[end + 1..];
        }
        if !self.skipping {
            self.take(buf, out);
        }
    }

    /// Adds `part` to the line begun; a line reaching [`LINE_BYTES`] is
    /// sent cut and its rest skipped.
    fn take(&mut self, part: &[u8], out: &mut BytesMut) {
        let room = LINE_BYTES - self.partial.len();
        if part.len() < room {
            self.partial.extend_from_slice(part);
            return;
        }
        self.partial.extend_from_slice(&part[..room]);
        self.partial.push(b'x'); // one more byte: line_event marks it cut
        line_event(out, &self.partial);
        self.partial.clear();
        self.skipping = true;
    }
}

/// The last [`TAIL_LINES`] whole lines of `file` as events, and where the
/// next read starts (after the last whole line).
fn last_lines(mut file: &std::fs::File) -> (Bytes, u64) {
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
        let (first, offset) = last_lines(&std::fs::File::open(&path).unwrap());
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

    #[test]
    fn new_lines_are_followed_across_a_rotation_and_a_long_line_is_cut_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        std::fs::write(&path, "old 1\n").unwrap();
        let (mut r, first) = Reader::open(path.clone());
        assert_eq!(events(&first), ["old 1"]);
        let append = |text: &str| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            f.write_all(text.as_bytes()).unwrap();
        };
        append("old 2\nhalf");
        assert_eq!(events(&r.read_new()), ["old 2"]);
        // Written to the old file just before it is renamed away: still read.
        append(" a line\nlast of the old\n");
        std::fs::rename(&path, dir.path().join("x.log.1")).unwrap();
        std::fs::write(&path, "new 1\n").unwrap();
        assert_eq!(events(&r.read_new()), ["half a line", "last of the old"]);
        assert_eq!(events(&r.read_new()), ["new 1"]);
        // One line past the cut, in two writes: one event, marked.
        append(&"y".repeat(LINE_BYTES - 10));
        assert!(r.read_new().is_empty());
        append(&format!("{}\nafter\n", "z".repeat(100)));
        let got = events(&r.read_new());
        assert_eq!(
            got.len(),
            2,
            "{:?}",
            got.iter().map(String::len).collect::<Vec<_>>()
        );
        assert!(got[0].ends_with(" [cut]") && got[0].len() == LINE_BYTES + 6);
        assert_eq!(got[1], "after");
    }
}
