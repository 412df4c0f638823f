//! The store in-process, on a real SQLite file: stream retention and IDs,
//! counters, events for real changes only, concurrent writers.

use std::collections::BTreeMap;
use std::sync::Arc;

use metacore::checked::{CheckedEntry, CheckedFields, FieldName};
use metacore::record::Target;
use metacore::rid::Rid;
use metacore::stream::{StreamId, StreamName};
use storaged::{Options, PageStart, Store};

fn fields(pairs: &[(&str, &str)]) -> CheckedFields {
    CheckedFields::check(metacore::record::fields_of(pairs)).unwrap()
}

fn name(field: &str) -> FieldName {
    FieldName::new(field).unwrap()
}

fn files_entry(fields: BTreeMap<String, String>) -> CheckedEntry {
    CheckedEntry::new(StreamName::Files, fields).unwrap()
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
                .append(files_entry(entry(if i % 2 == 0 {
                    "add"
                } else {
                    "change"
                })))
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
    let next = store.append(files_entry(entry("add"))).await.unwrap();
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
    let d = store.delete_field(t.clone(), name("nope")).await.unwrap();
    assert!(!d.existed);
    store.delete_field(t.clone(), name("year")).await.unwrap();
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
    let page = store
        .list_roots(PageStart::default(), 10_000)
        .await
        .unwrap();
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
    let writer = tokio::spawn(async move { s.append(files_entry(entry("add"))).await.unwrap() });
    tokio::time::timeout(std::time::Duration::from_secs(10), heads.changed())
        .await
        .unwrap()
        .unwrap();
    let id = writer.await.unwrap();
    let head = storaged::head_of(&heads.borrow(), StreamName::Files);
    assert_eq!(head, Some(id));
    assert!(id > StreamId::ZERO);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wipe_deletes_every_record_a_chunk_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Options::for_path(dir.path().join("w.db"))).unwrap();
    let n = storaged::WIPE_CHUNK as usize * 2 + 37;
    let writes: Vec<_> = (0..n)
        .map(|i| store.merge(Target::Rid(Rid::mint()), fields(&[("n", &i.to_string())])))
        .collect();
    for w in futures_util::future::join_all(writes).await {
        w.unwrap();
    }
    store
        .kv_put(metacore::key::KeyWrite::new("udl:u/x", "kept").unwrap())
        .await
        .unwrap();
    assert_eq!(store.roots().await.unwrap(), n as u64);
    let head = store.stream_info(StreamName::Meta).await.unwrap().last;
    assert_eq!(store.wipe().await.unwrap(), n as u64);
    assert_eq!(store.roots().await.unwrap(), 0);
    let page = store.list_roots(PageStart::default(), 10).await.unwrap();
    assert!(page.rids.is_empty());
    let dels = store
        .entries(StreamName::Meta, head, 10_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.fields["type"] == "del")
        .count();
    assert_eq!(dels, n, "one del event per field");
    assert_eq!(
        store.kv_get("udl:u/x".into()).await.unwrap().as_deref(),
        Some("kept"),
        "only records go"
    );
    assert_eq!(store.wipe().await.unwrap(), 0, "nothing left to wipe");
    store.close().await;
}

#[tokio::test]
async fn pages_of_roots_skip_an_offset_inside_storaged() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Options::for_path(dir.path().join("o.db"))).unwrap();
    let mut rids: Vec<Rid> = (0..30).map(|_| Rid::mint()).collect();
    for rid in &rids {
        store
            .merge(Target::Rid(*rid), fields(&[("a", "1")]))
            .await
            .unwrap();
    }
    rids.sort();
    let at = |offset| PageStart {
        after: None,
        offset,
    };
    let page = store.list_roots(at(7), 5).await.unwrap();
    assert_eq!(page.rids, rids[7..12]);
    assert_eq!(page.next, Some(rids[11]));
    let page = store.list_roots(at(28), 5).await.unwrap();
    assert_eq!((page.rids, page.next), (rids[28..].to_vec(), None));
    assert!(store.list_roots(at(30), 5).await.unwrap().rids.is_empty());
    let after = PageStart {
        after: Some(rids[9]),
        offset: 2,
    };
    assert_eq!(store.list_roots(after, 3).await.unwrap().rids, rids[12..15]);
    let names = vec![name("a")];
    let page = store.fields_page(names, at(29), 5).await.unwrap();
    assert_eq!(page.rows.len(), 1);
    assert_eq!(page.rows[0].rid, rids[29]);
    store.close().await;
}

#[tokio::test]
async fn totals_count_files_and_their_sizes_in_one_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Options::for_path(dir.path().join("t.db"))).unwrap();
    for (path, size) in [
        (Some("/files/a"), Some("100")),
        (Some("/files/b"), Some("23")),
        (Some("/files/c"), Some("not a number")),
        (Some("/files/d"), None),
        (None, Some("5000")),
        (None, None),
    ] {
        let mut f = vec![("title", "t")];
        f.extend(path.map(|p| ("filePath", p)));
        f.extend(size.map(|s| ("sizeByte", s)));
        store
            .merge(Target::Rid(Rid::mint()), fields(&f))
            .await
            .unwrap();
    }
    let t = store.totals().await.unwrap();
    assert_eq!((t.roots, t.files), (6, 4));
    assert_eq!(t.file_bytes, 123, "a size that is no number counts 0");
    assert_eq!(t.bytes, 5123);
    store.close().await;
}

