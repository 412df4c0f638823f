//! What the API shows of the engine: a copy the engine publishes on a
//! `watch` channel, so the API never reads the engine's own state.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use metacore::api::watcherd::WatcherConfig;

use super::Known;
use crate::scan;

/// The engine's figures as of its last publication.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineView {
    /// What was announced before has been read back from storaged.
    pub loaded: bool,
    pub known_files: usize,
    /// Known files under each watcher's folder, by the path it names.
    pub file_counts: HashMap<PathBuf, usize>,
    pub pending: u64,
    pub gone: u64,
    pub watched_dirs: u64,
    pub polled_dirs: u64,
    pub limit_reached: bool,
    /// Folders being walked now.
    pub walking: HashSet<PathBuf>,
    /// When each folder was last walked to the end (Unix ms).
    pub last_scan: HashMap<PathBuf, u64>,
}

impl EngineView {
    /// Known files under a watcher's folder (0 for a folder the engine
    /// has not been told of yet).
    pub fn file_count(&self, dir: &Path) -> usize {
        self.file_counts.get(dir).copied().unwrap_or(0)
    }

    /// When `dir` was last walked. A walk of a folder above it covered it
    /// too, except a walk of the inotify tree for a folder under the
    /// mounts folder `mounts` (it skips it).
    pub fn last_scan_of(&self, dir: &Path, mounts: &Path) -> Option<u64> {
        let in_mounts = dir.starts_with(mounts);
        self.last_scan
            .iter()
            .filter(|(walked, _)| {
                dir.starts_with(walked) && (!in_mounts || walked.starts_with(mounts))
            })
            .map(|(_, at)| *at)
            .max()
    }
}

/// Known files under each watcher's folder.
pub(super) fn file_counts(
    known: &BTreeMap<String, Known>,
    watchers: &[WatcherConfig],
    files: &Path,
) -> HashMap<PathBuf, usize> {
    watchers
        .iter()
        .map(|c| {
            let dir = PathBuf::from(&c.path);
            let n = count_under(known, &dir, files);
            (dir, n)
        })
        .collect()
}

/// Known files under `dir` (all of them for `FILES_PATH` itself or a
/// folder outside it).
fn count_under(known: &BTreeMap<String, Known>, dir: &Path, files: &Path) -> usize {
    let prefix = scan::relative(dir, files)
        .filter(|r| !r.is_empty())
        .map(|r| format!("{r}/"))
        .unwrap_or_default();
    known
        .range(prefix.clone()..)
        .take_while(|(p, _)| p.starts_with(&prefix))
        .count()
}

#[cfg(test)]
mod tests {
    use metacore::rid::Rid;

    use super::*;
    use crate::debounce::Seen;

    fn known(paths: &[&str]) -> BTreeMap<String, Known> {
        let k = Known {
            seen: Seen {
                size: 1,
                mtime_ns: 1,
            },
            midhash: [0; 32],
            rid: Rid::from_u128(1),
        };
        paths.iter().map(|p| (p.to_string(), k.clone())).collect()
    }

    #[test]
    fn a_folder_counts_the_known_files_under_it_and_files_path_counts_all() {
        let known = known(&["a/x", "a/y/z", "ab/x", "b"]);
        let files = Path::new("/files");
        assert_eq!(count_under(&known, Path::new("/files/a"), files), 2);
        assert_eq!(count_under(&known, Path::new("/files/a/y"), files), 1);
        assert_eq!(count_under(&known, Path::new("/files/c"), files), 0);
        assert_eq!(count_under(&known, files, files), 4);
    }

    #[test]
    fn a_walk_above_a_folder_covers_it_but_not_into_the_mounts_folder() {
        let mounts = Path::new("/files/corn");
        let view = EngineView {
            last_scan: [
                (PathBuf::from("/files"), 10),
                (PathBuf::from("/files/a"), 5),
            ]
            .into(),
            ..EngineView::default()
        };
        assert_eq!(view.last_scan_of(Path::new("/files/a"), mounts), Some(10));
        assert_eq!(view.last_scan_of(Path::new("/files/corn/m"), mounts), None);
        assert_eq!(view.last_scan_of(Path::new("/elsewhere"), mounts), None);
    }
}
