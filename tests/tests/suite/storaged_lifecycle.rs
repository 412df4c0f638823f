//! Starting and stopping storaged: one writer per database, the schema
//! gate, the sentinel of a fresh store, an orderly stop that commits every
//! acknowledged write, stale sockets, and what a restart keeps.

use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};

use e2e::daemon::test_dir;
use e2e::fixtures::{
    checked, field_write, fields, random_midhash, random_rid, stream_entry, target,
};
use e2e::snapshot::{self, assert_same, assert_sound, dump, record};
use e2e::wait::{self, DAEMON_DEADLINE};
use e2e::{Launch, Storaged};
use metacore::api::storaged::EntriesQuery;
use metacore::socket::client::ClientError;
use metacore::{Fields, StreamName};
use rusqlite::Connection;

/// Makes a database file holding `rows` in the `kv` table of the seeds.
fn make_db(path: &std::path::Path, rows: &[(&str, &str)]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let conn = Connection::open(path).unwrap();
    conn.execute_batch("CREATE TABLE kv(k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID;")
        .unwrap();
    for (k, v) in rows {
        conn.execute("INSERT INTO kv(k, v) VALUES (?1, ?2)", [k, v])
            .unwrap();
    }
}

/// Starts storaged on `dir` expecting it to refuse: returns its stderr
/// after checking it exited non-zero without serving.
async fn refused_start(launch: Launch) -> String {
    let mut s = launch.spawn();
    let status = s.wait_exit().await;
    assert!(
        !status.success(),
        "storaged should refuse to start; stderr:\n{}",
        s.stderr()
    );
    let answer = s.client().health().await.map(|h| h.pid).ok();
    assert_ne!(answer, Some(s.pid()), "a refused storaged serves nothing");
    s.stderr()
}

#[tokio::test]
async fn a_second_storaged_on_the_same_database_refuses_to_start() {
    let dir = test_dir();
    let first = Storaged::start_in(dir.path()).await;
    first
        .client()
        .merge(
            &target(&random_rid().to_string()),
            &checked(fields(&[("title", "T")])),
        )
        .await
        .unwrap();
    let before = dump(&first.db_path());

    let err = refused_start(Launch::in_dir(dir.path()).run_dir(dir.path().join("run2"))).await;
    let db = first.db_path().display().to_string();
    assert!(
        err.contains(&db),
        "the refusal names the database {db}:\n{err}"
    );
    assert!(
        err.contains(&first.pid().to_string()),
        "and the pid that holds it:\n{err}"
    );

    // Through META_CORE_DB_PATH from another META_CORE_PATH: still refused.
    let other = test_dir();
    let launch = Launch::in_dir(other.path())
        .meta_core_path(other.path().join("mc"))
        .db_path(first.db_path())
        .run_dir(other.path().join("run"));
    let err = refused_start(launch).await;
    assert!(err.contains(&db), "{err}");

    assert_eq!(
        first.client().health().await.unwrap().pid,
        first.pid(),
        "the first one still serves"
    );
    assert_same(&before, &dump(&first.db_path()), "the refused starts");
}

#[tokio::test]
async fn a_store_of_another_schema_version_is_refused() {
    let dir = test_dir();
    let launch = Launch::in_dir(dir.path());
    make_db(
        &launch.db(),
        &[("meta-core:schema-version", "1"), ("udl:x", "kept")],
    );
    let before = dump(&launch.db());
    let err = refused_start(launch.clone()).await;
    assert!(
        err.contains("schema version")
            && err.contains("\"1\"")
            && err.contains("no automated migration"),
        "the refusal says which version it found, and that an older one is not migrated:\n{err}"
    );
    assert_same(&before, &dump(&launch.db()), "a refused boot");
}

#[tokio::test]
async fn legacy_records_without_the_sentinel_are_refused() {
    for legacy in [
        "idx:roots/01JKR8XW5T4QMV7AHNJ2DEFGHK",
        "file:midhash256:abc/title",
    ] {
        let dir = test_dir();
        let launch = Launch::in_dir(dir.path());
        make_db(&launch.db(), &[(legacy, "x")]);
        let before = dump(&launch.db());
        let err = refused_start(launch.clone()).await;
        assert!(
            err.contains("legacy") && err.contains(legacy),
            "the refusal names the legacy row {legacy}:\n{err}"
        );
        assert_same(&before, &dump(&launch.db()), legacy);
    }
}

