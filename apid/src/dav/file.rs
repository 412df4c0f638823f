//! An open WebDAV file. A whole-file PUT writes a temporary file
//! ([`super::temp`]) in its target's folder and gives it the target's
//! name once every byte is on disk, so a reader (a sorter, a player, the
//! watcher) sees the old file or the new one, never half of one; an
//! upload that fails or is cut off leaves nothing behind. A ranged PUT
//! (`Content-Range`) writes in place, from at most the file's end. Writes
//! are gathered into 1 MiB before they reach the disk, and none goes past
//! the end the filesystem had room for when the file was opened (a
//! chunked body declares no length to refuse it by up front).

use std::ffi::OsString;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, OwnedFd};

use bytes::{Buf, Bytes, BytesMut};
use dav_server::fs::{DavFile, DavMetaData, FsError, FsFuture, FsResult};
use futures_util::FutureExt;

use super::meta::{Meta, blocking, fs_error};
use super::props;
use super::temp::{self, Temp};

/// Bytes gathered before a write to the disk.
const GATHER: usize = 1024 * 1024;

/// Where a whole-file PUT goes once written.
#[derive(Debug)]
pub(crate) struct Commit {
    /// The target's folder, checked.
    pub dir: OwnedFd,
    /// The temporary file.
    pub temp: Temp,
    pub name: OsString,
    /// `If-None-Match: *`: fail rather than replace a file that appeared.
    pub no_replace: bool,
    /// The length the client declared; a body of another length is not
    /// committed. (dav-server checks the length only after `flush`, and
    /// hyper only for `Content-Length`, not for `X-Expected-Entity-Length`
    /// over a chunked body.)
    pub expected: Option<u64>,
    pub done: bool,
}

#[derive(Debug)]
pub(crate) struct VolFile {
    file: Option<std::fs::File>,
    pending: BytesMut,
    /// Bytes taken by `write_*`.
    written: u64,
    /// Where the next byte taken lands.
    pos: u64,
    /// For a file opened to write: the end no write may pass (its size
    /// when opened, or 0 for a temporary file, plus the free space then),
    /// and no seek may go past the file's end.
    limit: Option<u64>,
    commit: Option<Commit>,
}

impl VolFile {
    /// A file opened to read.
    pub(crate) fn reading(file: std::fs::File) -> Self {
        Self::new(file, None, None, 0)
    }

    /// A file opened to write from `pos` (its end for an append), up to
    /// the end `limit`.
    pub(crate) fn writing(
        file: std::fs::File,
        commit: Option<Commit>,
        limit: u64,
        pos: u64,
    ) -> Self {
        Self::new(file, commit, Some(limit), pos)
    }

    fn new(file: std::fs::File, commit: Option<Commit>, limit: Option<u64>, pos: u64) -> Self {
        Self {
            file: Some(file),
            pending: BytesMut::new(),
            written: 0,
            pos,
            limit,
            commit,
        }
    }

    /// Runs `f` on the file on the blocking pool.
    async fn with_file<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&mut std::fs::File) -> std::io::Result<T> + Send + 'static,
    ) -> FsResult<T> {
        let mut file = self.file.take().ok_or(FsError::GeneralFailure)?;
        let (file, r) = blocking(move || {
            let r = f(&mut file);
            (file, r)
        })
        .await?;
        self.file = Some(file);
        r.map_err(|e| fs_error(&e))
    }

    /// Writes what was gathered.
    async fn write_pending(&mut self) -> FsResult<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let chunk = self.pending.split().freeze();
        self.with_file(move |f| f.write_all(&chunk)).await
    }

    async fn gather(&mut self, bytes: &[u8]) -> FsResult<()> {
        let n = bytes.len() as u64;
        if self.limit.is_some_and(|l| self.pos.saturating_add(n) > l) {
            // Past the room there was: nothing more is written, and a
            // whole-file PUT is dropped unnamed.
            return Err(FsError::InsufficientStorage);
        }
        self.pos += n;
        self.written += n;
        self.pending.extend_from_slice(bytes);
        if self.pending.len() >= GATHER {
            self.write_pending().await?;
        }
        Ok(())
    }
}

impl Drop for VolFile {
    fn drop(&mut self) {
        if let Some(c) = &self.commit
            && !c.done
        {
            temp::discard(&c.dir, &c.temp);
        }
    }
}

