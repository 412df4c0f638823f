//! The fault suite's storage faults (issue 26), on the whole tree: the WAL
//! removed under a running storaged, the database's directory turning
//! read-only, a page of garbage in a copy of the database, a database from
//! a newer schema. Each is a clear refusal (a 503 for writes meanwhile,
//! the reason in storaged's log or `/health`), never a silent wipe (the
//! file's bytes are checked), and writes resume once the fault is gone.
//! The volume filling up is `disk_full.rs`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use e2e::fixtures::random_rid;
use e2e::supervisor::{Launch, MetaCore};
use e2e::wait::{DAEMON_DEADLINE, until};
use metacore::api::supervisor::DaemonState;
use metacore::layout::Daemon;
use serde_json::json;
use sha2::{Digest, Sha256};

/// A started tree, every daemon ready.
async fn tree(dir: &Path) -> MetaCore {
    let mut mc = Launch::in_dir(dir, "run").spawn();
    mc.wait_all_ready().await;
    mc
}

/// Stops the tree and waits for it to exit.
async fn stop(mut mc: MetaCore) {
    mc.process.sigterm();
    mc.process.wait_exit().await;
}

/// `n` records written through the tree, each with its own `n` field.
async fn write_records(mc: &e2e::apid::Http, n: usize) -> Vec<String> {
    let mut rids = Vec::new();
    for i in 0..n {
        let rid = random_rid();
        let r = mc
            .send_json(
                "PATCH",
                &format!("/meta/{rid}"),
                &json!({ "n": i.to_string() }),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        rids.push(rid.to_string());
    }
    rids
}

/// Every record of `rids` reads back with its `n`.
async fn assert_all_present(mc: &MetaCore, rids: &[(String, usize)]) {
    for (rid, n) in rids {
        let r = mc.get(&format!("/meta/{rid}")).await;
        assert_eq!(r.status, 200, "acknowledged {rid} is missing: {}", r.text());
        assert_eq!(
            r.json()["metadata"]["n"],
            json!(n.to_string()),
            "{rid}: {}",
            r.text()
        );
    }
}

fn sha256(path: &Path) -> Vec<u8> {
    Sha256::digest(std::fs::read(path).expect("read the database")).to_vec()
}

/// What storaged's log says, as the supervisor captured it.
fn storaged_log(mc: &MetaCore) -> String {
    std::fs::read_to_string(mc.log_dir().join("storaged.log")).unwrap_or_default()
}

/// Waits until storaged's log says `needle`; the log. On a timeout, the
/// panic shows the log.
async fn wait_for_log(mc: &MetaCore, needle: &str) -> String {
    let found = e2e::wait::until_or_none(DAEMON_DEADLINE, || async {
        let log = storaged_log(mc);
        log.contains(needle).then_some(log)
    })
    .await;
    found.unwrap_or_else(|| {
        panic!(
            "storaged's log did not say {needle:?} within {DAEMON_DEADLINE:?}:\n{}",
            storaged_log(mc)
        )
    })
}

/// Starts a tree on a store that storaged must refuse: its log says
/// `needle`, it fails five times in a row, and the tree stops with an
/// error, as the design wants (the container platform restarts it, or a
/// standby takes over). Storaged's log.
async fn refused_at_start(dir: &Path, needle: &str) -> String {
    let mut mc = Launch::in_dir(dir, "run").spawn();
    let log = wait_for_log(&mc, needle).await;
    wait_gives_up(&mut mc).await;
    log
}

/// Waits for the tree to stop with an error because storaged failed five
/// times in a row.
async fn wait_gives_up(mc: &mut MetaCore) {
    let exit = e2e::wait::within(
        "the tree to give up",
        DAEMON_DEADLINE,
        mc.process.wait_exit(),
    )
    .await;
    assert!(!exit.success(), "{exit:?}");
    let stderr = mc.process.stderr();
    assert!(
        stderr.contains("storaged failed 5 times in a row"),
        "{stderr}"
    );
}

/// A write answered 503 `storage_unavailable` with `Retry-After` and a
/// message that says `why`.
async fn assert_write_refused(mc: &MetaCore, why: &str) {
    let r = until("a write refused with a 503", DAEMON_DEADLINE, || async {
        // apid may not listen yet: asked again.
        let r = mc
            .try_send(
                http::Method::PATCH,
                &format!("/meta/{}", random_rid()),
                serde_json::to_vec(&json!({"n": "-1"})).unwrap().into(),
                &[("content-type", "application/json")],
            )
            .await
            .ok()?;
        (r.status == 503 && r.text().contains(why)).then_some(r)
    })
    .await;
    r.assert_error(503, "storage_unavailable");
    assert!(r.header("retry-after").is_some(), "{:?}", r.headers);
}

/// Waits until a write goes through again (storaged back, ready).
async fn wait_writes_resume(mc: &MetaCore) -> String {
    until("a write to go through", DAEMON_DEADLINE, || async {
        let rid = random_rid();
        let r = mc
            .send_json("PATCH", &format!("/meta/{rid}"), &json!({"n": "0"}))
            .await;
        (r.status == 200).then_some(rid.to_string())
    })
    .await
}

/// Makes a directory or a file immutable (even root may not create or
/// remove files in the directory, or open the file for writing); undone
/// when dropped.
struct Immutable(PathBuf);

impl Immutable {
    fn set(path: &Path) -> Self {
        let ok = std::process::Command::new("chattr")
            .arg("+i")
            .arg(path)
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "chattr +i {} (needs root, on ext4 or tmpfs)",
            path.display()
        );
        Self(path.to_owned())
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .status();
    }
}