#[tokio::test]
async fn a_fresh_store_gets_the_sentinel_and_a_private_socket() {
    let s = Storaged::start().await;
    let rows = dump(&s.db_path());
    assert_eq!(
        rows.get("meta-core:schema-version").map(String::as_str),
        Some("2")
    );
    assert_sound(&rows);
    let mode = std::fs::metadata(s.socket_path())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "the socket is its owner's only");

    // An empty kv table (made by hand) is a fresh store too.
    let dir = test_dir();
    let launch = Launch::in_dir(dir.path());
    make_db(&launch.db(), &[("udl:kept", "1")]);
    let s = launch.start().await;
    let rows = dump(&s.db_path());
    assert_eq!(
        rows.get("meta-core:schema-version").map(String::as_str),
        Some("2")
    );
    assert_eq!(rows.get("udl:kept").map(String::as_str), Some("1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_writes_commits_every_acknowledged_write_and_exits_0() {
    let dir = test_dir();
    let mut s = Storaged::start_in(dir.path()).await;
    let acked: Arc<Mutex<Vec<(String, Fields)>>> = Arc::default();
    let mut writers = Vec::new();
    for w in 0..8 {
        let c = s.client().clone();
        let acked = acked.clone();
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let r = random_rid().to_string();
                let f = fields(&[
                    ("writer", &w.to_string()),
                    ("i", &i.to_string()),
                    ("filePath", "/files/x"),
                ]);
                match c.merge(&target(&r), &checked(f.clone())).await {
                    Ok(_) => acked.lock().unwrap().push((r, f)),
                    Err(ClientError::Api(e))
                        if e.code == metacore::ErrorCode::StorageUnavailable =>
                    {
                        break;
                    }
                    Err(ClientError::Api(e)) => panic!("a write was refused: {e}"),
                    Err(_) => break,
                }
            }
        }));
    }
    wait::until("writes to be acknowledged", DAEMON_DEADLINE, || {
        let n = acked.lock().unwrap().len();
        std::future::ready((n >= 200).then_some(()))
    })
    .await;
    s.sigterm();
    let status = s.wait_exit().await;
    for w in writers {
        wait::within("a writer to stop", DAEMON_DEADLINE, w)
            .await
            .unwrap();
    }
    assert!(
        status.success(),
        "an orderly stop exits 0, got {status}; stderr:\n{}",
        s.stderr()
    );

    let acked = std::mem::take(&mut *acked.lock().unwrap());
    s.restart().await;
    let rows = dump(&s.db_path());
    assert_sound(&rows);
    for (r, f) in &acked {
        assert_eq!(&record(&rows, r), f, "acknowledged record {r}");
    }
    assert!(snapshot::roots(&rows).len() >= acked.len());
}

#[tokio::test]
async fn a_stale_socket_file_is_removed_at_start() {
    // Left by a killed storaged.
    let mut s = Storaged::start().await;
    s.client()
        .merge(
            &target(&random_rid().to_string()),
            &checked(fields(&[("a", "1")])),
        )
        .await
        .unwrap();
    s.kill9();
    assert!(
        s.socket_path().exists(),
        "SIGKILL leaves the socket file behind"
    );
    s.restart().await;

    // Left by anything else: a socket nobody listens on.
    let dir = test_dir();
    let launch = Launch::in_dir(dir.path());
    let sock = dir.path().join("run/storaged.sock");
    std::fs::create_dir_all(sock.parent().unwrap()).unwrap();
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    let s = launch.start().await;
    assert_eq!(s.client().health().await.unwrap().pid, s.pid());
}

