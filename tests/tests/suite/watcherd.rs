//! watcherd under the real supervisor, on a real folder with real inotify:
//! what a sorter following `/api/events/files` sees when files are copied,
//! changed, moved, duplicated and deleted; restarts and kill -9; a forced
//! inotify queue overflow; the polling watchers; the watchers API.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use e2e::daemon::test_dir;
use e2e::sse::{Follower, Next, Received};
use e2e::supervisor::{Launch, MetaCore};
use e2e::wait::{DAEMON_DEADLINE, until};
use metacore::cid::Cid;
use metacore::layout::Daemon;
use metacore::socket::client::SocketClient;
use rustix::process::{Pid, Signal, kill_process};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tempfile::TempDir;

/// The debounce the tests run with: short, so they are quick, and longer
/// than the gaps between the writes of a slow copy.
const DEBOUNCE_MS: u64 = 400;

/// Long enough for anything pending to have been announced.
const SETTLED: Duration = Duration::from_millis(3 * DEBOUNCE_MS + 600);

const TOKEN: &str = "watchers-admin-token";

pub(crate) struct Watched {
    pub(crate) dir: TempDir,
    pub(crate) mc: MetaCore,
}

pub(crate) fn launch(dir: &Path, env: &[(&str, &str)]) -> Launch {
    let mut l = Launch::in_dir(dir, "run").env("DEBOUNCE_MS", &DEBOUNCE_MS.to_string());
    for (k, v) in env {
        l = l.env(k, v);
    }
    l
}

impl Watched {
    pub(crate) async fn start(env: &[(&str, &str)]) -> Self {
        let dir = test_dir();
        let mc = launch(dir.path(), env).start().await;
        let w = Self { dir, mc };
        w.wait_loaded().await;
        w
    }

    pub(crate) fn files(&self) -> PathBuf {
        self.dir.path().join("files")
    }

    pub(crate) fn watcherd(&self) -> SocketClient {
        SocketClient::new("watcherd", &self.mc.run_dir().join("watcherd.sock"))
    }

    pub(crate) async fn status(&self) -> Value {
        self.watcherd()
            .get("/status")
            .await
            .expect("watcherd /status")
    }

    /// Until watcherd has read back what it knew and set up its watches.
    pub(crate) async fn wait_loaded(&self) {
        until("watcherd to load and watch", DAEMON_DEADLINE, || async {
            let s: Value = self.watcherd().get("/status").await.ok()?;
            let ready = !s["enabled"].as_bool()?
                || (s["loaded"] == true && s["inotify"]["watchedDirs"].as_u64()? >= 3);
            ready.then_some(())
        })
        .await;
    }

    /// Until watcherd knows at least `files` files and none is pending.
    pub(crate) async fn wait_known(&self, files: u64) {
        until("watcherd to know the files", DAEMON_DEADLINE, || async {
            let s = self.status().await;
            (s["knownFiles"].as_u64()? >= files && s["pending"] == 0).then_some(())
        })
        .await;
    }

    /// Until watcherd's repairs (asked for by rescans) have run at least
    /// `passes` times and none is due; the passes run.
    pub(crate) async fn repair_passes(&self, passes: u64) -> u64 {
        until("watcherd's repairs to run", DAEMON_DEADLINE, || async {
            let s: Value = self.watcherd().get("/status").await.ok()?;
            let r = &s["repair"];
            let done = r["passes"].as_u64()?;
            (done >= passes && r["due"] == false).then_some(done)
        })
        .await
    }

    /// A follower of every file event from the oldest kept.
    pub(crate) async fn follow(&self) -> Follower {
        Follower::connect(self.mc.port(), "/api/events/files", Some("0")).await
    }

    pub(crate) async fn follow_after(&self, id: &str) -> Follower {
        Follower::connect(self.mc.port(), "/api/events/files", Some(id)).await
    }

