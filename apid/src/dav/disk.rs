//! The blocking work on the disk behind [`super::volume::Volume`]: stat,
//! list, open, copy, each confined ([`crate::confine`]) and run on the
//! blocking pool by its caller; and the directory entries a listing
//! returns to dav-server.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use dav_server::fs::{DavDirEntry, DavFile, DavMetaData, FsError, FsFuture, FsResult, OpenOptions};
use futures_util::FutureExt;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::area::{Area, area, entry_area, parent_mounted};
use super::budget::Budget;
use super::file::{Commit, NoFile, VolFile};
use super::meta::{Meta, errno, fs_error};
use super::props;
use super::temp::{self, FILE_MODE};
use crate::confine::{Parent, Roots, missing};
use metacore::sync::Locked;

/// Directory entries handed from the listing thread at a time.
const BATCH: usize = 256;

#[derive(Debug)]
pub(super) struct Entry {
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
pub(super) fn stat(roots: &Roots, rel: &Path, follow: bool) -> io::Result<Meta> {
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
pub(super) fn open_resource(roots: &Roots, rel: &Path) -> io::Result<std::os::fd::OwnedFd> {
    Ok(open_resource_at(roots, rel)?.0)
}

/// [`open_resource`], and where it really is.
pub(super) fn open_resource_at(
    roots: &Roots,
    rel: &Path,
) -> io::Result<(std::os::fd::OwnedFd, PathBuf)> {
    if rel.as_os_str().is_empty() {
        return roots.open_dir(rel);
    }
    let p = roots.parent(rel)?;
    roots.open_entry(&p)
}

/// How a folder is listed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Listing {
    /// Symlinks followed (where they stay inside) to what they lead to.
    pub follow: bool,
    /// For a COPY: only what is copied, so a symlink is listed only when
    /// it leads to a file inside ([`super::budget`]).
    pub copying: bool,
}

/// Whether the symlink at `path` leads to a regular file inside.
fn links_to_file(roots: &Roots, path: &Path) -> bool {
    roots.confined(path).is_some_and(|t| {
        rustix::fs::stat(&t)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile)
    })
}