#[tokio::test]
async fn a_restart_keeps_the_data_and_stream_ids_keep_increasing() {
    let mut s = Storaged::start().await;
    let c = s.client().clone();
    let x = random_midhash();
    let w = c
        .merge(
            &target(x.as_str()),
            &checked(fields(&[("title", "T"), ("year", "1999")])),
        )
        .await
        .unwrap();
    let file_id = c
        .append(&stream_entry(
            StreamName::Files,
            [("type".to_string(), "add".to_string())].into(),
        ))
        .await
        .unwrap();
    let meta_last = c.stream_info(StreamName::Meta).await.unwrap().last.unwrap();
    let before = dump(&s.db_path());

    s.sigterm();
    assert!(s.wait_exit().await.success());
    assert_same(&before, &dump(&s.db_path()), "an orderly stop");
    s.restart().await;
    let c = s.client().clone();

    assert_eq!(c.resolve(&target(x.as_str())).await.unwrap(), w.rid);
    assert_eq!(
        c.get_record(&target(&w.rid.to_string()))
            .await
            .unwrap()
            .fields["year"],
        "1999"
    );
    let info = c.stream_info(StreamName::Meta).await.unwrap();
    assert_eq!(info.last, Some(meta_last));

    c.set_field(&target(&w.rid.to_string()), &field_write("title", "T2"))
        .await
        .unwrap();
    let new_file_id = c
        .append(&stream_entry(
            StreamName::Files,
            [("type".to_string(), "change".to_string())].into(),
        ))
        .await
        .unwrap();
    assert!(new_file_id > file_id, "{new_file_id:?} after {file_id:?}");
    let after = c
        .entries(
            StreamName::Meta,
            &EntriesQuery {
                after: Some(meta_last),
                limit: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(after.len(), 1);
    assert!(after[0].id > meta_last);

    // A kill leaves the marks consistent too.
    let last = c
        .stream_info(StreamName::Files)
        .await
        .unwrap()
        .last
        .unwrap();
    s.kill9();
    s.restart().await;
    let next = s
        .client()
        .append(&stream_entry(
            StreamName::Files,
            [("type".to_string(), "x".to_string())].into(),
        ))
        .await
        .unwrap();
    assert!(next > last, "{next:?} after {last:?}");
}

#[tokio::test]
async fn a_live_socket_is_not_taken_over() {
    let dir = test_dir();
    let first = Storaged::start_in(dir.path()).await;
    let other = test_dir();
    // Another database, the same run dir: the socket is in use.
    let launch = Launch::in_dir(other.path()).run_dir(dir.path().join("run"));
    let err = refused_start(launch).await;
    assert!(
        err.contains("storaged.sock"),
        "the refusal names the socket:\n{err}"
    );
    assert_eq!(
        first.client().health().await.unwrap().pid,
        first.pid(),
        "the live socket still answers"
    );
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_refused_untouched() {
    let dir = test_dir();
    let launch = Launch::in_dir(dir.path());
    std::fs::create_dir_all(launch.db().parent().unwrap()).unwrap();
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(launch.db(), &garbage).unwrap();
    let err = refused_start(launch.clone()).await;
    assert!(err.contains("not a database"), "{err}");
    assert_eq!(
        std::fs::read(launch.db()).unwrap(),
        garbage,
        "the file is left as it was"
    );
}

/// SQLite would open a zero-byte file as a new, empty database; storaged
/// refuses it, says how to start fresh, and writes nothing to it.
#[tokio::test]
async fn an_empty_database_file_is_refused_untouched() {
    let dir = test_dir();
    let launch = Launch::in_dir(dir.path());
    std::fs::create_dir_all(launch.db().parent().unwrap()).unwrap();
    std::fs::write(launch.db(), b"").unwrap();
    let err = refused_start(launch.clone()).await;
    assert!(
        err.contains("is an empty file, not a meta-core database"),
        "{err}"
    );
    assert!(err.contains("remove it"), "{err}");
    assert_eq!(std::fs::metadata(launch.db()).unwrap().len(), 0);
    let mut wal = launch.db().into_os_string();
    wal.push("-wal");
    assert!(!std::path::Path::new(&wal).exists(), "no WAL was made");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_tail_does_not_hold_up_an_orderly_stop() {
    use futures_util::StreamExt;
    let mut s = Storaged::start().await;
    let c = s.client().clone();
    let mut tail = Box::pin(c.tail(StreamName::Meta, None).await.unwrap());
    c.set_field(&target(&random_rid().to_string()), &field_write("a", "1"))
        .await
        .unwrap();
    assert!(
        wait::within("the first tail entry", DAEMON_DEADLINE, tail.next())
            .await
            .is_some()
    );
    s.sigterm();
    let status = s.wait_exit().await;
    assert!(status.success(), "{status}; stderr:\n{}", s.stderr());
    let end = wait::within("the tail to end", DAEMON_DEADLINE, tail.next()).await;
    assert!(
        end.is_none() || end.is_some_and(|e| e.is_err()),
        "the tail ends with the daemon"
    );
}
