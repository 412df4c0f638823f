//! Online backup and restore (issue 24): `meta-core backup <file>` run as
//! the real CLI while 16 clients write through apid; the copy opens,
//! passes `PRAGMA integrity_check`, holds every write acknowledged before
//! the backup began and no half record. Bad targets are refused with
//! nothing written; a full backup volume is a 507 with nothing left. A
//! restore (stop, replace the file, start) serves the backup's rows and
//! not the later writes; a backup of another schema version is refused at
//! start, saying what to do.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use e2e::apid::Http;
use e2e::daemon::test_dir;
use e2e::fixtures::{api_error, member, random_midhash, random_rid};
use e2e::snapshot::{assert_same, assert_sound, dump, record, rids_with_fields};
use e2e::supervisor::{Launch, MetaCore};
use e2e::wait::{DAEMON_DEADLINE, IO_DEADLINE, until, within};
use metacore::api::storaged::{BackupRequest, StoragedClient};
use metacore::{ErrorCode, Fields};
use rusqlite::{Connection, OpenFlags};
use serde_json::json;

const WRITERS: usize = 16;
/// Fields of every record the writers make (one a `cids/` member).
const FIELDS_PER_RECORD: usize = 6;

/// One write a writer sent, and when it was acknowledged (`None`: it was
/// in flight when the writers stopped).
#[derive(Debug, Clone)]
struct Sent {
    rid: String,
    fields: Fields,
    acked: Option<Instant>,
}

type Log = Arc<Mutex<Vec<Sent>>>;

fn a_record(writer: usize, i: u64) -> (String, Fields) {
    let f = metacore::record::fields_of(&[
        ("filePath", &format!("/files/w{writer}/{i}.mkv")),
        ("sizeByte", &(i * 1000 + writer as u64).to_string()),
        ("title", &format!("Film {writer}-{i}")),
        ("year", "2001"),
        ("plot", &"A long plot. ".repeat(8)),
        (&member(&random_midhash()), "true"),
    ]);
    assert_eq!(f.len(), FIELDS_PER_RECORD);
    (random_rid().to_string(), f)
}

/// Writes new records through apid's `PATCH /meta/{rid}` until `stop`,
/// noting each one before it is sent and when it is acknowledged.
async fn writer(http: Http, w: usize, stop: Arc<AtomicBool>, log: Log) {
    for i in 0.. {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let (rid, fields) = a_record(w, i);
        let at = {
            let mut log = log.lock().unwrap();
            log.push(Sent {
                rid: rid.clone(),
                fields: fields.clone(),
                acked: None,
            });
            log.len() - 1
        };
        let r = http
            .send_json("PATCH", &format!("/meta/{rid}"), &json!(fields))
            .await;
        assert_eq!(r.status, 200, "writer {w}: write {i}: {}", r.text());
        log.lock().unwrap()[at].acked = Some(Instant::now());
    }
}

