//! `/api/events/meta` and `/api/events/files` followed by a real SSE
//! client over real HTTP: the wire form, every kind of start position,
//! the `meta` snapshot, keep-alives, fan-out, a follower too slow to keep
//! up, and storaged or apid dying under followers. What followers receive
//! is compared with the entries committed in the database.

use std::collections::BTreeSet;
use std::time::Duration;

use e2e::daemon::{Launch, test_dir};
use e2e::fixtures::{fields, random_rid, stream_entry};
use e2e::openapi::{check_component, document};
use e2e::sse::{Follower, Next, Received, connect_all};
use e2e::wait::IO_DEADLINE;
use e2e::{Apid, Storaged};
use metacore::api::storaged::{EntriesQuery, RangeQuery, StoragedClient};
use metacore::stream::{Entry, StreamId, StreamName};
use serde_json::json;

const META: &str = "/api/events/meta";
const FILES: &str = "/api/events/files";

async fn start() -> (Storaged, Apid) {
    let s = Storaged::start().await;
    let a = Apid::start(&s).await;
    (s, a)
}

/// Both daemons, storaged keeping 5 entries per stream and trimming at
/// every append (the dir lives as long as the first handle).
async fn start_retaining_five() -> (tempfile::TempDir, Storaged, Apid) {
    let dir = test_dir();
    let s = Launch::in_dir(dir.path())
        .env("META_CORE_STREAM_RETENTION", "5")
        .env("META_CORE_STREAM_TRIM_EVERY", "1")
        .start()
        .await;
    // A follower the tests hold up on purpose is not cut off however long
    // a busy machine takes to write what comes after.
    let a = Apid::start_with(&s, &[("META_CORE_HTTP_WRITE_STALL_MS", "3600000")]).await;
    (dir, s, a)
}

/// Every entry of a stream after `after`, read from storaged.
async fn committed(c: &StoragedClient, stream: StreamName, after: StreamId) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    loop {
        let q = EntriesQuery {
            after: Some(out.last().map_or(after, |e| e.id)),
            limit: Some(1000),
        };
        let page = c.entries(stream, &q).await.expect("read entries");
        if page.is_empty() {
            return out;
        }
        out.extend(page);
    }
}

/// The head of a stream (its last ID).
async fn head(c: &StoragedClient, stream: StreamName) -> StreamId {
    c.stream_info(stream)
        .await
        .expect("stream info")
        .last
        .unwrap_or(StreamId::ZERO)
}

/// `(id, type, key)` of a received `meta` event.
fn meta_of(e: &Received) -> (String, String, String) {
    (e.id.clone(), e.event.clone(), e.field("key").to_owned())
}

/// `(id, type, key)` of a committed `meta:events` entry.
fn meta_entry(e: &Entry) -> (String, String, String) {
    (
        e.id.to_string(),
        e.fields["type"].clone(),
        e.fields["key"].clone(),
    )
}

/// `batches` PATCHes of `per` fields with 1,000-byte names on one record:
/// `batches * per` `set` events of about 1.1 KB each, to fill socket
/// buffers.
async fn write_long_fields(a: &Apid, rid: &str, batches: usize, per: usize) {
    let long = "x".repeat(1000);
    for batch in 0..batches {
        let body: serde_json::Map<String, serde_json::Value> = (0..per)
            .map(|i| (format!("{long}{}", batch * per + i), json!("v")))
            .collect();
        a.ok_json("PATCH", &format!("/meta/{rid}"), &body.into())
            .await;
    }
}

/// Sets `n` fields `f0..` on one record through apid: `n` `set` events.
async fn write_fields(a: &Apid, rid: &str, from: usize, n: usize) {
    let body: serde_json::Map<String, serde_json::Value> = (from..from + n)
        .map(|i| (format!("f{i}"), json!(format!("v{i}"))))
        .collect();
    a.ok_json("PATCH", &format!("/meta/{rid}"), &body.into())
        .await;
}

