//! The event streams: `meta:events` written by storaged in the transaction
//! of each real change, `file:events` appended by clients, read by range,
//! described by `info`, and followed live by the NDJSON tail.

use std::collections::BTreeMap;

use e2e::fixtures::{
    api_error, checked, field_name, field_write, fields, random_rid, stream_entry, target,
};
use e2e::raw_http;
use e2e::wait::{IO_DEADLINE, within};
use e2e::{Storaged, unchecked};
use futures_util::{Stream, StreamExt};
use metacore::api::storaged::{EntriesQuery, StoragedClient};
use metacore::socket::client::ClientError;
use metacore::{Entry, ErrorCode, StreamId, StreamName};

async fn all_entries(c: &StoragedClient, stream: StreamName) -> Vec<Entry> {
    c.entries(
        stream,
        &EntriesQuery {
            after: None,
            limit: Some(10_000),
        },
    )
    .await
    .unwrap()
}

/// The `(type, key)` of the meta entries after `after`.
async fn meta_after(c: &StoragedClient, after: Option<StreamId>) -> Vec<(String, String)> {
    let q = EntriesQuery {
        after,
        limit: Some(10_000),
    };
    c.entries(StreamName::Meta, &q)
        .await
        .unwrap()
        .into_iter()
        .map(|e| kind_key(&e))
        .collect()
}

fn kind_key(e: &Entry) -> (String, String) {
    (e.fields["type"].clone(), e.fields["key"].clone())
}

/// The next entry of a tail, bounded.
async fn next_entry<S: Stream<Item = Result<Entry, ClientError>> + Unpin>(tail: &mut S) -> Entry {
    within("the next tail entry", IO_DEADLINE, tail.next())
        .await
        .expect("the tail goes on")
        .expect("a readable entry")
}

#[tokio::test]
async fn meta_events_announce_real_changes_only() {
    let s = Storaged::start().await;
    let c = s.client();
    let r = random_rid().to_string();
    let key = |f: &str| format!("file:{r}/{f}");
    let ev = |t: &str, f: &str| (t.to_string(), key(f));

    c.merge(&target(&r), &checked(fields(&[("title", "A")])))
        .await
        .unwrap();
    c.merge(&target(&r), &checked(fields(&[("title", "A")])))
        .await
        .unwrap();
    c.set_field(&target(&r), &field_write("title", "A"))
        .await
        .unwrap();
    c.replace(
        &target(&r),
        &checked(fields(&[("title", "A"), ("year", "1")])),
    )
    .await
    .unwrap();
    c.set_field(&target(&r), &field_write("title", "B"))
        .await
        .unwrap();
    assert!(
        !c.delete_field(&target(&r), &field_name("never-set"))
            .await
            .unwrap()
            .existed
    );
    assert!(
        c.delete_field(&target(&r), &field_name("year"))
            .await
            .unwrap()
            .existed
    );
    assert!(
        !c.delete_field(&target(&r), &field_name("year"))
            .await
            .unwrap()
            .existed
    );
    c.delete_record(&target(&r)).await.unwrap();

    let want = vec![
        ev("set", "title"),
        ev("set", "year"),
        ev("set", "title"),
        ev("del", "year"),
        ev("del", "title"),
    ];
    assert_eq!(meta_after(c, None).await, want);
}

#[tokio::test]
async fn entries_carry_type_key_and_ts_under_increasing_ids() {
    let s = Storaged::start().await;
    let c = s.client();
    let r = random_rid().to_string();
    for i in 0..20 {
        c.merge(
            &target(&r),
            &checked(fields(&[(&format!("f{}", i % 7), &i.to_string())])),
        )
        .await
        .unwrap();
    }
    let entries = all_entries(c, StreamName::Meta).await;
    assert_eq!(entries.len(), 20);
    for pair in entries.windows(2) {
        assert!(
            pair[0].id < pair[1].id,
            "{:?} then {:?}",
            pair[0].id,
            pair[1].id
        );
    }
    for e in &entries {
        let mut names: Vec<&str> = e.fields.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["key", "ts", "type"], "{e:?}");
        assert_eq!(e.fields["type"], "set");
        assert!(e.fields["key"].starts_with(&format!("file:{r}/f")), "{e:?}");
        let ts: u64 = e.fields["ts"]
            .parse()
            .unwrap_or_else(|_| panic!("ts is milliseconds: {e:?}"));
        assert!(
            ts > 1_600_000_000_000,
            "ts is a Unix time in milliseconds: {e:?}"
        );
    }
}

