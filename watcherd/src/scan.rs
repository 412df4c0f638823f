//! A scan: walk a watched tree, or list one folder.
//!
//! Paths are relative to `FILES_PATH` with `/` separators, as `file:events`
//! carries them. The walk descends into every folder, hidden ones included,
//! and skips files whose name starts with `.` (partial downloads, editor
//! swap files), as the original did. It does not follow symlinks. A file
//! or folder whose name is not UTF-8 is refused ([`RefusedNames`]): left
//! out, and a folder not walked into.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::debounce::Seen;
use crate::names::RefusedNames;

/// The `stat` of a file as the debounce and the diff compare it.
pub fn seen_of(meta: &std::fs::Metadata) -> Seen {
    Seen {
        size: meta.len(),
        mtime_ns: meta
            .mtime()
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.mtime_nsec()),
    }
}

/// Every regular, non-hidden file under `root`, by its path relative to
/// `files_path`, leaving out the folders `skip` (and everything under them,
/// `root` included) and the names `names` refuses. A folder that vanishes or cannot be read mid-walk is skipped
/// (the next scan sees it); `root` itself missing is an error.
pub fn walk(
    root: &Path,
    files_path: &Path,
    skip: &[PathBuf],
    names: &RefusedNames,
) -> io::Result<BTreeMap<String, Seen>> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_owned()];
    std::fs::metadata(root)?;
    while let Some(dir) = dirs.pop() {
        if skip.iter().any(|s| dir.starts_with(s)) {
            continue;
        }
        if let Ok(sub) = list_into(&dir, files_path, names, &mut out) {
            dirs.extend(sub);
        }
    }
    Ok(out)
}

/// The regular, non-hidden files directly in `dir` (a polled folder).
pub fn list(
    dir: &Path,
    files_path: &Path,
    names: &RefusedNames,
) -> io::Result<BTreeMap<String, Seen>> {
    let mut out = BTreeMap::new();
    list_into(dir, files_path, names, &mut out)?;
    Ok(out)
}

/// Adds the files of `dir` to `out`; returns its folders.
fn list_into(
    dir: &Path,
    files_path: &Path,
    names: &RefusedNames,
    out: &mut BTreeMap<String, Seen>,
) -> io::Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for entry in std::fs::read_dir(dir)?.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let name = entry.file_name();
        let file = kind.is_file() && !name.to_string_lossy().starts_with('.');
        if !kind.is_dir() && !file {
            continue;
        }
        let path = entry.path();
        if names.refuses(&path, &name) {
            continue;
        }
        if kind.is_dir() {
            dirs.push(path);
        } else {
            let (Ok(meta), Some(rel)) = (entry.metadata(), relative(&path, files_path)) else {
                continue;
            };
            out.insert(rel, seen_of(&meta));
        }
    }
    Ok(dirs)
}

/// `path` relative to `files_path` with `/` separators; `None` outside it
/// or not UTF-8 (such a name cannot be carried in an event's JSON string
/// losslessly; it is skipped).
pub fn relative(path: &Path, files_path: &Path) -> Option<String> {
    let rel = path.strip_prefix(files_path).ok()?;
    let parts: Option<Vec<&str>> = rel.iter().map(|c| c.to_str()).collect();
    Some(parts?.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_skips_hidden_files_but_not_hidden_folders() {
        let dir = tempfile::tempdir().unwrap();
        let files = dir.path();
        for (p, body) in [
            ("watch/a.mkv", &b"aa"[..]),
            ("watch/.partial", b"x"),
            ("watch/.hidden-dir/b.mkv", b"bbb"),
            ("watch/sub/deeper/c.srt", b"c"),
            ("other/d.mkv", b"d"),
        ] {
            let path = files.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, body).unwrap();
        }
        std::os::unix::fs::symlink(files.join("other"), files.join("watch/link")).unwrap();
        let refused = RefusedNames::default();
        let found = walk(
            &files.join("watch"),
            files,
            &[files.join("watch/sub")],
            &refused,
        )
        .unwrap();
        let names: Vec<&str> = found.keys().map(String::as_str).collect();
        assert_eq!(names, ["watch/.hidden-dir/b.mkv", "watch/a.mkv",]);
        assert_eq!(found["watch/a.mkv"].size, 2);
        assert!(walk(&files.join("missing"), files, &[], &refused).is_err());
        assert_eq!(walk(files, files, &[], &refused).unwrap().len(), 4);
        let here: Vec<String> = list(&files.join("watch"), files, &refused)
            .unwrap()
            .into_keys()
            .collect();
        assert_eq!(here, ["watch/a.mkv"]);
    }

    #[test]
    fn names_that_are_not_utf8_are_left_out_and_counted_once() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let files = dir.path();
        let bad = std::ffi::OsStr::from_bytes(b"bad\xff");
        std::fs::create_dir_all(files.join("watch").join(bad)).unwrap();
        std::fs::write(files.join("watch").join(bad).join("inside.mkv"), b"x").unwrap();
        std::fs::write(files.join("watch/ok.mkv"), b"ok").unwrap();
        let mut file = std::ffi::OsString::from("file-");
        file.push(bad);
        std::fs::write(files.join("watch").join(&file), b"y").unwrap();
        let names = RefusedNames::default();
        for _ in 0..3 {
            let found = walk(files, files, &[], &names).unwrap();
            let paths: Vec<&str> = found.keys().map(String::as_str).collect();
            assert_eq!(paths, ["watch/ok.mkv"]);
        }
        assert_eq!(names.count(), 2, "the folder and the file, once each");
        assert_eq!(list(&files.join("watch"), files, &names).unwrap().len(), 1);
        assert_eq!(names.count(), 2);
    }

    #[test]
    fn relative_paths_use_slashes_and_refuse_outsiders() {
        let root = Path::new("/files");
        assert_eq!(
            relative(Path::new("/files/a/b.mkv"), root).as_deref(),
            Some("a/b.mkv")
        );
        assert_eq!(relative(Path::new("/elsewhere/b.mkv"), root), None);
        use std::os::unix::ffi::OsStrExt;
        let not_utf8 = Path::new(std::ffi::OsStr::from_bytes(b"/files/a\xff.mkv"));
        assert_eq!(relative(not_utf8, root), None);
    }
}
