//! What the work on the disk hands dav-server: a file's or folder's
//! [`Meta`] and an I/O error as an [`FsError`] it understands; and the hop
//! to the blocking pool every such call takes. A leaf: [`super::disk`]
//! and [`super::file`] both answer in these terms.

use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dav_server::fs::{DavMetaData, FsError, FsResult};
use rustix::fs::{FileType, Stat};

/// Runs `f` on the blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> FsResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| FsError::GeneralFailure)
}

/// What an I/O error means to a WebDAV client.
pub(crate) fn fs_error(e: &io::Error) -> FsError {
    match e.raw_os_error() {
        Some(libc::ENOENT) => FsError::NotFound,
        Some(libc::EEXIST | libc::ENOTEMPTY) => FsError::Exists,
        Some(
            libc::EACCES | libc::EPERM | libc::EROFS | libc::ENOTDIR | libc::EISDIR | libc::ELOOP,
        ) => FsError::Forbidden,
        Some(libc::ENOSPC | libc::EDQUOT) => FsError::InsufficientStorage,
        Some(libc::EFBIG) => FsError::TooLarge,
        Some(libc::ENAMETOOLONG) => FsError::PathTooLong,
        // Across filesystems; or a mount's folder that is not mounted, or
        // a FUSE mount whose rclone is gone.
        Some(libc::EXDEV | libc::ENOTCONN) => FsError::IsRemote,
        _ => {
            tracing::warn!("webdav: {e}");
            FsError::GeneralFailure
        }
    }
}

pub(super) fn errno(e: rustix::io::Errno) -> FsError {
    fs_error(&e.into())
}

fn time(secs: i64, nanos: i64) -> SystemTime {
    if secs < 0 {
        return UNIX_EPOCH;
    }
    UNIX_EPOCH + Duration::new(secs as u64, nanos.clamp(0, 999_999_999) as u32)
}

/// What PROPFIND and the validators show of a file or folder.
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    len: u64,
    modified: SystemTime,
    accessed: SystemTime,
    changed: SystemTime,
    kind: FileType,
    executable: bool,
    etag: String,
}

impl Meta {
    pub(crate) fn of(st: &Stat) -> Self {
        let modified = time(st.st_mtime, st.st_mtime_nsec as i64);
        let ns = modified
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let len = st.st_size.max(0) as u64;
        Self {
            len,
            modified,
            accessed: time(st.st_atime, st.st_atime_nsec as i64),
            changed: time(st.st_ctime, st.st_ctime_nsec as i64),
            kind: FileType::from_raw_mode(st.st_mode),
            executable: st.st_mode & 0o100 != 0,
            etag: crate::send_file::etag(st.st_ino, ns, len),
        }
    }
}

impl DavMetaData for Meta {
    fn len(&self) -> u64 {
        self.len
    }
    fn modified(&self) -> FsResult<SystemTime> {
        Ok(self.modified)
    }
    fn accessed(&self) -> FsResult<SystemTime> {
        Ok(self.accessed)
    }
    fn status_changed(&self) -> FsResult<SystemTime> {
        Ok(self.changed)
    }
    fn is_dir(&self) -> bool {
        self.kind == FileType::Directory
    }
    fn is_file(&self) -> bool {
        self.kind == FileType::RegularFile
    }
    fn is_symlink(&self) -> bool {
        self.kind == FileType::Symlink
    }
    fn executable(&self) -> FsResult<bool> {
        Ok(self.executable)
    }
    fn etag(&self) -> Option<String> {
        Some(self.etag.clone())
    }
}
