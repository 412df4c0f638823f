//! meta-core's own folders nested in `FILES_PATH` (issue 23 review,
//! finding 15), under the real supervisor with real inotify:
//! `META_CORE_PATH`, the database's folder, `META_CORE_LOG_DIR` and
//! `META_CORE_RUN_DIR` inside `FILES_PATH` are neither watched, walked nor
//! announced (the admin token, the database and the logs would be records
//! otherwise), while the library beside them is.

use std::path::{Path, PathBuf};
use std::time::Duration;

use e2e::daemon::test_dir;
use e2e::sse::{Follower, Next};
use e2e::supervisor::Launch;
use e2e::wait::{DAEMON_DEADLINE, until};
use metacore::api::watcherd::WatcherdClient;
use metacore::checked::RelPath;
use serde_json::{Value, json};

use super::watcherd::Watched;

/// meta-core's folders, relative to `FILES_PATH`, as the test nests them.
const OWN: [&str; 4] = ["meta-core", "db", "logs", "run"];

/// Rows of the store at `db` that name a path under `FILES_PATH/<rel>`:
/// what the watcher saw, a record's `filePath` or duplicate, a
/// `file:events` entry.
fn naming(db: &Path, files: &Path, rel: &str) -> Vec<String> {
    let abs = format!("{}/{rel}/", files.display());
    let c = rusqlite::Connection::open(db).unwrap();
    let mut stmt = c
        .prepare(
            "SELECT k || ' = ' || v FROM kv WHERE k LIKE 'seen:' || ?1 || '/%' \
             OR (k LIKE 'dup:%' AND instr(k, ?2) > 0) \
             OR (k LIKE 'file:%/filePath' AND instr(v, ?2) = 1) \
             OR (k LIKE 'ev:file:events/%' AND instr(v, '\"path\":\"' || ?1 || '/') > 0)",
        )
        .unwrap();
    stmt.query_map([rel, abs.as_str()], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The path of every event until the `add` of `last`.
async fn paths_until_add(f: &mut Follower, last: &str) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        match f.next(Duration::from_secs(30)).await {
            Next::Event(e) => {
                let path = e.field("path").to_owned();
                out.push(path.clone());
                if e.event == "add" && path == last {
                    return out;
                }
            }
            other => panic!("no add of {last}; got {out:?} then {other:?}"),
        }
    }
}

#[tokio::test]
async fn meta_core_folders_nested_in_files_path_are_never_watched_nor_announced() {
    let dir = test_dir();
    let files = dir.path().join("files");
    let own = |rel: &str| files.join(rel);
    let db: PathBuf = own("db").join("meta-core.db");
    let mc = Launch::in_dir(dir.path(), "files/run")
        .env("META_CORE_PATH", &own("meta-core").display().to_string())
        .env("META_CORE_DB_PATH", &db.display().to_string())
        .env("META_CORE_LOG_DIR", &own("logs").display().to_string())
        .env("DEBOUNCE_MS", "100")
        .start()
        .await;
    let w = Watched { dir, mc };
    w.wait_loaded().await;
    assert!(
        own("meta-core/secrets/admin-token").is_file(),
        "the token is there to be found"
    );
    let mut f = w.follow().await;

    // Media-like files in each of them, at their top and deeper down, then
    // one in watch/: events come in order, so once its add is announced
    // whatever was written before it was taken in.
    for rel in OWN {
        w.write(&format!("{rel}/planted.mkv"), rel.as_bytes());
        w.write(&format!("{rel}/deeper/planted.mkv"), b"deeper");
    }
    w.write("watch/a.mkv", b"a film");
    let seen = paths_until_add(&mut f, "watch/a.mkv").await;
    assert_eq!(seen, ["watch/a.mkv"], "only the library is announced");

    // Walked on request: FILES_PATH finds only the library (through a
    // watcher of it, off, walked once: /scan names a folder inside
    // FILES_PATH), each folder of meta-core's nothing.
    let socket = w.watcherd();
    let made: Value = socket
        .call(
            http::Method::POST,
            "/watchers",
            Some(&json!({ "path": files.display().to_string() })),
        )
        .await
        .expect("a watcher of FILES_PATH");
    let id = made["id"].as_str().expect("its id");
    let walked: Value = socket
        .call::<(), _>(http::Method::POST, &format!("/watchers/{id}/scan"), None)
        .await
        .expect("a walk of FILES_PATH");
    assert_eq!(walked["fileCount"], 1, "{walked}");
    let _: Value = socket
        .call::<(), _>(http::Method::DELETE, &format!("/watchers/{id}"), None)
        .await
        .expect("the watcher deleted");
    let client = WatcherdClient::new(socket.path());
    for rel in OWN {
        let done = client
            .scan(&RelPath::new(rel).unwrap())
            .await
            .expect("a scan on watcherd's socket");
        assert_eq!(done.file_count, 0, "{rel}");
    }

    let s = until("the watcher to settle", DAEMON_DEADLINE, || async {
        let s: Value = w.watcherd().get("/status").await.ok()?;
        (s["pending"] == 0 && s["gone"] == 0 && s["repair"]["due"] == false).then_some(s)
    })
    .await;
    assert_eq!(s["knownFiles"], 1, "{s}");
    assert_eq!(
        s["inotify"]["watchedDirs"], 3,
        "FILES_PATH, watch/, plugin/: {s}"
    );
    for rel in OWN {
        assert_eq!(naming(&db, &files, rel), Vec::<String>::new(), "{rel}");
    }
    assert_eq!(naming(&db, &files, "watch").len(), 3, "seen, filePath, add");
}
