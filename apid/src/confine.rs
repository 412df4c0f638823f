//! Keeping every file apid serves inside `FILES_PATH`.
//!
//! A path is resolved (symlinks followed) and refused unless it stays
//! inside `FILES_PATH` and outside meta-core's own folders
//! (`META_CORE_PATH`, the database's folder, `META_CORE_LOG_DIR`,
//! `META_CORE_RUN_DIR`, should an operator nest one there: [`Roots`]). Every
//! check is made twice: on the name before it is opened, and on what was
//! opened (`/proc/self/fd/<n>`), so a symlink swapped in between the two
//! is caught. Operations on a name (create, remove, rename) are made
//! relative to the descriptor of a checked parent folder and never follow
//! the last component. What is refused looks missing: answers never say
//! where a path led.
//!
//! Everything here blocks; callers run it on the blocking pool.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use metacore::sync::Locked;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// One entry of a listed folder ([`Roots::entries`]).
pub(crate) struct Child {
    pub name: Vec<u8>,
    /// Where it is (not resolved).
    pub path: PathBuf,
    /// Its own status: a symlink's, not its target's.
    pub stat: rustix::fs::Stat,
}

impl Child {
    pub(crate) fn file_type(&self) -> FileType {
        FileType::from_raw_mode(self.stat.st_mode)
    }

    pub(crate) fn os_name(&self) -> &OsStr {
        OsStr::from_bytes(&self.name)
    }
}

/// The folders a path must stay in and out of, resolved: inside
/// `FILES_PATH`, never inside one of meta-core's own folders (should an
/// operator nest one there, the database, the admin token, the logs and
/// the sockets must not be served).
#[derive(Debug, Clone)]
pub(crate) struct Roots {
    pub files: PathBuf,
    /// meta-core's own folders that exist, resolved.
    pub private: Vec<PathBuf>,
}

impl Roots {
    /// `None` while `FILES_PATH` is not there.
    fn resolve(files: &Path, private: &[PathBuf]) -> Option<Self> {
        Some(Self {
            files: std::fs::canonicalize(files).ok()?,
            private: private
                .iter()
                .filter_map(|p| std::fs::canonicalize(p).ok())
                .collect(),
        })
    }

    pub(crate) fn allows(&self, real: &Path) -> bool {
        real.starts_with(&self.files) && !self.private.iter().any(|m| real.starts_with(m))
    }

    /// Whether `real` holds one of meta-core's own folders (a folder that
    /// may not be moved or copied whole).
    pub(crate) fn holds_private(&self, real: &Path) -> bool {
        self.private.iter().any(|m| m.starts_with(real))
    }

    /// `path` resolved (symlinks followed), if it stays where allowed.
    pub(crate) fn confined(&self, path: &Path) -> Option<PathBuf> {
        let real = std::fs::canonicalize(path).ok()?;
        self.allows(&real).then_some(real)
    }

    /// Where the descriptor `fd` really is, if that is allowed.
    fn check_opened(&self, fd: &OwnedFd) -> io::Result<PathBuf> {
        let opened = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
        if self.allows(&opened) {
            Ok(opened)
        } else {
            Err(missing())
        }
    }

    /// Opens the folder at `rel` (relative to `FILES_PATH`, already free
    /// of `..`) for reading, and says where it really is.
    pub(crate) fn open_dir(&self, rel: &Path) -> io::Result<(OwnedFd, PathBuf)> {
        let real = self.confined(&self.files.join(rel)).ok_or_else(missing)?;
        let fd = rustix::fs::open(
            &real,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let opened = self.check_opened(&fd)?;
        Ok((fd, opened))
    }

    /// The entries of the folder `fd` (really at `real`) that may be
    /// served, `.` and `..` left out, each with its own status (a symlink
    /// not followed). An entry whose status cannot be read is passed over;
    /// the listing ends at the first entry that cannot be read.
    pub(crate) fn entries<'a>(
        &'a self,
        fd: &'a OwnedFd,
        real: &'a Path,
    ) -> io::Result<impl Iterator<Item = Child> + 'a> {
        let dir = rustix::fs::Dir::read_from(fd)?;
        Ok(dir.map_while(Result::ok).filter_map(move |entry| {
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                return None;
            }
            let os = OsStr::from_bytes(name);
            let path = real.join(os);
            if !self.allows(&path) {
                return None;
            }
            let stat = rustix::fs::statat(fd, os, AtFlags::SYMLINK_NOFOLLOW).ok()?;
            Some(Child {
                name: name.to_vec(),
                path,
                stat,
            })
        }))
    }

    /// The checked parent folder of `rel` and the last component's name;
    /// `rel` must name something below `FILES_PATH` (not the root).
    pub(crate) fn parent<'a>(&self, rel: &'a Path) -> io::Result<Parent<'a>> {
        let name = rel
            .file_name()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EPERM))?;
        let (fd, real) = self.open_dir(rel.parent().unwrap_or(Path::new("")))?;
        // The parent is allowed; the entry itself may be META_CORE_PATH.
        if !self.allows(&real.join(name)) {
            return Err(missing());
        }
        Ok(Parent { fd, real, name })
    }

    /// Opens the entry `name` of `parent` for reading, following a
    /// symlink only where allowed: a regular file or a folder, with
    /// `O_NONBLOCK` (a FIFO would wait for a writer).
    pub(crate) fn open_entry(&self, parent: &Parent<'_>) -> io::Result<(OwnedFd, PathBuf)> {
        let fd = rustix::fs::openat(
            &parent.fd,
            parent.name,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let opened = self.check_opened(&fd)?;
        let st = rustix::fs::fstat(&fd)?;
        let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
        if !matches!(
            kind,
            rustix::fs::FileType::RegularFile | rustix::fs::FileType::Directory
        ) {
            return Err(missing());
        }
        Ok((fd, opened))
    }
}

