//! `FILES_PATH` as a WebDAV filesystem, confined ([`crate::confine`]):
//! every name is resolved under a checked folder descriptor, a symlink is
//! followed only where it stays inside, and nothing is cached (a file
//! another process writes is listed by the next PROPFIND).
//!
//! Writes are allowed only in the writable folders ([`area`]); files and
//! folders made here are 0644 and 0755 whatever apid's umask, because the
//! services in other containers that share the volume read them.

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dav_server::davpath::DavPath;
use dav_server::fs::{
    DavDirEntry, DavFile, DavMetaData, DavProp, FsError, FsFuture, FsResult, FsStream,
    GuardedFileSystem, OpenOptions, ReadDirMeta,
};
use futures_util::{FutureExt, StreamExt};
use http::StatusCode;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};

use super::file::{Commit, VolFile};
use super::props;
use super::temp;
use crate::confine::{Parent, Roots, missing};

/// Directory entries handed from the listing thread at a time.
const BATCH: usize = 256;
use super::temp::FILE_MODE;
const DIR_MODE: u32 = 0o755;

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
fn real_area(roots: &Roots, real: &Path) -> Area {
    real.strip_prefix(&roots.files).map_or(Area::ReadOnly, area)
}

/// The area of the entry a checked parent names.
fn entry_area(roots: &Roots, p: &Parent<'_>) -> Area {
    real_area(roots, &p.real.join(p.name))
}

/// The error of a write refused for its area.
fn read_only() -> io::Error {
    io::Error::from_raw_os_error(libc::EACCES)
}

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
        Some(libc::EXDEV) => FsError::IsRemote,
        _ => {
            tracing::warn!("webdav: {e}");
            FsError::GeneralFailure
        }
    }
}

fn errno(e: rustix::io::Errno) -> FsError {
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

#[derive(Debug)]
struct Entry {
    name: Vec<u8>,
    meta: Meta,
}

impl DavDirEntry for Entry {
    fn name(&self) -> Vec<u8> {
        self.name.clone()
    }
    fn metadata(&self) -> FsFuture<'_, Box<dyn DavMetaData>> {
        let m: Box<dyn DavMetaData> = Box::new(self.meta.clone());
        futures_util::future::ready(Ok(m)).boxed()
    }
}

/// `rel`'s metadata; a symlink is followed where it stays inside.
fn stat(roots: &Roots, rel: &Path, follow: bool) -> io::Result<Meta> {
    if rel.as_os_str().is_empty() {
        return Ok(Meta::of(&rustix::fs::stat(&roots.files)?));
    }
    let p = roots.parent(rel)?;
    let st = rustix::fs::statat(&p.fd, p.name, AtFlags::SYMLINK_NOFOLLOW)?;
    if follow && FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
        let real = roots.confined(&p.real.join(p.name)).ok_or_else(missing)?;
        return Ok(Meta::of(&rustix::fs::stat(&real)?));
    }
    Ok(Meta::of(&st))
}

/// Opens the file or folder at `rel` for reading (its properties).
fn open_resource(roots: &Roots, rel: &Path) -> io::Result<std::os::fd::OwnedFd> {
    Ok(open_resource_at(roots, rel)?.0)
}

/// [`open_resource`], and where it really is.
fn open_resource_at(roots: &Roots, rel: &Path) -> io::Result<(std::os::fd::OwnedFd, PathBuf)> {
    if rel.as_os_str().is_empty() {
        return roots.open_dir(rel);
    }
    let p = roots.parent(rel)?;
    roots.open_entry(&p)
}

/// Lists the folder `fd` (really at `real`) to `tx` in batches.
fn list(
    roots: &Roots,
    fd: std::os::fd::OwnedFd,
    real: &Path,
    follow: bool,
    listed: &std::sync::Mutex<Listed>,
    tx: &tokio::sync::mpsc::Sender<Vec<Entry>>,
) {
    let dir = match rustix::fs::Dir::read_from(&fd) {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!("webdav: cannot list a folder: {e}");
            return;
        }
    };
    let mut batch = Vec::with_capacity(BATCH);
    for entry in dir {
        let Ok(entry) = entry else { break };
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let os = OsStr::from_bytes(name);
        let path = real.join(os);
        if !roots.allows(&path) {
            continue;
        }
        let Ok(mut st) = rustix::fs::statat(&fd, os, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        let mut props_at = path.clone();
        if follow && FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
            let Some(target) = roots.confined(&path) else {
                continue;
            };
            match rustix::fs::stat(&target) {
                Ok(t) => st = t,
                Err(_) => continue,
            }
            props_at = target;
        }
        if let Ok((stored, size)) = props::load_path(&props_at) {
            listed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.to_vec(), stored, size);
        }
        batch.push(Entry {
            name: name.to_vec(),
            meta: Meta::of(&st),
        });
        if batch.len() == BATCH && tx.blocking_send(std::mem::take(&mut batch)).is_err() {
            return;
        }
    }
    if !batch.is_empty() {
        let _ = tx.blocking_send(batch);
    }
}