/// A database made before meta-core first opens it: the sentinel and
/// `rows` filler rows of 2 KiB under `udl:` (kept, served, in no record),
/// so that a copy takes long enough for writes to land during it.
fn filler_db(path: &Path, rows: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TABLE kv(k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID;
         INSERT INTO kv(k, v) VALUES ('meta-core:schema-version', '2');",
    )
    .unwrap();
    let tx = conn.unchecked_transaction().unwrap();
    let value = "f".repeat(2048);
    for i in 0..rows {
        tx.execute(
            "INSERT INTO kv(k, v) VALUES (?1, ?2)",
            (format!("udl:filler/{i:06}"), &value),
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

/// Runs `meta-core backup <args>` without blocking the writers' runtime.
async fn cli(mc: &MetaCore, args: &[&str]) -> std::process::Output {
    let mut cmd = tokio::process::Command::from(mc.cli_command(args));
    within("meta-core backup", DAEMON_DEADLINE * 3, cmd.output())
        .await
        .expect("run the meta-core CLI")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The row count `meta-core backup` printed, checking the sentence.
fn printed_rows(stdout: &str, path: &Path) -> u64 {
    let line = stdout.trim();
    assert!(
        line.starts_with("backed up ") && line.contains(&format!(" to {} in ", path.display())),
        "{line}"
    );
    assert!(line.ends_with(" ms") || line.ends_with(" s"), "{line}");
    line["backed up ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .replace(',', "")
        .parse()
        .unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// `PRAGMA integrity_check` on the file, read-only.
fn integrity(path: &Path) -> String {
    let c = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    c.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap()
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_under_16_writers_holds_every_write_acknowledged_before_it() {
    let dir = test_dir();
    filler_db(&dir.path().join("meta-core/db/meta-core.db"), 12_000);
    let mc = Launch::in_dir(dir.path(), "run").start().await;
    let backups = dir.path().join("backups");
    std::fs::create_dir(&backups).unwrap();
    let file = backups.join("b.db");

    let stop = Arc::new(AtomicBool::new(false));
    let log: Log = Arc::default();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| tokio::spawn(writer((*mc).clone(), w, stop.clone(), log.clone())))
        .collect();
    let acked = |log: &Log| {
        log.lock()
            .unwrap()
            .iter()
            .filter(|s| s.acked.is_some())
            .count()
    };
    until("the writers to be under way", DAEMON_DEADLINE, || async {
        (acked(&log) >= 4 * WRITERS).then_some(())
    })
    .await;

    let began = Instant::now();
    let out = cli(&mc, &["backup", file.to_str().unwrap()]).await;
    let ended = Instant::now();
    // A few more writes after it, then stop.
    let after_backup = acked(&log);
    until("writes after the backup", DAEMON_DEADLINE, || async {
        (acked(&log) > after_backup).then_some(())
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        within("a writer to stop", IO_DEADLINE, w).await.unwrap();
    }
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");

    assert_eq!(integrity(&file), "ok");
    let rows = dump(&file);
    assert_eq!(printed_rows(&stdout, &file), rows.len() as u64, "{stdout}");
    assert_sound(&rows);
    let sent = log.lock().unwrap().clone();
    let before: Vec<&Sent> = sent
        .iter()
        .filter(|s| s.acked.is_some_and(|t| t < began))
        .collect();
    assert!(before.len() >= 4 * WRITERS);
    for s in &before {
        assert_eq!(
            record(&rows, &s.rid),
            s.fields,
            "a write acknowledged before the backup began is in it, whole"
        );
    }
    // Every record in the copy is one a writer sent, whole (no half write).
    let by_rid: std::collections::HashMap<&str, &Sent> =
        sent.iter().map(|s| (s.rid.as_str(), s)).collect();
    for rid in rids_with_fields(&rows) {
        let s = by_rid
            .get(rid.as_str())
            .unwrap_or_else(|| panic!("{rid} in the copy was never written"));
        assert_eq!(record(&rows, &rid), s.fields, "record {rid} is whole");
    }
    let during = sent
        .iter()
        .filter(|s| s.acked.is_some_and(|t| t > began && t < ended))
        .count();
    assert!(
        during > 0,
        "writes are acknowledged while the backup runs ({} in all)",
        sent.len()
    );
    assert_eq!(
        rows.keys().filter(|k| k.starts_with("udl:filler/")).count(),
        12_000
    );
    // One private file, nothing beside it.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(names_in(&backups), ["b.db"]);
    eprintln!(
        "backup: {}; {} writes, {during} acknowledged during it",
        stdout.trim(),
        sent.len()
    );
}

/// A 400 in the envelope: `bad_request` (not JSON, or a path storaged
/// refuses) or `schema_violation` (JSON of another shape).
fn refused_as_input(r: &e2e::raw_http::RawResponse) {
    let slug = r.json()["error"].as_str().unwrap_or_default().to_owned();
    assert!(
        ["bad_request", "schema_violation"].contains(&slug.as_str()),
        "{}",
        r.text()
    );
    r.assert_error(400, &slug);
}

#[tokio::test]
async fn malformed_backup_requests_are_400_and_write_nothing() {
    let dir = test_dir();
    let mc = Launch::in_dir(dir.path(), "run").start().await;
    let before = dump(&mc.db());
    let socket = mc.run_dir().join("storaged.sock");
    let target = dir.path().join("b.db");
    let named = format!("{{\"path\":\"{}\"}}", target.display());
    // Neither JSON nor the request's shape: a 400 in the error envelope,
    // as every socket route answers them; a GET is 405.
    let bodies: [&[u8]; 6] = [
        b"",
        b"{",
        b"[]",
        b"{}",
        b"{\"path\":5}",
        b"{\"path\":\"/tmp/x\\u0000y.db\"}",
    ];
    for body in bodies {
        let r = e2e::raw_http::request(&socket, "POST", "/backup", Some(body)).await;
        refused_as_input(&r);
        let text = r.text();
        assert!(
            !text.contains(&*mc.db().to_string_lossy()),
            "the answer names the database: {text}"
        );
    }
    let r = e2e::raw_http::request(&socket, "GET", "/backup", None).await;
    assert_eq!(r.status, 405, "GET /backup: {}", r.text());
    // The same well-formed request with an unknown member is refused too,
    // so a typo is not silently a default.
    let extra = named.replacen('{', "{\"paht\":1,", 1);
    let r = e2e::raw_http::request(&socket, "POST", "/backup", Some(extra.as_bytes())).await;
    refused_as_input(&r);
    assert!(
        !target.exists(),
        "a refused request wrote {}",
        target.display()
    );
    assert_same(&before, &dump(&mc.db()), "the refused requests");
    // And the well-formed one works on the same socket.
    let r = e2e::raw_http::request(&socket, "POST", "/backup", Some(named.as_bytes())).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(target.exists());
}

#[tokio::test]
async fn bad_targets_are_refused_and_nothing_is_written() {
    let dir = test_dir();
    let mc = Launch::in_dir(dir.path(), "run").start().await;
    let r = mc
        .send_json(
            "PATCH",
            &format!("/meta/{}", random_rid()),
            &json!({"title": "kept"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let before = dump(&mc.db());
    let storaged = StoragedClient::new(&mc.run_dir().join("storaged.sock"));

    // On the socket: a relative path is a 400 (the CLI never sends one).
    let e = api_error(
        storaged
            .backup(&BackupRequest {
                path: PathBuf::from("b.db"),
            })
            .await,
    );
    assert_eq!(e.code, ErrorCode::BadRequest, "{e:?}");
    assert_eq!(e.code.status().as_u16(), 400);
    assert!(e.message.contains("relative"), "{e:?}");

    // Through the CLI: refused in words, exit 2, nothing made.
    let db = mc.db();
    let mut wal = db.clone().into_os_string();
    wal.push("-wal");
    let missing = dir.path().join("nope/b.db");
    let in_run = mc.run_dir().join("b.db");
    let cases: [(&Path, &str); 4] = [
        (&missing, "does not exist"),
        (&db, "live database"),
        (Path::new(&wal), "live database"),
        (&in_run, "run folder"),
    ];
    let db_files = names_in(db.parent().unwrap());
    for (target, why) in cases {
        let out = cli(&mc, &["backup", target.to_str().unwrap()]).await;
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", target.display());
        assert!(err.contains(why), "{}: {err}", target.display());
        // Only the path the operator gave is named, not storaged's own.
        let others = err.replace(target.to_str().unwrap(), "");
        assert!(!others.contains(&*db.to_string_lossy()), "{err}");
        assert!(out.stdout.is_empty());
    }
    assert!(!missing.parent().unwrap().exists());
    assert!(!in_run.exists());
    assert_eq!(names_in(db.parent().unwrap()), db_files);
    assert_same(&before, &dump(&mc.db()), "the refused backups");
    // A relative file through the CLI is taken from its current folder.
    let here = dir.path().join("here");
    std::fs::create_dir(&here).unwrap();
    let mut cmd = tokio::process::Command::from(mc.cli_command(&["backup", "rel.db"]));
    let out = within(
        "meta-core backup",
        DAEMON_DEADLINE,
        cmd.current_dir(&here).output(),
    )
    .await
    .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        printed_rows(&text(&out.stdout), &here.join("rel.db")),
        before.len() as u64
    );
    assert_same(&before, &dump(&here.join("rel.db")), "the copy");
}

#[tokio::test]
async fn a_full_backup_volume_is_a_507_and_leaves_nothing() {
    let dir = test_dir();
    filler_db(&dir.path().join("meta-core/db/meta-core.db"), 2_000);
    let mc = Launch::in_dir(dir.path(), "run").start().await;
    let small = dir.path().join("small");
    let _mnt = e2e::mount::Tmpfs::at(&small, "1m");
    let out = cli(&mc, &["backup", small.join("b.db").to_str().unwrap()]).await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("volume is full"), "{err}");
    assert_eq!(names_in(&small), Vec::<String>::new(), "nothing left");
    let h = mc.get_ok("/health").await;
    assert_eq!(h["status"], "ok", "the database's own volume is fine: {h}");
}

#[tokio::test]
async fn a_restore_serves_the_backup_and_not_the_later_writes() {
    let dir = test_dir();
    let mut mc = Launch::in_dir(dir.path(), "run").start().await;
    let (kept, later) = (random_rid().to_string(), random_rid().to_string());
    for (rid, title) in [(&kept, "in the backup"), (&later, "after it")] {
        if rid == &later {
            let file = dir.path().join("b.db");
            let out = cli(&mc, &["backup", file.to_str().unwrap()]).await;
            assert!(out.status.success(), "{}", text(&out.stderr));
        }
        let r = mc
            .send_json("PATCH", &format!("/meta/{rid}"), &json!({"title": title}))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let backed_up = dump(&dir.path().join("b.db"));

    // The procedure of docs/operations.md: stop, replace, remove the
    // -wal and -shm, start.
    let out = mc.cli(&["stop"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(mc.process.wait_exit().await.success());
    // With storaged gone the CLI says so.
    let out = cli(&mc, &["backup", dir.path().join("c.db").to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("storaged is not running"),
        "{}",
        text(&out.stderr)
    );
    let db = mc.db();
    std::fs::copy(dir.path().join("b.db"), &db).unwrap();
    for suffix in ["-wal", "-shm"] {
        let mut p = db.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    drop(mc);
    let mc = Launch::in_dir(dir.path(), "run").start().await;
    let r = mc.get_ok(&format!("/meta/{kept}")).await;
    assert_eq!(r["metadata"]["title"], "in the backup", "{r}");
    let r = mc.get(&format!("/meta/{later}")).await;
    assert_eq!(
        r.status,
        404,
        "the write after the backup is gone: {}",
        r.text()
    );
    let rows = dump(&db);
    assert_sound(&rows);
    assert_eq!(record(&rows, &kept), record(&backed_up, &kept));
    assert!(record(&rows, &later).is_empty());
}

#[tokio::test]
async fn a_backup_of_another_schema_version_is_refused_at_start() {
    let dir = test_dir();
    let mut mc = Launch::in_dir(dir.path(), "run").start().await;
    let file = dir.path().join("b.db");
    let out = cli(&mc, &["backup", file.to_str().unwrap()]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(mc.cli(&["stop"]).status.success());
    assert!(mc.process.wait_exit().await.success());
    // As a backup taken by a newer meta-core would be.
    Connection::open(&file)
        .unwrap()
        .execute(
            "UPDATE kv SET v = '3' WHERE k = 'meta-core:schema-version'",
            [],
        )
        .unwrap();
    let db = mc.db();
    std::fs::copy(&file, &db).unwrap();
    for suffix in ["-wal", "-shm"] {
        let mut p = db.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    let log_dir = mc.log_dir();
    drop(mc);
    let mut mc = Launch::in_dir(dir.path(), "run").spawn();
    let exit = within(
        "the supervisor to give up",
        DAEMON_DEADLINE * 3,
        mc.process.wait_exit(),
    )
    .await;
    assert_eq!(exit.code(), Some(1), "{}", mc.process.stderr());
    let log = std::fs::read_to_string(log_dir.join("storaged.log")).unwrap();
    assert!(
        log.contains("schema version \"3\"") && log.contains("reads version \"2\""),
        "the refusal names both versions:\n{log}"
    );
    assert!(
        log.contains("a newer meta-core wrote it: run that build")
            && !log.contains("wipe the database"),
        "and what to do, without advising a wipe of a newer store:\n{log}"
    );
    let version: String = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap()
        .query_row(
            "SELECT v FROM kv WHERE k = 'meta-core:schema-version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(version, "3", "the refused file is left as it was");
}
