//! One HTTP/1.1 exchange over a Unix socket, as a one-shot caller needs
//! it: one request with `Connection: close`, the whole answer read until
//! the peer closes, then its status and body. The operator CLI uses it
//! blocking (no async runtime to build for one call) and the health checks
//! use it on the supervisor's runtime; both speak to axum servers, which
//! close the connection after answering such a request.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The most an answer may hold: the status table of a tree is a few KiB.
pub(crate) const MAX_ANSWER: u64 = 1 << 20;

/// The request's bytes. `host` names the peer in the `Host` header.
pub(crate) fn request(method: &str, path: &str, host: &str) -> Vec<u8> {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    )
    .into_bytes()
}

/// Sends `request` on `socket` and reads the answer, blocking.
pub(crate) fn exchange(socket: &Path, request: &[u8]) -> io::Result<Vec<u8>> {
    let mut stream = UnixStream::connect(socket)?;
    stream.write_all(request)?;
    // Room for a status table at once: one read instead of a doubling
    // series of small ones.
    let mut answer = Vec::with_capacity(16 * 1024);
    stream.take(MAX_ANSWER + 1).read_to_end(&mut answer)?;
    too_long(&answer)?;
    Ok(answer)
}

/// [`exchange`] on the async runtime.
pub(crate) async fn exchange_async(socket: &Path, request: &[u8]) -> io::Result<Vec<u8>> {
    let mut stream = tokio::net::UnixStream::connect(socket).await?;
    stream.write_all(request).await?;
    let mut answer = Vec::with_capacity(1024);
    stream.take(MAX_ANSWER + 1).read_to_end(&mut answer).await?;
    too_long(&answer)?;
    Ok(answer)
}

fn too_long(answer: &[u8]) -> io::Result<()> {
    if answer.len() as u64 > MAX_ANSWER {
        return Err(io::Error::other(format!(
            "the answer is longer than {MAX_ANSWER} bytes"
        )));
    }
    Ok(())
}

/// The status code and body of a whole answer (`Content-Length`,
/// `Transfer-Encoding: chunked`, or the bytes until the close).
pub(crate) fn parse(answer: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = find(answer, b"\r\n\r\n").ok_or("the answer has no complete header")?;
    let head = std::str::from_utf8(&answer[..end]).map_err(|_| "the header is not text")?;
    let rest = &answer[end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .strip_prefix("HTTP/1.")
        .and_then(|s| s.get(2..5))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| format!("not an HTTP/1 status line: {status_line:?}"))?;
    let (mut length, mut chunked) = (None, false);
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.parse::<usize>().map_err(|_| "a bad Content-Length")?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.eq_ignore_ascii_case("chunked");
        }
    }
    let body = if chunked {
        unchunk(rest)?
    } else if let Some(n) = length {
        rest.get(..n).ok_or("the answer ends early")?.to_vec()
    } else {
        rest.to_vec()
    };
    Ok((status, body))
}

/// Joins the chunks of a chunked body.
fn unchunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let eol = find(rest, b"\r\n").ok_or("a chunk has no size line")?;
        let size = std::str::from_utf8(&rest[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok())
            .ok_or("a bad chunk size")?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok(body);
        }
        body.extend_from_slice(rest.get(..size).ok_or("a chunk ends early")?);
        rest = rest.get(size + 2..).ok_or("a chunk ends early")?;
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_answers_axum_gives() {
        let ok = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{\"a\":true}\n";
        assert_eq!(parse(ok).unwrap(), (200, b"{\"a\":true}\n".to_vec()));
        let chunked =
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nnot \r\n5\r\nfound\r\n0\r\n\r\n";
        assert_eq!(parse(chunked).unwrap(), (404, b"not found".to_vec()));
        let until_close = b"HTTP/1.0 500 Oops\r\n\r\nbody";
        assert_eq!(parse(until_close).unwrap(), (500, b"body".to_vec()));
        for bad in [
            &b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort"[..],
            b"SSH-2.0-OpenSSH\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn the_request_closes_the_connection() {
        let r = String::from_utf8(request("POST", "/restart/apid", "meta-core")).unwrap();
        assert!(r.starts_with("POST /restart/apid HTTP/1.1\r\n"), "{r}");
        assert!(r.contains("\r\nConnection: close\r\n") && r.ends_with("\r\n\r\n"));
    }
}