#[tokio::test]
async fn an_import_plans_each_record_where_it_writes_and_refuses_bad_ones_alone() {
    use metacore::api::storaged::{ImportBody, ImportConflict, ImportMode, ImportRecord};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Options::for_path(dir.path().join("i.db"))).unwrap();
    let (a, b) = (Rid::mint(), Rid::mint());
    store
        .merge(Target::Rid(a), fields(&[("x", "ours"), ("y", "1")]))
        .await
        .unwrap();
    let raw = metacore::record::fields_of;
    let body = |dry_run| ImportBody {
        mode: ImportMode::Merge,
        conflict: ImportConflict::Mine,
        dry_run,
        records: vec![
            ImportRecord {
                rid: a,
                fields: raw(&[("x", "theirs"), ("z", "new")]),
            },
            ImportRecord {
                rid: b,
                fields: raw(&[("cid_x", "retired")]),
            },
        ],
    };
    let group = |dry_run| storaged::ImportGroup::check(body(dry_run)).unwrap();
    let dry = store.import(group(true)).await.unwrap().records;
    assert_eq!((dry[0].counts.added, dry[0].counts.kept), (1, 1));
    assert!(
        dry[1]
            .error
            .as_deref()
            .unwrap()
            .starts_with("deprecated_field")
    );
    let get = |rid| store.get_record(Target::Rid(rid));
    assert_eq!(
        get(a).await.unwrap().fields.len(),
        2,
        "a dry run writes nothing"
    );
    let done = store.import(group(false)).await.unwrap().records;
    assert_eq!(
        done[0].counts, dry[0].counts,
        "a dry run counts what a run does"
    );
    assert_eq!(
        get(a).await.unwrap().fields,
        raw(&[("x", "ours"), ("y", "1"), ("z", "new")])
    );
    assert!(done[1].error.is_some());
    assert!(get(b).await.is_err(), "the refused record is not made");
    store.close().await;
}

/// The tree (one index seek per entry) answers what a listing of every key
/// under the prefix, split by hand, answers; and its pages, followed by
/// `next`, add up to the whole level.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tree_is_one_level_of_the_keys_and_its_pages_add_up() {
    use metacore::api::storaged::{KvTreeQuery, RangeQuery};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Options::for_path(dir.path().join("t.db"))).unwrap();
    // Keys from a small alphabet with both delimiters, so that branches,
    // leaves, a leaf that is also a branch's stem and empty segments occur.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let alphabet = ['a', 'b', '/', ':', 'é', 'z'];
    let mut keys = std::collections::BTreeSet::new();
    while keys.len() < 400 {
        let len = 1 + (next() % 6) as usize;
        let tail: String = (0..len)
            .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
            .collect();
        keys.insert(format!("udl:{tail}"));
    }
    for k in &keys {
        store
            .kv_put(metacore::key::KeyWrite::new(k, "v").unwrap())
            .await
            .unwrap();
    }
    let all: Vec<String> = store
        .kv_range(RangeQuery::default(), 10_000)
        .await
        .unwrap()
        .rows
        .into_iter()
        .map(|r| r.key)
        .collect();
    for (prefix, delimiter) in [
        ("udl:", "/"),
        ("udl:", ":"),
        ("udl:a", "/"),
        ("udl:a/", "/"),
        ("udl:", ""),
        ("", ":"),
        ("udl:é", "é"),
        ("nothing:", "/"),
    ] {
        let mut branches = std::collections::BTreeSet::new();
        let mut leaves = Vec::new();
        for k in all.iter().filter(|k| k.starts_with(prefix)) {
            let rest = &k[prefix.len()..];
            match rest.find(delimiter).filter(|_| !delimiter.is_empty()) {
                Some(i) => {
                    branches.insert(format!("{prefix}{}{delimiter}", &rest[..i]));
                }
                None => leaves.push(k.clone()),
            }
        }
        let whole = store
            .kv_tree(KvTreeQuery {
                prefix: prefix.into(),
                delimiter: delimiter.into(),
                start: None,
                max: 10_000,
            })
            .await
            .unwrap();
        let want: Vec<String> = branches.into_iter().collect();
        assert_eq!(whole.branches, want, "{prefix:?} {delimiter:?}");
        assert_eq!(whole.leaves, leaves, "{prefix:?} {delimiter:?}");
        assert_eq!(whole.next, None);
        for max in [1, 2, 7] {
            let (mut b, mut l, mut start) = (Vec::new(), Vec::new(), None);
            loop {
                let page = store
                    .kv_tree(KvTreeQuery {
                        prefix: prefix.into(),
                        delimiter: delimiter.into(),
                        start: start.take(),
                        max,
                    })
                    .await
                    .unwrap();
                assert!(page.branches.len() + page.leaves.len() <= max as usize);
                b.extend(page.branches);
                l.extend(page.leaves);
                match page.next {
                    Some(n) => start = Some(n),
                    None => break,
                }
            }
            assert_eq!(
                (&b, &l),
                (&whole.branches, &whole.leaves),
                "{prefix:?} {delimiter:?} max {max}"
            );
        }
    }
}
