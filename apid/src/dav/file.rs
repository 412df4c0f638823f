//! An open WebDAV file. A whole-file PUT writes a temporary file
//! ([`super::temp`]) in its target's folder and gives it the target's
//! name once every byte is on disk, so a reader (a sorter, a player, the
//! watcher) sees the old file or the new one, never half of one; an
//! upload that fails or is cut off leaves nothing behind. A ranged PUT (`Content-Range`) writes in
//! place. Writes are gathered into 1 MiB before they reach the disk.

use std::ffi::OsString;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, OwnedFd};

use bytes::{Buf, Bytes, BytesMut};
use dav_server::fs::{DavFile, DavMetaData, FsError, FsFuture, FsResult};
use futures_util::FutureExt;

use super::disk::{Meta, blocking, fs_error};
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
    commit: Option<Commit>,
}

impl VolFile {
    pub(crate) fn new(file: std::fs::File, commit: Option<Commit>) -> Self {
        Self {
            file: Some(file),
            pending: BytesMut::new(),
            written: 0,
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
        self.written += bytes.len() as u64;
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
            self.with_file(move |f| f.seek(pos)).await
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