#[tokio::test]
async fn entries_are_read_in_pages_after_a_cursor() {
    let s = Storaged::start().await;
    let c = s.client();
    let r = random_rid().to_string();
    for i in 0..30 {
        c.set_field(&target(&r), &field_write(&format!("f{i:02}"), "v"))
            .await
            .unwrap();
    }
    let all = all_entries(c, StreamName::Meta).await;
    assert_eq!(all.len(), 30);

    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let page = c
            .entries(
                StreamName::Meta,
                &EntriesQuery {
                    after,
                    limit: Some(7),
                },
            )
            .await
            .unwrap();
        assert!(page.len() <= 7);
        let Some(last) = page.last() else { break };
        after = Some(last.id);
        paged.extend(page);
        assert!(paged.len() <= 30, "paging does not end");
    }
    assert_eq!(paged, all);

    let tail = c
        .entries(
            StreamName::Meta,
            &EntriesQuery {
                after: Some(all[26].id),
                limit: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(tail, all[27..].to_vec(), "strictly after the cursor");
    let info = c.stream_info(StreamName::Meta).await.unwrap();
    assert_eq!(info.stream, "meta:events");
    assert_eq!(
        (info.first, info.last, info.length),
        (Some(all[0].id), Some(all[29].id), 30)
    );
}

#[tokio::test]
async fn info_of_an_empty_stream() {
    let s = Storaged::start().await;
    let info = s.client().stream_info(StreamName::Files).await.unwrap();
    assert_eq!(
        (info.stream.as_str(), info.first, info.last, info.length),
        ("file:events", None, None, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tail_delivers_entries_committed_after_it_started_in_order() {
    let s = Storaged::start().await;
    let c = s.client();
    let r = random_rid().to_string();
    c.set_field(&target(&r), &field_write("before", "x"))
        .await
        .unwrap();

    let mut tail = Box::pin(c.tail(StreamName::Meta, None).await.unwrap());
    let writer = {
        let c = c.clone();
        let r = r.clone();
        tokio::spawn(async move {
            for i in 0..25 {
                c.set_field(&target(&r), &field_write(&format!("live{i:02}"), "v"))
                    .await
                    .unwrap();
            }
        })
    };
    let mut got = Vec::new();
    for _ in 0..25 {
        got.push(next_entry(&mut tail).await);
    }
    writer.await.unwrap();
    let keys: Vec<String> = got.iter().map(|e| e.fields["key"].clone()).collect();
    let want: Vec<String> = (0..25).map(|i| format!("file:{r}/live{i:02}")).collect();
    assert_eq!(
        keys, want,
        "the entry written before the tail is not replayed; the rest arrive in order"
    );
    for pair in got.windows(2) {
        assert!(pair[0].id < pair[1].id);
    }
    assert_eq!(
        got,
        all_entries(c, StreamName::Meta).await[1..].to_vec(),
        "the tail sends the stored entries"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_resumes_after_a_given_id() {
    let s = Storaged::start().await;
    let c = s.client();
    let r = random_rid().to_string();
    for i in 0..5 {
        c.set_field(&target(&r), &field_write(&format!("old{i}"), "v"))
            .await
            .unwrap();
    }
    let stored = all_entries(c, StreamName::Meta).await;

    let mut tail = Box::pin(c.tail(StreamName::Meta, Some(stored[1].id)).await.unwrap());
    for want in &stored[2..] {
        assert_eq!(
            &next_entry(&mut tail).await,
            want,
            "the stored entries after the cursor come first"
        );
    }
    c.set_field(&target(&r), &field_write("new", "v"))
        .await
        .unwrap();
    let live = next_entry(&mut tail).await;
    assert_eq!(
        kind_key(&live),
        ("set".to_string(), format!("file:{r}/new"))
    );
    assert!(live.id > stored[4].id);

    // A tail of file:events sees appended entries too.
    let mut files = Box::pin(
        c.tail(StreamName::Files, Some(StreamId::ZERO))
            .await
            .unwrap(),
    );
    let id = c
        .append(&stream_entry(
            StreamName::Files,
            [("type".to_string(), "add".to_string())].into(),
        ))
        .await
        .unwrap();
    assert_eq!(next_entry(&mut files).await.id, id);
}

#[tokio::test]
async fn clients_append_to_file_events_but_not_to_meta_events() {
    let s = Storaged::start().await;
    let c = s.client();
    let entry: BTreeMap<String, String> = [
        ("type", "add"),
        ("path", "movies/Film (2001)/film.mkv"),
        ("timestamp", "1700000000000"),
        ("size", "123"),
        (
            "midhash256",
            "bagacbabaec7v3fu2ygzh3e2sybg3fbzmisry2hbtpmck6vx3yftea6vzq35r4",
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let first = c
        .append(&stream_entry(StreamName::Files, entry.clone()))
        .await
        .unwrap();
    let second = c
        .append(&stream_entry(
            StreamName::Files,
            [("type".to_string(), "delete".to_string())].into(),
        ))
        .await
        .unwrap();
    assert!(first < second);
    let stored = all_entries(c, StreamName::Files).await;
    assert_eq!(stored.len(), 2);
    assert_eq!(
        (stored[0].id, &stored[0].fields),
        (first, &entry),
        "the entry is stored as sent"
    );
    assert_eq!(
        c.stream_info(StreamName::Files).await.unwrap().last,
        Some(second)
    );

    let before = e2e::snapshot::dump(&s.db_path());
    let meta = api_error(
        unchecked::append(
            c,
            StreamName::Meta,
            [("type".to_string(), "set".to_string())].into(),
        )
        .await,
    );
    assert_eq!(
        meta.code,
        ErrorCode::SchemaViolation,
        "meta:events is storaged's own"
    );
    let untyped = api_error(
        unchecked::append(
            c,
            StreamName::Files,
            [("path".to_string(), "a".to_string())].into(),
        )
        .await,
    );
    assert_eq!(untyped.code, ErrorCode::SchemaViolation);
    let empty_type = api_error(
        unchecked::append(
            c,
            StreamName::Files,
            [("type".to_string(), String::new())].into(),
        )
        .await,
    );
    assert_eq!(empty_type.code, ErrorCode::SchemaViolation);
    e2e::snapshot::assert_same(
        &before,
        &e2e::snapshot::dump(&s.db_path()),
        "refused appends",
    );
}

#[tokio::test]
async fn an_unknown_stream_is_404_on_every_route() {
    let s = Storaged::start().await;
    let sock = s.socket_path();
    for (method, path, body) in [
        ("GET", "/streams/other:events/entries", None),
        ("GET", "/streams/other:events/info", None),
        ("GET", "/streams/other:events/tail", None),
        (
            "POST",
            "/streams/other:events/entries",
            Some(&br#"{"fields":{"type":"add"}}"#[..]),
        ),
        ("GET", "/streams/meta/entries", None),
    ] {
        let resp = raw_http::request(&sock, method, path, body).await;
        resp.assert_error(404, "not_found");
    }
    let resp = raw_http::request(
        &sock,
        "POST",
        "/streams/meta:events/entries",
        Some(br#"{"fields":{}}"#),
    )
    .await;
    resp.assert_error(400, "schema_violation");
}
