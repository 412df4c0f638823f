//! A scan: walk a watched tree, compare it with what is known, and pair
//! the files that left one path and appeared at another into renames.
//!
//! Paths are relative to `FILES_PATH` with `/` separators, as `file:events`
//! carries them. The walk descends into every folder, hidden ones included,
//! and skips files whose name starts with `.` (partial downloads, editor
//! swap files), as the original did. It does not follow symlinks.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use metacore::cid::Cid;

use crate::debounce::Seen;

/// What the watcher knows of a file it has announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    pub seen: Seen,
    pub midhash: Cid,
}

/// How a path differs between what is known and what a walk found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Not known before.
    Added(String, Seen),
    /// Known, with another size or mtime.
    Changed(String, Seen),
    /// Known, not found now.
    Removed(String),
}

/// The `stat` of a file as the debounce and the diff compare it.
pub fn seen_of(meta: &std::fs::Metadata) -> Seen {
    Seen {
        size: meta.len(),
        mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
    }
}

/// Every regular, non-hidden file under `root`, by its path relative to
/// `files_path`. A folder that vanishes or cannot be read mid-walk is
/// skipped (the next scan sees it); `root` itself missing is an error.
pub fn walk(root: &Path, files_path: &Path) -> io::Result<BTreeMap<String, Seen>> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_owned()];
    std::fs::metadata(root)?;
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                dirs.push(path);
            } else if kind.is_file() && !entry.file_name().to_string_lossy().starts_with('.') {
                let (Ok(meta), Some(rel)) = (entry.metadata(), relative(&path, files_path)) else {
                    continue;
                };
                out.insert(rel, seen_of(&meta));
            }
        }
    }
    Ok(out)
}

/// `path` relative to `files_path` with `/` separators; `None` outside it
/// or not UTF-8 (such a name cannot be carried in an event's JSON string
/// losslessly; it is skipped).
pub fn relative(path: &Path, files_path: &Path) -> Option<String> {
    let rel = path.strip_prefix(files_path).ok()?;
    let parts: Option<Vec<&str>> = rel.iter().map(|c| c.to_str()).collect();
    Some(parts?.join("/"))
}

/// The changes from `known` to `found`, in path order (`known` holds only
/// the files of the walked tree).
pub fn diff(known: &BTreeMap<String, Known>, found: &BTreeMap<String, Seen>) -> Vec<Change> {
    let mut out = Vec::new();
    for (path, seen) in found {
        match known.get(path) {
            None => out.push(Change::Added(path.clone(), *seen)),
            Some(k) if k.seen != *seen => out.push(Change::Changed(path.clone(), *seen)),
            Some(_) => {}
        }
    }
    for path in known.keys() {
        if !found.contains_key(path) {
            out.push(Change::Removed(path.clone()));
        }
    }
    out.sort_by(|a, b| path_of(a).cmp(path_of(b)));
    out
}

fn path_of(c: &Change) -> &str {
    match c {
        Change::Added(p, _) | Change::Changed(p, _) | Change::Removed(p) => p,
    }
}

/// Files that left one path and appeared at another with the same content.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Paired {
    /// `(old path, new path)`.
    pub renamed: Vec<(String, String)>,
    pub added: Vec<String>,
    pub removed: Vec<String>,
}

/// Pairs removed and added paths whose midhash is the same into renames,
/// one to one, in path order; what is left stays added or removed.
pub fn pair_renames(removed: Vec<(String, Cid)>, added: Vec<(String, Cid)>) -> Paired {
    let mut gone: HashMap<Cid, Vec<String>> = HashMap::new();
    let mut removed = removed;
    removed.sort();
    for (path, cid) in removed {
        gone.entry(cid).or_default().push(path);
    }
    let mut out = Paired::default();
    let mut added = added;
    added.sort();
    for (path, cid) in added {
        match gone.get_mut(&cid).filter(|olds| !olds.is_empty()) {
            Some(olds) => out.renamed.push((olds.remove(0), path)),
            None => out.added.push(path),
        }
    }
    out.removed = gone.into_values().flatten().collect();
    out.removed.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::midhash;

    fn seen(size: u64) -> Seen {
        Seen { size, mtime_ns: 7 }
    }

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
        let found = walk(&files.join("watch"), files).unwrap();
        let names: Vec<&str> = found.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "watch/.hidden-dir/b.mkv",
                "watch/a.mkv",
                "watch/sub/deeper/c.srt"
            ]
        );
        assert_eq!(found["watch/a.mkv"].size, 2);
        assert!(walk(&files.join("missing"), files).is_err());
    }

    #[test]
    fn the_diff_names_each_added_changed_and_removed_path() {
        let cid = midhash::of_bytes(b"x");
        let known: BTreeMap<String, Known> = [("a", 1), ("b", 2), ("c", 3)]
            .into_iter()
            .map(|(p, s)| {
                let k = Known {
                    seen: seen(s),
                    midhash: cid.clone(),
                };
                (p.to_owned(), k)
            })
            .collect();
        let found: BTreeMap<String, Seen> = [("a", 1), ("b", 20), ("d", 4)]
            .into_iter()
            .map(|(p, s)| (p.to_owned(), seen(s)))
            .collect();
        assert_eq!(
            diff(&known, &found),
            [
                Change::Changed("b".into(), seen(20)),
                Change::Removed("c".into()),
                Change::Added("d".into(), seen(4)),
            ]
        );
        assert!(
            diff(
                &known,
                &known.iter().map(|(p, k)| (p.clone(), k.seen)).collect()
            )
            .is_empty()
        );
    }

    #[test]
    fn same_content_gone_here_and_new_there_is_a_rename() {
        let (x, y, z) = (
            midhash::of_bytes(b"x"),
            midhash::of_bytes(b"y"),
            midhash::of_bytes(b"z"),
        );
        let p = pair_renames(
            vec![
                ("watch/old.mkv".into(), x.clone()),
                ("watch/gone.mkv".into(), y.clone()),
                ("watch/twin-1".into(), z.clone()),
                ("watch/twin-2".into(), z.clone()),
            ],
            vec![
                ("sorted/new.mkv".into(), x),
                ("sorted/brand-new.mkv".into(), midhash::of_bytes(b"w")),
                ("sorted/twin".into(), z),
            ],
        );
        assert_eq!(
            p,
            Paired {
                renamed: vec![
                    ("watch/old.mkv".into(), "sorted/new.mkv".into()),
                    ("watch/twin-1".into(), "sorted/twin".into()),
                ],
                added: vec!["sorted/brand-new.mkv".into()],
                removed: vec!["watch/gone.mkv".into(), "watch/twin-2".into()],
            }
        );
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
