//! One client cannot take every WebDAV slot (review finding 5): uploads
//! and copies run 16 at once and listings 32, and one client (an IPv4
//! address) runs at most 4 uploads and copies and 8 listings of them;
//! past its share it is a 429 `too_many_requests` at once, while another
//! client is served.

use e2e::raw_http::RawResponse;
use e2e::wait::{DAEMON_DEADLINE, IO_DEADLINE, until, within};
use e2e::{Apid, Storaged};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::webdav_raw::{OTHER, THIRD, connect, exchange};

/// Uploads and copies per client (`UPLOADS_PER_CLIENT` in apid's
/// `dav/turns.rs`).
const UPLOADS_PER_CLIENT: usize = 4;
/// Listings per client (`LISTINGS_PER_CLIENT`).
const LISTINGS_PER_CLIENT: usize = 8;

/// An apid whose request bodies and slow readers are waited for an hour:
/// what a client holds here, it holds for the whole test.
async fn start() -> (Storaged, Apid) {
    let s = Storaged::start().await;
    let a = Apid::start_with(
        &s,
        &[
            ("META_CORE_HTTP_BODY_TIMEOUT_MS", "3600000"),
            ("META_CORE_HTTP_WRITE_STALL_MS", "3600000"),
        ],
    )
    .await;
    std::fs::create_dir_all(a.files_path().join("plugin")).unwrap();
    (s, a)
}

/// A PUT of `path` from `from` that sends one byte of its 1,000 and then
/// nothing: a body trickling slower than anyone waits for. It asks
/// `Expect: 100-continue`, so the `100 Continue` says that apid has begun
/// to read the body: the upload has its turn.
async fn trickling(a: &Apid, from: std::net::IpAddr, path: &str) -> TcpStream {
    let mut tcp = connect(from, a.port()).await;
    let head = format!(
        "PUT {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n"
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut answer = [0u8; 25];
    within(
        "the upload's 100 Continue",
        IO_DEADLINE,
        tcp.read_exact(&mut answer),
    )
    .await
    .unwrap();
    assert_eq!(&answer, b"HTTP/1.1 100 Continue\r\n\r\n");
    tcp.write_all(b"x").await.unwrap();
    tcp
}

/// A whole small PUT of `path` from `from`.
async fn put(a: &Apid, from: std::net::IpAddr, path: &str) -> RawResponse {
    let head = format!("PUT {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 5");
    exchange(from, a.port(), &head, &[b"hello"], IO_DEADLINE).await
}

#[tokio::test]
async fn one_client_runs_a_bounded_share_of_the_uploads() {
    let (_s, a) = start().await;
    let mut held = Vec::new();
    for i in 0..UPLOADS_PER_CLIENT {
        held.push(trickling(&a, OTHER, &format!("/webdav/plugin/slow{i}")).await);
    }
    // That client's next upload is refused at once.
    let r = put(&a, OTHER, "/webdav/plugin/fifth").await;
    r.assert_error(429, "too_many_requests");
    assert!(r.header("retry-after").is_some());
    assert!(r.text().contains('4'), "{}", r.text());
    // A COPY shares the uploads' slots.
    std::fs::write(a.files_path().join("plugin/src.txt"), b"src").unwrap();
    let head =
        "COPY /webdav/plugin/src.txt HTTP/1.1\r\nHost: x\r\nDestination: /webdav/plugin/dst.txt";
    exchange(OTHER, a.port(), head, &[], IO_DEADLINE)
        .await
        .assert_error(429, "too_many_requests");
    // Another client uploads while the four are held.
    assert_eq!(put(&a, THIRD, "/webdav/plugin/theirs").await.status, 201);
    assert_eq!(
        std::fs::read(a.files_path().join("plugin/theirs")).unwrap(),
        b"hello"
    );
    // One of the four gone, the first client has a turn again.
    drop(held.pop());
    until(
        "an upload ended gives its turn back",
        DAEMON_DEADLINE,
        || async { (put(&a, OTHER, "/webdav/plugin/again").await.status == 201).then_some(()) },
    )
    .await;
}

/// A PROPFIND of `path` from `from` whose answer is read only as far as
/// its status line: a client that stopped reading.
async fn stalled_listing(a: &Apid, from: std::net::IpAddr, path: &str) -> TcpStream {
    let mut tcp = connect(from, a.port()).await;
    let head =
        format!("PROPFIND {path} HTTP/1.1\r\nHost: x\r\nDepth: 1\r\nContent-Length: 0\r\n\r\n");
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut first = [0u8; 12];
    within(
        "the listing's status line",
        IO_DEADLINE,
        tcp.read_exact(&mut first),
    )
    .await
    .unwrap();
    assert_eq!(&first, b"HTTP/1.1 207");
    tcp
}

async fn propfind(a: &Apid, from: std::net::IpAddr, path: &str) -> RawResponse {
    let head = format!("PROPFIND {path} HTTP/1.1\r\nHost: x\r\nDepth: 0\r\nContent-Length: 0");
    exchange(from, a.port(), &head, &[], IO_DEADLINE).await
}

#[tokio::test]
async fn one_client_runs_a_bounded_share_of_the_listings() {
    let (_s, a) = start().await;
    // A folder whose listing is more than the socket buffers hold, so a
    // client that stops reading keeps it running.
    let big = a.files_path().join("plugin/big");
    std::fs::create_dir_all(&big).unwrap();
    let long = "n".repeat(200);
    for i in 0..LISTING_ENTRIES {
        std::fs::File::create(big.join(format!("{long}-{i}"))).unwrap();
    }
    let mut held = Vec::new();
    for _ in 0..LISTINGS_PER_CLIENT {
        held.push(stalled_listing(&a, OTHER, "/webdav/plugin/big/").await);
    }
    let r = propfind(&a, OTHER, "/webdav/plugin/").await;
    r.assert_error(429, "too_many_requests");
    assert!(r.header("retry-after").is_some());
    // Another client lists while they are held.
    assert_eq!(propfind(&a, THIRD, "/webdav/plugin/").await.status, 207);
    // One of them gone, the first client lists again.
    drop(held.pop());
    until(
        "a listing ended gives its turn back",
        DAEMON_DEADLINE,
        || async { (propfind(&a, OTHER, "/webdav/plugin/").await.status == 207).then_some(()) },
    )
    .await;
}

/// Entries of the folder a stalled listing lists.
const LISTING_ENTRIES: usize = 40_000;
