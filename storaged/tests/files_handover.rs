//! A record's `filePath` handed to a live duplicate, on a real SQLite file:
//! when the watcher announces the delete of the file it names, when that
//! path is overwritten with another record's content, and by the paged
//! repair a rescan runs over a store left with stale ones (finding N4).

use metacore::api::storaged::{
    FileState, Observation, ObserveBody, ObserveOutcome, REPAIR_PAGE, RepairBody, RepairDone,
    ResetBody,
};
use metacore::checked::{CheckedField, FilePath, RelPath};
use metacore::cid::Cid;
use metacore::record::Target;
use metacore::rid::Rid;
use metacore::stream::StreamName;
use storaged::{Options, Store};

const ROOT: &str = "/files";

fn open(dir: &tempfile::TempDir) -> Store {
    Store::open(&Options::for_path(dir.path().join("db/meta-core.db"))).unwrap()
}

fn rel(p: &str) -> RelPath {
    RelPath::new(p).unwrap()
}

/// A made-up midhash per content number.
fn hash_of(n: u32) -> Cid {
    let mut digest = [7u8; 32];
    digest[..4].copy_from_slice(&n.to_be_bytes());
    Cid::midhash256(&digest)
}

fn state(n: u32) -> FileState {
    FileState {
        size: 100 + u64::from(n),
        mtime_ns: 1_700_000_000_000_000_000 + i64::from(n),
        midhash: hash_of(n),
    }
}

fn present(path: &str, n: u32) -> Observation {
    Observation::Present {
        path: rel(path),
        file: state(n),
    }
}

fn gone(path: &str) -> Observation {
    Observation::Gone { path: rel(path) }
}

async fn one(store: &Store, o: Observation) -> ObserveOutcome {
    let mut out = store
        .observe(ObserveBody {
            root: FilePath::new(ROOT).unwrap(),
            observations: vec![o],
        })
        .await;
    let out = out.remove(0);
    assert_eq!(out.error, None);
    out
}

async fn field(store: &Store, n: u32, name: &str) -> Option<String> {
    let rec = store.get_record(Target::Cid(hash_of(n))).await.ok()?;
    rec.fields.get(name).cloned()
}

