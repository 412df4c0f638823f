//! The repair of stale `filePath`s (issue 23, finding N4): a store left
//! with a `filePath` that is gone, its live file only a duplicate, while
//! watcherd was down, repaired at its next start and left alone by the
//! next scan; a due repair that still runs on a tree that never settles (a
//! download being written: review finding 9); and storaged's repair route
//! refusing bad input.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use e2e::wait::{DAEMON_DEADLINE, until};
use serde_json::{Value, json};

use super::watcherd::{Watched, content, launch, midhash};
use super::watcherd_renames::{
    DEBOUNCE_MS, Op, Storm, assert_records_follow_files, bytes_of, settle,
};
use e2e::snapshot;

/// The meta:events entries in the store.
fn meta_events(w: &Watched) -> i64 {
    w.query("SELECT count(*) FROM kv WHERE k LIKE 'ev:meta:events/%'")
}

fn file_events(w: &Watched) -> i64 {
    w.query("SELECT count(*) FROM kv WHERE k LIKE 'ev:file:events/%'")
}

#[tokio::test]
async fn a_stale_file_path_left_while_watcherd_was_down_is_repaired_once_at_start() {
    let dir = e2e::daemon::test_dir();
    let mc = launch(dir.path(), &[("DEBOUNCE_MS", DEBOUNCE_MS)])
        .start()
        .await;
    let port = mc.port();
    let w = Watched { dir, mc };
    w.wait_loaded().await;
    let mut storm = Storm::new(0);
    let id = storm.new_content();
    storm.apply(&w, &Op::Write("watch/a.mkv".into(), id));
    settle(&w, &storm.expected(), "a").await;
    storm.apply(&w, &Op::Write("plugin/c.mkv".into(), id));
    settle(&w, &storm.expected(), "its copy").await;
    let cid = midhash(&bytes_of(id));
    let rec = w.mc.get_ok(&format!("/meta/{cid}")).await;
    assert_eq!(rec["metadata"]["filePath"], w.abs("watch/a.mkv"), "{rec}");

    // While nothing runs: the file of the filePath goes, and so does what
    // the watcher knew of it, as the storms of finding N4 left it: a
    // filePath that is gone, the live file only a duplicate.
    let files_before = file_events(&w);
    let Watched { dir, mut mc } = w;
    assert!(mc.cli(&["stop"]).status.success());
    mc.process.wait_exit().await;
    let files = dir.path().join("files");
    std::fs::remove_file(files.join("watch/a.mkv")).unwrap();
    storm.disk.remove("watch/a.mkv");
    let db = rusqlite::Connection::open(mc.db()).unwrap();
    assert_eq!(
        db.execute("DELETE FROM kv WHERE k = 'seen:watch/a.mkv'", [])
            .unwrap(),
        1
    );
    drop(db);

    let mc = launch(dir.path(), &[("DEBOUNCE_MS", DEBOUNCE_MS)])
        .port(port)
        .start()
        .await;
    let w = Watched { dir, mc };
    w.wait_loaded().await;
    let passes = w.repair_passes(1).await;
    let s = w.status().await;
    assert_eq!(s["repair"]["promoted"], 1, "{s}");
    let rows = settle(&w, &storm.expected(), "the repair").await;
    assert_records_follow_files(&w, &rows, &storm, "after the restart");
    let rec = w.mc.get_ok(&format!("/meta/{cid}")).await;
    assert_eq!(rec["metadata"]["filePath"], w.abs("plugin/c.mkv"), "{rec}");
    assert_eq!(w.query("SELECT count(*) FROM kv WHERE k LIKE 'dup:%'"), 0);

    // A scan-all repairs again, and finds nothing to do: nothing changes,
    // nothing is announced.
    let meta_before = meta_events(&w);
    let r: Value = w
        .watcherd()
        .call(http::Method::POST, "/watchers/scan-all", None::<&()>)
        .await
        .expect("scan-all on watcherd's socket");
    assert!(r["totalFiles"].is_u64(), "{r}");
    w.repair_passes(passes + 1).await;
    let s = w.status().await;
    assert_eq!(s["repair"]["promoted"], 1, "{s}");
    assert_eq!(
        meta_events(&w),
        meta_before,
        "the repair wrote nothing twice"
    );
    assert_eq!(file_events(&w), files_before, "nothing was announced");
    assert_eq!(w.roots(), 1);
}