/// Before, nothing noticed: every write since the last checkpoint went
/// into the unlinked WAL and vanished at the next start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wal_removed_under_a_running_storaged_loses_no_acknowledged_write() {
    let run = changed_under_writers(
        |db| {
            for suffix in ["-wal", "-shm"] {
                std::fs::remove_file(format!("{}{suffix}", db.display())).unwrap();
            }
        },
        "its WAL was removed",
    )
    .await;
    assert!(run.log.contains("the WAL was put back"), "{}", run.log);
    assert_all_present(&run.mc, &run.acked).await;
    run.done().await;
}

/// Before, nothing noticed: storaged wrote into the unlinked file, and the
/// next start made an empty store at the path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_removed_under_a_running_storaged_is_put_back_whole() {
    let run = changed_under_writers(
        |db| std::fs::remove_file(db).unwrap(),
        "the database file was removed",
    )
    .await;
    assert!(
        run.log.contains("the database file was put back"),
        "{}",
        run.log
    );
    assert_all_present(&run.mc, &run.acked).await;
    run.done().await;
}

/// Another database moved over ours (a restore done the wrong way): the
/// tree opens it, and ours is kept beside it with its WAL, holding every
/// write acknowledged before the restart; none is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_replaced_under_a_running_storaged_is_opened_and_ours_is_kept() {
    let dir = e2e::daemon::test_dir();
    let (theirs, other) =
        copied_store(&dir.path().join("other"), &dir.path().join("staged"), 5, 0).await;
    let run = changed_under_writers(
        move |db| std::fs::rename(&other, db).unwrap(),
        "the database file was replaced",
    )
    .await;
    assert!(
        run.log
            .contains("another meta-core database was put in its place"),
        "{}",
        run.log
    );
    // The tree serves theirs now.
    let served: Vec<(String, usize)> = theirs.into_iter().zip(0..).collect();
    assert_all_present(&run.mc, &served).await;
    // Ours, beside it: every acknowledged write is in it or was written
    // after the restart.
    let db_dir = run.mc.db().parent().unwrap().to_path_buf();
    let kept = std::fs::read_dir(&db_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.to_string_lossy();
            name.contains(".replaced-") && !name.ends_with("-wal") && !name.ends_with("-shm")
        })
        .expect("ours kept beside theirs");
    let rows = e2e::snapshot::dump(&kept);
    let mut in_kept = 0;
    for (rid, n) in &run.acked {
        let key = format!("file:{rid}/n");
        if rows.iter().any(|(k, v)| *k == key && *v == n.to_string()) {
            in_kept += 1;
            continue;
        }
        let r = run.mc.get(&format!("/meta/{rid}")).await;
        assert_eq!(
            r.status,
            200,
            "acknowledged {rid} is in neither: {}",
            r.text()
        );
    }
    assert!(
        in_kept >= 200,
        "{in_kept} of {} in the kept file",
        run.acked.len()
    );
    eprintln!(
        "{in_kept} of {} acknowledged writes in the kept file",
        run.acked.len()
    );
    run.done().await;
}