#[tokio::test]
async fn live_events_carry_id_type_and_string_data_in_lf_framing() {
    let (s, a) = start().await;
    let mut f = Follower::connect(a.port(), META, None).await;
    assert_eq!(f.status, 200);
    assert_eq!(f.header("content-type"), Some("text/event-stream"));
    assert_eq!(f.header("cache-control"), Some("no-cache"));
    assert_eq!(f.header("x-accel-buffering"), Some("no"));

    let rid = random_rid().to_string();
    write_fields(&a, &rid, 0, 2).await;
    a.send("DELETE", &format!("/meta/{rid}/f0"), "", &[]).await;
    let got = f.take(3).await;
    let want: Vec<_> = committed(s.client(), StreamName::Meta, StreamId::ZERO)
        .await
        .iter()
        .map(meta_entry)
        .collect();
    assert_eq!(got.iter().map(meta_of).collect::<Vec<_>>(), want);
    assert_eq!(
        got.iter().map(|e| e.event.as_str()).collect::<Vec<_>>(),
        ["set", "set", "del"]
    );
    let doc = document();
    for e in &got {
        check_component(&doc, "MetaEvent", &e.data).unwrap();
        let data = e.data.as_object().expect("data is one JSON object");
        assert_eq!(
            data.keys().collect::<BTreeSet<_>>(),
            BTreeSet::from([&"key".to_string(), &"ts".to_string()]),
            "type goes to event:, the rest to data: {e:?}"
        );
        assert!(data.values().all(|v| v.is_string()), "string values: {e:?}");
    }
    let raw = f.raw();
    assert!(!raw.contains('\r'), "LF framing only: {raw:?}");
    let blocks = f.blocks();
    assert_eq!(blocks.len(), 3);
    for (b, e) in blocks.iter().zip(&got) {
        assert_eq!(b[0], format!("id: {}", e.id), "id: on every live event");
        assert_eq!(b[1], format!("event: {}", e.event));
        assert!(b[2].starts_with("data: {"), "{b:?}");
    }
}

#[tokio::test]
async fn without_an_id_a_follower_starts_at_the_head_it_found() {
    let (_s, a) = start().await;
    let rid = random_rid().to_string();
    write_fields(&a, &rid, 0, 3).await;
    let mut f = Follower::connect(a.port(), META, None).await;
    write_fields(&a, &rid, 3, 2).await;
    let keys: Vec<String> = f
        .take(2)
        .await
        .iter()
        .map(|e| e.field("key").to_owned())
        .collect();
    assert_eq!(keys, [format!("file:{rid}/f3"), format!("file:{rid}/f4")]);
    f.assert_quiet(Duration::from_millis(300)).await;
}

#[tokio::test]
async fn an_id_resumes_with_the_next_entry_by_header_or_query() {
    let (s, a) = start().await;
    let rid = random_rid().to_string();
    write_fields(&a, &rid, 0, 6).await;
    let all = committed(s.client(), StreamName::Meta, StreamId::ZERO).await;
    let want = |after: usize| -> Vec<_> { all[after + 1..].iter().map(meta_entry).collect() };

    // The middle, as a header and as the query parameter.
    let middle = all[2].id.to_string();
    let mut by_header = Follower::connect(a.port(), META, Some(&middle)).await;
    let path = format!("{META}?lastEventId={middle}");
    let mut by_query = Follower::connect(a.port(), &path, None).await;
    for f in [&mut by_header, &mut by_query] {
        let got: Vec<_> = f.take(3).await.iter().map(meta_of).collect();
        assert_eq!(got, want(2));
        f.assert_quiet(Duration::from_millis(200)).await;
    }

    // The header wins over the query parameter.
    let path = format!("{META}?lastEventId={}", all[0].id);
    let mut both = Follower::connect(a.port(), &path, Some(&all[4].id.to_string())).await;
    assert_eq!(meta_of(&both.event().await), want(4)[0]);

    // The head: nothing until the next write, then exactly it.
    let last = all[5].id.to_string();
    let mut at_head = Follower::connect(a.port(), META, Some(&last)).await;
    at_head.assert_quiet(Duration::from_millis(200)).await;
    write_fields(&a, &rid, 6, 1).await;
    let e = at_head.event().await;
    assert_eq!(e.field("key"), format!("file:{rid}/f6"));

    // `<ms>` alone is `<ms>-0`.
    let ms_only = all[3].id.ms.to_string();
    let mut f = Follower::connect(a.port(), META, Some(&ms_only)).await;
    let first = f.event().await;
    assert!(
        StreamId::parse(&first.id).unwrap() > StreamId::new(all[3].id.ms, 0),
        "{first:?}"
    );
}