/// Free bytes for an unprivileged writer on the volume of `dir`.
fn free_bytes(dir: &impl AsFd) -> Option<u64> {
    let v = rustix::fs::fstatvfs(dir).ok()?;
    Some(v.f_bavail.saturating_mul(v.f_frsize))
}

fn open(roots: &Roots, rel: &Path, o: &OpenOptions) -> FsResult<Box<dyn DavFile>> {
    let err = |e: io::Error| fs_error(&e);
    if !o.write && !o.append {
        let p = roots.parent(rel).map_err(err)?;
        let (fd, _) = roots.open_entry(&p).map_err(err)?;
        let file = std::fs::File::from(fd);
        let is_file = file.metadata().map(|m| m.is_file()).unwrap_or(false);
        if !is_file {
            return Err(FsError::Forbidden);
        }
        return Ok(Box::new(VolFile::new(file, None)));
    }
    if area(rel) != Area::Writable {
        return Err(FsError::Forbidden);
    }
    let p = roots.parent(rel).map_err(err)?;
    if entry_area(roots, &p) != Area::Writable {
        return Err(FsError::Forbidden);
    }
    let existing = match rustix::fs::statat(&p.fd, p.name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Some(FileType::from_raw_mode(st.st_mode)),
        Err(rustix::io::Errno::NOENT) => None,
        Err(e) => return Err(errno(e)),
    };
    match existing {
        Some(FileType::RegularFile) if o.create_new => return Err(FsError::Exists),
        Some(FileType::RegularFile) => {}
        // Never written through: a folder, a symlink, a device.
        Some(_) => return Err(FsError::Forbidden),
        None if !o.create && !o.create_new => return Err(FsError::NotFound),
        None => {}
    }
    if let (Some(size), Some(free)) = (o.size, free_bytes(&p.fd))
        && size > free
    {
        return Err(FsError::InsufficientStorage);
    }
    if o.truncate && !o.append {
        let (file, temp) = temp::create(&p.fd, p.name).map_err(err)?;
        let commit = Commit {
            temp,
            name: p.name.to_owned(),
            no_replace: o.create_new,
            expected: o.size,
            done: false,
            dir: p.fd,
        };
        return Ok(Box::new(VolFile::new(file, Some(commit))));
    }
    let mut flags = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    if o.create || o.create_new {
        flags |= OFlags::CREATE;
    }
    if o.create_new {
        flags |= OFlags::EXCL;
    }
    if o.append {
        flags |= OFlags::APPEND;
    }
    let fd =
        rustix::fs::openat(&p.fd, p.name, flags, Mode::from_raw_mode(FILE_MODE)).map_err(errno)?;
    if existing.is_none() {
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(FILE_MODE)).map_err(errno)?;
    }
    Ok(Box::new(VolFile::new(fd.into(), None)))
}

/// Copies the regular file at `from` over (or to) `to`, through a
/// temporary file renamed into place.
fn copy(roots: &Roots, from: &Path, to: &Path) -> FsResult<()> {
    let err = |e: io::Error| fs_error(&e);
    if area(to) != Area::Writable {
        return Err(FsError::Forbidden);
    }
    let src = roots.parent(from).map_err(err)?;
    let (src_fd, _) = roots.open_entry(&src).map_err(err)?;
    let mut src_file = std::fs::File::from(src_fd);
    let meta = src_file.metadata().map_err(err)?;
    if !meta.is_file() {
        return Err(FsError::Forbidden);
    }
    let dst = roots.parent(to).map_err(err)?;
    if entry_area(roots, &dst) != Area::Writable {
        return Err(FsError::Forbidden);
    }
    if free_bytes(&dst.fd).is_some_and(|free| meta.len() > free) {
        return Err(FsError::InsufficientStorage);
    }
    let (mut tmp_file, temp) = temp::create(&dst.fd, dst.name).map_err(err)?;
    let done = (|| -> io::Result<()> {
        std::io::copy(&mut src_file, &mut tmp_file)?;
        props::copy(&src_file, &tmp_file);
        tmp_file.sync_data()?;
        temp::commit(&dst.fd, &tmp_file, &temp, dst.name, false)
    })();
    if let Err(e) = done {
        temp::discard(&dst.fd, &temp);
        return Err(err(e));
    }
    Ok(())
}

