//! Faults of the database's files, driven directly: what is told apart,
//! what quick_check finds, what clients are told.

use super::*;

#[test]
fn a_removed_wal_a_replaced_database_and_a_removed_one_are_told_apart() {
    for (touch, want) in [
        ("-wal", Fault::WalLost),
        ("-shm", Fault::WalLost),
        ("", Fault::DbReplaced),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db.sqlite");
        for suffix in ["", "-wal", "-shm"] {
            std::fs::write(format!("{}{suffix}", db.display()), b"x").unwrap();
        }
        let faults = Faults::new(&db);
        faults.compare_files();
        assert_eq!(faults.raised(), None, "nothing changed");
        // Replaced: a new inode at the path (the old one kept alive).
        let path = format!("{}{touch}", db.display());
        let keep = std::fs::File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        if touch.is_empty() {
            std::fs::write(&path, b"other").unwrap();
        }
        faults.compare_files();
        assert_eq!(faults.raised(), Some(want.clone()), "{touch:?}");
        assert!(want.needs_restart());
        drop(keep);
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.sqlite");
    std::fs::write(&db, b"x").unwrap();
    let faults = Faults::new(&db);
    // A WAL that appears later is recorded, not a fault.
    std::fs::write(format!("{}-wal", db.display()), b"x").unwrap();
    faults.compare_files();
    assert_eq!(faults.raised(), None);
    std::fs::remove_file(&db).unwrap();
    faults.compare_files();
    assert_eq!(faults.raised(), Some(Fault::DbRemoved));
    assert!(!Fault::DbRemoved.needs_restart());
    // The first fault stays.
    faults.raise(Fault::Damaged("x".into()));
    assert_eq!(faults.raised(), Some(Fault::DbRemoved));
}

#[test]
fn quick_check_finds_a_page_of_garbage_that_no_query_has_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.sqlite");
    let c = Connection::open(&db).unwrap();
    c.execute_batch("CREATE TABLE kv(k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID")
        .unwrap();
    for i in 0..2000 {
        c.execute(
            "INSERT INTO kv VALUES (?1, ?2)",
            (format!("k{i:05}"), "v".repeat(200)),
        )
        .unwrap();
    }
    let leaf: i64 = c
        .query_row(
            "SELECT pageno FROM dbstat WHERE name = 'kv' AND pagetype = 'leaf' \
             ORDER BY path LIMIT 1 OFFSET 50",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let size: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    drop(c);
    let healthy = Faults::new(&db);
    healthy.quick_check(&Connection::open(&db).unwrap());
    assert_eq!(healthy.raised(), None);

    let mut bytes = std::fs::read(&db).unwrap();
    let at = ((leaf - 1) * size) as usize;
    bytes[at..at + size as usize].fill(0xa5);
    std::fs::write(&db, &bytes).unwrap();
    let faults = Faults::new(&db);
    faults.quick_check(&Connection::open(&db).unwrap());
    match faults.raised() {
        Some(Fault::Damaged(what)) => assert!(!what.is_empty()),
        other => panic!("{other:?}"),
    }
    assert!(!faults.raised().unwrap().needs_restart());
}

#[test]
fn every_reason_says_writes_are_refused_and_names_no_path() {
    for f in [
        Fault::WalLost,
        Fault::DbReplaced,
        Fault::DbRemoved,
        Fault::DbRestored,
        Fault::Damaged("database disk image is malformed".into()),
        Fault::VolumeFailed("disk I/O error".into()),
    ] {
        let why = f.reason();
        assert!(!why.contains(".sqlite") && !why.contains("/tmp"), "{why}");
        assert!(why.contains("writes are refused"), "{why}");
    }
}
