//! The watcher's observations applied by the store, on a real SQLite file:
//! mint, duplicates, change in place, rename, delete, reset, and the
//! `seen:` rows and `file:events` entries committed with each.

use metacore::api::storaged::{
    FileState, Observation, ObserveBody, ObserveOutcome, ResetBody, SeenRow,
};
use metacore::checked::{FilePath, RelPath};
use metacore::cid::Cid;
use metacore::record::Target;
use metacore::stream::{Entry, StreamName};
use storaged::{Options, Store};

const ROOT: &str = "/files";

fn open(dir: &tempfile::TempDir) -> Store {
    Store::open(&Options::for_path(dir.path().join("db/meta-core.db"))).unwrap()
}

fn rel(p: &str) -> RelPath {
    RelPath::new(p).unwrap()
}

/// A made-up midhash per content label (any valid CIDv1 will do here; the
/// real midhash is watcherd's and has its own vectors).
fn hash_of(label: &str) -> Cid {
    let mut digest = [0u8; 32];
    for (i, b) in label.bytes().enumerate() {
        digest[i % 32] ^= b.wrapping_add(i as u8);
    }
    digest[31] = label.len() as u8;
    Cid::midhash256(&digest)
}

fn state(label: &str, size: u64) -> FileState {
    FileState {
        size,
        mtime_ns: 1_700_000_000_000_000_000,
        midhash: hash_of(label),
    }
}

fn present(path: &str, file: FileState) -> Observation {
    Observation::Present {
        path: rel(path),
        file,
    }
}

async fn apply(store: &Store, observations: Vec<Observation>) -> Vec<ObserveOutcome> {
    store
        .observe(ObserveBody {
            root: FilePath::new(ROOT).unwrap(),
            observations,
        })
        .await
}

async fn one(store: &Store, o: Observation) -> ObserveOutcome {
    let out = apply(store, vec![o]).await.remove(0);
    assert_eq!(out.error, None);
    out
}

async fn events(store: &Store) -> Vec<Entry> {
    store.entries(StreamName::Files, None, 1000).await.unwrap()
}

async fn field(store: &Store, cid: &Cid, name: &str) -> Option<String> {
    let rec = store.get_record(Target::Cid(cid.clone())).await.ok()?;
    rec.fields.get(name).cloned()
}

