//! The store in-process, on a real SQLite file: stream retention and IDs,
//! counters, events for real changes only, concurrent writers.

use std::collections::BTreeMap;
use std::sync::Arc;

use metacore::record::{Fields, Target};
use metacore::rid::Rid;
use metacore::stream::{StreamId, StreamName};
use storaged::{Options, Store};

fn fields(pairs: &[(&str, &str)]) -> Fields {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn entry(t: &str) -> BTreeMap<String, String> {
    [
        ("type".to_string(), t.to_string()),
        ("path".to_string(), "watch/a.mkv".to_string()),
    ]
    .into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_trimmed_to_their_retention_and_ids_only_grow() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = Options::for_path(dir.path().join("db/meta-core.db"));
    opts.retention = 100;
    opts.trim_every = 10;
    let store = Store::open(&opts).unwrap();
    let mut ids = Vec::new();
    for i in 0..500 {
        ids.push(
            store
                .append(
                    StreamName::Files,
                    entry(if i % 2 == 0 { "add" } else { "change" }),
                )
                .await
                .unwrap(),
        );
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "IDs strictly increase");
    let info = store.stream_info(StreamName::Files).await.unwrap();
    assert!(
        info.length >= 100 && info.length < 110,
        "kept about the retention: {info:?}"
    );
    assert_eq!(info.last, Some(*ids.last().unwrap()));
    assert!(
        info.first.unwrap() > ids[300],
        "old entries are gone: {info:?}"
    );
    let kept = store.entries(StreamName::Files, None, 1000).await.unwrap();
    assert_eq!(kept.len() as u64, info.length);
    assert_eq!(kept.last().unwrap().id, *ids.last().unwrap());
    store.close().await;
    drop(store);

    // After a restart, new IDs continue after the last one ever issued.
    let store = Store::open(&opts).unwrap();
    let next = store.append(StreamName::Files, entry("add")).await.unwrap();
    assert!(next > *ids.last().unwrap());
    store.close().await;
}

#[tokio::test]
async fn only_real_changes_are_published() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Options::for_path(dir.path().join("m.db"))).unwrap();
    let rid = Rid::mint();
    let t = Target::Rid(rid);
    store
        .merge(t.clone(), fields(&[("title", "A"), ("year", "2010")]))
        .await
        .unwrap();
    let r = store
        .merge(t.clone(), fields(&[("title", "A"), ("year", "2010")]))
        .await
        .unwrap();
    assert_eq!(r.changed, 0);
    store
        .merge(t.clone(), fields(&[("title", "B")]))
        .await
        .unwrap();
    let d = store.delete_field(t.clone(), "nope".into()).await.unwrap();
    assert!(!d.existed);
    store.delete_field(t.clone(), "year".into()).await.unwrap();
    let events: Vec<(String, String)> = store
        .entries(StreamName::Meta, None, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.fields["type"].clone(), e.fields["key"].clone()))
        .collect();
    let k = |f: &str| format!("file:{rid}/{f}");
    assert_eq!(
        events,
        vec![
            ("set".into(), k("title")),
            ("set".into(), k("year")),
            ("set".into(), k("title")),
            ("del".into(), k("year")),
        ]
    );
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_concurrent_writers_all_land_and_the_root_count_follows() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&Options::for_path(dir.path().join("c.db"))).unwrap());
    let mut tasks = Vec::new();
    for w in 0..16 {
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut rids = Vec::new();
            for i in 0..25 {
                let rid = Rid::mint();
                s.merge(
                    Target::Rid(rid),
                    fields(&[("title", &format!("w{w} r{i}")), ("n", &i.to_string())]),
                )
                .await
                .unwrap();
                rids.push(rid);
            }
            rids
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    assert_eq!(store.roots().await.unwrap(), 400);
    for rid in all.iter().step_by(7) {
        let r = store.get_record(Target::Rid(*rid)).await.unwrap();
        assert_eq!(r.fields.len(), 2);
    }
    for rid in &all[..100] {
        store.delete_root(Target::Rid(*rid)).await.unwrap();
    }
    assert_eq!(store.roots().await.unwrap(), 300);
    let page = store.list_roots(None, 10_000).await.unwrap();
    assert_eq!(page.rids.len(), 300);
    store.close().await;
}

#[tokio::test]
async fn counters_are_rebuilt_when_their_ready_mark_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let opts = Options::for_path(&path);
    {
        let store = Store::open(&opts).unwrap();
        for _ in 0..7 {
            store
                .merge(Target::Rid(Rid::mint()), fields(&[("a", "1")]))
                .await
                .unwrap();
        }
        store.close().await;
    }
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute(
            "DELETE FROM kv WHERE k IN ('idx:count/ready', 'idx:count/roots')",
            [],
        )
        .unwrap();
    }
    let store = Store::open(&opts).unwrap();
    assert_eq!(store.roots().await.unwrap(), 7);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_wake_on_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&Options::for_path(dir.path().join("s.db"))).unwrap());
    let mut heads = store.subscribe();
    heads.borrow_and_update();
    let s = store.clone();
    let writer =
        tokio::spawn(async move { s.append(StreamName::Files, entry("add")).await.unwrap() });
    tokio::time::timeout(std::time::Duration::from_secs(10), heads.changed())
        .await
        .unwrap()
        .unwrap();
    let id = writer.await.unwrap();
    let head = storaged::streams::head_of(&heads.borrow(), StreamName::Files);
    assert_eq!(head, Some(id));
    assert!(id > StreamId::ZERO);
    store.close().await;
}
