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
    assert!(faults.files_are_ours());
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
    assert!(!faults.files_are_ours());
    faults.check_files(true);
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

/// The files of `dir` whose names contain `part`.
fn named(dir: &Path, part: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().contains(part))
        .collect();
    found.sort();
    found
}

fn put_back_done(faults: &Faults) -> String {
    match faults.raised() {
        Some(Fault::FilesPutBack(done)) => done,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_file_that_is_no_store_at_our_place_is_moved_aside_and_ours_put_back() {
    let dir = tempfile::tempdir().unwrap();
    let (held, paths) = files(dir.path());
    let ours = std::fs::read(&paths[0]).unwrap();
    let faults = Faults::new(&paths[0]);
    std::fs::remove_file(&paths[0]).unwrap();
    std::fs::write(&paths[0], b"not a database").unwrap();
    faults.check_files(true);
    let done = put_back_done(&faults);
    assert!(done.contains("is not a meta-core store"), "{done}");
    assert_eq!(std::fs::read(&paths[0]).unwrap(), ours);
    let aside = named(dir.path(), ".foreign-");
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(std::fs::read(&aside[0]).unwrap(), b"not a database");
    drop(held);
}

#[test]
fn another_store_put_in_our_place_with_its_wal_is_kept_and_ours_goes_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let (held, paths) = files(dir.path());
    let (ours, our_wal) = (
        std::fs::read(&paths[0]).unwrap(),
        std::fs::read(&paths[1]).unwrap(),
    );
    let faults = Faults::new(&paths[0]);
    // Theirs: a meta-core store (the sentinel), and a WAL of its own.
    let staged = dir.path().join("staged.db");
    let c = Connection::open(&staged).unwrap();
    c.execute_batch(
        "CREATE TABLE kv(k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID;
         INSERT INTO kv VALUES ('meta-core:schema-version', '2');",
    )
    .unwrap();
    drop(c);
    let theirs = std::fs::read(&staged).unwrap();
    std::fs::rename(&staged, &paths[0]).unwrap();
    std::fs::remove_file(&paths[1]).unwrap();
    std::fs::write(&paths[1], b"their WAL").unwrap();
    faults.check_files(true);
    let done = put_back_done(&faults);
    assert!(done.contains("another meta-core database"), "{done}");
    assert_eq!(std::fs::read(&paths[0]).unwrap(), theirs);
    assert_eq!(
        std::fs::read(&paths[1]).unwrap(),
        b"their WAL",
        "theirs untouched"
    );
    let kept = named(dir.path(), ".replaced-");
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert_eq!(std::fs::read(&kept[0]).unwrap(), ours);
    assert!(kept[1].to_string_lossy().ends_with("-wal"), "{kept:?}");
    assert_eq!(
        std::fs::read(&kept[1]).unwrap(),
        our_wal,
        "copied from ours"
    );
    drop(held);
}

#[test]
fn a_put_back_that_fails_stays_frozen_marked_and_overwrites_nothing_then_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (held, paths) = files(dir.path());
    let before = std::fs::read(&paths[0]).unwrap();
    let faults = Faults::new(&paths[0]);
    std::fs::remove_file(&paths[0]).unwrap();
    // A directory where the copy would be made: it cannot be.
    let restoring = PathBuf::from(format!("{}.restoring", paths[0].display()));
    std::fs::create_dir(&restoring).unwrap();
    std::fs::write(restoring.join("inside"), b"left alone").unwrap();
    faults.check_files(true);
    assert!(
        matches!(faults.raised(), Some(Fault::FilesChanged(_))),
        "{:?}",
        faults.raised()
    );
    assert!(faults.frozen() && !faults.raised().unwrap().needs_restart());
    assert!(!paths[0].exists(), "no file made in its place");
    assert!(marker(&paths[0]).exists(), "a start would refuse");
    assert_eq!(
        std::fs::read(restoring.join("inside")).unwrap(),
        b"left alone"
    );
    // The cause gone, the next attempt puts it back and lifts the marker.
    std::fs::remove_dir_all(&restoring).unwrap();
    faults.check_files(true);
    put_back_done(&faults);
    assert_eq!(std::fs::read(&paths[0]).unwrap(), before);
    assert!(!marker(&paths[0]).exists());
    assert!(named(dir.path(), ".restoring").is_empty());
    drop(held);
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