/// Lists the folder `fd` (really at `real`) to `tx` in batches.
pub(super) fn list(
    roots: &Roots,
    fd: std::os::fd::OwnedFd,
    real: &Path,
    how: Listing,
    listed: &std::sync::Mutex<Listed>,
    tx: &tokio::sync::mpsc::Sender<Vec<Entry>>,
) {
    let follow = how.follow;
    let entries = match roots.entries(&fd, real) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::warn!("webdav: cannot list a folder: {e}");
            return;
        }
    };
    let mut batch = Vec::with_capacity(BATCH);
    for child in entries {
        let link = child.file_type() == FileType::Symlink;
        if how.copying && link && !links_to_file(roots, &child.path) {
            continue;
        }
        let (mut st, mut props_at) = (child.stat, child.path);
        if follow && link {
            let Some(target) = roots.confined(&props_at) else {
                continue;
            };
            match rustix::fs::stat(&target) {
                Ok(t) => st = t,
                Err(_) => continue,
            }
            props_at = target;
        }
        if let Ok((stored, size)) = props::load_path(&props_at) {
            listed.locked().insert(child.name.clone(), stored, size);
        }
        batch.push(Entry {
            name: child.name,
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
pub(super) fn free_bytes(dir: &impl AsFd) -> Option<u64> {
    let v = rustix::fs::fstatvfs(dir).ok()?;
    Some(v.f_bavail.saturating_mul(v.f_frsize))
}

/// Opens the file at `rel` as `o` asks. `lock`: for a LOCK of an
/// unmapped URL, which makes nothing ([`NoFile`]).
pub(super) fn open(
    roots: &Roots,
    rel: &Path,
    o: &OpenOptions,
    lock: bool,
) -> FsResult<Box<dyn DavFile>> {
    let err = |e: io::Error| fs_error(&e);
    if !o.write && !o.append {
        return open_to_read(roots, rel);
    }
    if area(rel) != Area::Writable {
        return Err(FsError::Forbidden);
    }
    let p = roots.parent(rel).map_err(err)?;
    if entry_area(roots, &p) != Area::Writable {
        return Err(FsError::Forbidden);
    }
    parent_mounted(roots, &p).map_err(err)?;
    let existing = match rustix::fs::statat(&p.fd, p.name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Some((
            FileType::from_raw_mode(st.st_mode),
            st.st_size.max(0) as u64,
        )),
        Err(rustix::io::Errno::NOENT) => None,
        Err(e) => return Err(errno(e)),
    };
    match existing {
        Some((FileType::RegularFile, _)) if o.create_new => return Err(FsError::Exists),
        Some((FileType::RegularFile, _)) => {}
        // Never written through: a folder, a symlink, a device.
        Some(_) => return Err(FsError::Forbidden),
        None if !o.create && !o.create_new => return Err(FsError::NotFound),
        None if lock => return Ok(Box::new(NoFile)),
        None => {}
    }
    let size = existing.map_or(0, |(_, n)| n);
    let free = free_bytes(&p.fd).unwrap_or(u64::MAX);
    if let Some(declared) = o.size
        && declared > free
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
        return Ok(Box::new(VolFile::writing(file, Some(commit), free, 0)));
    }
    let fd = open_in_place(&p, o, existing.is_none())?;
    let start = if o.append { size } else { 0 };
    Ok(Box::new(VolFile::writing(
        fd.into(),
        None,
        size.saturating_add(free),
        start,
    )))
}

/// Opens the regular file at `rel` for reading; anything else is
/// forbidden.
fn open_to_read(roots: &Roots, rel: &Path) -> FsResult<Box<dyn DavFile>> {
    let err = |e: io::Error| fs_error(&e);
    let p = roots.parent(rel).map_err(err)?;
    let (fd, _) = roots.open_entry(&p).map_err(err)?;
    let file = std::fs::File::from(fd);
    let is_file = file.metadata().map(|m| m.is_file()).unwrap_or(false);
    if !is_file {
        return Err(FsError::Forbidden);
    }
    Ok(Box::new(VolFile::reading(file)))
}

/// Opens `p` to write where it is (a ranged write, an append), made with
/// the file mode when it is new (`created`).
fn open_in_place(p: &Parent<'_>, o: &OpenOptions, created: bool) -> FsResult<OwnedFd> {
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
    if created {
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(FILE_MODE)).map_err(errno)?;
    }
    Ok(fd)
}

/// Copies the regular file at `from` over (or to) `to`, through a
/// temporary file renamed into place; taken from `budget` when a COPY
/// request runs it.
pub(super) fn copy(roots: &Roots, from: &Path, to: &Path, budget: Option<&Budget>) -> FsResult<()> {
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
    parent_mounted(roots, &dst).map_err(err)?;
    if free_bytes(&dst.fd).is_some_and(|free| meta.len() > free)
        || budget.is_some_and(|b| !b.take(meta.len()))
    {
        return Err(FsError::InsufficientStorage);
    }
    let done = copy_bytes(&mut src_file, &dst);
    // Written or failed, the file's bytes are no longer to come.
    if let Some(b) = budget {
        b.settle(meta.len());
    }
    done.map_err(err)
}

/// Copies `src` to a temporary file in `dst`'s folder, given `dst`'s name
/// once complete and durable; a copy that fails leaves nothing.
fn copy_bytes(src: &mut std::fs::File, dst: &Parent<'_>) -> io::Result<()> {
    let (mut tmp_file, temp) = temp::create(&dst.fd, dst.name)?;
    let done = (|| -> io::Result<()> {
        std::io::copy(src, &mut tmp_file)?;
        props::copy(src, &tmp_file);
        tmp_file.sync_data()?;
        temp::commit(&dst.fd, &tmp_file, &temp, dst.name, false)
    })();
    if done.is_err() {
        temp::discard(&dst.fd, &temp);
    }
    done
}

/// Entries listed at most; their properties at most (bytes). Past either,
/// an entry's properties are read when asked.
const LISTED_ENTRIES: usize = 4096;
const LISTED_BYTES: usize = 4 << 20;

/// The dead properties of entries of one folder, listed and not asked yet.
#[derive(Debug, Default)]
pub(super) struct Listed {
    dir: PathBuf,
    props: std::collections::HashMap<Vec<u8>, (Vec<props::Stored>, usize)>,
    order: std::collections::VecDeque<Vec<u8>>,
    bytes: usize,
}

impl Listed {
    /// An empty cache for the listing of `dir`.
    pub(super) fn of(dir: PathBuf) -> Self {
        Self {
            dir,
            ..Self::default()
        }
    }

    pub(super) fn insert(&mut self, name: Vec<u8>, stored: Vec<props::Stored>, size: usize) {
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

    pub(super) fn take(&mut self, rel: &Path) -> Option<Vec<props::Stored>> {
        let (dir, name) = (rel.parent()?, rel.file_name()?);
        if dir != self.dir {
            return None;
        }
        let (stored, n) = self.props.remove(name.as_bytes())?;
        self.bytes -= n;
        Some(stored)
    }
}