/// Every `dup:` key, sorted.
fn dups(store: &Store) -> Vec<String> {
    let c = rusqlite::Connection::open(store.db_path()).unwrap();
    let mut stmt = c
        .prepare("SELECT k FROM kv WHERE k >= 'dup:' AND k < 'dup;' ORDER BY k")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

async fn last_id(store: &Store, stream: StreamName) -> Option<String> {
    let b = store.stream_bounds(stream).await.unwrap();
    b.last.map(|id| id.to_string())
}

/// Every page of one repair, summed.
async fn repair_all(store: &Store) -> (RepairDone, usize) {
    let mut total = RepairDone::default();
    let mut after: Option<Rid> = None;
    let mut pages = 0;
    loop {
        let page = store
            .repair_files(RepairBody {
                root: FilePath::new(ROOT).unwrap(),
                after,
            })
            .await
            .unwrap();
        pages += 1;
        total.records += page.records;
        total.promoted += page.promoted;
        match page.next {
            Some(n) => after = Some(n),
            None => return (total, pages),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delete_of_a_file_path_hands_it_to_the_live_duplicate_in_its_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let rid = one(&store, present("watch/a.mkv", 1)).await.rid.unwrap();
    one(
        &store,
        Observation::Moved {
            from: rel("watch/a.mkv"),
            path: rel("watch/b.mkv"),
            file: state(1),
        },
    )
    .await;
    one(&store, present("plugin/c.mkv", 1)).await;
    assert_eq!(dups(&store), [format!("dup:{rid}//files/plugin/c.mkv")]);
    let meta_before = last_id(&store, StreamName::Meta).await;

    // One observation: the delete, and the duplicate taking the path over.
    let out = one(&store, gone("watch/b.mkv")).await;
    assert_eq!(out.event.as_deref(), Some("delete"));
    assert_eq!(
        field(&store, 1, "filePath").await.as_deref(),
        Some("/files/plugin/c.mkv")
    );
    assert_eq!(dups(&store), Vec::<String>::new(), "it left the dup: rows");
    assert_ne!(last_id(&store, StreamName::Meta).await, meta_before);
    assert_eq!(store.roots().await.unwrap(), 1);

    // Its last file gone too: the record keeps it as its filePath.
    one(&store, gone("plugin/c.mkv")).await;
    assert_eq!(
        field(&store, 1, "filePath").await.as_deref(),
        Some("/files/plugin/c.mkv")
    );
    assert_eq!(store.roots().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_path_overwritten_with_other_content_hands_over_to_the_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let x = one(&store, present("watch/x.mkv", 1)).await.rid.unwrap();
    one(&store, present("plugin/x-copy.mkv", 1)).await;
    let y = one(&store, present("watch/y.mkv", 2)).await.rid.unwrap();
    // y moved over x: x.mkv holds y's content now.
    let out = one(
        &store,
        Observation::Moved {
            from: rel("watch/y.mkv"),
            path: rel("watch/x.mkv"),
            file: state(2),
        },
    )
    .await;
    assert_eq!(out.rid, Some(y));
    assert_eq!(
        field(&store, 1, "filePath").await.as_deref(),
        Some("/files/plugin/x-copy.mkv"),
        "x's record is on its live copy"
    );
    assert_eq!(
        field(&store, 2, "filePath").await.as_deref(),
        Some("/files/watch/x.mkv")
    );
    assert_eq!(dups(&store), Vec::<String>::new());

    // The same, announced as a change of x.mkv while y.mkv is still seen,
    // then y.mkv's delete: each record ends on its live file.
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    one(&store, present("watch/x.mkv", 1)).await;
    one(&store, present("plugin/x-copy.mkv", 1)).await;
    one(&store, present("watch/y.mkv", 2)).await;
    one(&store, present("watch/x.mkv", 2)).await;
    assert_eq!(
        field(&store, 1, "filePath").await.as_deref(),
        Some("/files/plugin/x-copy.mkv")
    );
    assert_eq!(dups(&store).len(), 1, "x.mkv is a duplicate of y's record");
    one(&store, gone("watch/y.mkv")).await;
    assert_eq!(
        field(&store, 2, "filePath").await.as_deref(),
        Some("/files/watch/x.mkv")
    );
    assert_eq!(dups(&store), Vec::<String>::new());
    assert_ne!(x, y);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repair_hands_stale_file_paths_to_live_duplicates_page_by_page_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let n = REPAIR_PAGE as u32 + 10;
    for i in 0..n {
        one(&store, present(&format!("watch/f{i:04}"), i)).await;
        one(&store, present(&format!("plugin/f{i:04}"), i)).await;
    }
    // A record whose filePath is outside FILES_PATH is not the watcher's
    // to move; one whose duplicate is not seen has nothing to take it.
    let outside = n;
    one(&store, present("watch/outside", outside)).await;
    one(&store, present("plugin/outside", outside)).await;
    store
        .set_field(
            Target::Cid(hash_of(outside)),
            CheckedField::new("filePath", "/elsewhere/outside").unwrap(),
        )
        .await
        .unwrap();
    let unseen = n + 1;
    one(&store, present("watch/unseen", unseen)).await;
    one(&store, present("other/unseen", unseen)).await;
    // What watcherd knew of watch/ and other/ is forgotten: every filePath
    // under watch/ now names no live file, as finding N4 left them.
    store
        .reset_files(ResetBody {
            dirs: vec!["watch".into(), "other".into()],
            watcher_id: "w".into(),
        })
        .await
        .unwrap();
    assert_eq!(dups(&store).len(), n as usize + 2);
    let files_before = last_id(&store, StreamName::Files).await;

    let (done, pages) = repair_all(&store).await;
    assert_eq!(done.records, u64::from(n) + 2);
    assert_eq!(done.promoted, u64::from(n));
    assert_eq!(pages, 2, "{REPAIR_PAGE} records a page");
    for i in [0, n / 2, n - 1] {
        assert_eq!(
            field(&store, i, "filePath").await,
            Some(format!("/files/plugin/f{i:04}"))
        );
        assert_eq!(
            field(&store, i, "sizeByte").await,
            Some(state(i).size.to_string())
        );
    }
    assert_eq!(
        field(&store, outside, "filePath").await.as_deref(),
        Some("/elsewhere/outside")
    );
    assert_eq!(
        field(&store, unseen, "filePath").await.as_deref(),
        Some("/files/watch/unseen")
    );
    assert_eq!(dups(&store).len(), 2, "the promoted left their dup: rows");
    assert_eq!(last_id(&store, StreamName::Files).await, files_before);

    // Again: nothing to do, nothing written.
    let meta = last_id(&store, StreamName::Meta).await;
    let (again, _) = repair_all(&store).await;
    assert_eq!((again.records, again.promoted), (2, 0));
    assert_eq!(last_id(&store, StreamName::Meta).await, meta);
    assert_eq!(store.roots().await.unwrap(), u64::from(n) + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_path_the_watcher_cannot_see_leave_is_kept_by_the_repair() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let set_path = |n: u32, p: &'static str| {
        let store = &store;
        async move {
            store
                .set_field(
                    Target::Cid(hash_of(n)),
                    CheckedField::new("filePath", p).unwrap(),
                )
                .await
                .unwrap();
        }
    };
    // Each record has a live file and a live duplicate; a sorter then
    // writes its filePath: under corn/ (a mount, which inotify does not
    // see), a hidden name (never announced), a plain folder (which the
    // watcher covers: this one names no live file and is repaired).
    for (n, to) in [
        (1, "/files/corn/gdrive/films/x.mkv"),
        (2, "/files/watch/.x.mkv.partial"),
        (3, "/files/corn"),
        (4, "/files/watch/sorted/x.mkv"),
    ] {
        one(&store, present(&format!("watch/f{n}.mkv"), n)).await;
        one(&store, present(&format!("plugin/f{n}.mkv"), n)).await;
        set_path(n, to).await;
    }
    let (done, _) = repair_all(&store).await;
    assert_eq!((done.records, done.promoted), (4, 1), "{done:?}");
    assert_eq!(
        field(&store, 1, "filePath").await.as_deref(),
        Some("/files/corn/gdrive/films/x.mkv")
    );
    assert_eq!(
        field(&store, 2, "filePath").await.as_deref(),
        Some("/files/watch/.x.mkv.partial")
    );
    assert_eq!(
        field(&store, 3, "filePath").await.as_deref(),
        Some("/files/corn")
    );
    assert_eq!(
        field(&store, 4, "filePath").await.as_deref(),
        Some("/files/plugin/f4.mkv"),
        "a covered path with no live file is repaired"
    );
    // Again, and after another copy turns up: still the sorter's.
    one(&store, present("watch/another.mkv", 1)).await;
    repair_all(&store).await;
    assert_eq!(
        field(&store, 1, "filePath").await.as_deref(),
        Some("/files/corn/gdrive/films/x.mkv")
    );

    // Under corn/ a polling watcher does see files come and go: the
    // observations that say so move the filePath themselves.
    one(&store, present("corn/gdrive/m.mkv", 5)).await;
    one(&store, present("plugin/m.mkv", 5)).await;
    one(
        &store,
        Observation::Moved {
            from: rel("corn/gdrive/m.mkv"),
            path: rel("corn/gdrive/n.mkv"),
            file: state(5),
        },
    )
    .await;
    assert_eq!(
        field(&store, 5, "filePath").await.as_deref(),
        Some("/files/corn/gdrive/n.mkv"),
        "the rename under corn/ is followed"
    );
    one(&store, gone("corn/gdrive/n.mkv")).await;
    assert_eq!(
        field(&store, 5, "filePath").await.as_deref(),
        Some("/files/plugin/m.mkv"),
        "its delete hands it to the live duplicate"
    );
}
