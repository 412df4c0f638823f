//! A minimal HTTP/1.1 client over a Unix socket (or TCP), for what the typed client
//! cannot or should not send: malformed bodies, paths with `..`, `//` or
//! `%00` exactly as written, oversized bodies. One request per connection
//! (`Connection: close`); the body is written while the answer is read, so
//! a server that answers before reading everything (413) is seen as it is.

use std::path::Path;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

use crate::wait::{IO_DEADLINE, within};

/// An answer as received.
#[derive(Debug, Clone)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy UTF-8).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON, or a panic that shows it.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// Panics unless this is `status` with the error envelope of the
    /// contract: exactly `error` (= `slug`), a non-empty `message` and
    /// `retryable` (false for a 4xx).
    pub fn assert_error(&self, status: u16, slug: &str) {
        let text = String::from_utf8_lossy(&self.body);
        assert_eq!(
            self.status, status,
            "status of an answer whose body is {text}"
        );
        let v = self.json();
        let obj = v
            .as_object()
            .unwrap_or_else(|| panic!("the envelope is not an object: {text}"));
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["error", "message", "retryable"],
            "envelope keys of {text}"
        );
        assert_eq!(v["error"], slug, "slug of {text}");
        assert!(
            v["message"].as_str().is_some_and(|m| !m.trim().is_empty()),
            "message of {text}"
        );
        // As the error table has it (429 is a retryable 4xx).
        let retryable =
            metacore::ErrorCode::from_slug(slug).map_or(status >= 500, |code| code.retryable());
        assert_eq!(
            v["retryable"],
            Value::Bool(retryable),
            "retryable of {text}"
        );
        assert!(
            self.header("content-type")
                .is_some_and(|c| c.starts_with("application/json")),
            "content type of an error: {:?}",
            self.header("content-type")
        );
    }
}

/// Sends one request and reads the whole answer (bounded).
pub async fn request(
    socket: &Path,
    method: &str,
    target: &str,
    body: Option<&[u8]>,
) -> RawResponse {
    let what = format!("{method} {target}");
    within(
        &what,
        IO_DEADLINE,
        exchange(socket, method, target, body.map(<[u8]>::to_vec)),
    )
    .await
}

/// The same over TCP (`addr` is `host:port`), for apid's public port.
pub async fn request_tcp(
    addr: &str,
    method: &str,
    target: &str,
    body: Option<&[u8]>,
) -> RawResponse {
    let what = format!("{method} {target}");
    within(&what, IO_DEADLINE, async {
        let stream = TcpStream::connect(addr)
            .await
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        exchange_on(stream, method, target, body.map(<[u8]>::to_vec)).await
    })
    .await
}

async fn exchange(socket: &Path, method: &str, target: &str, body: Option<Vec<u8>>) -> RawResponse {
    let stream = UnixStream::connect(socket)
        .await
        .unwrap_or_else(|e| panic!("connect {}: {e}", socket.display()));
    exchange_on(stream, method, target, body).await
}

async fn exchange_on<S>(stream: S, method: &str, target: &str, body: Option<Vec<u8>>) -> RawResponse
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut rd, mut wr) = tokio::io::split(stream);
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: storaged\r\nConnection: close\r\n");
    if let Some(b) = &body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    head.push_str("\r\n");
    // The server may answer and close before it has read the body: a
    // failed write is then expected, the answer is what counts.
    let writer = tokio::spawn(async move {
        let _ = wr.write_all(head.as_bytes()).await;
        if let Some(b) = body {
            let _ = wr.write_all(&b).await;
        }
        let _ = wr.flush().await;
        wr
    });
    let mut raw = Vec::new();
    // A reset after the answer arrived is fine; the answer is parsed below.
    let _ = rd.read_to_end(&mut raw).await;
    drop(writer.await);
    parse(&raw).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&raw)))
}

/// Parses a whole HTTP/1.1 answer (Content-Length, chunked, or to EOF).
fn parse(raw: &[u8]) -> Result<RawResponse, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of headers")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or("no status line")?;
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let rest = &raw[end + 4..];
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.clone())
    };
    let body = if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        dechunk(rest)?
    } else if let Some(len) = get("content-length") {
        let len: usize = len.parse().map_err(|_| "bad content-length")?;
        rest.get(..len)
            .ok_or("body shorter than its content-length")?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Ok(RawResponse {
        status,
        headers,
        body,
    })
}

fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("unterminated chunk size")?;
        let size_text = std::str::from_utf8(&rest[..eol]).map_err(|_| "chunk size is not text")?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(rest.get(..size).ok_or("chunk shorter than its size")?);
        rest = rest.get(size + 2..).ok_or("chunk without its CRLF")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_body_framings() {
        let r = parse(b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\nX: y\r\n\r\n{}").unwrap();
        assert_eq!(
            (r.status, r.body.as_slice(), r.header("x")),
            (404, &b"{}"[..], Some("y"))
        );
        let r =
            parse(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").unwrap();
        assert_eq!(r.body, b"abcde");
        assert!(parse(b"HTTP/1.1 200 OK\r\n").is_err());
    }
}
