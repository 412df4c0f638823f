//! One client cannot take apid's port (issue 23, point 4, finding N3):
//! each client (a source address) holds at most its share of connections
//! and of event streams, and event streams never take the connections
//! that `/health` and the other requests need. Clients are told apart by
//! their source address: the tests bind `127.0.0.x` (all of `127/8` is
//! loopback) for each.

use std::net::SocketAddr;

use e2e::wait::IO_DEADLINE;
use e2e::{Apid, Storaged};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const STREAMS_PER_CLIENT: usize = 4;
const CONNECTIONS_PER_CLIENT: usize = 16;
const CONNECTIONS: usize = 64;

async fn start() -> (Storaged, Apid) {
    let s = Storaged::start().await;
    let a = Apid::start_with(
        &s,
        &[
            ("META_CORE_HTTP_MAX_CONNECTIONS", &CONNECTIONS.to_string()),
            (
                "META_CORE_HTTP_MAX_CONNECTIONS_PER_CLIENT",
                &CONNECTIONS_PER_CLIENT.to_string(),
            ),
            (
                "META_CORE_SSE_MAX_FOLLOWERS_PER_CLIENT",
                &STREAMS_PER_CLIENT.to_string(),
            ),
            // Idle connections are held for the whole test, not cut.
            ("META_CORE_HTTP_HEADER_TIMEOUT_MS", "3600000"),
        ],
    )
    .await;
    (s, a)
}

/// A connection to apid from `127.0.0.<host>`.
async fn connect_from(host: u8, port: u16) -> TcpStream {
    let sock = TcpSocket::new_v4().unwrap();
    sock.bind(SocketAddr::from(([127, 0, 0, host], 0))).unwrap();
    tokio::time::timeout(IO_DEADLINE, sock.connect(([127, 0, 0, 1], port).into()))
        .await
        .expect("connect in time")
        .expect("connect")
}

/// Reads an answer's head (and what came with it) within the deadline.
async fn head(tcp: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(IO_DEADLINE, tcp.read(&mut buf))
            .await
            .expect("an answer in time")
            .expect("read");
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// `GET path` from `127.0.0.<host>`: the head of the answer, and the
/// connection (an event stream stays open while it is held).
async fn get_from(host: u8, port: u16, path: &str) -> (String, TcpStream) {
    let mut tcp = connect_from(host, port).await;
    tcp.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let answer = head(&mut tcp).await;
    (answer, tcp)
}

#[tokio::test]
async fn one_client_holds_its_share_of_streams_and_no_more() {
    let (_s, a) = start().await;
    let port = a.port();
    let greedy = 2;
    let mut held = Vec::new();
    for _ in 0..STREAMS_PER_CLIENT {
        let (answer, tcp) = get_from(greedy, port, "/api/events/meta").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        held.push(tcp);
    }
    // One stream more is a 429 for this client...
    let (answer, _) = get_from(greedy, port, "/api/events/meta").await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(answer.contains("too_many_requests"), "{answer}");
    assert!(
        answer.contains("META_CORE_SSE_MAX_FOLLOWERS_PER_CLIENT"),
        "{answer}"
    );
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1"),
        "{answer}"
    );
    // ...while another client follows as it likes.
    let (answer, _other) = get_from(3, port, "/api/events/meta").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // A stream given back is free for the greedy client again.
    drop(held.pop());
    let _again = e2e::wait::until("the greedy client's freed stream", IO_DEADLINE, || async {
        let (answer, tcp) = get_from(greedy, port, "/api/events/meta").await;
        answer.starts_with("HTTP/1.1 200").then_some(tcp)
    })
    .await;
}

