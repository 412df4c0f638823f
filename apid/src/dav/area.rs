//! Where in `FILES_PATH` WebDAV may write: only below `plugin/` and
//! `corn/`, judged on the path a client wrote and again on the real path
//! a name leads to.

use std::ffi::OsStr;
use std::io;
use std::path::{Component, Path};

use crate::confine::{Parent, Roots};

/// Where in `FILES_PATH` a path is, for writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Area {
    ReadOnly,
    /// `plugin` or `corn` itself: it may be made and carry properties,
    /// not be removed or moved.
    WritableRoot,
    /// Below `plugin/` or `corn/`.
    Writable,
}

/// The writable folders, first components of a path under `FILES_PATH`.
pub(crate) const WRITABLE: [&str; 2] = ["plugin", "corn"];

pub(crate) fn area(rel: &Path) -> Area {
    let mut parts = rel.components();
    match parts.next() {
        Some(Component::Normal(first)) if WRITABLE.iter().any(|w| first == OsStr::new(w)) => {
            if parts.next().is_some() {
                Area::Writable
            } else {
                Area::WritableRoot
            }
        }
        _ => Area::ReadOnly,
    }
}

/// Where `real` (a resolved path) is in `FILES_PATH`, for writing: the
/// area of what a name leads to, not of the name a client wrote (a
/// symlink in `plugin/` to `watch/` does not make `watch/` writable).
pub(super) fn real_area(roots: &Roots, real: &Path) -> Area {
    real.strip_prefix(&roots.files).map_or(Area::ReadOnly, area)
}

/// The area of the entry a checked parent names.
pub(super) fn entry_area(roots: &Roots, p: &Parent<'_>) -> Area {
    real_area(roots, &p.real.join(p.name))
}

/// The error of a write refused for its area.
pub(super) fn read_only() -> io::Error {
    io::Error::from_raw_os_error(libc::EACCES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plugin_and_corn_are_writable() {
        assert_eq!(area(Path::new("")), Area::ReadOnly);
        assert_eq!(area(Path::new("watch/a.mkv")), Area::ReadOnly);
        assert_eq!(area(Path::new("plugins/a")), Area::ReadOnly);
        assert_eq!(area(Path::new("plugin")), Area::WritableRoot);
        assert_eq!(area(Path::new("corn")), Area::WritableRoot);
        assert_eq!(area(Path::new("plugin/a/b")), Area::Writable);
        assert_eq!(area(Path::new("corn/gdrive/x.mkv")), Area::Writable);
    }
}
