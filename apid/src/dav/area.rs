//! Where in `FILES_PATH` WebDAV may write: only below `plugin/` and
//! `corn/`, judged on the path a client wrote and again on the real path
//! a name leads to.
//!
//! `corn/` holds only mounts (mountd makes their folders): nothing is
//! created in it through WebDAV, a mount's folder (`corn/<name>`) is the
//! root of its own area (it may carry properties, not be removed, moved
//! or written over), and below it a write goes through only while the
//! folder is a mount point. A write into the folder of a mount that is
//! not mounted would land on the volume under it, and mountd never mounts
//! over a folder that is not empty ([`mounted`]).

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;
use std::path::{Component, Path};

use crate::confine::{Parent, Roots};

/// Where in `FILES_PATH` a path is, for writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Area {
    ReadOnly,
    /// `plugin`, `corn` or a mount's folder `corn/<name>`: it may be made
    /// (not in `corn`, [`mounted`]) and carry properties, not be removed
    /// or moved.
    WritableRoot,
    /// Below `plugin/` or below `corn/<name>/`.
    Writable,
}

/// The writable folder that holds files.
pub(crate) const PLUGIN: &str = "plugin";
/// The writable folder that holds mounts.
pub(crate) const CORN: &str = "corn";

pub(crate) fn area(rel: &Path) -> Area {
    let parts: Vec<_> = rel.components().take(3).collect();
    let is =
        |c: &Component<'_>, name: &str| matches!(c, Component::Normal(n) if *n == OsStr::new(name));
    match &parts[..] {
        [first] if is(first, PLUGIN) || is(first, CORN) => Area::WritableRoot,
        [first, _, ..] if is(first, PLUGIN) => Area::Writable,
        [first, _] if is(first, CORN) => Area::WritableRoot,
        [first, _, _] if is(first, CORN) => Area::Writable,
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

/// The error of a write below a mount's folder that is not mounted.
pub(super) fn not_mounted() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOTCONN)
}

/// Refuses a write in or at the folder `fd` (really at `real`) when it
/// is `corn` itself, or in the folder of a mount that is not mounted: its
/// filesystem (`st_dev`) is still the one of `corn`. `fd` is the
/// descriptor the write resolved, so a symlink or a rename in between
/// cannot make it another folder.
pub(super) fn mounted(roots: &Roots, fd: &impl AsFd, real: &Path) -> io::Result<()> {
    let Ok(rel) = real.strip_prefix(&roots.files) else {
        return Ok(());
    };
    let mut parts = rel.components();
    if parts.next() != Some(Component::Normal(OsStr::new(CORN))) {
        return Ok(());
    }
    if parts.next().is_none() {
        // In corn/ itself: only mountd makes entries there.
        return Err(read_only());
    }
    let corn = rustix::fs::stat(roots.files.join(CORN))?;
    if rustix::fs::fstat(fd)?.st_dev == corn.st_dev {
        return Err(not_mounted());
    }
    Ok(())
}

/// [`mounted`] for the folder a checked parent is.
pub(super) fn parent_mounted(roots: &Roots, p: &Parent<'_>) -> io::Result<()> {
    mounted(roots, &p.fd, &p.real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plugin_and_mounts_are_writable() {
        assert_eq!(area(Path::new("")), Area::ReadOnly);
        assert_eq!(area(Path::new("watch/a.mkv")), Area::ReadOnly);
        assert_eq!(area(Path::new("plugins/a")), Area::ReadOnly);
        assert_eq!(area(Path::new("plugin")), Area::WritableRoot);
        assert_eq!(area(Path::new("corn")), Area::WritableRoot);
        assert_eq!(area(Path::new("plugin/a")), Area::Writable);
        assert_eq!(area(Path::new("plugin/a/b")), Area::Writable);
        assert_eq!(area(Path::new("corn/gdrive")), Area::WritableRoot);
        assert_eq!(area(Path::new("corn/gdrive/x.mkv")), Area::Writable);
        assert_eq!(area(Path::new("corn/gdrive/d/x.mkv")), Area::Writable);
    }

    #[test]
    fn writes_in_corn_need_a_mount() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("corn/m")).unwrap();
        std::fs::create_dir_all(d.path().join("plugin")).unwrap();
        let roots = Roots {
            files: std::fs::canonicalize(d.path()).unwrap(),
            private: Vec::new(),
        };
        let open = |rel: &str| roots.open_dir(Path::new(rel)).unwrap();
        let (fd, real) = open("plugin");
        assert!(mounted(&roots, &fd, &real).is_ok());
        let (fd, real) = open("corn");
        assert_eq!(
            mounted(&roots, &fd, &real).unwrap_err().raw_os_error(),
            Some(libc::EACCES)
        );
        let (fd, real) = open("corn/m");
        assert_eq!(
            mounted(&roots, &fd, &real).unwrap_err().raw_os_error(),
            Some(libc::ENOTCONN),
            "a plain folder in corn/ is not a mount"
        );
    }
}
