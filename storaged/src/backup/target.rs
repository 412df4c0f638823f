//! Where a backup may be written: the checks on the path a caller names,
//! made before anything is created. Every refusal is a 400 that says what
//! is wrong with the caller's own path; the database's path is never
//! shown.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use metacore::error::ApiError;

/// The files SQLite and storaged keep beside the database (`<db>` plus
/// each suffix): a backup over one of them would destroy the live store.
const DB_FILE_SUFFIXES: [&str; 6] = ["", "-wal", "-shm", "-journal", "-reserve", ".lock"];

/// A checked target: the folder it goes in (resolved, so symbolic links
/// in it are followed once, here) and its file name there.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The path as the caller gave it: what the answer and the logs name.
    pub(crate) path: PathBuf,
    /// The folder, resolved.
    pub(crate) dir: PathBuf,
    pub(crate) name: OsString,
}

impl Target {
    /// The file the copy is renamed to.
    pub(crate) fn file(&self) -> PathBuf {
        self.dir.join(&self.name)
    }
}

/// Checks `path` as a backup target for the database `db`, with storaged's
/// run folder `run_dir`: absolute, a file name in a folder that exists,
/// outside the run folder, neither the database nor one of its files, and
/// not a folder.
pub(crate) fn check(path: &Path, db: &Path, run_dir: &Path) -> Result<Target, ApiError> {
    let shown = path.display();
    let bad = |why: String| ApiError::bad_request(why);
    if path.as_os_str().is_empty() {
        return Err(bad("the backup path is empty".into()));
    }
    if !path.is_absolute() {
        return Err(bad(format!(
            "the backup path {shown:?} is relative: give an absolute path \
             (storaged does not know the caller's current folder)"
        )));
    }
    if path.as_os_str().as_encoded_bytes().contains(&0) {
        return Err(bad("the backup path contains a NUL byte".into()));
    }
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(bad(format!("the backup path {shown:?} names no file")));
    };
    let dir = match std::fs::canonicalize(parent) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(bad(format!(
                "the folder {:?} does not exist: create it first",
                parent.display()
            )));
        }
        Err(e) => {
            return Err(bad(format!(
                "storaged cannot reach the folder {:?}: {}",
                parent.display(),
                std::io::Error::from(e.kind())
            )));
        }
    };
    if !dir.is_dir() {
        return Err(bad(format!("{:?} is not a folder", parent.display())));
    }
    if let Ok(run) = std::fs::canonicalize(run_dir)
        && dir.starts_with(&run)
    {
        return Err(bad(format!(
            "{shown:?} is inside storaged's run folder (META_CORE_RUN_DIR), which holds \
             its sockets: write the backup elsewhere"
        )));
    }
    let target = Target {
        path: path.to_owned(),
        dir,
        name: name.to_owned(),
    };
    if is_db_file(&target, db) {
        return Err(bad(format!(
            "{shown:?} is the live database or one of its own files: write the backup \
             to another file"
        )));
    }
    if std::fs::metadata(target.file()).is_ok_and(|m| m.is_dir()) {
        return Err(bad(format!("{shown:?} is a folder: name a file in it")));
    }
    Ok(target)
}

/// Whether `target` is the database `db` or one of the files beside it,
/// by name in the resolved folder, or (through a link) the same file.
fn is_db_file(target: &Target, db: &Path) -> bool {
    let db = std::fs::canonicalize(db).unwrap_or_else(|_| db.to_owned());
    let (Some(db_dir), Some(db_name)) = (db.parent(), db.file_name()) else {
        return false;
    };
    if target.dir == db_dir {
        let named = DB_FILE_SUFFIXES.iter().any(|suffix| {
            let mut n = db_name.to_owned();
            n.push(suffix);
            n == target.name
        });
        if named {
            return true;
        }
    }
    match (std::fs::metadata(target.file()), std::fs::metadata(&db)) {
        (Ok(t), Ok(d)) => t.dev() == d.dev() && t.ino() == d.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dirs {
        _tmp: tempfile::TempDir,
        db: PathBuf,
        run: PathBuf,
        out: PathBuf,
    }

    fn dirs() -> Dirs {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let (db_dir, run, out) = (root.join("db"), root.join("run"), root.join("out"));
        for d in [&db_dir, &run, &out] {
            std::fs::create_dir(d).unwrap();
        }
        let db = db_dir.join("meta-core.db");
        std::fs::write(&db, b"x").unwrap();
        Dirs {
            _tmp: tmp,
            db,
            run,
            out,
        }
    }

    fn refusal(d: &Dirs, path: &Path) -> String {
        let e = check(path, &d.db, &d.run).expect_err("refused");
        assert_eq!(e.code, metacore::ErrorCode::BadRequest, "{e:?}");
        e.message
    }

    #[test]
    fn a_file_in_a_folder_that_exists_is_taken() {
        let d = dirs();
        let t = check(&d.out.join("b.db"), &d.db, &d.run).unwrap();
        assert_eq!(t.file(), d.out.join("b.db"));
        // One that exists is replaced; a name beside the database that is
        // none of its files is fine too.
        std::fs::write(d.out.join("old.db"), b"old").unwrap();
        assert!(check(&d.out.join("old.db"), &d.db, &d.run).is_ok());
        let beside = d.db.with_file_name("meta-core.db-2024-05-01");
        assert!(check(&beside, &d.db, &d.run).is_ok());
    }

    #[test]
    fn each_bad_target_is_refused_in_words() {
        let d = dirs();
        assert!(refusal(&d, Path::new("b.db")).contains("relative"));
        assert!(refusal(&d, Path::new("")).contains("empty"));
        assert!(refusal(&d, Path::new("/")).contains("names no file"));
        let missing = refusal(&d, &d.out.join("nope/b.db"));
        assert!(missing.contains("does not exist"), "{missing}");
        std::fs::write(d.out.join("file"), b"").unwrap();
        assert!(refusal(&d, &d.out.join("file/b.db")).contains("not a folder"));
        assert!(refusal(&d, &d.out).contains("is a folder"));
        assert!(refusal(&d, &d.run.join("b.db")).contains("run folder"));
        for suffix in DB_FILE_SUFFIXES {
            let mut p = d.db.clone().into_os_string();
            p.push(suffix);
            let why = refusal(&d, Path::new(&p));
            assert!(why.contains("live database"), "{suffix:?}: {why}");
        }
        // The database reached through another path: `..` and a link.
        let dotted = d.out.join("../db/meta-core.db");
        assert!(refusal(&d, &dotted).contains("live database"));
        let link = d.out.join("link.db");
        std::os::unix::fs::symlink(&d.db, &link).unwrap();
        assert!(refusal(&d, &link).contains("live database"));
        let dir_link = d.out.join("dblink");
        std::os::unix::fs::symlink(d.db.parent().unwrap(), &dir_link).unwrap();
        assert!(refusal(&d, &dir_link.join("meta-core.db-wal")).contains("live database"));
    }

    #[test]
    fn no_refusal_shows_the_database_path() {
        let d = dirs();
        let link = d.out.join("link.db");
        std::os::unix::fs::symlink(&d.db, &link).unwrap();
        let why = refusal(&d, &link);
        assert!(!why.contains(&*d.db.to_string_lossy()), "{why}");
    }
}