/// A tree under eight writers whose database's files `change` changed:
/// what it acknowledged, storaged's log once restarted, the tree.
struct Changed {
    _dir: tempfile::TempDir,
    mc: MetaCore,
    acked: Vec<(String, usize)>,
    log: String,
}

impl Changed {
    async fn done(self) {
        eprintln!("{} writes acknowledged around the change", self.acked.len());
        stop(self.mc).await;
    }
}

/// Changes the database's files with `change` while eight writers write
/// through apid; storaged must say `fault_log`, put back what it held,
/// restart, and take writes again.
async fn changed_under_writers(change: impl FnOnce(&Path), fault_log: &str) -> Changed {
    let dir = e2e::daemon::test_dir();
    let mc = Arc::new(tree(dir.path()).await);
    let first = mc.daemon(Daemon::Storaged).await.pid;
    // Eight writers, each recording what was acknowledged.
    let acked = Arc::new(Mutex::new(Vec::<(String, usize)>::new()));
    let stop_writing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..8usize {
        let (mc, acked, stop) = (mc.clone(), acked.clone(), stop_writing.clone());
        writers.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (rid, n) = (random_rid(), w * 1_000_000 + i);
                i += 1;
                let sent = mc
                    .try_send(
                        http::Method::PATCH,
                        &format!("/meta/{rid}"),
                        serde_json::to_vec(&json!({ "n": n.to_string() }))
                            .unwrap()
                            .into(),
                        &[("content-type", "application/json")],
                    )
                    .await;
                if sent.is_ok_and(|r| r.status == 200) {
                    acked.lock().unwrap().push((rid.to_string(), n));
                }
            }
        }));
    }
    let count = || acked.lock().unwrap().len();
    until("200 writes acknowledged", DAEMON_DEADLINE, || async {
        (count() >= 200).then_some(())
    })
    .await;
    change(&mc.db());
    wait_for_log(&mc, fault_log).await;
    let log = wait_for_log(&mc, "stopped for a fault of the database's files").await;
    // storaged restarts on what was put back and writes go through again.
    let restarted = until("storaged restarted and ready", DAEMON_DEADLINE, || async {
        let d = mc.daemon(Daemon::Storaged).await;
        (d.pid != first && d.state == DaemonState::Running && d.ready).then_some(d)
    })
    .await;
    assert!(restarted.restarts >= 1, "{restarted:?}");
    let before = count();
    until(
        "writes acknowledged after the restart",
        DAEMON_DEADLINE,
        || async { (count() >= before + 100).then_some(()) },
    )
    .await;
    stop_writing.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let mc = Arc::into_inner(mc).expect("the writers are done");
    Changed {
        _dir: dir,
        mc,
        acked,
        log,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_database_directory_or_file_is_refused_until_it_is_writable_again() {
    let dir = e2e::daemon::test_dir();
    let mc = tree(dir.path()).await;
    let mut all = Vec::new();
    let mut write = async |mc: &MetaCore, count: usize| {
        all.extend(write_records(mc, count).await.into_iter().zip(0..));
    };
    write(&mc, 10).await;
    let db = mc.db();
    let db_dir = db.parent().unwrap().to_path_buf();
    // A read-only directory while running: the open files are written as
    // before (SQLite needs no new file).
    let frozen = Immutable::set(&db_dir);
    write(&mc, 5).await;
    drop(frozen);
    stop(mc).await;

    // Only the database file (as a restore of it alone leaves it) in a
    // read-only directory: the WAL cannot be made, storaged refuses and
    // says why, and changes nothing.
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let before = sha256(&db);
    let frozen = Immutable::set(&db_dir);
    let log = refused_at_start(
        dir.path(),
        "is its directory or volume read-only? nothing was changed",
    )
    .await;
    assert!(log.contains("unable to open database file"), "{log}");
    assert_eq!(sha256(&db), before, "the database was changed");
    // Writable again: the next start serves.
    drop(frozen);
    let mc = tree(dir.path()).await;
    wait_writes_resume(&mc).await;
    write(&mc, 5).await;
    stop(mc).await;

    // A read-only database file (a volume mounted read-only): SQLite would
    // open it for reading only; storaged refuses and says so.
    let frozen = Immutable::set(&db);
    let before = sha256(&db);
    refused_at_start(
        dir.path(),
        "cannot be written by storaged (a read-only file or volume)",
    )
    .await;
    assert_eq!(sha256(&db), before, "the database was changed");
    drop(frozen);
    let mc = tree(dir.path()).await;
    wait_writes_resume(&mc).await;
    assert_all_present(&mc, &all).await;
    stop(mc).await;
}

/// A volume that fails under a running tree (ext4 shut down, as a dying
/// disk or a lost iSCSI path leaves it): storaged refuses writes with the
/// reason and restarts rather than trust what it still holds; while the
/// volume is gone it cannot open the store and says why; once the volume is
/// mounted again it starts and every write acknowledged before the failure
/// is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_loop_ext4,
    ignore = "no loop device or mkfs.ext4 here (tests/build.rs)"
)]
async fn a_failing_volume_refuses_writes_and_storaged_recovers_once_it_is_back() {
    let dir = e2e::daemon::test_dir();
    let volume = e2e::mount::LoopExt4::at(
        &dir.path().join("volume.ext4"),
        &dir.path().join("meta-core/db"),
        64,
    );
    let mc = tree(dir.path()).await;
    let first = mc.daemon(Daemon::Storaged).await.pid;
    let rids: Vec<(String, usize)> = write_records(&mc, 50).await.into_iter().zip(0..).collect();
    volume.fail();
    // The first write that reaches the volume fails and says why; storaged
    // exits and cannot open the store while the volume is gone.
    let r = until(
        "a write refused by the failed volume",
        DAEMON_DEADLINE,
        || async {
            let r = mc
                .send_json(
                    "PATCH",
                    &format!("/meta/{}", random_rid()),
                    &json!({"n": "-1"}),
                )
                .await;
            (r.status != 200).then_some(r)
        },
    )
    .await;
    r.assert_error(503, "storage_unavailable");
    assert!(r.header("retry-after").is_some(), "{:?}", r.headers);
    wait_for_log(&mc, "the database's volume failed a read or a write").await;
    // While the volume is gone storaged cannot open the store, and the
    // tree gives up (the platform restarts it).
    let mut mc = mc;
    wait_gives_up(&mut mc).await;
    let log = storaged_log(&mc);
    assert!(log.contains("cannot open the store"), "{log}");
    assert!(log.contains("Input/output error"), "{log}");
    // Mounted again: the next start serves every acknowledged write.
    volume.mount_again();
    std::fs::remove_dir_all(dir.path().join("run")).unwrap();
    let mc = tree(dir.path()).await;
    assert_ne!(mc.daemon(Daemon::Storaged).await.pid, first);
    wait_writes_resume(&mc).await;
    assert_all_present(&mc, &rids).await;
    stop(mc).await;
    drop(volume);
}