async fn seen(store: &Store) -> Vec<SeenRow> {
    store.seen(None, 1000).await.unwrap().rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_file_mints_a_record_announced_in_the_same_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let a = state("a", 11);
    let out = one(&store, present("watch/a.mkv", a.clone())).await;
    assert!(out.minted);
    assert_eq!(out.event.as_deref(), Some("add"));
    let rid = out.rid.unwrap();
    let rec = store
        .get_record(Target::Cid(a.midhash.clone()))
        .await
        .unwrap();
    assert_eq!(
        rec.rid, rid,
        "the midhash CID resolves to the minted record"
    );
    assert_eq!(rec.fields["filePath"], "/files/watch/a.mkv");
    assert_eq!(rec.fields["sizeByte"], "11");
    assert_eq!(rec.fields["mtimeNano"], "1700000000000000000");
    assert_eq!(rec.fields[&format!("cids/{}", a.midhash)], "true");
    let ev = events(&store).await;
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].id, out.id.unwrap());
    let f = &ev[0].fields;
    assert_eq!(f["type"], "add");
    assert_eq!(f["path"], "watch/a.mkv");
    assert_eq!(f["size"], "11");
    assert_eq!(f["midhash256"], a.midhash.to_string());
    assert!(f["timestamp"].parse::<u64>().is_ok());
    assert_eq!(seen(&store).await.len(), 1);

    // The same again is nothing: no event, no second record.
    let again = one(&store, present("watch/a.mkv", a.clone())).await;
    assert_eq!(
        (again.rid, again.event, again.minted),
        (Some(rid), None, false)
    );
    assert_eq!(events(&store).await.len(), 1);
    assert_eq!(store.roots().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_content_at_a_second_path_is_a_duplicate_of_one_record() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let a = state("a", 5);
    let first = one(&store, present("watch/a.mkv", a.clone())).await;
    let second = one(&store, present("plugin/copy.mkv", a.clone())).await;
    assert_eq!(second.rid, first.rid);
    assert!(!second.minted);
    assert_eq!(second.event.as_deref(), Some("add"));
    assert_eq!(store.roots().await.unwrap(), 1);
    let doc = store
        .document(Target::Cid(a.midhash.clone()))
        .await
        .unwrap();
    let json = serde_json::to_value(&doc).unwrap();
    assert!(
        json.to_string().contains("/files/plugin/copy.mkv"),
        "the duplicate path is listed: {json}"
    );
    assert_eq!(
        field(&store, &a.midhash, "filePath").await.as_deref(),
        Some("/files/watch/a.mkv"),
        "the first path stays the record's"
    );
    // The duplicate goes: the record keeps its path.
    let out = one(
        &store,
        Observation::Gone {
            path: rel("plugin/copy.mkv"),
        },
    )
    .await;
    assert_eq!(out.event.as_deref(), Some("delete"));
    let doc = serde_json::to_value(
        store
            .document(Target::Cid(a.midhash.clone()))
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(!doc.to_string().contains("copy.mkv"), "{doc}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_in_place_moves_the_record_to_the_new_content() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let (a, b) = (state("a", 5), state("b", 6));
    let first = one(&store, present("watch/a.mkv", a.clone())).await;
    let changed = one(&store, present("watch/a.mkv", b.clone())).await;
    assert_eq!(changed.event.as_deref(), Some("change"));
    assert_eq!(changed.rid, first.rid, "one record per file");
    assert!(!changed.minted);
    assert!(store.resolve(Target::Cid(a.midhash.clone())).await.is_err());
    assert_eq!(
        store.resolve(Target::Cid(b.midhash.clone())).await.unwrap(),
        first.rid.unwrap()
    );
    assert_eq!(
        field(&store, &b.midhash, "sizeByte").await.as_deref(),
        Some("6")
    );
    let ev = events(&store).await;
    assert_eq!(ev[1].fields["midhash256"], b.midhash.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_is_one_event_and_the_record_follows() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let a = state("a", 5);
    let first = one(&store, present("watch/a.mkv", a.clone())).await;
    let out = one(
        &store,
        Observation::Moved {
            from: rel("watch/a.mkv"),
            path: rel("sorted/A (2020).mkv"),
            file: a.clone(),
        },
    )
    .await;
    assert_eq!(out.rid, first.rid);
    assert_eq!(out.event.as_deref(), Some("rename"));
    assert_eq!(
        field(&store, &a.midhash, "filePath").await.as_deref(),
        Some("/files/sorted/A (2020).mkv")
    );
    let ev = events(&store).await;
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[1].fields["type"], "rename");
    assert_eq!(ev[1].fields["path"], "sorted/A (2020).mkv");
    assert_eq!(ev[1].fields["oldPath"], "watch/a.mkv");
    let paths: Vec<String> = seen(&store)
        .await
        .into_iter()
        .map(|r| r.path.to_string())
        .collect();
    assert_eq!(paths, ["sorted/A (2020).mkv"]);

    // A move whose content is not what was seen at the old path is a
    // delete and an add.
    let b = state("b", 7);
    let out = one(
        &store,
        Observation::Moved {
            from: rel("sorted/A (2020).mkv"),
            path: rel("watch/b.mkv"),
            file: b.clone(),
        },
    )
    .await;
    assert_eq!(out.event.as_deref(), Some("add"));
    let kinds: Vec<String> = events(&store)
        .await
        .iter()
        .map(|e| e.fields["type"].clone())
        .collect();
    assert_eq!(kinds, ["add", "rename", "delete", "add"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_keeps_the_record_and_a_return_elsewhere_takes_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let a = state("a", 5);
    let first = one(&store, present("watch/a.mkv", a.clone())).await;
    let gone = one(
        &store,
        Observation::Gone {
            path: rel("watch/a.mkv"),
        },
    )
    .await;
    assert_eq!(gone.event.as_deref(), Some("delete"));
    let ev = events(&store).await;
    assert_eq!(ev[1].fields.get("size"), None, "a delete carries no size");
    assert_eq!(ev[1].fields.get("midhash256"), None);
    assert_eq!(store.roots().await.unwrap(), 1, "the record is kept");
    // Gone twice is nothing.
    let twice = one(
        &store,
        Observation::Gone {
            path: rel("watch/a.mkv"),
        },
    )
    .await;
    assert_eq!(twice.event, None);
    // The content comes back at another path: that path is the record's now.
    let back = one(&store, present("archive/a.mkv", a.clone())).await;
    assert_eq!(back.rid, first.rid);
    assert_eq!(
        field(&store, &a.midhash, "filePath").await.as_deref(),
        Some("/files/archive/a.mkv")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_forgets_a_folder_and_starts_the_stream_over() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    apply(
        &store,
        vec![
            present("watch/a", state("a", 1)),
            present("watch/sub/b", state("b", 2)),
            present("plugin/c", state("c", 3)),
            present("watchers/d", state("d", 4)),
        ],
    )
    .await;
    let before = store
        .stream_bounds(StreamName::Files)
        .await
        .unwrap()
        .last
        .unwrap();
    let done = store
        .reset_files(ResetBody {
            dirs: vec!["watch".into()],
            watcher_id: "1a2b3c4d".into(),
        })
        .await
        .unwrap();
    assert_eq!(done.forgotten, 2);
    assert!(done.id > before, "IDs go on after a reset");
    let ev = events(&store).await;
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].fields["type"], "reset");
    assert_eq!(ev[0].fields["path"], "");
    assert_eq!(ev[0].fields["watcherId"], "1a2b3c4d");
    let paths: Vec<String> = seen(&store)
        .await
        .into_iter()
        .map(|r| r.path.to_string())
        .collect();
    assert_eq!(paths, ["plugin/c", "watchers/d"]);
    // Seen again after the reset, a file is an add on its old record.
    let again = one(&store, present("watch/a", state("a", 1))).await;
    assert_eq!(again.event.as_deref(), Some("add"));
    assert!(!again.minted);
    assert_eq!(store.roots().await.unwrap(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seen_rows_page_in_path_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let obs: Vec<Observation> = (0..25)
        .map(|i| present(&format!("watch/f{i:02}"), state(&format!("c{i}"), i)))
        .collect();
    let outs = apply(&store, obs).await;
    assert!(outs.iter().all(|o| o.error.is_none() && o.minted));
    let mut all = Vec::new();
    let mut after = None;
    loop {
        let page = store.seen(after.clone(), 10).await.unwrap();
        all.extend(page.rows);
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(all.len(), 25);
    assert!(all.windows(2).all(|w| w[0].path < w[1].path));
    assert_eq!(all[3].file.size, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_overwritten_with_another_records_content_leaves_its_old_record() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let (a, b) = (state("a", 5), state("b", 6));
    let rec_a = one(&store, present("watch/a.mkv", a.clone()))
        .await
        .rid
        .unwrap();
    let rec_b = one(&store, present("watch/b.mkv", b.clone()))
        .await
        .rid
        .unwrap();
    // a.mkv now holds b's content: a duplicate of B, and A's filePath no
    // longer names a file with A's content.
    let out = one(&store, present("watch/a.mkv", b.clone())).await;
    assert_eq!(out.rid, Some(rec_b));
    assert_eq!(out.event.as_deref(), Some("change"));
    assert_eq!(field(&store, &a.midhash, "filePath").await, None);
    assert_eq!(
        store.resolve(Target::Cid(a.midhash.clone())).await.unwrap(),
        rec_a
    );
    let doc = serde_json::to_value(
        store
            .document(Target::Cid(b.midhash.clone()))
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(doc.to_string().contains("/files/watch/a.mkv"), "{doc}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_that_takes_the_record_is_no_longer_its_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let a = state("a", 5);
    let rid = one(&store, present("watch/a.mkv", a.clone()))
        .await
        .rid
        .unwrap();
    one(&store, present("plugin/a-copy.mkv", a.clone())).await;
    let dup = format!("dup:{rid}//files/plugin/a-copy.mkv");
    let dups = |store: &Store| {
        let key = dup.clone();
        let path = store.db_path().to_owned();
        async move {
            let c = rusqlite::Connection::open(path).unwrap();
            c.query_row("SELECT count(*) FROM kv WHERE k = ?1", [key], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap()
        }
    };
    assert_eq!(dups(&store).await, 1);
    // After a reset, the copy is seen first: it takes the record's path,
    // and its duplicate row goes.
    store
        .reset_files(ResetBody {
            dirs: vec![],
            watcher_id: "w".into(),
        })
        .await
        .unwrap();
    one(&store, present("plugin/a-copy.mkv", a.clone())).await;
    assert_eq!(
        field(&store, &a.midhash, "filePath").await.as_deref(),
        Some("/files/plugin/a-copy.mkv")
    );
    assert_eq!(dups(&store).await, 0);
    // A duplicate moved: the old duplicate row goes, the new path is one.
    one(&store, present("watch/a.mkv", a.clone())).await;
    one(
        &store,
        Observation::Moved {
            from: rel("watch/a.mkv"),
            path: rel("watch/moved.mkv"),
            file: a.clone(),
        },
    )
    .await;
    let doc = serde_json::to_value(
        store
            .document(Target::Cid(a.midhash.clone()))
            .await
            .unwrap(),
    )
    .unwrap()
    .to_string();
    assert!(
        doc.contains("/files/watch/moved.mkv") && !doc.contains("/files/watch/a.mkv"),
        "{doc}"
    );
}