/// The WebDAV filesystem.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Volume;

/// What one request works with (dav-server's "credentials"): the roots
/// resolved for it, the volume's quota once asked, and the dead
/// properties of the entries of the folder it lists, read by the listing
/// thread beside their `stat` so that an `allprop` PROPFIND of a folder
/// costs no hand-off to the blocking pool per entry.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub roots: Arc<Roots>,
    quota: std::sync::Mutex<Option<(u64, Option<u64>)>>,
    listed: Arc<std::sync::Mutex<Listed>>,
}

impl Ctx {
    pub(crate) fn new(roots: Arc<Roots>) -> Self {
        Self {
            roots,
            quota: std::sync::Mutex::new(None),
            listed: Arc::default(),
        }
    }
}

/// Entries listed at most; their properties at most (bytes). Past either,
/// an entry's properties are read when asked.
const LISTED_ENTRIES: usize = 4096;
const LISTED_BYTES: usize = 4 << 20;

/// The dead properties of entries of one folder, listed and not asked yet.
#[derive(Debug, Default)]
struct Listed {
    dir: PathBuf,
    props: std::collections::HashMap<Vec<u8>, (Vec<props::Stored>, usize)>,
    order: std::collections::VecDeque<Vec<u8>>,
    bytes: usize,
}

impl Listed {
    fn insert(&mut self, name: Vec<u8>, stored: Vec<props::Stored>, size: usize) {
        while self.order.len() >= LISTED_ENTRIES || self.bytes + size > LISTED_BYTES {
            let Some(old) = self.order.pop_front() else {
                return;
            };
            if let Some((_, n)) = self.props.remove(&old) {
                self.bytes -= n;
            }
        }
        self.bytes += size;
        self.order.push_back(name.clone());
        self.props.insert(name, (stored, size));
    }

    fn take(&mut self, rel: &Path) -> Option<Vec<props::Stored>> {
        let (dir, name) = (rel.parent()?, rel.file_name()?);
        if dir != self.dir {
            return None;
        }
        let (stored, n) = self.props.remove(name.as_bytes())?;
        self.bytes -= n;
        Some(stored)
    }
}

type Creds = Arc<Ctx>;

fn owned(path: &DavPath) -> PathBuf {
    path.as_rel_ospath().to_path_buf()
}

