//! The checks a WebDAV write passes before dav-server runs it, made on
//! the descriptors the volume resolves (on the blocking pool), so that
//! what can be refused up front is refused before anything is written or
//! removed, with an answer that says why:
//!
//! - below `corn/<name>`, the folder must be a mount point (else 503:
//!   the mount is not mounted), and nothing is made in `corn/` itself
//!   (403 `read_only`) ([`super::area`]);
//! - a PUT or PATCH starts at most at the file's end (else 416 with
//!   `Content-Range: bytes */<size>`) and what it adds fits the free
//!   space of the filesystem it lands on (else 507) ([`super::span`]);
//! - a COPY or MOVE does not put a folder inside itself (409), a MOVE of
//!   a folder stays on its filesystem (502), and a COPY fits its budget:
//!   its entries, its bytes, and the reserve of the filesystem it lands
//!   on ([`super::budget`]; else 507);
//! - a LOCK of infinite depth is of a file, or of a folder that holds
//!   nothing yet (else 403 `read_only`): a deep lock on a folder others
//!   work in would lock every one of them out of all of it.
//!
//! The volume checks the same again where it acts; this is where the
//! answers come from.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use metacore::error::{ApiError, ErrorCode};
use rustix::fs::{AtFlags, FileType};

use super::area::CORN;
use super::budget::{
    Budget, Ledger, MAX_COPY_ENTRIES, Short, Space, Tally, inside, measure, space,
};
use super::disk::{free_bytes, open_resource_at};
use super::span::{self, Span};
use crate::confine::Roots;

/// What a request asks that the checks look at.
#[derive(Debug, Clone)]
pub(super) struct Asked {
    pub method: http::Method,
    /// The request's path, relative to `FILES_PATH`.
    pub rel: PathBuf,
    /// A COPY's or MOVE's destination.
    pub dest: Option<PathBuf>,
    /// A PUT's or PATCH's span.
    pub span: Option<Span>,
    /// `Depth` is infinity (COPY).
    pub deep: bool,
    /// The path is written (not only read from, as a COPY's source).
    pub writes_path: bool,
    /// A new LOCK of infinite depth (not a refresh).
    pub deep_lock: bool,
    /// The most bytes a COPY writes (`META_CORE_DAV_COPY_MAX_BYTES`).
    pub copy_max: u64,
    /// What a COPY leaves free (`META_CORE_DAV_COPY_RESERVE_BYTES`).
    pub copy_reserve: u64,
}

/// Why a request is refused before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Refusal {
    /// 403 `read_only`.
    ReadOnly(&'static str),
    /// 503: `corn/<name>` is not a mount point.
    NotMounted(String),
    /// 416.
    PastEnd { size: u64 },
    /// 507: the bytes do not fit.
    NoRoom { need: u64, free: u64 },
    /// 507: more entries than a COPY makes.
    TooMany,
    /// 507: more bytes than a COPY writes, or into its filesystem's
    /// reserve.
    Short(Short),
    /// 409: the destination is the source or inside it.
    Inside,
    /// 502: a folder moved to another filesystem.
    Across,
    /// 403: a LOCK of infinite depth on a folder that holds entries.
    DeepLock,
}