/// A stopped tree's database with `n` records (each with `pad` bytes of
/// padding besides its `n`), copied into a second tree's place; the
/// records and the copy's path.
async fn copied_store(from: &Path, to: &Path, n: usize, pad: usize) -> (Vec<String>, PathBuf) {
    std::fs::create_dir_all(from).unwrap();
    std::fs::create_dir_all(to).unwrap();
    let mc = tree(from).await;
    let mut rids = Vec::new();
    for i in 0..n {
        let rid = random_rid().to_string();
        let body = json!({ "n": i.to_string(), "pad": "p".repeat(pad) });
        let r = mc.send_json("PATCH", &format!("/meta/{rid}"), &body).await;
        assert_eq!(r.status, 200, "{}", r.text());
        rids.push(rid);
    }
    let db = mc.db();
    stop(mc).await;
    let copy = to.join("meta-core/db/meta-core.db");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(&db, &copy).expect("copy the database");
    (rids, copy)
}

/// Writes `page` (1-based) of `db` over with garbage; the garbage.
fn damage_page(db: &Path, page: u64) -> Vec<u8> {
    use std::io::{Seek, Write};
    let size = e2e::snapshot::open_read_only(db)
        .query_row("PRAGMA page_size", [], |r| r.get::<_, u64>(0))
        .unwrap();
    let mut f = std::fs::OpenOptions::new().write(true).open(db).unwrap();
    f.seek(std::io::SeekFrom::Start((page - 1) * size)).unwrap();
    let garbage: Vec<u8> = (0..size).map(|i| (i * 7919 % 251) as u8 ^ 0x5a).collect();
    f.write_all(&garbage).unwrap();
    f.sync_all().unwrap();
    garbage
}

