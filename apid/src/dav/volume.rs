//! `FILES_PATH` as a WebDAV filesystem, confined ([`crate::confine`]):
//! every name is resolved under a checked folder descriptor, a symlink is
//! followed only where it stays inside, and nothing is cached (a file
//! another process writes is listed by the next PROPFIND).
//!
//! This is dav-server's side: the trait, the per-request [`Ctx`], the
//! hand-offs to the blocking pool. The work on the disk is
//! [`super::disk`]'s; where writes may go, [`super::area`]'s. Files and
//! folders made here are 0644 and 0755 whatever apid's umask, because the
//! services in other containers that share the volume read them.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use dav_server::davpath::DavPath;
use dav_server::fs::{
    DavDirEntry, DavFile, DavMetaData, DavProp, FsError, FsFuture, FsResult, FsStream,
    GuardedFileSystem, OpenOptions, ReadDirMeta,
};
use futures_util::{FutureExt, StreamExt};
use http::StatusCode;
use rustix::fs::{AtFlags, FileType, Mode};

use super::area::{Area, area, entry_area, mounted, parent_mounted, read_only, real_area};
use super::budget::Budget;
use super::disk::{Listed, Listing, copy, list, open, open_resource, open_resource_at, stat};
use super::meta::{blocking, errno, fs_error};
use super::props;
use crate::confine::Roots;
use metacore::sync::Locked;

const DIR_MODE: u32 = 0o755;

/// The WebDAV filesystem.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Volume;

/// What one request works with (dav-server's "credentials"): the roots
/// resolved for it, what kind of request it is, the volume's quota once
/// asked, and the dead properties of the entries of the folder it lists,
/// read by the listing thread beside their `stat` so that an `allprop`
/// PROPFIND of a folder costs no hand-off to the blocking pool per entry.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub roots: Arc<Roots>,
    purpose: Purpose,
    /// Asked once per request (a PROPFIND asks for every entry).
    quota: std::sync::Mutex<Option<(u64, Option<u64>)>>,
    /// Filled by the listing thread, emptied by `get_props`.
    listed: Arc<std::sync::Mutex<Listed>>,
}

/// What a request is, where the volume treats it apart.
#[derive(Debug)]
pub(crate) enum Purpose {
    Other,
    /// A LOCK: an unmapped URL is locked without making a file.
    Lock,
    /// A COPY of `source`: folder symlinks in it are not followed, and
    /// what it makes is taken from its budget.
    Copy {
        budget: Arc<Budget>,
        source: PathBuf,
    },
}

impl Ctx {
    pub(crate) fn new(roots: Arc<Roots>, purpose: Purpose) -> Self {
        Self {
            roots,
            purpose,
            quota: std::sync::Mutex::new(None),
            listed: Arc::default(),
        }
    }

    fn budget(&self) -> Option<Arc<Budget>> {
        match &self.purpose {
            Purpose::Copy { budget, .. } => Some(budget.clone()),
            _ => None,
        }
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
        let lock = matches!(ctx.purpose, Purpose::Lock);
        async move { blocking(move || open(&roots, &rel, &options, lock)).await? }.boxed()
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
            *listed.locked() = Listed::of(rel.clone());
            let (tx, rx) = tokio::sync::mpsc::channel(2);
            let how = Listing {
                follow: meta == ReadDirMeta::Data,
                // Only in the tree copied: a destination it replaces is
                // listed whole to be removed.
                copying: matches!(&ctx.purpose, Purpose::Copy { source, .. } if rel.starts_with(source)),
            };
            tokio::task::spawn_blocking(move || list(&roots, fd, &real, how, &listed, &tx));
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
        let (rel, roots, budget) = (owned(path), ctx.roots.clone(), ctx.budget());
        async move {
            if area(&rel) == Area::ReadOnly {
                return Err(FsError::Forbidden);
            }
            if budget.is_some_and(|b| !b.take(0)) {
                return Err(FsError::InsufficientStorage);
            }
            blocking(move || -> io::Result<()> {
                let p = roots.parent(&rel)?;
                if entry_area(&roots, &p) == Area::ReadOnly {
                    return Err(read_only());
                }
                parent_mounted(&roots, &p)?;
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
                parent_mounted(&roots, &a).map_err(err)?;
                parent_mounted(&roots, &b).map_err(err)?;
                // A nested META_CORE_PATH (or another of meta-core's
                // folders) is not carried away with a folder.
                let source = a.real.join(a.name);
                if roots.holds_private(&source) {
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
                        copy(&roots, &from, &to, None)?;
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
        let (from, to, roots, budget) = (owned(from), owned(to), ctx.roots.clone(), ctx.budget());
        async move { blocking(move || copy(&roots, &from, &to, budget.as_deref())).await? }.boxed()
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
                // The properties of corn/ itself are its own; below it, a
                // mount's (or its folder's) only while it is mounted.
                if real != roots.files.join(super::area::CORN) {
                    mounted(&roots, &fd, &real)?;
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
            let listed = ctx.listed.locked().take(&rel);
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
            if let Some(q) = *ctx.quota.locked() {
                return Ok(q);
            }
            let v = blocking(move || rustix::fs::statvfs(&roots.files))
                .await?
                .map_err(errno)?;
            let total = v.f_blocks.saturating_mul(v.f_frsize);
            let free = v.f_bavail.saturating_mul(v.f_frsize);
            let used = total.saturating_sub(v.f_bfree.saturating_mul(v.f_frsize));
            let q = (used, Some(used.saturating_add(free)));
            *ctx.quota.locked() = Some(q);
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
                parent_mounted(&roots, &p)?;
                rustix::fs::unlinkat(&p.fd, p.name, flags)?;
                Ok(())
            })
            .await?
            .map_err(|e| fs_error(&e))
        }
        .boxed()
    }
}
