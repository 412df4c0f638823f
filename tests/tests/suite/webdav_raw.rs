//! Requests written by hand for the WebDAV tests: a head apid may answer
//! before the body (507), a body sent in pieces, chunked or stalled, and
//! a connection from another loopback address (another client, as the
//! per-client budgets count them).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use e2e::raw_http::RawResponse;
use e2e::wait::within;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// 127.0.0.1: the client the harness's own requests come from.
pub(crate) const HERE: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// Another client on the same machine.
pub(crate) const OTHER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
/// A third one.
pub(crate) const THIRD: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));

/// A connection to apid's port from `from`.
pub(crate) async fn connect(from: IpAddr, port: u16) -> TcpStream {
    let sock = TcpSocket::new_v4().expect("a socket");
    sock.bind(SocketAddr::new(from, 0))
        .expect("bind a loopback address");
    sock.connect(SocketAddr::new(HERE, port))
        .await
        .expect("connect to apid")
}

/// `head` (request line and headers, without the blank line; a
/// `Connection: close` is added), then the `pieces` of the body one by
/// one; the answer, read to the end. A write the server refused to read
/// (it answered first) is not an error.
pub(crate) async fn exchange(
    from: IpAddr,
    port: u16,
    head: &str,
    pieces: &[&[u8]],
    deadline: Duration,
) -> RawResponse {
    within(head, deadline, async {
        let mut tcp = connect(from, port).await;
        let head = format!("{head}\r\nConnection: close\r\n\r\n");
        let (mut rd, mut wr) = tcp.split();
        let write = async {
            let _ = wr.write_all(head.as_bytes()).await;
            for p in pieces {
                if wr.write_all(p).await.is_err() {
                    break;
                }
                let _ = wr.flush().await;
            }
        };
        let mut raw = Vec::new();
        let read = rd.read_to_end(&mut raw);
        let ((), _) = tokio::join!(write, read);
        parse(&raw)
    })
    .await
}

/// A whole HTTP/1.1 answer: status, headers, body (by its length, chunked
/// or to the end).
pub(crate) fn parse(raw: &[u8]) -> RawResponse {
    let text = String::from_utf8_lossy(raw);
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no answer head in {text:?}"));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut r = RawResponse {
        status,
        headers,
        body: Vec::new(),
    };
    let rest = &raw[end + 4..];
    r.body = if r
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        dechunk(rest)
    } else if let Some(n) = r
        .header("content-length")
        .and_then(|n| n.parse::<usize>().ok())
    {
        rest[..n.min(rest.len())].to_vec()
    } else {
        rest.to_vec()
    };
    r
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&rest[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok())
            .unwrap_or(0);
        rest = &rest[eol + 2..];
        if size == 0 || rest.len() < size {
            break;
        }
        out.extend_from_slice(&rest[..size]);
        rest = rest.get(size + 2..).unwrap_or_default();
    }
    out
}

/// One chunk of a chunked body.
pub(crate) fn chunk(bytes: &[u8]) -> Vec<u8> {
    let mut c = format!("{:x}\r\n", bytes.len()).into_bytes();
    c.extend_from_slice(bytes);
    c.extend_from_slice(b"\r\n");
    c
}
