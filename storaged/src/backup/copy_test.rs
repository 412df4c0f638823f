//! The copy on real SQLite files: one snapshot whatever is written
//! between its steps, one self-contained file, nothing left on failure.

use std::cell::Cell;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use rusqlite::Connection;

use super::*;

/// A store in WAL mode, as storaged keeps it, with `rows` rows of about
/// 1 KiB (so that the copy takes several steps).
fn store(path: &Path, rows: u64) -> Connection {
    let conn = Connection::open(path).unwrap();
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    conn.pragma_update(None, "synchronous", "OFF").unwrap();
    conn.execute_batch("CREATE TABLE kv(k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID;")
        .unwrap();
    let tx = conn.unchecked_transaction().unwrap();
    let filler = "x".repeat(1000);
    for i in 0..rows {
        tx.execute(
            "INSERT INTO kv(k, v) VALUES (?1, ?2)",
            (format!("base/{i:08}"), &filler),
        )
        .unwrap();
    }
    tx.commit().unwrap();
    conn
}

fn target_in(dir: &Path, name: &str) -> Target {
    Target {
        path: dir.join(name),
        dir: dir.to_owned(),
        name: name.into(),
    }
}

fn never() -> Option<Stop> {
    None
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn keys(path: &Path, prefix: &str) -> Vec<String> {
    let c = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut stmt = c
        .prepare("SELECT k FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k")
        .unwrap();
    stmt.query_map((prefix, format!("{prefix}\u{10FFFF}")), |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn the_copy_is_one_private_checked_file() {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let db = src.path().join("meta-core.db");
    let conn = store(&db, 300);
    // Rows still in the WAL are part of the copy.
    conn.execute("INSERT INTO kv(k, v) VALUES ('late', 'in the WAL')", [])
        .unwrap();
    let copied = copy(&db, &target_in(out.path(), "b.db"), &never).unwrap();
    assert_eq!(copied.rows, 301);
    let file = out.path().join("b.db");
    assert_eq!(copied.bytes, std::fs::metadata(&file).unwrap().len());
    assert_eq!(
        names(out.path()),
        ["b.db"],
        "no partial, no -wal or -journal"
    );
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // One file: opened read-only with nothing beside it, in rollback mode.
    let c = Connection::open_with_flags(&file, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let jm: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(jm, "delete");
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    let late: String = c
        .query_row("SELECT v FROM kv WHERE k = 'late'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(late, "in the WAL");
    drop(c);
    assert_eq!(names(out.path()), ["b.db"]);
}

#[test]
fn writes_between_steps_neither_restart_the_copy_nor_enter_it() {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let db = src.path().join("meta-core.db");
    // About 4,000 pages of rows: four steps or more.
    let writer = store(&db, 12_000);
    let steps = Cell::new(0u32);
    // Between two steps another connection commits a write: the copy
    // must hold none of them, and must not start over (it would never
    // end: give up past a bound far above the steps it needs).
    let write_between = || {
        let n = steps.get();
        assert!(n < 200, "the copy keeps restarting");
        steps.set(n + 1);
        writer
            .execute(
                "INSERT INTO kv(k, v) VALUES (?1, 'written during the backup')",
                [format!("during/{n:04}")],
            )
            .unwrap();
        None
    };
    let copied = copy(&db, &target_in(out.path(), "b.db"), &write_between).unwrap();
    let file = out.path().join("b.db");
    assert!(steps.get() >= 4, "the copy took {} steps", steps.get());
    // The snapshot began before the first look at the stop flag.
    assert_eq!(keys(&file, "during/"), Vec::<String>::new());
    assert_eq!(keys(&file, "base/").len(), 12_000);
    assert_eq!(copied.rows, 12_000);
    assert_eq!(keys(&db, "during/").len() as u32, steps.get());
}

#[test]
fn a_stopped_copy_leaves_nothing_and_the_old_file_stays() {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let db = src.path().join("meta-core.db");
    let _conn = store(&db, 12_000);
    std::fs::write(out.path().join("b.db"), b"yesterday's backup").unwrap();
    let looks = Cell::new(0);
    let stop_second = || {
        looks.set(looks.get() + 1);
        (looks.get() > 1).then_some(Stop::Shutdown)
    };
    let err = copy(&db, &target_in(out.path(), "b.db"), &stop_second).unwrap_err();
    assert!(
        matches!(err, BackupError::Stopped(Stop::Shutdown)),
        "{err:?}"
    );
    assert_eq!(err.to_api().code, metacore::ErrorCode::StorageUnavailable);
    assert_eq!(names(out.path()), ["b.db"]);
    assert_eq!(
        std::fs::read(out.path().join("b.db")).unwrap(),
        b"yesterday's backup"
    );
    // Then a whole one replaces it.
    copy(&db, &target_in(out.path(), "b.db"), &never).unwrap();
    assert_eq!(keys(&out.path().join("b.db"), "base/").len(), 12_000);
    assert_eq!(names(out.path()), ["b.db"]);
}

#[test]
fn a_copy_that_cannot_be_made_says_why_without_a_path() {
    let src = tempfile::tempdir().unwrap();
    let db = src.path().join("meta-core.db");
    let _conn = store(&db, 10);
    // A folder gone since the target was checked.
    let gone = src.path().join("gone");
    let err = copy(&db, &target_in(&gone, "b.db"), &never).unwrap_err();
    let api = err.to_api();
    assert_eq!(api.code, metacore::ErrorCode::Internal, "{err:?}");
    assert!(
        !api.message.contains(&*src.path().to_string_lossy()),
        "{api:?}"
    );
    // A source that is no database: nothing is left in the folder.
    let out = tempfile::tempdir().unwrap();
    let junk = src.path().join("junk");
    std::fs::write(&junk, vec![7u8; 8192]).unwrap();
    assert!(copy(&junk, &target_in(out.path(), "b.db"), &never).is_err());
    assert_eq!(names(out.path()), Vec::<String>::new());
}

#[test]
fn a_copy_that_fails_its_check_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("copy.db");
    drop(store(&db, 300));
    // Back to one file, then garbage over a page in the middle of the table.
    let c = Connection::open(&db).unwrap();
    c.pragma_update(None, "journal_mode", "DELETE").unwrap();
    drop(c);
    let mut bytes = std::fs::read(&db).unwrap();
    assert!(bytes.len() > 40 * 4096);
    bytes[20 * 4096..21 * 4096].fill(0x5a);
    std::fs::write(&db, bytes).unwrap();
    let err = check(&db).unwrap_err();
    assert!(
        matches!(err, BackupError::Check(_) | BackupError::Sqlite { .. }),
        "{err:?}"
    );
    assert_eq!(err.to_api().code, metacore::ErrorCode::Internal);
}
