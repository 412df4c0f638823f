//! Slow clients cannot hold apid's connections: unfinished headers and
//! stalled bodies are cut off after their timeouts, and connections are
//! capped, while an SSE stream that is quiet between events stays open
//! (issue 13, point 3).

use std::time::Duration;

use e2e::fixtures::random_rid;
use e2e::sse::{Follower, Next};
use e2e::{Apid, Storaged};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn start() -> (Storaged, Apid) {
    let s = Storaged::start().await;
    let a = Apid::start_with(
        &s,
        &[
            ("META_CORE_HTTP_HEADER_TIMEOUT_MS", "300"),
            ("META_CORE_HTTP_BODY_TIMEOUT_MS", "300"),
            ("META_CORE_HTTP_MAX_CONNECTIONS", "16"),
        ],
    )
    .await;
    (s, a)
}

/// Reads until the peer closes or `within` passes; what came, and
/// whether it closed.
async fn read_until_closed(tcp: &mut TcpStream, within: Duration) -> (String, bool) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(end, tcp.read(&mut buf)).await {
            Err(_) => return (String::from_utf8_lossy(&got).into_owned(), false),
            Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&got).into_owned(), true),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test]
async fn unfinished_headers_and_stalled_bodies_are_cut_off() {
    let (_s, a) = start().await;
    // Half a request head, then nothing.
    let mut tcp = TcpStream::connect(("127.0.0.1", a.port())).await.unwrap();
    tcp.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow:")
        .await
        .unwrap();
    let (_, closed) = read_until_closed(&mut tcp, Duration::from_secs(10)).await;
    assert!(closed, "a connection with unfinished headers stays open");

    // A body that stops after 10 of its 100 bytes.
    let rid = random_rid();
    let mut tcp = TcpStream::connect(("127.0.0.1", a.port())).await.unwrap();
    tcp.write_all(
        format!(
            "PATCH /meta/{rid} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
             Content-Length: 100\r\n\r\n{{\"title\":"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let (answer, closed) = read_until_closed(&mut tcp, Duration::from_secs(10)).await;
    assert!(
        closed || answer.starts_with("HTTP/1.1 4"),
        "a stalled body is waited for: {answer:?}"
    );
    assert!(!answer.starts_with("HTTP/1.1 2"), "{answer}");
    a.get(&format!("/meta/{rid}"))
        .await
        .assert_error(404, "unknown_root");
}

#[tokio::test]
async fn a_quiet_event_stream_is_not_cut_off() {
    let (_s, a) = start().await;
    let mut f = Follower::connect(a.port(), "/api/events/meta", None).await;
    assert_eq!(f.status, 200);
    // Ten times the header and body timeouts without an event.
    assert!(matches!(f.next(Duration::from_secs(3)).await, Next::Quiet));
    let rid = random_rid();
    a.ok_json("PATCH", &format!("/meta/{rid}"), &json!({"title": "late"}))
        .await;
    let e = f.event().await;
    assert!(e.data.to_string().contains(&rid.to_string()), "{}", e.data);
}

#[tokio::test]
async fn connections_past_the_cap_wait_for_one_to_end() {
    let (_s, a) = start().await;
    // Event streams take at most seven eighths of the sixteen connections.
    let mut held = Vec::new();
    for _ in 0..14 {
        let f = Follower::connect(a.port(), "/api/events/meta", None).await;
        assert_eq!(f.status, 200);
        held.push(f);
    }
    let refused = a.get("/api/events/meta").await;
    refused.assert_error(503, "overloaded");
    // The rest is left for other requests...
    assert_eq!(a.get("/health").await.status, 200);
    // ...until two downloads nobody reads hold it too.
    std::fs::create_dir_all(a.files_path().join("plugin")).unwrap();
    std::fs::write(a.files_path().join("plugin/big"), vec![7u8; 32 << 20]).unwrap();
    let mut downloads = Vec::new();
    for _ in 0..2 {
        let mut tcp = TcpStream::connect(("127.0.0.1", a.port())).await.unwrap();
        tcp.write_all(b"GET /webdav/plugin/big HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut first = [0u8; 12];
        tcp.read_exact(&mut first).await.unwrap();
        assert_eq!(&first, b"HTTP/1.1 200");
        downloads.push(tcp);
    }
    // The seventeenth is not served while they are...
    let mut tcp = TcpStream::connect(("127.0.0.1", a.port())).await.unwrap();
    tcp.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let (answer, _) = read_until_closed(&mut tcp, Duration::from_secs(1)).await;
    assert!(answer.is_empty(), "served past the cap: {answer}");
    // ...and is once one ends.
    drop(held.pop());
    let (answer, _) = read_until_closed(&mut tcp, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
}