/// A download: a file that grows every 150 ms, from a thread of its own,
/// until dropped.
struct Download {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Download {
    fn start(path: std::path::PathBuf) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap();
            let mut chunk = 0u32;
            while !flag.load(Ordering::Relaxed) {
                chunk += 1;
                f.write_all(&content(chunk, 4096)).unwrap();
                f.flush().unwrap();
                // The pace of the download, not a wait for something to
                // happen: it writes more often than DEBOUNCE_MS, so its
                // file is never quiet.
                std::thread::sleep(std::time::Duration::from_millis(150));
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Download {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[tokio::test]
async fn a_due_repair_runs_while_a_download_keeps_the_tree_from_settling() {
    // Longer than the download's pace: its file is pending all along.
    let w = Watched::start(&[("DEBOUNCE_MS", "1000")]).await;
    let passes = w.repair_passes(1).await;
    w.write("watch/a.mkv", b"a film with a copy");
    let cid = midhash(b"a film with a copy");
    until("the film's record", DAEMON_DEADLINE, || async {
        (w.mc.get(&format!("/meta/{cid}")).await.status == 200).then_some(())
    })
    .await;
    w.write("plugin/c.mkv", b"a film with a copy");
    until("the copy to be a duplicate", DAEMON_DEADLINE, || async {
        (w.query("SELECT count(*) FROM kv WHERE k LIKE 'dup:%'") == 1).then_some(())
    })
    .await;
    let rec = w.mc.get_ok(&format!("/meta/{cid}")).await;
    assert_eq!(rec["metadata"]["filePath"], w.abs("watch/a.mkv"), "{rec}");
    // A sorter points the record at a path with no file: stale, while its
    // copy is a live duplicate.
    let r =
        w.mc.send_json(
            "PATCH",
            &format!("/meta/{cid}"),
            &json!({"filePath": w.abs("watch/sorted/a.mkv")}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());

    let _download = Download::start(w.files().join("watch/downloading.mkv"));
    until("the download to be pending", DAEMON_DEADLINE, || async {
        let s = w.status().await;
        (s["pending"].as_u64()? >= 1).then_some(())
    })
    .await;
    let r: Value = w
        .watcherd()
        .call(http::Method::POST, "/watchers/scan-all", None::<&()>)
        .await
        .expect("scan-all on watcherd's socket");
    assert!(r["totalFiles"].is_u64(), "{r}");
    // The rescan's repair runs, though the tree never settles.
    w.repair_passes(passes + 1).await;
    let s = w.status().await;
    assert_eq!(s["repair"]["promoted"], 1, "{s}");
    let rec = w.mc.get_ok(&format!("/meta/{cid}")).await;
    assert_eq!(rec["metadata"]["filePath"], w.abs("plugin/c.mkv"), "{rec}");
    assert_eq!(w.query("SELECT count(*) FROM kv WHERE k LIKE 'dup:%'"), 0);
}

#[tokio::test]
async fn storaged_refuses_a_bad_repair_and_changes_nothing() {
    let s = e2e::Storaged::start().await;
    let socket = s.socket_path();
    let before = snapshot::dump(&s.db_path());
    for (body, slug) in [
        (&br#"{"root":"files"}"#[..], "schema_violation"),
        (
            br#"{"root":"/files","after":"not-a-rid"}"#,
            "schema_violation",
        ),
        (br#"{"after":null}"#, "schema_violation"),
        (br#"{"root":"/files""#, "bad_request"),
    ] {
        let r = e2e::raw_http::request(&socket, "POST", "/files/repair", Some(body)).await;
        r.assert_error(400, slug);
        snapshot::assert_same(&before, &snapshot::dump(&s.db_path()), "a bad repair");
    }
    let r = e2e::raw_http::request(
        &socket,
        "POST",
        "/files/repair",
        Some(br#"{"root":"/files"}"#),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), serde_json::json!({"records": 0, "promoted": 0}));
}
