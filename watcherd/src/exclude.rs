//! What the watcher leaves alone under `FILES_PATH`.
//!
//! - `corn/`, the rclone mounts: inotify sees only local changes there and
//!   a walk can list a whole cloud drive. The inotify tree and its rescans
//!   skip it; a polling watcher configured on a folder under it, and only
//!   such a walk, covers it.
//! - meta-core's own folders, should an operator nest them in
//!   `FILES_PATH` (apid supports it, see `apid/src/confine.rs`):
//!   `META_CORE_PATH`, the database's folder, `META_CORE_LOG_DIR` and
//!   `META_CORE_RUN_DIR`. Never watched, walked or listed, whoever asks: the
//!   admin token, the database and the logs are not media files, and
//!   announcing them would tell every follower where the secrets are.
//!
//! A folder of meta-core's is found inside `FILES_PATH` by its path as
//! given and by its path with symlinks resolved (a symlinked
//! `META_CORE_PATH` whose target is in `FILES_PATH`), and named as the
//! watcher names paths: under `FILES_PATH` as given.

use std::path::{Path, PathBuf};

use metacore::Config;

/// The folder under `FILES_PATH` that inotify leaves alone.
pub const MOUNTS_DIR: &str = "corn";

/// The folders under `FILES_PATH` the watcher leaves alone.
#[derive(Debug, Clone)]
pub struct Excluded {
    files: PathBuf,
    mounts: PathBuf,
    /// meta-core's own folders inside `FILES_PATH` (most often none).
    own: Vec<PathBuf>,
}

impl Excluded {
    /// `files`: `FILES_PATH` as the watcher spells it (absolute); `own`:
    /// meta-core's folders, any of which may lie outside it.
    pub fn new(files: &Path, own: &[PathBuf]) -> Self {
        let mut inside: Vec<PathBuf> = own.iter().filter_map(|d| nested(files, d)).collect();
        inside.sort();
        inside.dedup();
        Self {
            files: files.to_owned(),
            mounts: files.join(MOUNTS_DIR),
            own: inside,
        }
    }

    /// From the configuration: `META_CORE_PATH`, the database's folder,
    /// `META_CORE_LOG_DIR` and `META_CORE_RUN_DIR`.
    pub fn of(files: &Path, config: &Config) -> Self {
        let mut own = vec![
            config.meta_core_path.clone(),
            config.log_dir.clone(),
            config.run_dir.clone(),
        ];
        own.extend(config.db_path.parent().map(Path::to_owned));
        Self::new(files, &own)
    }

    /// meta-core's own folders found inside `FILES_PATH`.
    pub fn own(&self) -> &[PathBuf] {
        &self.own
    }

    /// Whether inotify events and the tree's walks take in `path`: inside
    /// `FILES_PATH`, outside the mounts folder and meta-core's folders.
    pub fn covers(&self, path: &Path) -> bool {
        path.starts_with(&self.files) && !path.starts_with(&self.mounts) && !self.is_own(path)
    }

    /// Whether `path` is in one of meta-core's own folders.
    pub fn is_own(&self, path: &Path) -> bool {
        self.own.iter().any(|o| path.starts_with(o))
    }

    /// What a walk of `dir` leaves out: meta-core's folders always, the
    /// mounts folder unless the walk is of a folder under it (a polling
    /// watcher's of a mount).
    pub fn skipped_by_walk_of(&self, dir: &Path) -> Vec<PathBuf> {
        let mut skip = self.own.clone();
        if !dir.starts_with(&self.mounts) {
            skip.push(self.mounts.clone());
        }
        skip
    }

    /// Whether the path relative to `FILES_PATH` lies in one of meta-core's
    /// folders.
    pub fn is_own_rel(&self, rel: &str) -> bool {
        !rel.is_empty() && self.is_own(&self.files.join(rel))
    }
}

/// `dir` as a folder strictly inside `files`, spelled under `files`: by
/// its path as given (made absolute), else with symlinks resolved on both
/// sides. `None` when it is not inside (or is `FILES_PATH` itself, which
/// is not skipped: the watcher would see nothing).
fn nested(files: &Path, dir: &Path) -> Option<PathBuf> {
    let lexical = std::path::absolute(dir).ok()?;
    if lexical != files && lexical.starts_with(files) {
        return Some(lexical);
    }
    let (real_files, real_dir) = (
        std::fs::canonicalize(files).ok()?,
        std::fs::canonicalize(dir).ok()?,
    );
    let rest = real_dir.strip_prefix(&real_files).ok()?;
    (!rest.as_os_str().is_empty()).then(|| files.join(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_folders_strictly_inside_files_path_are_excluded() {
        let d = tempfile::tempdir().unwrap();
        let files = d.path().join("files");
        std::fs::create_dir_all(files.join("mc/db")).unwrap();
        std::fs::create_dir_all(d.path().join("elsewhere")).unwrap();
        let x = Excluded::new(
            &files,
            &[
                files.join("mc"),
                files.join("mc/db"),
                d.path().join("elsewhere"),
                files.clone(),
                d.path().to_owned(),
            ],
        );
        assert_eq!(x.own(), [files.join("mc"), files.join("mc/db")]);
        assert!(x.covers(&files.join("watch/a.mkv")));
        assert!(x.covers(&files));
        assert!(!x.covers(&files.join("mc")));
        assert!(!x.covers(&files.join("mc/secrets/admin-token")));
        assert!(!x.covers(&files.join("corn/gdrive/a.mkv")));
        assert!(
            x.covers(&files.join("mcx/a.mkv")),
            "a sibling with the prefix"
        );
        assert!(!x.covers(&d.path().join("elsewhere/a")));
        assert!(x.is_own_rel("mc/db/meta-core.db"));
        assert!(!x.is_own_rel("watch/mc"));
        assert!(!x.is_own_rel(""));
    }

    #[test]
    fn a_symlinked_folder_whose_target_is_inside_is_found_there() {
        let d = tempfile::tempdir().unwrap();
        let files = d.path().join("files");
        std::fs::create_dir_all(files.join("hidden-mc")).unwrap();
        std::os::unix::fs::symlink(files.join("hidden-mc"), d.path().join("mc")).unwrap();
        // FILES_PATH itself reached through a symlink.
        std::os::unix::fs::symlink(&files, d.path().join("files-link")).unwrap();
        let link = d.path().join("files-link");
        let x = Excluded::new(&link, &[d.path().join("mc")]);
        assert_eq!(x.own(), [link.join("hidden-mc")]);
        assert!(!x.covers(&link.join("hidden-mc/logs/apid.log")));
    }

    #[test]
    fn a_walk_skips_the_mounts_unless_it_is_of_a_mount() {
        let files = Path::new("/files");
        let x = Excluded::new(files, &[PathBuf::from("/files/mc")]);
        assert_eq!(
            x.skipped_by_walk_of(files),
            [PathBuf::from("/files/mc"), PathBuf::from("/files/corn")]
        );
        assert_eq!(
            x.skipped_by_walk_of(Path::new("/files/corn/gdrive")),
            [PathBuf::from("/files/mc")]
        );
        assert_eq!(
            x.skipped_by_walk_of(Path::new("/files/mc")),
            [PathBuf::from("/files/mc"), PathBuf::from("/files/corn")],
            "meta-core's folders stay skipped even when a walk is asked of them"
        );
    }
}
