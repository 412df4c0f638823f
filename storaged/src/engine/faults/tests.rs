//! Faults of the database's files, driven directly on real files: what is
//! told apart, what is put back from the descriptors still open, what
//! quick_check finds.

use std::fs::File;

use super::*;

/// A database, its WAL and index as files with known bytes, held open as
/// SQLite would hold them; the descriptors and the paths.
fn files(dir: &Path) -> (Vec<File>, [PathBuf; 3]) {
    let db = dir.join("meta-core.db");
    let paths = [
        db.clone(),
        PathBuf::from(format!("{}-wal", db.display())),
        PathBuf::from(format!("{}-shm", db.display())),
    ];
    let mut held = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        std::fs::write(p, format!("bytes of file {i}").repeat(1000)).unwrap();
        held.push(File::open(p).unwrap());
    }
    (held, paths)
}

fn changed(faults: &Faults) -> String {
    match faults.raised() {
        Some(Fault::FilesChanged(what)) => what,
        other => panic!("{other:?}"),
    }
}

#[test]
fn each_path_removed_or_replaced_is_a_change_and_a_late_sidecar_is_not() {
    for (i, name) in ["the database file", "its WAL", "the WAL's index"]
        .iter()
        .enumerate()
    {
        for replace in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let (_held, paths) = files(dir.path());
            let faults = Faults::new(&paths[0]);
            faults.compare_files();
            assert_eq!(faults.raised(), None, "nothing changed");
            std::fs::remove_file(&paths[i]).unwrap();
            if replace {
                std::fs::write(&paths[i], b"another file").unwrap();
            }
            faults.compare_files();
            let want = format!(
                "{name} was {}",
                if replace { "replaced" } else { "removed" }
            );
            assert_eq!(changed(&faults), want);
            assert!(faults.frozen() && !faults.raised().unwrap().needs_restart());
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("meta-core.db");
    std::fs::write(&db, b"x").unwrap();
    let faults = Faults::new(&db);
    std::fs::write(format!("{}-wal", db.display()), b"x").unwrap();
    faults.compare_files();
    assert_eq!(
        faults.raised(),
        None,
        "a WAL that appears later is recorded"
    );
    assert!(faults.db_is_ours());
}

#[test]
fn a_removed_database_and_wal_are_put_back_byte_for_byte_from_the_open_files() {
    let dir = tempfile::tempdir().unwrap();
    let (held, paths) = files(dir.path());
    let before: Vec<Vec<u8>> = paths[..2]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    let faults = Faults::new(&paths[0]);
    for p in &paths {
        std::fs::remove_file(p).unwrap();
    }
    assert!(!faults.db_is_ours());
    faults.check_files();
    let Some(Fault::FilesPutBack(done)) = faults.raised() else {
        panic!("{:?}", faults.raised());
    };
    assert!(done.contains("the WAL was put back"), "{done}");
    assert!(done.contains("the database file was put back"), "{done}");
    assert!(
        !done.contains(&dir.path().display().to_string()),
        "no path: {done}"
    );
    for (p, bytes) in paths[..2].iter().zip(&before) {
        assert_eq!(&std::fs::read(p).unwrap(), bytes, "{}", p.display());
    }
    assert!(!paths[2].exists(), "the index is rebuilt by the next start");
    assert!(faults.raised().unwrap().needs_restart());
    drop(held);
}

#[test]
fn a_database_put_in_our_place_is_kept_and_ours_goes_beside_it_with_its_wal() {
    let dir = tempfile::tempdir().unwrap();
    let (held, paths) = files(dir.path());
    let ours = std::fs::read(&paths[0]).unwrap();
    let our_wal = std::fs::read(&paths[1]).unwrap();
    let faults = Faults::new(&paths[0]);
    std::fs::remove_file(&paths[0]).unwrap();
    std::fs::write(&paths[0], b"the operator's database").unwrap();
    faults.check_files();
    let Some(Fault::FilesPutBack(done)) = faults.raised() else {
        panic!("{:?}", faults.raised());
    };
    assert!(
        done.contains("another database was put in its place"),
        "{done}"
    );
    assert_eq!(
        std::fs::read(&paths[0]).unwrap(),
        b"the operator's database"
    );
    let kept: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".replaced-"))
        .collect();
    let db = kept
        .iter()
        .find(|p| !p.to_string_lossy().ends_with("-wal"))
        .expect("ours kept");
    assert_eq!(std::fs::read(db).unwrap(), ours);
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    assert_eq!(std::fs::read(&wal).unwrap(), our_wal, "its WAL beside it");
    assert!(!paths[1].exists() && !paths[2].exists(), "{kept:?}");
    drop(held);
}

#[test]
fn nothing_is_overwritten_and_a_failed_put_back_stays_frozen_and_up() {
    let dir = tempfile::tempdir().unwrap();
    let (held, paths) = files(dir.path());
    let faults = Faults::new(&paths[0]);
    // The descriptors are gone: nothing can be copied back.
    drop(held);
    std::fs::remove_file(&paths[0]).unwrap();
    faults.check_files();
    assert!(
        matches!(faults.raised(), Some(Fault::FilesChanged(_))),
        "{:?}",
        faults.raised()
    );
    assert!(faults.frozen() && !faults.raised().unwrap().needs_restart());
    assert!(!paths[0].exists(), "no empty file made in its place");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().contains(".restoring"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_change_of_the_files_outranks_damage_and_nothing_else_replaces_a_fault() {
    let dir = tempfile::tempdir().unwrap();
    let (_held, paths) = files(dir.path());
    let faults = Faults::new(&paths[0]);
    faults.raise(Fault::Damaged("x".into()));
    faults.raise(Fault::VolumeFailed("y".into()));
    assert_eq!(faults.raised(), Some(Fault::Damaged("x".into())));
    assert!(!faults.frozen(), "damage refuses writes, reads go on");
    std::fs::remove_file(&paths[1]).unwrap();
    faults.compare_files();
    assert_eq!(changed(&faults), "its WAL was removed");
    faults.raise(Fault::Damaged("z".into()));
    assert_eq!(changed(&faults), "its WAL was removed");
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