#[tokio::test]
async fn zero_on_files_replays_every_entry_kept() {
    let (s, a) = start().await;
    for i in 0..5 {
        let e = stream_entry(
            StreamName::Files,
            fields(&[
                ("type", "add"),
                ("path", &format!("watch/{i}.mkv")),
                ("size", "123"),
                ("timestamp", "1747000000000"),
            ]),
        );
        s.client().append(&e).await.expect("append");
    }
    let want: Vec<_> = committed(s.client(), StreamName::Files, StreamId::ZERO).await;
    for id in ["0", "0-0"] {
        let mut f = Follower::connect(a.port(), FILES, Some(id)).await;
        let got = f.take(5).await;
        for (g, w) in got.iter().zip(&want) {
            check_component(&document(), "FileEvent", &g.data).unwrap();
            assert_eq!(g.id, w.id.to_string());
            assert_eq!(g.event, "add");
            assert_eq!(g.field("path"), w.fields["path"]);
            assert_eq!(g.field("size"), "123");
            assert!(g.data.get("type").is_none());
        }
        f.assert_quiet(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_cursor_older_than_retention_gets_one_gap_then_the_oldest_onwards() {
    let (_dir, s, a) = start_retaining_five().await;
    let rid = random_rid().to_string();
    write_fields(&a, &rid, 0, 3).await;
    let trimmed = committed(s.client(), StreamName::Meta, StreamId::ZERO).await[0].id;
    for i in 3..12 {
        write_fields(&a, &rid, i, 1).await;
    }
    let kept = committed(s.client(), StreamName::Meta, StreamId::ZERO).await;
    assert!(kept[0].id > trimmed && kept.len() <= 6, "trimmed: {kept:?}");

    let mut f = Follower::connect(a.port(), META, Some(&trimmed.to_string())).await;
    let gap = f.event().await;
    assert_eq!(gap.event, "gap");
    check_component(&document(), "GapEvent", &gap.data).unwrap();
    assert_eq!(
        gap.data,
        json!({"requested": trimmed.to_string(), "resumeFrom": kept[0].id.to_string(), "reason": "retention"})
    );
    let got: Vec<_> = f.take(kept.len()).await.iter().map(meta_of).collect();
    assert_eq!(got, kept.iter().map(meta_entry).collect::<Vec<_>>());
    assert!(
        !f.blocks()[0].iter().any(|l| l.starts_with("id:")),
        "the gap carries no id"
    );
}

/// An ID past the head (issue 23, N14) is told as one that retention
/// passed: a `gap`, then the head onwards; following on from it silently
/// would skip every entry until the IDs caught up with it.
#[tokio::test]
async fn an_id_past_the_head_gets_a_gap_then_the_head_onwards() {
    let (s, a) = start().await;
    let rid = random_rid().to_string();
    write_fields(&a, &rid, 0, 2).await;
    let head = head(s.client(), StreamName::Meta).await;
    let ahead = format!(
        "{}-0",
        head.to_string()
            .split('-')
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            + 3_600_000
    );
    for stream in [META, FILES] {
        let now = if stream == META {
            head
        } else {
            self::head(s.client(), StreamName::Files).await
        };
        let mut f = Follower::connect(a.port(), stream, Some(&ahead)).await;
        let gap = f.event().await;
        assert_eq!(gap.event, "gap", "{stream}");
        check_component(&document(), "GapEvent", &gap.data).unwrap();
        assert_eq!(
            gap.data,
            json!({"requested": ahead, "resumeFrom": now.to_string(), "reason": "retention"}),
            "{stream}"
        );
        if stream == META {
            // What commits next comes, though its ID is below the client's.
            write_fields(&a, &rid, 10, 1).await;
            let next = f.event().await;
            assert_eq!(next.field("key"), format!("file:{rid}/f10"));
        }
    }
}

#[tokio::test]
async fn a_malformed_id_is_a_400_envelope_before_any_stream() {
    let (_s, a) = start().await;
    for bad in [
        "abc",
        "1-2-3",
        "-1",
        "1-",
        "-",
        "1.5",
        "1-x",
        &"9".repeat(30),
    ] {
        for path in [META, FILES] {
            let r = a.send("GET", path, "", &[("last-event-id", bad)]).await;
            r.assert_error(400, "bad_request");
            let q = format!("{path}?lastEventId={}", urlencode(bad));
            a.get(&q).await.assert_error(400, "bad_request");
        }
    }
    // A long one is said back cut short.
    let long = "x".repeat(5000);
    let r = a.send("GET", META, "", &[("last-event-id", &long)]).await;
    r.assert_error(400, "bad_request");
    assert!(r.text().contains(&"x".repeat(64)), "{}", r.text());
    assert!(
        !r.text().contains(&"x".repeat(65)),
        "echoed whole: {} bytes",
        r.text().len()
    );
    // An unknown stream is a 404 like any unknown path.
    a.get("/api/events/other")
        .await
        .assert_error(404, "not_found");
}

fn urlencode(s: &str) -> String {
    serde_urlencoded::to_string([("x", s)]).unwrap()[2..].to_owned()
}

#[tokio::test]
async fn zero_on_meta_streams_every_key_once_then_the_live_tail() {
    let (s, a) = start().await;
    let mut rids = Vec::new();
    for _ in 0..25 {
        let rid = random_rid().to_string();
        write_fields(&a, &rid, 0, 8).await;
        rids.push(rid);
    }
    a.send("DELETE", &format!("/meta/{}/f3", rids[0]), "", &[])
        .await;
    let mut keys = BTreeSet::new();
    let q = RangeQuery {
        prefix: Some("file:".into()),
        keys_only: true,
        limit: Some(10_000),
        ..RangeQuery::default()
    };
    let page = s.client().kv_range(&q).await.unwrap();
    keys.extend(page.rows.into_iter().map(|r| r.key));
    assert_eq!(keys.len(), 25 * 8 - 1);
    for zero in ["0", "0-0"] {
        let head_before = head(s.client(), StreamName::Meta).await;
        let mut f = Follower::connect(a.port(), META, Some(zero)).await;
        let snap = f.take(keys.len()).await;
        let seen: Vec<&str> = snap.iter().map(|e| e.field("key")).collect();
        assert_eq!(
            seen.iter().copied().collect::<BTreeSet<_>>().len(),
            seen.len(),
            "each key once"
        );
        assert_eq!(
            seen.iter().map(|k| k.to_string()).collect::<BTreeSet<_>>(),
            keys
        );
        assert!(snap.iter().all(|e| e.event == "set"));
        let doc = document();
        for e in &snap {
            check_component(&doc, "MetaEvent", &e.data).unwrap();
        }
        // Only the last snapshot event has an id line: the head before it.
        let blocks = f.blocks();
        let with_id: Vec<usize> = (0..blocks.len())
            .filter(|&i| blocks[i][0].starts_with("id: "))
            .collect();
        assert_eq!(with_id, [blocks.len() - 1]);
        assert_eq!(blocks.last().unwrap()[0], format!("id: {head_before}"));

        // Then live, with ids.
        write_fields(&a, &rids[1], 100, 1).await;
        let live = f.event().await;
        assert_eq!(live.field("key"), format!("file:{}/f100", rids[1]));
        assert!(StreamId::parse(&live.id).unwrap() > head_before);
        assert!(f.blocks().last().unwrap()[0].starts_with("id: "));
        a.send("DELETE", &format!("/meta/{}/f100", rids[1]), "", &[])
            .await;
        assert_eq!(f.event().await.event, "del");
    }
}

#[tokio::test]
async fn zero_on_an_empty_meta_stream_is_only_the_live_tail() {
    let (_s, a) = start().await;
    let mut f = Follower::connect(a.port(), META, Some("0")).await;
    f.assert_quiet(Duration::from_millis(200)).await;
    let rid = random_rid().to_string();
    write_fields(&a, &rid, 0, 1).await;
    assert_eq!(f.event().await.field("key"), format!("file:{rid}/f0"));
}

#[tokio::test]
async fn a_silent_stream_gets_keep_alive_comments() {
    let s = Storaged::start().await;
    let a = Apid::start_with(&s, &[("META_CORE_SSE_KEEPALIVE_MS", "1000")]).await;
    let mut meta = Follower::connect(a.port(), META, None).await;
    let mut files = Follower::connect(a.port(), FILES, None).await;
    // The parser drops comments: nothing is an event...
    let quiet = Duration::from_millis(2500);
    tokio::join!(meta.assert_quiet(quiet), files.assert_quiet(quiet));
    // ...but the comments came, about one a second.
    for f in [&meta, &files] {
        let raw = f.raw();
        assert!(
            raw.matches(":keep-alive\n\n").count() >= 2,
            "keep-alives in {raw:?}"
        );
        assert_eq!(raw.replace(":keep-alive\n\n", ""), "", "{raw:?}");
    }
}

#[tokio::test]
async fn fifty_followers_receive_the_same_ordered_events() {
    let (s, a) = start().await;
    let from = head(s.client(), StreamName::Meta).await;
    let mut followers = connect_all(a.port(), META, 50).await;
    let rid = random_rid().to_string();
    for i in 0..20 {
        write_fields(&a, &rid, i * 10, 10).await;
    }
    let want: Vec<_> = committed(s.client(), StreamName::Meta, from)
        .await
        .iter()
        .map(meta_entry)
        .collect();
    assert_eq!(want.len(), 200);
    let got = futures_util::future::join_all(followers.iter_mut().map(|f| f.take(200))).await;
    for g in got {
        assert_eq!(g.iter().map(meta_of).collect::<Vec<_>>(), want);
    }
}

/// A follower that reads nothing more once its answer has begun: a raw
/// request on a socket with a small receive buffer.
struct Stalled {
    conn: tokio::net::TcpStream,
    /// What was read to see the answer's head (the head and maybe the
    /// start of the body).
    read: Vec<u8>,
}

/// Sends the request and reads until the answer's head has come: apid has
/// placed the follower (taken its slot, captured its head) by then.
async fn stalled_follower(port: u16, path: &str) -> Stalled {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut conn = sock
        .connect(([127, 0, 0, 1], port).into())
        .await
        .expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: meta-core\r\n\r\n");
    conn.write_all(req.as_bytes()).await.unwrap();
    let mut read = Vec::new();
    let mut buf = [0u8; 1024];
    while !read.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(IO_DEADLINE, conn.read(&mut buf))
            .await
            .expect("the answer's head")
            .expect("read");
        assert!(n > 0, "closed before the answer's head");
        read.extend_from_slice(&buf[..n]);
    }
    assert!(
        read.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&read)
    );
    Stalled { conn, read }
}

/// Reads what a raw connection still holds until the server's close; the
/// events' ids.
async fn drain_ids(stalled: Stalled) -> Vec<String> {
    use tokio::io::AsyncReadExt;
    let Stalled { mut conn, read } = stalled;
    let mut raw = read;
    let mut buf = vec![0; 64 * 1024];
    loop {
        match tokio::time::timeout(IO_DEADLINE, conn.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => raw.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the connection was not closed"),
        }
    }
    String::from_utf8_lossy(&raw)
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(str::to_owned)
        .collect()
}

/// Open event streams, from apid's socket `/status`.
async fn open_streams(a: &Apid) -> u64 {
    let r = e2e::raw_http::request(&a.dir().join("run/apid.sock"), "GET", "/status", None).await;
    r.json()["events"]["open"].as_u64().expect("events.open")
}

#[tokio::test]
async fn a_follower_that_stopped_reading_is_cut_off_and_loses_nothing() {
    let s = Storaged::start().await;
    let a = Apid::start_with(
        &s,
        &[
            ("META_CORE_SSE_QUEUE", "16"),
            ("META_CORE_HTTP_WRITE_STALL_MS", "500"),
        ],
    )
    .await;
    let from = head(s.client(), StreamName::Meta).await;
    let slow = stalled_follower(a.port(), META).await;
    // The others read as events come.
    let n = 6000;
    // (Each task gives its follower back, so its stream stays open.)
    let fast: Vec<_> = connect_all(a.port(), META, 3)
        .await
        .into_iter()
        .map(|mut f| {
            tokio::spawn(async move {
                let got = f.take(n).await;
                (f, got)
            })
        })
        .collect();
    assert_eq!(open_streams(&a).await, 4);
    // Long keys make big events: enough to fill the slow one's socket
    // buffers, then the ring, many times over.
    let rid = random_rid().to_string();
    write_long_fields(&a, &rid, n / 100, 100).await;
    let want: Vec<String> = committed(s.client(), StreamName::Meta, from)
        .await
        .iter()
        .map(|e| e.id.to_string())
        .collect();
    assert_eq!(want.len(), n);
    // The others got everything while the slow one read nothing...
    let mut kept_open = Vec::new();
    for f in fast {
        let (f, got) = f.await.unwrap();
        let got: Vec<String> = got.into_iter().map(|e| e.id).collect();
        assert_eq!(got, want);
        kept_open.push(f);
    }
    // ...and the slow one is closed while it still reads nothing.
    e2e::wait::until("the stalled follower's close", IO_DEADLINE, || async {
        (open_streams(&a).await == 3).then_some(())
    })
    .await;
    assert!(
        a.process().stderr().contains("took nothing"),
        "the cut-off is logged"
    );
    // What reached its socket is a prefix, in order; reconnecting with its
    // last ID gives exactly the rest.
    let ids = drain_ids(slow).await;
    assert!(ids.len() < n, "cut off before the end: {}", ids.len());
    assert_eq!(ids[..], want[..ids.len()]);
    let last = ids.last().cloned().unwrap_or_else(|| from.to_string());
    let mut again = Follower::connect(a.port(), META, Some(&last)).await;
    let rest: Vec<String> = again
        .take(n - ids.len())
        .await
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(rest[..], want[ids.len()..]);
}

#[tokio::test]
async fn a_slow_but_steady_reader_is_not_cut_off() {
    use tokio::io::AsyncReadExt;
    let s = Storaged::start().await;
    // The stall limit is well above what a starved test process may lose
    // on a busy machine (a 500 ms limit was passed by a test runner that
    // did not run for half a second beside two busy loops and a build),
    // and the reading takes about twice as long as it.
    let a = Apid::start_with(&s, &[("META_CORE_HTTP_WRITE_STALL_MS", "3000")]).await;
    let from = head(s.client(), StreamName::Meta).await;
    let mut slow = stalled_follower(a.port(), META).await;
    // 0.9 MB of events, far more than a 4 KiB receive window lets in
    // flight, read 8 KiB every 50 ms (about 6 s in all): apid's writes
    // wait again and again while the peer takes bytes all along; it must
    // not be closed.
    let rid = random_rid().to_string();
    write_long_fields(&a, &rid, 8, 100).await;
    let last = committed(s.client(), StreamName::Meta, from)
        .await
        .last()
        .expect("entries")
        .id
        .to_string();
    let needle = format!("id: {last}\n");
    let mut raw = std::mem::take(&mut slow.read);
    let mut buf = vec![0; 8 * 1024];
    loop {
        let n = tokio::time::timeout(IO_DEADLINE, slow.conn.read(&mut buf))
            .await
            .expect("more events")
            .expect("read");
        assert!(
            n > 0,
            "the slow reader was cut off after {} bytes",
            raw.len()
        );
        let from = raw.len().saturating_sub(needle.len());
        raw.extend_from_slice(&buf[..n]);
        if raw[from..]
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(open_streams(&a).await, 1);
    assert!(!a.process().stderr().contains("took nothing"));
}

#[tokio::test]
async fn entries_trimmed_while_a_snapshot_streams_are_announced_by_a_gap() {
    let (_dir, s, a) = start_retaining_five().await;
    // A snapshot far larger than the socket buffers (15,000 keys of 1 KB),
    // so a follower that does not read yet is held up in the middle of it.
    let rid = random_rid().to_string();
    write_long_fields(&a, &rid, 15, 1000).await;
    let slow = stalled_follower(a.port(), &format!("{META}?lastEventId=0")).await;
    // Trim past the snapshot's head while it is held up.
    for i in 0..20 {
        write_fields(&a, &rid, 100_000 + i, 1).await;
    }
    let kept = committed(s.client(), StreamName::Meta, StreamId::ZERO).await;
    let text = drain_until(slow, &kept.last().unwrap().id.to_string()).await;
    let gap = text
        .split("\n\n")
        // (Blocks may begin with the chunked encoding's size line.)
        .find(|b| b.contains("event: gap"))
        .unwrap_or_else(|| {
            panic!(
                "no gap after the snapshot: {} bytes, {} events, kept {kept:?}",
                text.len(),
                text.matches("\n\n").count()
            )
        });
    assert!(
        gap.contains(&format!("\"resumeFrom\":\"{}\"", kept[0].id)),
        "{gap}"
    );
    // After the gap, every entry kept, in order.
    let after_gap = &text[text.find("event: gap").unwrap()..];
    let ids: Vec<&str> = after_gap
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .collect();
    let want: Vec<String> = kept.iter().map(|e| e.id.to_string()).collect();
    assert_eq!(ids, want);
}

/// Reads a raw connection until an event with `last_id` has come; the text.
async fn drain_until(stalled: Stalled, last_id: &str) -> String {
    use tokio::io::AsyncReadExt;
    let Stalled { mut conn, read } = stalled;
    let mut raw = read;
    let mut buf = vec![0; 64 * 1024];
    let needle = format!("id: {last_id}\n");
    loop {
        let n = tokio::time::timeout(IO_DEADLINE, conn.read(&mut buf))
            .await
            .expect("more events")
            .expect("read");
        assert!(n > 0, "the stream ended before {last_id}");
        // Only the new bytes (and a needle's length before them) can hold it.
        let from = raw.len().saturating_sub(needle.len());
        raw.extend_from_slice(&buf[..n]);
        if raw[from..]
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
        {
            return String::from_utf8_lossy(&raw).into_owned();
        }
    }
}

#[tokio::test]
async fn past_the_follower_limit_a_stream_is_a_503_overloaded() {
    let s = Storaged::start().await;
    let a = Apid::start_with(&s, &[("META_CORE_SSE_MAX_FOLLOWERS", "2")]).await;
    let _one = Follower::connect(a.port(), META, None).await;
    let _two = Follower::connect(a.port(), FILES, None).await;
    let r = a.get(META).await;
    r.assert_error(503, "overloaded");
    assert_eq!(r.header("retry-after"), Some("1"));
    drop(_one);
    // The slot comes back once the first stream is gone.
    e2e::wait::until("a freed slot", IO_DEADLINE, || async {
        let f = Follower::connect(a.port(), META, None).await;
        (f.status == 200).then_some(())
    })
    .await;
}

#[tokio::test]
async fn kill_9_of_storaged_mid_stream_is_a_pause_with_nothing_lost_or_repeated() {
    let (mut s, a) = start().await;
    let from = head(s.client(), StreamName::Meta).await;
    let mut followers = connect_all(a.port(), META, 5).await;
    let rid = random_rid().to_string();
    // Writes on both sides of the kill; those refused while storaged is
    // away are retried, so every one commits in the end.
    let writer = {
        let http = (*a).clone();
        let rid = rid.clone();
        tokio::spawn(async move {
            for i in 0..300 {
                loop {
                    let body = json!({ format!("f{i}"): "v" });
                    let r = http
                        .send_json("PATCH", &format!("/meta/{rid}"), &body)
                        .await;
                    if r.status == 200 {
                        break;
                    }
                    assert_eq!(r.status, 503, "{}", r.text());
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        })
    };
    // Kill once some events have gone out.
    let mut first = followers[0].take(50).await;
    s.restart().await;
    writer.await.expect("the writer");
    let want: Vec<_> = committed(s.client(), StreamName::Meta, from)
        .await
        .iter()
        .map(meta_entry)
        .collect();
    assert_eq!(want.len(), 300);
    first.extend(followers[0].take(250).await);
    assert_eq!(first.iter().map(meta_of).collect::<Vec<_>>(), want);
    for f in &mut followers[1..] {
        let got: Vec<_> = f.take(300).await.iter().map(meta_of).collect();
        assert_eq!(got, want);
    }
    for f in &mut followers {
        f.assert_quiet(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn after_apid_restarts_a_follower_resumes_with_its_last_id() {
    let (s, mut a) = start().await;
    let from = head(s.client(), StreamName::Meta).await;
    let rid = random_rid().to_string();
    let mut f = Follower::connect(a.port(), META, None).await;
    write_fields(&a, &rid, 0, 5).await;
    let before = f.take(5).await;
    a.process_mut().kill9();
    match f.next(IO_DEADLINE).await {
        Next::End | Next::Broken(_) => {}
        other => panic!("the stream ends with apid: {other:?}"),
    }
    // Written while apid is away.
    for i in 5..10 {
        let e = s
            .client()
            .set_field(
                &e2e::fixtures::target(&rid),
                &e2e::fixtures::field_write(&format!("f{i}"), "v"),
            )
            .await;
        e.expect("write through storaged");
    }
    let a = Apid::start(&s).await;
    let last = before.last().unwrap().id.clone();
    let mut f = Follower::connect(a.port(), META, Some(&last)).await;
    let mut got = before;
    got.extend(f.take(5).await);
    let want: Vec<_> = committed(s.client(), StreamName::Meta, from)
        .await
        .iter()
        .map(meta_entry)
        .collect();
    assert_eq!(got.iter().map(meta_of).collect::<Vec<_>>(), want);
}

#[tokio::test]
async fn followers_end_when_apid_stops() {
    let (_s, mut a) = start().await;
    let mut followers = connect_all(a.port(), META, 3).await;
    let mut snapshot = Follower::connect(a.port(), META, Some("0")).await;
    a.process().sigterm();
    for f in followers.iter_mut().chain([&mut snapshot]) {
        assert!(
            matches!(f.next(IO_DEADLINE).await, Next::End),
            "ended by the stop"
        );
    }
    let status = a.process_mut().wait_exit().await;
    assert!(status.success(), "apid stops cleanly: {status:?}");
}

#[tokio::test]
async fn a_stop_is_not_held_by_a_follower_that_reads_nothing() {
    let s = Storaged::start().await;
    // The write stall at its longest: only the bounded drain can end the
    // stalled answer within the exit deadline.
    let mut a = Apid::start_with(&s, &[("META_CORE_HTTP_WRITE_STALL_MS", "3600000")]).await;
    let from = head(s.client(), StreamName::Meta).await;
    let _slow = stalled_follower(a.port(), META).await;
    let rid = random_rid().to_string();
    write_long_fields(&a, &rid, 60, 100).await;
    assert_eq!(
        committed(s.client(), StreamName::Meta, from).await.len(),
        6000
    );
    a.process().sigterm();
    let status = a.process_mut().wait_exit().await;
    assert!(status.success(), "apid stops cleanly: {status:?}");
    assert!(
        a.process().stderr().contains("still open"),
        "the drain's end is logged"
    );
}

#[tokio::test]
async fn a_follower_waits_briefly_for_storaged_then_gets_503() {
    let dir = test_dir();
    // apid alone: its hubs cannot reach storaged.
    let a = Apid::start_in(dir.path(), &[]).await;
    let r = a.get(META).await;
    r.assert_error(503, "storage_unavailable");
    assert_eq!(r.header("retry-after"), Some("1"));
    // storaged arrives: followers are served.
    let s = Launch::in_dir(dir.path()).start().await;
    e2e::wait::until("a stream once storaged is up", IO_DEADLINE, || async {
        let f = Follower::connect(a.port(), META, None).await;
        (f.status == 200).then_some(())
    })
    .await;
    let mut f = Follower::connect(a.port(), META, None).await;
    let rid = random_rid().to_string();
    s.client()
        .set_field(
            &e2e::fixtures::target(&rid),
            &e2e::fixtures::field_write("title", "x"),
        )
        .await
        .expect("write");
    assert_eq!(f.event().await.field("key"), format!("file:{rid}/title"));
}