/// The [`Roots`] of the configuration, resolved at most once a second
/// (on the blocking pool) rather than for every request: a moved
/// `FILES_PATH` is followed within a second.
#[derive(Debug, Default)]
pub(crate) struct RootsCache {
    cached: std::sync::Mutex<Option<(std::time::Instant, Arc<Roots>)>>,
}

/// How long resolved roots are used.
const ROOTS_FOR: std::time::Duration = std::time::Duration::from_secs(1);

impl RootsCache {
    /// `None` while `FILES_PATH` is not there.
    pub(crate) async fn get(&self, config: &metacore::Config) -> Option<Arc<Roots>> {
        if let Some((at, r)) = &*self.cached.locked()
            && at.elapsed() < ROOTS_FOR
        {
            return Some(r.clone());
        }
        let files = config.files_path.clone();
        let mut private = vec![
            config.meta_core_path.clone(),
            config.log_dir.clone(),
            config.run_dir.clone(),
        ];
        private.extend(config.db_path.parent().map(Path::to_path_buf));
        let roots = tokio::task::spawn_blocking(move || Roots::resolve(&files, &private))
            .await
            .ok()??;
        let roots = Arc::new(roots);
        *self.cached.locked() = Some((std::time::Instant::now(), roots.clone()));
        Some(roots)
    }
}

/// A checked folder and one name in it.
#[derive(Debug)]
pub(crate) struct Parent<'a> {
    pub fd: OwnedFd,
    /// Where the folder really is.
    pub real: PathBuf,
    pub name: &'a OsStr,
}

/// What a refused path is answered with: it is not there.
pub(crate) fn missing() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOENT)
}

/// Opens `path` if it is a regular file where `roots` allow, judged by
/// what was opened, not only by the name (see the module's comment).
pub(crate) fn open_file(roots: &Roots, path: &Path) -> Option<(std::fs::File, std::fs::Metadata)> {
    use std::os::unix::fs::OpenOptionsExt;
    let real = roots.confined(path)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&real)
        .ok()?;
    let opened = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()?;
    if !roots.allows(&opened) {
        return None;
    }
    let meta = file.metadata().ok().filter(|m| m.is_file())?;
    Some((file, meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> (tempfile::TempDir, PathBuf, Roots) {
        let dir = tempfile::tempdir().unwrap();
        let files = dir.path().join("files");
        std::fs::create_dir_all(files.join("meta-core")).unwrap();
        std::fs::write(dir.path().join("secret"), b"x").unwrap();
        std::fs::write(files.join("in"), b"y").unwrap();
        std::fs::write(files.join("meta-core/db"), b"z").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), files.join("link")).unwrap();
        std::os::unix::fs::symlink(dir.path(), files.join("up")).unwrap();
        let roots = Roots {
            files: std::fs::canonicalize(&files).unwrap(),
            private: vec![std::fs::canonicalize(files.join("meta-core")).unwrap()],
        };
        (dir, files, roots)
    }

    #[test]
    fn a_symlink_out_of_files_path_is_not_followed() {
        let (_dir, files, roots) = layout();
        assert!(open_file(&roots, &files.join("in")).is_some());
        assert!(open_file(&roots, &files.join("link")).is_none());
        assert!(open_file(&roots, &files.join("missing")).is_none());
        assert!(
            open_file(&roots, &files.join("meta-core/db")).is_none(),
            "META_CORE_PATH nested in FILES_PATH is never served"
        );
    }

    #[test]
    fn parents_and_entries_stay_inside() {
        let (_dir, _files, roots) = layout();
        let p = roots.parent(Path::new("in")).unwrap();
        assert!(roots.open_entry(&p).is_ok());
        let p = roots.parent(Path::new("link")).unwrap();
        assert!(roots.open_entry(&p).is_err(), "a symlink out is refused");
        assert!(roots.parent(Path::new("up/secret")).is_err());
        assert!(roots.parent(Path::new("meta-core")).is_err());
        assert!(roots.parent(Path::new("meta-core/db")).is_err());
        assert!(
            roots.parent(Path::new("")).is_err(),
            "the root has no parent"
        );
        assert!(roots.open_dir(Path::new("")).is_ok());
        assert!(roots.open_dir(Path::new("up")).is_err());
    }

    #[tokio::test]
    async fn every_folder_of_meta_core_nested_in_files_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let files = dir.path().join("files");
        for d in ["meta-core", "logs", "run", "db", "watch"] {
            std::fs::create_dir_all(files.join(d)).unwrap();
            std::fs::write(files.join(d).join("f"), b"x").unwrap();
        }
        let at = |p: &str| files.join(p).display().to_string();
        let env = [
            ("FILES_PATH", at("")),
            ("META_CORE_PATH", at("meta-core")),
            ("META_CORE_LOG_DIR", at("logs")),
            ("META_CORE_RUN_DIR", at("run")),
            ("META_CORE_DB_PATH", at("db/meta-core.db")),
        ];
        let config = metacore::Config::from_lookup(|k| {
            env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
        })
        .unwrap();
        let roots = RootsCache::default().get(&config).await.unwrap();
        assert!(open_file(&roots, &files.join("watch/f")).is_some());
        for d in ["meta-core", "logs", "run", "db"] {
            assert!(open_file(&roots, &files.join(d).join("f")).is_none(), "{d}");
            assert!(roots.holds_private(&files.canonicalize().unwrap()), "{d}");
        }
    }
}