impl Refusal {
    pub(super) fn into_response(self) -> Response {
        let text = |status: StatusCode, msg: String| (status, msg + "\n").into_response();
        match self {
            Refusal::ReadOnly(why) => ApiError::new(ErrorCode::ReadOnly, why).into_response(),
            Refusal::NotMounted(name) => ApiError::new(
                ErrorCode::StorageUnavailable,
                format!(
                    "the mount corn/{name} is not mounted: nothing is written into its folder \
                     until mountd has mounted it again"
                ),
            )
            .into_response(),
            Refusal::PastEnd { size } => {
                let mut r = text(
                    StatusCode::RANGE_NOT_SATISFIABLE,
                    format!("a ranged write starts at most at the end of the file ({size} bytes)"),
                );
                if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                    r.headers_mut().insert(header::CONTENT_RANGE, v);
                }
                r
            }
            Refusal::NoRoom { need, free } => ApiError::new(
                ErrorCode::InsufficientStorage,
                format!("the write needs {need} bytes; its filesystem has {free} free"),
            )
            .into_response(),
            Refusal::TooMany => ApiError::new(
                ErrorCode::InsufficientStorage,
                format!(
                    "a COPY makes at most {MAX_COPY_ENTRIES} files and folders; this one would make more"
                ),
            )
            .into_response(),
            Refusal::Short(Short::Ceiling { need, max }) => ApiError::new(
                ErrorCode::InsufficientStorage,
                format!(
                    "a COPY writes at most {max} bytes (META_CORE_DAV_COPY_MAX_BYTES); this one \
                     would write {need}"
                ),
            )
            .into_response(),
            Refusal::Short(Short::Reserve {
                need,
                free,
                reserve,
            }) => ApiError::new(
                ErrorCode::InsufficientStorage,
                format!(
                    "the COPY needs {need} bytes; its filesystem has {free} free (less what \
                     copies under way will write), and a COPY leaves {reserve} of them free \
                     for the other writers (META_CORE_DAV_COPY_RESERVE_BYTES)"
                ),
            )
            .into_response(),
            Refusal::Inside => text(
                StatusCode::CONFLICT,
                "the Destination is the source or inside it".to_owned(),
            ),
            Refusal::Across => text(
                StatusCode::BAD_GATEWAY,
                "a folder cannot be moved to another filesystem; copy it, then delete it"
                    .to_owned(),
            ),
            Refusal::DeepLock => ApiError::new(
                ErrorCode::ReadOnly,
                "a LOCK of Depth: infinity on a folder that holds files or folders would lock \
                 every other client out of all of them: lock what you write (a file), or \
                 send Depth: 0; a folder that holds nothing yet may be locked deep",
            )
            .into_response(),
        }
    }
}

/// Runs the checks of `asked`; a COPY that passes gets its [`Budget`],
/// its bytes promised in `ledger` while it runs.
pub(super) async fn check(
    roots: &Arc<Roots>,
    ledger: &Arc<Ledger>,
    asked: Asked,
) -> Result<Option<Arc<Budget>>, Response> {
    let (roots, ledger) = (roots.clone(), ledger.clone());
    match tokio::task::spawn_blocking(move || checks(&roots, &ledger, &asked)).await {
        Ok(r) => r.map_err(Refusal::into_response),
        Err(e) => {
            Err(ApiError::internal(format!("the checks of a write failed: {e}")).into_response())
        }
    }
}

fn checks(roots: &Roots, ledger: &Arc<Ledger>, a: &Asked) -> Result<Option<Arc<Budget>>, Refusal> {
    if a.writes_path {
        mount(roots, &a.rel)?;
    }
    if let Some(dest) = &a.dest {
        mount(roots, dest)?;
    }
    if let Some(span) = a.span {
        room(roots, &a.rel, span)?;
    }
    if a.deep_lock && holds_entries(roots, &a.rel) {
        return Err(Refusal::DeepLock);
    }
    match (a.method.as_str(), &a.dest) {
        ("COPY", Some(dest)) => copy(roots, ledger, a, dest).map(Some),
        ("MOVE", Some(dest)) => moved(roots, &a.rel, dest).map(|()| None),
        _ => Ok(None),
    }
}

/// A write at `rel`: below `corn/<name>` only while it is mounted.
fn mount(roots: &Roots, rel: &Path) -> Result<(), Refusal> {
    let mut parts = rel.components();
    if parts.next() != Some(Component::Normal(CORN.as_ref())) {
        return Ok(());
    }
    let Some(Component::Normal(name)) = parts.next() else {
        return Ok(());
    };
    let deeper = parts.next().is_some();
    let Ok((corn, _)) = roots.open_dir(Path::new(CORN)) else {
        return Ok(());
    };
    let only_mounts = "corn/ holds only mounts (made by mountd): nothing is made in it directly";
    match rustix::fs::statat(&corn, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
            let here = rustix::fs::fstat(&corn).map(|c| c.st_dev).ok();
            if here.is_some_and(|dev| dev != st.st_dev) {
                Ok(())
            } else {
                Err(Refusal::NotMounted(name.to_string_lossy().into_owned()))
            }
        }
        Ok(_) => Err(Refusal::ReadOnly(only_mounts)),
        // Nothing there: below it, dav-server finds no folder.
        Err(_) if deeper => Ok(()),
        Err(_) => Err(Refusal::ReadOnly(only_mounts)),
    }
}