/// `len` bytes of `db` from the start of `page` (1-based).
fn page_bytes(db: &Path, page: u64, len: usize) -> Vec<u8> {
    let bytes = std::fs::read(db).unwrap();
    let start = (page - 1) as usize * len;
    bytes[start..start + len].to_vec()
}

/// The middle one of the leaf pages of the `kv` table, in key order: with
/// records of some size, one that holds record fields, which opening the
/// store does not read.
fn middle_leaf(db: &Path) -> u64 {
    let c = e2e::snapshot::open_read_only(db);
    let mut q = c
        .prepare("SELECT pageno FROM dbstat WHERE name = 'kv' AND pagetype = 'leaf' ORDER BY path")
        .unwrap();
    let leaves: Vec<u64> = q
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(leaves.len() > 10, "{} leaves", leaves.len());
    leaves[leaves.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_copy_is_refused_and_left_as_it_is() {
    let dir = e2e::daemon::test_dir();
    let (rids, copy) = copied_store(&dir.path().join("a"), &dir.path().join("b"), 300, 1500).await;
    let good = std::fs::read(&copy).unwrap();
    let leaf = middle_leaf(&copy);

    // Garbage over the header: not a database any more; storaged refuses
    // to start, and says what to do.
    damage_page(&copy, 1);
    let damaged = sha256(&copy);
    let log = refused_at_start(&dir.path().join("b"), "damaged or not a SQLite database").await;
    assert!(log.contains("restore it from a backup"), "{log}");
    assert_eq!(sha256(&copy), damaged, "the damaged file was changed");

    // Garbage over a leaf in the middle (record fields, which opening the
    // store does not read): storaged starts, its check after readiness
    // finds the damage, `/health` and `meta-core status` say so, and
    // writes are refused (those that came before the check may have
    // committed); the damaged page is left as it is.
    std::fs::write(&copy, &good).unwrap();
    let garbage = damage_page(&copy, leaf);
    // The log of this start alone.
    std::fs::remove_dir_all(dir.path().join("b/meta-core/logs")).unwrap();
    let mc = Launch::in_dir(&dir.path().join("b"), "run").spawn();
    until("storaged to report the damage", DAEMON_DEADLINE, || async {
        let log = storaged_log(&mc);
        assert!(!log.contains("damaged or not a SQLite database"), "{log}");
        // Not up yet: `None`, and asked again.
        let status = mc.control.status().await.ok()?;
        let storaged = status
            .daemons
            .into_iter()
            .find(|d| d.name == Daemon::Storaged)?;
        storaged
            .degraded
            .filter(|why| why.contains("the database is damaged"))
    })
    .await;
    assert_write_refused(&mc, "the database is damaged").await;
    stop(mc).await;
    assert_eq!(
        page_bytes(&copy, leaf, garbage.len()),
        garbage,
        "the damaged page was written over"
    );

    // Restored from the good copy: writes resume, every record is there.
    std::fs::write(&copy, &good).unwrap();
    let mc = tree(&dir.path().join("b")).await;
    wait_writes_resume(&mc).await;
    let all: Vec<(String, usize)> = rids.into_iter().enumerate().map(|(n, r)| (r, n)).collect();
    assert_all_present(&mc, &all).await;
    stop(mc).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_from_a_newer_schema_is_refused_and_left_as_it_is() {
    let dir = e2e::daemon::test_dir();
    let (rids, copy) = copied_store(&dir.path().join("a"), &dir.path().join("b"), 10, 0).await;
    let set_version = |v: &str| {
        let c = rusqlite::Connection::open(&copy).unwrap();
        c.execute(
            "UPDATE kv SET v = ?1 WHERE k = 'meta-core:schema-version'",
            [v],
        )
        .unwrap();
        c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    };
    let ours: String = e2e::snapshot::open_read_only(&copy)
        .query_row(
            "SELECT v FROM kv WHERE k = 'meta-core:schema-version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let newer = (ours.parse::<u64>().unwrap() + 1).to_string();
    set_version(&newer);
    let before = sha256(&copy);
    let log = refused_at_start(&dir.path().join("b"), "a newer meta-core wrote it").await;
    assert!(log.contains("the file was left as it is"), "{log}");
    assert_eq!(sha256(&copy), before, "the newer store was changed");

    // The version this build reads: it starts, and everything is there.
    set_version(&ours);
    let mc = tree(&dir.path().join("b")).await;
    wait_writes_resume(&mc).await;
    let all: Vec<(String, usize)> = rids.into_iter().enumerate().map(|(n, r)| (r, n)).collect();
    assert_all_present(&mc, &all).await;
    stop(mc).await;
}

/// Starts storaged alone on `launch`, expecting a refusal that says
/// `needle`; its stderr.
async fn storaged_refuses(launch: e2e::Launch, needle: &str) -> String {
    let mut s = launch.spawn();
    let exit = e2e::wait::within("storaged to refuse", DAEMON_DEADLINE, s.wait_exit()).await;
    assert!(!exit.success(), "{exit:?}");
    let stderr = s.stderr();
    assert!(stderr.contains(needle), "{stderr}");
    stderr
}

/// A start never begins an empty store where data may be: beside a WAL
/// that holds commits but no database (before, SQLite made an empty one
/// and dropped the WAL), or beside the marker a storaged leaves when it
/// stops before it could put changed files back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_never_begins_an_empty_store_where_data_may_be() {
    let dir = e2e::daemon::test_dir();
    let mut s = e2e::Launch::in_dir(dir.path()).start().await;
    let a = e2e::Apid::start(&s).await;
    let rids = write_records(&a, 20).await;
    drop(a);
    s.kill9();
    let db = s.db_path();
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    assert!(
        std::fs::metadata(&wal).unwrap().len() > 0,
        "the WAL holds commits"
    );
    let saved = dir.path().join("saved.db");
    std::fs::copy(&db, &saved).unwrap();
    std::fs::remove_file(&db).unwrap();
    storaged_refuses(s.launch(), "is missing but its WAL").await;
    assert!(!db.exists(), "no empty store was made");

    std::fs::copy(&saved, &db).unwrap();
    let marker = PathBuf::from(format!("{}.files-changed", db.display()));
    std::fs::write(&marker, "the database file was removed\n").unwrap();
    storaged_refuses(s.launch(), "changed under a storaged that stopped").await;
    std::fs::remove_file(&marker).unwrap();
    let s = s.launch().start().await;
    let a = e2e::Apid::start(&s).await;
    for (n, rid) in rids.iter().enumerate() {
        let r = a.get(&format!("/meta/{rid}")).await;
        assert_eq!(r.status, 200, "{rid}: {}", r.text());
        assert_eq!(r.json()["metadata"]["n"], json!(n.to_string()));
    }
}