#[tokio::test]
async fn one_client_holds_its_share_of_connections_and_no_more() {
    let (_s, a) = start().await;
    let port = a.port();
    let greedy = 4;
    // Its whole share, each connection served (then kept alive, held).
    let mut held = Vec::new();
    for i in 0..CONNECTIONS_PER_CLIENT {
        let (answer, tcp) = get_from(greedy, port, "/health").await;
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "connection {i}: {answer}"
        );
        held.push(tcp);
    }
    // The next one is answered 429 at once, unread, and closed.
    let mut refused = connect_from(greedy, port).await;
    let answer = head(&mut refused).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(
        answer.contains("META_CORE_HTTP_MAX_CONNECTIONS_PER_CLIENT"),
        "{answer}"
    );
    let mut rest = Vec::new();
    let n = tokio::time::timeout(IO_DEADLINE, refused.read_to_end(&mut rest))
        .await
        .expect("closed in time");
    assert!(n.is_ok(), "the refused connection is closed: {n:?}");
    // Connections that never send a header from another client are its
    // own share; the health probe, from elsewhere again, is answered.
    let mut idle = Vec::new();
    for _ in 0..CONNECTIONS_PER_CLIENT {
        idle.push(connect_from(5, port).await);
    }
    let (answer, _) = get_from(1, port, "/health").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // A connection given back is free for the greedy client again.
    drop(held.pop());
    let _again = e2e::wait::until(
        "the greedy client's freed connection",
        IO_DEADLINE,
        || async {
            let (answer, tcp) = get_from(greedy, port, "/health").await;
            answer.starts_with("HTTP/1.1 200").then_some(tcp)
        },
    )
    .await;
}

#[tokio::test]
async fn event_streams_leave_connections_for_everything_else() {
    let (_s, a) = start().await;
    let port = a.port();
    // Streams from many clients take at most seven eighths of the table.
    let max_streams = CONNECTIONS - CONNECTIONS / 8;
    let mut streams = Vec::new();
    let mut overloaded = 0;
    'clients: for host in 10..250u8 {
        for _ in 0..STREAMS_PER_CLIENT {
            let (answer, tcp) = get_from(host, port, "/api/events/files").await;
            if answer.starts_with("HTTP/1.1 503") {
                assert!(answer.contains("overloaded"), "{answer}");
                overloaded += 1;
                break 'clients;
            }
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            streams.push(tcp);
        }
    }
    assert_eq!((streams.len(), overloaded), (max_streams, 1));
    // What is left serves requests.
    for host in [1, 2, 3] {
        let (answer, _) = get_from(host, port, "/health").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let (answer, _) = get_from(host, port, "/urls").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
}

#[tokio::test]
async fn an_extra_port_serves_the_same_api_within_the_same_shares() {
    let s = Storaged::start().await;
    let extra = e2e::apid::free_port();
    let a = Apid::start_with(
        &s,
        &[
            (
                "META_CORE_HTTP_MAX_CONNECTIONS_PER_CLIENT",
                &CONNECTIONS_PER_CLIENT.to_string(),
            ),
            ("META_CORE_HTTP_EXTRA_PORTS", &extra.to_string()),
            ("META_CORE_HTTP_HEADER_TIMEOUT_MS", "3600000"),
        ],
    )
    .await;
    // A record written through one port is read through the other.
    let cid = e2e::fixtures::random_midhash();
    let (answer, _) = get_from(1, extra, "/health").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let (main, also) = (e2e::apid::Http::new(a.port()), e2e::apid::Http::new(extra));
    let r = main
        .send_json(
            "PATCH",
            &format!("/meta/{cid}"),
            &serde_json::json!({"title": "Both ports"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = also.get(&format!("/meta/{cid}/title")).await;
    assert_eq!((r.status, r.text()), (200, "Both ports".to_owned()));
    // One client's share counts its connections on both ports.
    let greedy = 6;
    let mut held = Vec::new();
    for i in 0..CONNECTIONS_PER_CLIENT {
        let port = if i % 2 == 0 { a.port() } else { extra };
        let (answer, tcp) = get_from(greedy, port, "/health").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{i}: {answer}");
        held.push(tcp);
    }
    for port in [a.port(), extra] {
        let mut refused = connect_from(greedy, port).await;
        let answer = head(&mut refused).await;
        assert!(answer.starts_with("HTTP/1.1 429"), "port {port}: {answer}");
    }
}