impl GuardedFileSystem<Creds> for Volume {
    fn open<'a>(
        &'a self,
        path: &'a DavPath,
        options: OpenOptions,
        ctx: &'a Creds,
    ) -> FsFuture<'a, Box<dyn DavFile>> {
        let (rel, roots) = (owned(path), ctx.roots.clone());
        async move { blocking(move || open(&roots, &rel, &options)).await? }.boxed()
    }

    fn read_dir<'a>(
        &'a self,
        path: &'a DavPath,
        meta: ReadDirMeta,
        ctx: &'a Creds,
    ) -> FsFuture<'a, FsStream<Box<dyn DavDirEntry>>> {
        let (rel, roots) = (owned(path), ctx.roots.clone());
        async move {
            let (r, dir) = (ctx.roots.clone(), rel.clone());
            let (fd, real) = blocking(move || r.open_dir(&dir))
                .await?
                .map_err(|e| fs_error(&e))?;
            let listed = ctx.listed.clone();
            *listed.lock().unwrap_or_else(|e| e.into_inner()) = Listed {
                dir: rel,
                ..Listed::default()
            };
            let (tx, rx) = tokio::sync::mpsc::channel(2);
            let follow = meta == ReadDirMeta::Data;
            tokio::task::spawn_blocking(move || list(&roots, fd, &real, follow, &listed, &tx));
            let entries = futures_util::stream::unfold(rx, |mut rx| async move {
                let batch = rx.recv().await?;
                let items = batch
                    .into_iter()
                    .map(|e| Ok(Box::new(e) as Box<dyn DavDirEntry>));
                Some((futures_util::stream::iter(items), rx))
            })
            .flatten();
            Ok(Box::pin(entries) as FsStream<Box<dyn DavDirEntry>>)
        }
        .boxed()
    }

    fn metadata<'a>(
        &'a self,
        path: &'a DavPath,
        ctx: &'a Creds,
    ) -> FsFuture<'a, Box<dyn DavMetaData>> {
        self.stat(path, ctx, true)
    }

    fn symlink_metadata<'a>(
        &'a self,
        path: &'a DavPath,
        ctx: &'a Creds,
    ) -> FsFuture<'a, Box<dyn DavMetaData>> {
        self.stat(path, ctx, false)
    }

    fn create_dir<'a>(&'a self, path: &'a DavPath, ctx: &'a Creds) -> FsFuture<'a, ()> {
        let (rel, roots) = (owned(path), ctx.roots.clone());
        async move {
            if area(&rel) == Area::ReadOnly {
                return Err(FsError::Forbidden);
            }
            blocking(move || -> io::Result<()> {
                let p = roots.parent(&rel)?;
                if entry_area(&roots, &p) == Area::ReadOnly {
                    return Err(read_only());
                }
                rustix::fs::mkdirat(&p.fd, p.name, Mode::from_raw_mode(DIR_MODE))?;
                let _ = rustix::fs::chmodat(
                    &p.fd,
                    p.name,
                    Mode::from_raw_mode(DIR_MODE),
                    AtFlags::empty(),
                );
                Ok(())
            })
            .await?
            .map_err(|e| fs_error(&e))
        }
        .boxed()
    }

    fn remove_dir<'a>(&'a self, path: &'a DavPath, ctx: &'a Creds) -> FsFuture<'a, ()> {
        self.remove(path, ctx, AtFlags::REMOVEDIR)
    }

    fn remove_file<'a>(&'a self, path: &'a DavPath, ctx: &'a Creds) -> FsFuture<'a, ()> {
        self.remove(path, ctx, AtFlags::empty())
    }

    fn rename<'a>(
        &'a self,
        from: &'a DavPath,
        to: &'a DavPath,
        ctx: &'a Creds,
    ) -> FsFuture<'a, ()> {
        let (from, to, roots) = (owned(from), owned(to), ctx.roots.clone());
        async move {
            if area(&from) != Area::Writable || area(&to) != Area::Writable {
                return Err(FsError::Forbidden);
            }
            blocking(move || -> FsResult<()> {
                let err = |e: io::Error| fs_error(&e);
                let a = roots.parent(&from).map_err(err)?;
                let b = roots.parent(&to).map_err(err)?;
                if entry_area(&roots, &a) != Area::Writable
                    || entry_area(&roots, &b) != Area::Writable
                {
                    return Err(FsError::Forbidden);
                }
                // A nested META_CORE_PATH is not carried away with a folder.
                let source = a.real.join(a.name);
                if roots.meta.as_ref().is_some_and(|m| m.starts_with(&source)) {
                    return Err(FsError::Forbidden);
                }
                // A folder moved over a file (Overwrite: T; dav-server
                // removes a folder in the way, not a file) replaces it.
                let kind = |fd, name| {
                    rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW)
                        .map(|st| FileType::from_raw_mode(st.st_mode))
                };
                let source_kind = kind(&a.fd, a.name).map_err(errno)?;
                if source_kind == FileType::Directory
                    && kind(&b.fd, b.name).is_ok_and(|k| k != FileType::Directory)
                {
                    rustix::fs::unlinkat(&b.fd, b.name, AtFlags::empty()).map_err(errno)?;
                }
                match rustix::fs::renameat(&a.fd, a.name, &b.fd, b.name) {
                    Ok(()) => Ok(()),
                    // To another filesystem (a mount under corn/): a file
                    // is copied, then removed. (A folder was refused
                    // before dav-server ran.)
                    Err(rustix::io::Errno::XDEV) if source_kind == FileType::RegularFile => {
                        copy(&roots, &from, &to)?;
                        rustix::fs::unlinkat(&a.fd, a.name, AtFlags::empty()).map_err(errno)
                    }
                    Err(e) => Err(errno(e)),
                }
            })
            .await?
        }
        .boxed()
    }

    fn copy<'a>(&'a self, from: &'a DavPath, to: &'a DavPath, ctx: &'a Creds) -> FsFuture<'a, ()> {
        let (from, to, roots) = (owned(from), owned(to), ctx.roots.clone());
        async move { blocking(move || copy(&roots, &from, &to)).await? }.boxed()
    }

    fn have_props<'a>(
        &'a self,
        _path: &'a DavPath,
        _ctx: &'a Creds,
    ) -> std::pin::Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        Box::pin(futures_util::future::ready(true))
    }

    fn patch_props<'a>(
        &'a self,
        path: &'a DavPath,
        patch: Vec<(bool, DavProp)>,
        ctx: &'a Creds,
    ) -> FsFuture<'a, Vec<(StatusCode, DavProp)>> {
        let (rel, roots) = (owned(path), ctx.roots.clone());
        async move {
            if area(&rel) == Area::ReadOnly {
                return Err(FsError::Forbidden);
            }
            let fd = blocking(move || -> io::Result<_> {
                let (fd, real) = open_resource_at(&roots, &rel)?;
                if real_area(&roots, &real) == Area::ReadOnly {
                    return Err(read_only());
                }
                Ok(fd)
            })
            .await?
            .map_err(|e| fs_error(&e))?;
            blocking(move || props::patch(&fd, patch)).await
        }
        .boxed()
    }

    fn get_props<'a>(
        &'a self,
        path: &'a DavPath,
        do_content: bool,
        ctx: &'a Creds,
    ) -> FsFuture<'a, Vec<DavProp>> {
        let (rel, roots) = (owned(path), ctx.roots.clone());
        async move {
            let listed = ctx
                .listed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(&rel);
            if let Some(stored) = listed {
                return Ok(props::to_props(&stored, do_content));
            }
            blocking(move || props::list(&open_resource(&roots, &rel)?, do_content))
                .await?
                .map_err(|e| fs_error(&e))
        }
        .boxed()
    }

    fn get_prop<'a>(
        &'a self,
        path: &'a DavPath,
        prop: DavProp,
        ctx: &'a Creds,
    ) -> FsFuture<'a, Vec<u8>> {
        let (rel, roots) = (owned(path), ctx.roots.clone());
        async move {
            blocking(move || props::get(&open_resource(&roots, &rel)?, &prop))
                .await?
                .map_err(|e| fs_error(&e))?
                .ok_or(FsError::NotFound)
        }
        .boxed()
    }

    fn get_quota<'a>(&'a self, ctx: &'a Creds) -> FsFuture<'a, (u64, Option<u64>)> {
        let roots = ctx.roots.clone();
        async move {
            // Once per request: a PROPFIND asks it for every entry.
            if let Some(q) = *ctx.quota.lock().unwrap_or_else(|e| e.into_inner()) {
                return Ok(q);
            }
            let v = blocking(move || rustix::fs::statvfs(&roots.files))
                .await?
                .map_err(errno)?;
            let total = v.f_blocks.saturating_mul(v.f_frsize);
            let free = v.f_bavail.saturating_mul(v.f_frsize);
            let used = total.saturating_sub(v.f_bfree.saturating_mul(v.f_frsize));
            let q = (used, Some(used.saturating_add(free)));
            *ctx.quota.lock().unwrap_or_else(|e| e.into_inner()) = Some(q);
            Ok(q)
        }
        .boxed()
    }
}

impl Volume {
    fn stat<'a>(
        &'a self,
        path: &'a DavPath,
        ctx: &'a Creds,
        follow: bool,
    ) -> FsFuture<'a, Box<dyn DavMetaData>> {
        let (rel, roots) = (owned(path), ctx.roots.clone());
        async move {
            let m = blocking(move || stat(&roots, &rel, follow))
                .await?
                .map_err(|e| fs_error(&e))?;
            Ok(Box::new(m) as Box<dyn DavMetaData>)
        }
        .boxed()
    }

    fn remove<'a>(&'a self, path: &'a DavPath, ctx: &'a Creds, flags: AtFlags) -> FsFuture<'a, ()> {
        let (rel, roots) = (owned(path), ctx.roots.clone());
        async move {
            if area(&rel) != Area::Writable {
                return Err(FsError::Forbidden);
            }
            blocking(move || -> io::Result<()> {
                let p = roots.parent(&rel)?;
                if entry_area(&roots, &p) != Area::Writable {
                    return Err(read_only());
                }
                rustix::fs::unlinkat(&p.fd, p.name, flags)?;
                Ok(())
            })
            .await?
            .map_err(|e| fs_error(&e))
        }
        .boxed()
    }
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