/// Whether `rel` is a folder with at least one entry (hidden ones too).
fn holds_entries(roots: &Roots, rel: &Path) -> bool {
    let Ok((fd, _)) = open_resource_at(roots, rel) else {
        return false;
    };
    let is_dir = rustix::fs::fstat(&fd)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory);
    if !is_dir {
        return false;
    }
    let Ok(list) = rustix::fs::Dir::read_from(&fd) else {
        return false;
    };
    list.filter_map(Result::ok).any(|e| {
        let name = e.file_name().to_bytes();
        name != b"." && name != b".."
    })
}

/// A PUT or PATCH: where it starts and what it adds.
fn room(roots: &Roots, rel: &Path, span: Span) -> Result<(), Refusal> {
    let Ok(p) = roots.parent(rel) else {
        return Ok(());
    };
    let size = match rustix::fs::statat(&p.fd, p.name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
            st.st_size.max(0) as u64
        }
        // Not a file: dav-server refuses the write.
        Ok(_) => return Ok(()),
        Err(_) => 0,
    };
    let free = free_bytes(&p.fd).unwrap_or(u64::MAX);
    span.judge(size, free).map_err(|r| match r {
        span::Refused::PastEnd { size } => Refusal::PastEnd { size },
        span::Refused::NoRoom { need, free } => Refusal::NoRoom { need, free },
    })
}

/// Where the destination's entry really is, and its folder's filesystem.
fn destination(roots: &Roots, dest: &Path) -> Option<(PathBuf, Option<Space>)> {
    let p = roots.parent(dest).ok()?;
    Some((p.real.join(p.name), space(&p.fd)))
}

/// A COPY: not into itself, and within its budget: its entries, its bytes
/// (at most `max`), and the reserve of its destination's filesystem.
fn copy(roots: &Roots, ledger: &Arc<Ledger>, a: &Asked, to: &Path) -> Result<Arc<Budget>, Refusal> {
    let max = a.copy_max;
    let unbounded = || Arc::new(Budget::new(MAX_COPY_ENTRIES, max));
    // The source as a COPY reads it: a symlink at the top is followed.
    let Ok((fd, src)) = open_resource_at(roots, &a.rel) else {
        return Ok(unbounded());
    };
    let Some((dst, space)) = destination(roots, to) else {
        return Ok(unbounded());
    };
    if inside(&src, &dst) {
        return Err(Refusal::Inside);
    }
    let Ok(st) = rustix::fs::fstat(&fd) else {
        return Ok(unbounded());
    };
    let t = match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => measure(roots, &a.rel, a.deep, MAX_COPY_ENTRIES),
        _ => Tally {
            entries: 1,
            bytes: st.st_size.max(0) as u64,
        },
    };
    if t.entries > MAX_COPY_ENTRIES {
        return Err(Refusal::TooMany);
    }
    let Some(space) = space else {
        // Its filesystem says nothing of its room: the ceiling alone.
        if t.bytes > max {
            return Err(Refusal::Short(Short::Ceiling { need: t.bytes, max }));
        }
        return Ok(unbounded());
    };
    match ledger.promise(space, t.bytes, max, a.copy_reserve) {
        Ok((bytes, promise)) => Ok(Arc::new(Budget::promised(MAX_COPY_ENTRIES, bytes, promise))),
        Err(short) => Err(Refusal::Short(short)),
    }
}

/// A MOVE: not into itself (the name moves, a symlink itself), and a
/// folder stays on its filesystem (dav-server removes what is at the
/// destination before it tries the rename).
fn moved(roots: &Roots, from: &Path, to: &Path) -> Result<(), Refusal> {
    let Ok(src) = roots.parent(from) else {
        return Ok(());
    };
    let Ok(dst) = roots.parent(to) else {
        return Ok(());
    };
    if inside(&src.real.join(src.name), &dst.real.join(dst.name)) {
        return Err(Refusal::Inside);
    }
    let Ok(st) = rustix::fs::statat(&src.fd, src.name, AtFlags::SYMLINK_NOFOLLOW) else {
        return Ok(());
    };
    if FileType::from_raw_mode(st.st_mode) == FileType::Directory
        && rustix::fs::fstat(&dst.fd).is_ok_and(|d| d.st_dev != st.st_dev)
    {
        return Err(Refusal::Across);
    }
    Ok(())
}
