//! A record's stored `filePath` on this host (CONTRACT decision 5): the
//! field itself, where its file is on disk, and how the API shows it. The
//! routes that serve or describe a record's file share these.

use std::path::{Component, Path, PathBuf};

use metacore::checked::FieldName;

/// The `filePath` field, for reading it.
pub(crate) fn field() -> FieldName {
    FieldName::new("filePath").expect("filePath is a field name")
}

/// Maps a stored `filePath` to disk without doubling the prefix
/// (CONTRACT decision 5): an absolute path under `files_path` is kept; a
/// path under the conventional `/files` mount point, or a relative one, is
/// joined to `files_path`. `None` when it would leave `files_path`.
pub(crate) fn disk_path(files_path: &Path, file_path: &str) -> Option<PathBuf> {
    let p = Path::new(file_path);
    let rel: &Path = if let Ok(r) = p.strip_prefix(files_path) {
        r
    } else if let Ok(r) = p.strip_prefix("/files") {
        r
    } else if p.is_relative() {
        p
    } else {
        return None;
    };
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    Some(files_path.join(rel))
}

/// A stored `filePath` as the original showed it: relative to
/// `FILES_PATH`, with a leading `/` (`/watch/x.mkv`), never where
/// `FILES_PATH` is on this host (CONTRACT decision 5).
pub(crate) fn shown_path(files_path: &Path, file_path: &str) -> Option<String> {
    let on_disk = disk_path(files_path, file_path)?;
    let rel = on_disk.strip_prefix(files_path).ok()?.to_str()?;
    Some(format!("/{rel}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_paths_map_to_disk_once() {
        let root = Path::new("/srv/files");
        assert_eq!(
            disk_path(root, "/srv/files/watch/a.mkv"),
            Some(PathBuf::from("/srv/files/watch/a.mkv"))
        );
        assert_eq!(
            disk_path(root, "/files/watch/a.mkv"),
            Some(PathBuf::from("/srv/files/watch/a.mkv"))
        );
        assert_eq!(
            disk_path(root, "watch/a.mkv"),
            Some(PathBuf::from("/srv/files/watch/a.mkv"))
        );
        assert_eq!(disk_path(root, "/etc/passwd"), None);
        assert_eq!(disk_path(root, "/files/../etc/passwd"), None);
        assert_eq!(disk_path(root, "watch/../../x"), None);
    }

    #[test]
    fn file_paths_are_shown_below_files_path() {
        let root = Path::new("/srv/files");
        assert_eq!(
            shown_path(root, "/srv/files/watch/a.mkv").as_deref(),
            Some("/watch/a.mkv")
        );
        assert_eq!(
            shown_path(root, "/files/watch/a.mkv").as_deref(),
            Some("/watch/a.mkv")
        );
        assert_eq!(shown_path(root, "/etc/passwd"), None);
    }
}