impl DavFile for VolFile {
    fn metadata(&mut self) -> FsFuture<'_, Box<dyn DavMetaData>> {
        async move {
            let st = self
                .with_file(|f| rustix::fs::fstat(f.as_fd()).map_err(Into::into))
                .await?;
            Ok(Box::new(Meta::of(&st)) as Box<dyn DavMetaData>)
        }
        .boxed()
    }

    fn write_buf(&mut self, mut buf: Box<dyn Buf + Send>) -> FsFuture<'_, ()> {
        async move {
            while buf.has_remaining() {
                let n = buf.chunk().len();
                let chunk = buf.chunk().to_vec();
                self.gather(&chunk).await?;
                buf.advance(n);
            }
            Ok(())
        }
        .boxed()
    }

    fn write_bytes(&mut self, buf: Bytes) -> FsFuture<'_, ()> {
        async move { self.gather(&buf).await }.boxed()
    }

    fn read_bytes(&mut self, count: usize) -> FsFuture<'_, Bytes> {
        async move {
            let count = count.min(GATHER);
            self.with_file(move |f| {
                let mut buf = vec![0; count];
                let mut got = 0;
                while got < count {
                    match f.read(&mut buf[got..])? {
                        0 => break,
                        n => got += n,
                    }
                }
                buf.truncate(got);
                Ok(Bytes::from(buf))
            })
            .await
        }
        .boxed()
    }

    fn seek(&mut self, pos: SeekFrom) -> FsFuture<'_, u64> {
        async move {
            self.write_pending().await?;
            let writing = self.limit.is_some();
            let at = self
                .with_file(move |f| {
                    if let (true, SeekFrom::Start(n)) = (writing, pos)
                        && n > f.metadata()?.len()
                    {
                        // A write never starts past the end (dav-server
                        // answers 416).
                        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
                    }
                    f.seek(pos)
                })
                .await?;
            self.pos = at;
            Ok(at)
        }
        .boxed()
    }

    /// Everything on disk (`fdatasync`), then, for a whole-file PUT, the
    /// rename over the target.
    fn flush(&mut self) -> FsFuture<'_, ()> {
        async move {
            self.write_pending().await?;
            self.with_file(|f| f.sync_data()).await?;
            let Some(c) = self.commit.as_mut() else {
                return Ok(());
            };
            if c.done {
                return Ok(());
            }
            if c.expected.is_some_and(|n| n != self.written) {
                // Not what was announced: left unnamed (dropped with the
                // file); dav-server answers 400.
                return Ok(());
            }
            let dir = c.dir.try_clone().map_err(|e| fs_error(&e))?;
            let (temp, name, no_replace) = (c.temp.clone(), c.name.clone(), c.no_replace);
            let file = self.file.as_ref().ok_or(FsError::GeneralFailure)?;
            let file = file.try_clone().map_err(|e| fs_error(&e))?;
            blocking(move || -> FsResult<()> {
                // The replaced file's dead properties stay with the name.
                if let Ok(old) = rustix::fs::openat(
                    &dir,
                    &name,
                    rustix::fs::OFlags::RDONLY
                        | rustix::fs::OFlags::NOFOLLOW
                        | rustix::fs::OFlags::NONBLOCK
                        | rustix::fs::OFlags::CLOEXEC,
                    rustix::fs::Mode::empty(),
                ) {
                    props::copy(&old, &file);
                }
                temp::commit(&dir, &file, &temp, &name, no_replace).map_err(|e| {
                    if e.raw_os_error() == Some(libc::EEXIST) {
                        FsError::Exists
                    } else {
                        fs_error(&e)
                    }
                })
            })
            .await??;
            if let Some(c) = self.commit.as_mut() {
                c.done = true;
            }
            Ok(())
        }
        .boxed()
    }
}

/// What a LOCK of an unmapped URL opens: nothing. The lock is kept in
/// memory ([`super::locks`]); no empty file is made, so none is left
/// behind when the lock ends unused, and the client's PUT makes the file.
#[derive(Debug)]
pub(crate) struct NoFile;

impl DavFile for NoFile {
    fn metadata(&mut self) -> FsFuture<'_, Box<dyn DavMetaData>> {
        futures_util::future::ready(Err(FsError::NotFound)).boxed()
    }
    fn write_buf(&mut self, _buf: Box<dyn Buf + Send>) -> FsFuture<'_, ()> {
        futures_util::future::ready(Err(FsError::Forbidden)).boxed()
    }
    fn write_bytes(&mut self, _buf: Bytes) -> FsFuture<'_, ()> {
        futures_util::future::ready(Err(FsError::Forbidden)).boxed()
    }
    fn read_bytes(&mut self, _count: usize) -> FsFuture<'_, Bytes> {
        futures_util::future::ready(Err(FsError::Forbidden)).boxed()
    }
    fn seek(&mut self, _pos: SeekFrom) -> FsFuture<'_, u64> {
        futures_util::future::ready(Err(FsError::Forbidden)).boxed()
    }
    fn flush(&mut self) -> FsFuture<'_, ()> {
        futures_util::future::ready(Ok(())).boxed()
    }
}