    pub(crate) fn write(&self, rel: &str, bytes: &[u8]) {
        let path = self.files().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    pub(crate) fn abs(&self, rel: &str) -> String {
        self.files().join(rel).display().to_string()
    }

    pub(crate) fn roots(&self) -> i64 {
        self.query("SELECT count(*) FROM kv WHERE k LIKE 'idx:roots/%'")
    }

    pub(crate) fn query(&self, sql: &str) -> i64 {
        let c = rusqlite::Connection::open(self.mc.db()).unwrap();
        c.query_row(sql, [], |r| r.get(0)).unwrap()
    }

    async fn admin(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> e2e::raw_http::RawResponse {
        let bytes = body
            .map(|b| serde_json::to_vec(&b).unwrap())
            .unwrap_or_default();
        self.mc
            .send(
                method,
                path,
                bytes,
                &[
                    ("authorization", &format!("Bearer {TOKEN}")),
                    ("content-type", "application/json"),
                ],
            )
            .await
    }
}

/// midhash256 computed here, from the contract's words (decision 7):
/// SHA-256 over the size as 8 big-endian bytes, then the whole file up to
/// 1 MiB, else the 1 MiB starting at `(size - 1 MiB) / 2`.
pub(crate) fn midhash(bytes: &[u8]) -> String {
    const MIB: usize = 1 << 20;
    let sample = if bytes.len() <= MIB {
        bytes
    } else {
        let start = (bytes.len() - MIB) / 2;
        &bytes[start..start + MIB]
    };
    let mut h = Sha256::new();
    h.update((bytes.len() as u64).to_be_bytes());
    h.update(sample);
    Cid::midhash256(&h.finalize().into()).to_string()
}

/// Distinct bytes per seed.
pub(crate) fn content(seed: u32, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn signal(pid: u32, sig: Signal) {
    kill_process(Pid::from_raw(pid as i32).unwrap(), sig).unwrap();
}

/// Every event until `SETTLED` passes without one.
async fn drain(f: &mut Follower) -> Vec<Received> {
    let mut out = Vec::new();
    loop {
        match f.next(SETTLED).await {
            Next::Event(e) => out.push(e),
            Next::Quiet => return out,
            other => panic!("the stream ended: {other:?}"),
        }
    }
}

fn kinds(events: &[Received]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| (e.event.clone(), e.field("path").to_owned()))
        .collect()
}

#[tokio::test]
async fn a_slow_copy_is_one_add_when_complete_and_a_change_is_one_change() {
    let w = Watched::start(&[]).await;
    let mut f = w.follow().await;
    // 2 MiB + 3 bytes in 8 pieces, each sooner after the last than the
    // debounce: one add, after the last piece, with the whole file's hash.
    let bytes = content(1, (2 << 20) + 3);
    let path = w.files().join("watch/slow.mkv");
    let mut file = std::fs::File::create(&path).unwrap();
    for piece in bytes.chunks(bytes.len().div_ceil(8)) {
        file.write_all(piece).unwrap();
        file.flush().unwrap();
        tokio::time::sleep(Duration::from_millis(DEBOUNCE_MS / 3)).await;
    }
    drop(file);
    // A partial download's hidden name is never announced.
    w.write("watch/.slow.mkv.part", b"partial");
    let events = drain(&mut f).await;
    assert_eq!(kinds(&events), [("add".into(), "watch/slow.mkv".into())]);
    let add = &events[0];
    let cid = midhash(&bytes);
    assert_eq!(add.field("midhash256"), cid);
    assert_eq!(add.field("size"), bytes.len().to_string());
    assert!(add.field("timestamp").parse::<u64>().is_ok());

    // The record the watcher minted, found by that CID.
    let rec = w.mc.get_ok(&format!("/meta/{cid}")).await;
    let m = &rec["metadata"];
    assert_eq!(m["filePath"], w.abs("watch/slow.mkv"), "{rec}");
    assert_eq!(m["sizeByte"], bytes.len().to_string());
    assert!(m["mtimeNano"].as_str().unwrap().parse::<u64>().unwrap() > 0);

    // A sorter writes by that CID: it lands on the same record.
    w.mc.ok_json("PATCH", &format!("/meta/{cid}"), &json!({"title": "Slow"}))
        .await;
    assert_eq!(w.roots(), 1, "no second record");
    let rec = w.mc.get_ok(&format!("/meta/{cid}")).await;
    assert_eq!(rec["metadata"]["title"], "Slow");

    // Changed in place: one change, the record follows the new content.
    let mut changed = bytes.clone();
    changed.extend_from_slice(b"more");
    std::fs::write(&path, &changed).unwrap();
    let events = drain(&mut f).await;
    assert_eq!(kinds(&events), [("change".into(), "watch/slow.mkv".into())]);
    let new_cid = midhash(&changed);
    assert_eq!(events[0].field("midhash256"), new_cid);
    let rec = w.mc.get_ok(&format!("/meta/{new_cid}")).await;
    assert_eq!(rec["metadata"]["title"], "Slow", "the same record: {rec}");
    assert_eq!(w.roots(), 1);
}

#[tokio::test]
async fn a_move_is_one_rename_and_a_delete_keeps_the_record() {
    let w = Watched::start(&[]).await;
    let mut f = w.follow().await;
    let bytes = content(2, 5000);
    let cid = midhash(&bytes);
    w.write("watch/film.mkv", &bytes);
    w.write("watch/show/e1.mkv", &content(3, 100));
    w.write("watch/show/e2.mkv", &content(4, 100));
    assert_eq!(drain(&mut f).await.len(), 3);

    std::fs::create_dir_all(w.files().join("plugin/sorted")).unwrap();
    std::fs::rename(
        w.files().join("watch/film.mkv"),
        w.files().join("plugin/sorted/Film (2020).mkv"),
    )
    .unwrap();
    let events = drain(&mut f).await;
    assert_eq!(
        kinds(&events),
        [("rename".into(), "plugin/sorted/Film (2020).mkv".into())]
    );
    assert_eq!(events[0].field("oldPath"), "watch/film.mkv");
    assert_eq!(events[0].field("midhash256"), cid);
    let rec = w.mc.get_ok(&format!("/meta/{cid}")).await;
    assert_eq!(
        rec["metadata"]["filePath"],
        w.abs("plugin/sorted/Film (2020).mkv")
    );

    // A folder moved: one rename per file in it.
    std::fs::rename(w.files().join("watch/show"), w.files().join("plugin/show")).unwrap();
    let events = drain(&mut f).await;
    let renames: BTreeSet<(String, String)> = events
        .iter()
        .map(|e| {
            assert_eq!(e.event, "rename", "{e:?}");
            (e.field("oldPath").to_owned(), e.field("path").to_owned())
        })
        .collect();
    assert_eq!(
        renames,
        [
            (
                "watch/show/e1.mkv".to_owned(),
                "plugin/show/e1.mkv".to_owned()
            ),
            (
                "watch/show/e2.mkv".to_owned(),
                "plugin/show/e2.mkv".to_owned()
            ),
        ]
        .into()
    );

    // Deleted: one delete, without size or hash; the record stays.
    std::fs::remove_file(w.files().join("plugin/sorted/Film (2020).mkv")).unwrap();
    let events = drain(&mut f).await;
    assert_eq!(
        kinds(&events),
        [("delete".into(), "plugin/sorted/Film (2020).mkv".into())]
    );
    assert!(events[0].data.get("size").is_none() && events[0].data.get("midhash256").is_none());
    assert_eq!(w.mc.get(&format!("/meta/{cid}")).await.status, 200);
    assert_eq!(w.roots(), 3);
}

#[tokio::test]
async fn the_same_content_at_two_paths_is_one_record_with_a_duplicate() {
    let w = Watched::start(&[]).await;
    let mut f = w.follow().await;
    let bytes = content(5, 3000);
    w.write("watch/a.mkv", &bytes);
    assert_eq!(drain(&mut f).await.len(), 1);
    w.write("plugin/copy-of-a.mkv", &bytes);
    let events = drain(&mut f).await;
    assert_eq!(
        kinds(&events),
        [("add".into(), "plugin/copy-of-a.mkv".into())]
    );
    assert_eq!(events[0].field("midhash256"), midhash(&bytes));
    assert_eq!(w.roots(), 1);
    let rec = w.mc.get_ok(&format!("/meta/{}", midhash(&bytes))).await;
    let rid = rec["hashId"]
        .as_str()
        .unwrap_or_else(|| panic!("{rec}"))
        .to_owned();
    assert_eq!(rec["metadata"]["filePath"], w.abs("watch/a.mkv"));
    let dup = format!("dup:{rid}/{}", w.abs("plugin/copy-of-a.mkv"));
    assert_eq!(
        w.query(&format!("SELECT count(*) FROM kv WHERE k = '{dup}'")),
        1,
        "the second path is the record's duplicate"
    );
}

#[tokio::test]
async fn a_restart_announces_exactly_what_changed_while_it_was_down() {
    let dir = test_dir();
    let mc = launch(dir.path(), &[]).start().await;
    let port = mc.port();
    let w = Watched { dir, mc };
    w.wait_loaded().await;
    let mut f = w.follow().await;
    for name in ["kept", "changed", "deleted"] {
        w.write(&format!("watch/{name}.mkv"), name.as_bytes());
    }
    let first = drain(&mut f).await;
    assert_eq!(first.len(), 3);
    let last_id = first.last().unwrap().id.clone();
    drop(f);
    let Watched { dir, mut mc } = w;
    let out = mc.cli(&["stop"]);
    assert!(out.status.success());
    mc.process.wait_exit().await;

    // While nothing watches.
    let files = dir.path().join("files");
    std::fs::write(files.join("watch/changed.mkv"), b"changed, and longer").unwrap();
    std::fs::remove_file(files.join("watch/deleted.mkv")).unwrap();
    std::fs::write(files.join("watch/new.mkv"), b"new").unwrap();

    let mc = launch(dir.path(), &[]).port(port).start().await;
    let w = Watched { dir, mc };
    w.wait_loaded().await;
    let mut f = w.follow_after(&last_id).await;
    let mut got = kinds(&drain(&mut f).await);
    got.sort();
    assert_eq!(
        got,
        [
            ("add".into(), "watch/new.mkv".into()),
            ("change".into(), "watch/changed.mkv".into()),
            ("delete".into(), "watch/deleted.mkv".into()),
        ]
    );
    assert_eq!(
        w.roots(),
        4,
        "the changed file kept its record; the new one has its own"
    );
}

#[tokio::test]
async fn kill_9_of_watcherd_restarts_it_and_nothing_is_announced_twice() {
    let mut w = Watched::start(&[]).await;
    let mut f = w.follow().await;
    for i in 0..20 {
        w.write(&format!("watch/f{i:02}.mkv"), &content(100 + i, 200));
    }
    assert_eq!(drain(&mut f).await.len(), 20);
    let old = w.mc.daemon(Daemon::Watcherd).await.pid.unwrap();
    signal(old, Signal::KILL);
    w.mc.wait_status("watcherd to be replaced", |s| {
        s.daemons
            .iter()
            .any(|d| d.name == Daemon::Watcherd && d.ready && d.pid.is_some_and(|p| p != old))
    })
    .await;
    w.wait_loaded().await;
    w.write("watch/after.mkv", b"after the kill");
    assert_eq!(
        kinds(&drain(&mut f).await),
        [("add".into(), "watch/after.mkv".into())]
    );
    assert_eq!(w.roots(), 21);
}

#[tokio::test]
async fn an_inotify_queue_overflow_rescans_and_every_file_is_announced_once() {
    // The supervisor must not take the stopped watcherd for hung.
    let w = Watched::start(&[("HEALTH_CHECK_INTERVAL_MS", "600000")]).await;
    let mut f = w.follow().await;
    let queue: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Each file is at least three events (create, modify, close): a burst
    // of this many, with nobody reading, overflows the kernel's queue.
    let n = queue / 3 + 1000;
    let passes = w.repair_passes(1).await;
    let pid = w.mc.daemon(Daemon::Watcherd).await.pid.unwrap();
    signal(pid, Signal::STOP);
    let dir = w.files().join("watch");
    for i in 0..n {
        std::fs::write(dir.join(format!("burst-{i:05}")), i.to_string()).unwrap();
    }
    signal(pid, Signal::CONT);
    let mut seen = BTreeSet::new();
    while seen.len() < n {
        match f.next(Duration::from_secs(30)).await {
            Next::Event(e) => {
                assert_eq!(e.event, "add", "{e:?}");
                assert!(seen.insert(e.field("path").to_owned()), "twice: {e:?}");
            }
            other => panic!("{} of {n} announced, then {other:?}", seen.len()),
        }
    }
    f.assert_quiet(SETTLED).await;
    let s = w.status().await;
    assert!(s["inotify"]["overflows"].as_u64().unwrap() >= 1, "{s}");
    assert_eq!(s["knownFiles"], n as u64);
    // The rescan asked for a repair of stale filePaths, run once settled.
    w.repair_passes(passes + 1).await;
}

#[tokio::test]
async fn watchers_through_apid_behind_the_token_and_polling_where_inotify_is_off() {
    let w = Watched::start(&[("META_CORE_ADMIN_TOKEN", TOKEN)]).await;
    let mut f = w.follow().await;
    // Without the token: refused.
    w.mc.get("/api/watchers")
        .await
        .assert_error(401, "unauthorized");
    let list = w.admin("GET", "/api/watchers", None).await;
    assert_eq!(list.status, 200, "{}", list.text());
    let list = list.json();
    assert_eq!(list["count"], 2);
    let paths: BTreeSet<String> = list["watchers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(paths, [w.abs("plugin"), w.abs("watch")].into());
    for c in list["watchers"].as_array().unwrap() {
        for key in [
            "id",
            "intervalMs",
            "enabled",
            "createdAt",
            "active",
            "fileCount",
            "isScanning",
        ] {
            assert!(c.get(key).is_some(), "{key} in {c}");
        }
    }

    // Bad paths: outside FILES_PATH, `..`, missing.
    for bad in [
        "/etc",
        "../outside",
        "watch/../../etc",
        "no/such/folder",
        "",
    ] {
        let r = w
            .admin(
                "POST",
                "/api/watchers",
                Some(json!({"path": bad, "enabled": true})),
            )
            .await;
        assert_eq!(r.status, 400, "{bad:?}: {}", r.text());
    }
    // A folder watched already, under another spelling.
    let spelled = w.abs("watch//");
    for twin in ["./watch", "watch/", "watch/.", spelled.as_str()] {
        let r = w
            .admin("POST", "/api/watchers", Some(json!({"path": twin})))
            .await;
        assert_eq!(r.status, 400, "{twin:?}: {}", r.text());
        assert!(r.text().contains("exists already"), "{}", r.text());
    }
    let r = w
        .admin("POST", "/api/watchers", Some(json!({"path": 7})))
        .await;
    r.assert_error(400, "schema_violation");

    // corn/ is left to polling: a watcher there finds what inotify does not.
    std::fs::create_dir_all(w.files().join("corn/remote")).unwrap();
    let r = w
        .admin(
            "POST",
            "/api/watchers",
            Some(json!({"path": "corn/remote", "intervalMs": 5000, "enabled": true})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["path"], w.abs("corn/remote"));
    w.write("corn/remote/film.mkv", b"from a mount");
    match f.next(Duration::from_secs(15)).await {
        Next::Event(e) => {
            assert_eq!(
                (e.event.as_str(), e.field("path")),
                ("add", "corn/remote/film.mkv")
            )
        }
        other => panic!("the polling watcher announced nothing: {other:?}"),
    }

    let one = w
        .admin("GET", &format!("/api/watchers/{id}"), None)
        .await
        .json();
    assert_eq!(one["fileCount"], 1, "{one}");
    let scan = w
        .admin("POST", &format!("/api/watchers/{id}/scan"), None)
        .await;
    assert_eq!(scan.status, 200, "{}", scan.text());
    assert_eq!(scan.json()["fileCount"], 1);

    // A reset starts the stream over; every file of the watcher is an add.
    let reset = w
        .admin("POST", &format!("/api/watchers/{id}/reset"), None)
        .await;
    assert_eq!(reset.status, 200, "{}", reset.text());
    let reset = reset.json();
    assert_eq!(reset["message"], "Reset complete");
    assert_eq!(reset["watcherId"], id);
    let events = drain(&mut f).await;
    assert_eq!(
        kinds(&events),
        [
            ("reset".into(), String::new()),
            ("add".into(), "corn/remote/film.mkv".into())
        ]
    );
    assert_eq!(events[0].field("watcherId"), id);
    assert_eq!(w.roots(), 1, "the reset re-announced, it did not re-mint");

    // Update: an interval under the minimum is raised to it.
    let r = w
        .admin(
            "PUT",
            &format!("/api/watchers/{id}"),
            Some(json!({"intervalMs": 100})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["intervalMs"], 5000);
    let r = w
        .admin("DELETE", &format!("/api/watchers/{id}"), None)
        .await;
    assert_eq!(
        r.json(),
        json!({"status": "ok", "message": "Watcher deleted"})
    );
    let r = w.admin("GET", &format!("/api/watchers/{id}"), None).await;
    r.assert_error(404, "not_found");
    assert!(
        r.text().contains(&format!("watcher not found: {id}")),
        "{}",
        r.text()
    );
    w.admin("GET", "/api/watchers/..%2Fetc", None)
        .await
        .assert_error(404, "not_found");

    // The retired routes answer, marked deprecated.
    let r = w.admin("POST", "/api/scan/trigger", None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("deprecation"), Some("true"));
    assert!(r.json()["totalFiles"].is_u64());
    let r = w.admin("GET", "/api/scan/status", None).await;
    assert_eq!(r.header("deprecation"), Some("true"));
    assert_eq!(r.json()["count"], 2);
}

#[tokio::test]
async fn with_the_watcher_off_nothing_is_announced_and_status_says_so() {
    let w = Watched::start(&[("ENABLE_FILE_WATCHER", "false")]).await;
    let mut f = w.follow().await;
    w.write("watch/ignored.mkv", b"nobody looks");
    f.assert_quiet(SETTLED).await;
    let s = w.status().await;
    assert_eq!(s["enabled"], false, "{s}");
    let id = w.mc.admin().get_ok("/api/watchers").await["watchers"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    w.mc.admin()
        .send("POST", &format!("/api/watchers/{id}/scan"), "", &[])
        .await
        .assert_error(409, "disabled");
    w.mc.admin()
        .send("POST", "/api/watchers/scan-all", "", &[])
        .await
        .assert_error(409, "disabled");
    assert_eq!(w.roots(), 0);
}

#[tokio::test]
async fn folders_past_the_watch_limit_are_polled_and_status_shows_it() {
    // The root, watch/ and plugin/ take the three watches allowed.
    let w = Watched::start(&[
        ("META_CORE_WATCH_MAX_DIRS", "3"),
        ("WATCH_INTERVAL_MS", "300"),
    ])
    .await;
    let mut f = w.follow().await;
    w.write("watch/deep/er/film.mkv", b"past the limit");
    w.write("watch/top.mkv", b"watched");
    let mut got = kinds(&drain(&mut f).await);
    got.sort();
    assert_eq!(
        got,
        [
            ("add".into(), "watch/deep/er/film.mkv".into()),
            ("add".into(), "watch/top.mkv".into()),
        ]
    );
    let s = w.status().await;
    let i = &s["inotify"];
    assert_eq!(i["watchedDirs"], 3, "{s}");
    assert_eq!(i["limitReached"], true, "{s}");
    assert!(i["polledDirs"].as_u64().unwrap() >= 2, "{s}");
    assert!(i["maxUserWatches"].as_u64().unwrap() > 0, "{s}");
    // A file changed in a polled folder is a change, found by the poll.
    w.write("watch/deep/er/film.mkv", b"past the limit, changed");
    assert_eq!(
        kinds(&drain(&mut f).await),
        [("change".into(), "watch/deep/er/film.mkv".into())]
    );
    // And a delete there is a delete, though every poll misses it again
    // (each poll is sooner than the debounce).
    std::fs::remove_file(w.files().join("watch/deep/er/film.mkv")).unwrap();
    assert_eq!(
        kinds(&drain(&mut f).await),
        [("delete".into(), "watch/deep/er/film.mkv".into())]
    );
}

#[tokio::test]
async fn a_folder_removed_and_made_again_is_watched_again() {
    let w = Watched::start(&[]).await;
    let mut f = w.follow().await;
    w.write("watch/season/e1.mkv", b"one");
    assert_eq!(drain(&mut f).await.len(), 1);
    std::fs::remove_dir_all(w.files().join("watch/season")).unwrap();
    std::fs::create_dir(w.files().join("watch/season")).unwrap();
    assert_eq!(
        kinds(&drain(&mut f).await),
        [("delete".into(), "watch/season/e1.mkv".into())]
    );
    // Written well after the folder was made again: only its watch sees it.
    w.write("watch/season/e2.mkv", b"two");
    assert_eq!(
        kinds(&drain(&mut f).await),
        [("add".into(), "watch/season/e2.mkv".into())]
    );
}

/// A watcher made over files watcherd knows already counts them in the
/// first answers about it: the API waits for the engine to take the new
/// watchers in, it does not show what the engine published before.
#[tokio::test]
async fn a_watcher_made_over_known_files_counts_them_at_once() {
    let w = Watched::start(&[("META_CORE_ADMIN_TOKEN", TOKEN)]).await;
    w.write("watch/shows/a.mkv", b"one");
    w.write("watch/shows/b.mkv", b"two");
    w.wait_known(2).await;

    let made = w
        .admin(
            "POST",
            "/api/watchers",
            Some(json!({"path": "watch/shows"})),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.text());
    let id = made.json()["id"].as_str().unwrap().to_owned();
    let one = w
        .admin("GET", &format!("/api/watchers/{id}"), None)
        .await
        .json();
    assert_eq!(one["fileCount"], 2, "{one}");

    // Moved to another folder: the answer to the move counts the files there.
    w.write("watch/films/c.mkv", b"three");
    w.wait_known(3).await;
    let moved = w
        .admin(
            "PUT",
            &format!("/api/watchers/{id}"),
            Some(json!({"path": "watch/films"})),
        )
        .await;
    assert_eq!(moved.status, 200, "{}", moved.text());
    assert_eq!(moved.json()["fileCount"], 1, "{}", moved.text());
}
