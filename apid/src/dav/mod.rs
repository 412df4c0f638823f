//! WebDAV at `/webdav/` over `FILES_PATH` (crate `dav-server` for the
//! protocol, [`volume::Volume`] for the disk).
//!
//! Before a request reaches `dav-server` it is checked here:
//! - the path and a COPY or MOVE `Destination`, decoded: a `..`
//!   segment, an encoded `/` or a NUL is a 400, whatever the encoding; a
//!   `Destination` that is not literally a `/webdav/` path is a 502 (as
//!   to another server), so dav-server, which reads it more loosely,
//!   never acts on a destination apid did not check;
//! - writes (PUT, PATCH, DELETE, MKCOL, PROPPATCH, LOCK, and MOVE's
//!   source, COPY's and MOVE's destination) only under `plugin/` and
//!   `corn/`, else 403 `read_only` (the filesystem checks again where a
//!   name really leads, [`volume`]);
//! - `PROPFIND` with `Depth: infinity` (or none, which means infinity) is
//!   refused with 403 and `propfind-finite-depth` (RFC 4918 §9.1): a walk
//!   of the whole volume is not something one request may ask for;
//! - a MOVE of a folder to another filesystem is a 502 before dav-server
//!   removes anything at the destination;
//! - uploads and copies run [`UPLOADS`] at a time, listings [`LISTINGS`];
//!   one that waits longer than [`SLOT_WAIT`] gets 503 with
//!   `Retry-After`.
//!
//! `GET` and `HEAD` of a file are answered by [`crate::send_file`], as
//! `/file/{cid}` is: the same ranges, validators and streaming, and the
//! same ETag as PROPFIND's `getetag`. Locks live in apid's memory and end
//! with it (a client re-locks after a restart), and when their timeout
//! passes ([`locks`]).

mod area;
mod disk;
mod file;
mod locks;
mod props;
mod temp;
mod volume;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use dav_server::DavHandler;
use http::{HeaderValue, Method, StatusCode, header};
use metacore::error::{ApiError, ErrorCode};
use tokio::sync::Semaphore;

use crate::confine::Roots;
use crate::send_file::Prefetched;
use crate::state::State;
use area::{Area, area};
use volume::Volume;

/// Where WebDAV is mounted.
pub(crate) const PREFIX: &str = "/webdav";
/// Uploads and copies (PUT, PATCH, COPY) written at once; an upload
/// holds up to 1 MiB of gathered bytes.
pub(crate) const UPLOADS: usize = 16;
/// PROPFINDs answered at once: a listing holds a blocking thread while
/// its client reads (a client that stops reading is cut off by
/// `META_CORE_HTTP_WRITE_STALL_MS`), so they are bounded well below
/// tokio's pool of 512.
pub(crate) const LISTINGS: usize = 32;
/// The longest body of a method other than PUT and PATCH (PROPFIND,
/// PROPPATCH, LOCK, ...): what dav-server reads whole.
pub(crate) const DAV_BODY: u64 = 64 * 1024;
/// How long a request waits for a slot before 503.
pub(crate) const SLOT_WAIT: Duration = Duration::from_secs(10);

/// The WebDAV handler apid keeps for its life.
pub(crate) struct Dav {
    handler: DavHandler<Arc<volume::Ctx>>,
    uploads: Semaphore,
    listings: Semaphore,
}

impl std::fmt::Debug for Dav {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dav")
            .field("uploads_free", &self.uploads.available_permits())
            .finish_non_exhaustive()
    }
}

impl Default for Dav {
    fn default() -> Self {
        let handler = DavHandler::builder()
            .strip_prefix(PREFIX)
            .filesystem(Box::new(Volume))
            .locksystem(Box::new(locks::Locks::default()))
            // Symlinks are followed (where they stay inside), not hidden.
            .hide_symlinks(false)
            .build_handler();
        Self {
            handler,
            uploads: Semaphore::new(UPLOADS),
            listings: Semaphore::new(LISTINGS),
        }
    }
}

/// A path below `/webdav`, decoded and checked: relative to `FILES_PATH`,
/// with no `..`, no empty or `.` segment, no encoded `/`, no NUL.
fn checked(raw: &str) -> Result<PathBuf, ApiError> {
    let bad = |why: &str| ApiError::bad_request(format!("the WebDAV path {why}"));
    let mut rel = PathBuf::new();
    for seg in raw.split('/') {
        let bytes: Vec<u8> = percent_encoding::percent_decode_str(seg).collect();
        match &bytes[..] {
            b"" | b"." => {}
            b".." => return Err(bad("has a `..` segment")),
            s if s.contains(&b'/') => return Err(bad("has an encoded `/` in a segment")),
            s if s.contains(&0) => return Err(bad("has a NUL byte")),
            s => rel.push(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(s)),
        }
    }
    Ok(rel)
}

/// The path part of a `Destination` header below `/webdav`, if it is one.
fn destination(value: &str) -> Option<&str> {
    let path = match value.split_once("://") {
        Some((_, rest)) => &rest[rest.find('/').unwrap_or(rest.len())..],
        None => value,
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    let below = path.strip_prefix(PREFIX)?;
    (below.is_empty() || below.starts_with('/')).then_some(below)
}

/// A `Destination` that is not a `/webdav/` path of this server: 502, as
/// RFC 4918 §9.8.5 answers a COPY or MOVE to another server.
fn not_here() -> Response {
    (
        StatusCode::BAD_GATEWAY,
        "the Destination is not a /webdav/ path of this server\n",
    )
        .into_response()
}

/// For a MOVE: a folder cannot go to another filesystem (a mount under
/// `corn/`) by a rename, and dav-server removes what is at the
/// destination before it tries; refused here first. (A file is copied
/// and removed, [`volume`].)
async fn same_filesystem(roots: &Arc<Roots>, from: &Path, to: &Path) -> Result<(), Response> {
    let (roots, from, to) = (roots.clone(), from.to_path_buf(), to.to_path_buf());
    let across = tokio::task::spawn_blocking(move || -> std::io::Result<bool> {
        let src = roots.parent(&from)?;
        let st = rustix::fs::statat(&src.fd, src.name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Directory {
            return Ok(false);
        }
        let dst = roots.parent(&to)?;
        Ok(rustix::fs::fstat(&dst.fd)?.st_dev != st.st_dev)
    })
    .await;
    match across {
        Ok(Ok(true)) => Err((
            StatusCode::BAD_GATEWAY,
            "a folder cannot be moved to another filesystem; copy it, then delete it\n",
        )
            .into_response()),
        // Missing paths and the like: dav-server answers them.
        _ => Ok(()),
    }
}

fn read_only() -> Response {
    ApiError::new(
        ErrorCode::ReadOnly,
        "this path is read-only: WebDAV writes go under /webdav/plugin/ and /webdav/corn/",
    )
    .into_response()
}

/// What a method needs of the request path to be allowed.
fn needs(method: &Method) -> Option<Area> {
    match method.as_str() {
        "PUT" | "PATCH" | "DELETE" | "MOVE" => Some(Area::Writable),
        "MKCOL" | "PROPPATCH" | "LOCK" => Some(Area::WritableRoot),
        _ => None,
    }
}

fn allowed(need: Area, rel: &Path) -> bool {
    matches!(
        (need, area(rel)),
        (_, Area::Writable) | (Area::WritableRoot, Area::WritableRoot)
    )
}

/// The methods WebDAV here answers; any other is a 405 with `Allow`.
const METHODS: &str =
    "GET, HEAD, PUT, PATCH, DELETE, MKCOL, COPY, MOVE, PROPFIND, PROPPATCH, OPTIONS, LOCK, UNLOCK";

/// `/webdav` and everything below it.
pub(crate) async fn serve(st: State, mut req: Request) -> Response {
    if !METHODS.split(", ").any(|m| m == req.method().as_str()) {
        let mut r = ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!("{} is not a WebDAV method here", req.method()),
        )
        .into_response();
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static(METHODS));
        return r;
    }
    let raw = req.uri().path().strip_prefix(PREFIX).unwrap_or("");
    let rel = match checked(raw) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let method = req.method().clone();
    if let Some(need) = needs(&method)
        && !allowed(need, &rel)
    {
        return read_only();
    }
    // COPY and MOVE: the Destination must name a writable path of this
    // server literally (`/webdav/...`, decoded and checked like the path).
    // dav-server reads the header more loosely (it resolves `..` and
    // merges slashes before it looks for the prefix) and, with Overwrite,
    // removes what is at the destination first: whatever it would read
    // differently is refused here, before it runs.
    let mut dest_rel = None;
    if (method.as_str() == "COPY" || method.as_str() == "MOVE")
        && let Some(v) = req.headers().get("destination")
    {
        let Some(below) = v.to_str().ok().and_then(destination) else {
            return not_here();
        };
        match checked(below) {
            Ok(d) if allowed(Area::Writable, &d) => dest_rel = Some(d),
            Ok(_) => return read_only(),
            Err(e) => return e.into_response(),
        }
    }
    // dav-server reads the body of every method but PUT and PATCH whole,
    // up to 64 KiB; a longer declared one is refused before it is waited
    // for.
    if !matches!(method.as_str(), "PUT" | "PATCH")
        && metacore::socket::body::declared_length(req.headers()).is_some_and(|n| n > DAV_BODY)
    {
        return ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("a {method} body is at most {DAV_BODY} bytes"),
        )
        .into_response();
    }
    if method.as_str() == "PROPFIND" && !finite_depth(req.headers()) {
        return infinite_depth();
    }
    // dav-server lets a litmus run walk a whole tree; nobody else may.
    req.headers_mut().remove("x-litmus");
    let Some(roots) = st.roots.get(&st.config).await else {
        return ApiError::unavailable("FILES_PATH is not there").into_response();
    };
    if method == Method::GET || method == Method::HEAD {
        match open_file(&roots, &rel, &method, req.headers()).await {
            Ok(Some((file, meta, ready))) => {
                return crate::send_file::send_with(
                    &method,
                    req.headers(),
                    file,
                    &meta,
                    crate::routes::files::content_type(&rel),
                    ready,
                )
                .await;
            }
            // A folder: dav-server answers.
            Ok(None) => {}
            Err(r) => return r,
        }
    }
    if method.as_str() == "MOVE"
        && let Some(dest) = &dest_rel
        && let Err(r) = same_filesystem(&roots, &rel, dest).await
    {
        return r;
    }
    let dav = &st.dav;
    // Uploads and copies write bytes; a listing holds a thread while the
    // client reads it. Each kind runs a bounded number at once.
    let slots = match method.as_str() {
        "PUT" | "PATCH" | "COPY" => Some((&dav.uploads, "uploads and copies are")),
        "PROPFIND" => Some((&dav.listings, "listings are")),
        _ => None,
    };
    let _turn = match slots {
        Some((sem, what)) => match tokio::time::timeout(SLOT_WAIT, sem.acquire()).await {
            Ok(Ok(p)) => Some(p),
            _ => {
                return ApiError::new(
                    ErrorCode::Overloaded,
                    format!("as many {what} running as apid takes; try again shortly"),
                )
                .into_response();
            }
        },
        None => None,
    };
    let ctx = Arc::new(volume::Ctx::new(roots));
    let resp = dav.handler.handle_guarded(req, ctx).await.map(Body::new);
    if method.as_str() == "PROPFIND" {
        resp.map(quote_etags)
    } else {
        resp
    }
}

/// The multistatus body with every `getetag` quoted, as RFC 4918 §15.6
/// has it (`"<tag>"`, the value of the `ETag` header); dav-server writes
/// the tag bare. Streamed: a chunk is held back only from a `<` whose tag
/// is not complete yet, or from a `getetag` whose end has not come.
fn quote_etags(body: Body) -> Body {
    use futures_util::StreamExt;
    let chunks = futures_util::stream::unfold(
        (body.into_data_stream(), Vec::<u8>::new(), false),
        |(mut inner, mut held, done)| async move {
            if done {
                return None;
            }
            match inner.next().await {
                Some(Ok(chunk)) => {
                    held.extend_from_slice(&chunk);
                    let cut = complete_up_to(&held);
                    let out = with_quoted_etags(&held[..cut]);
                    held.drain(..cut);
                    Some((Ok(bytes::Bytes::from(out)), (inner, held, false)))
                }
                Some(Err(e)) => Some((Err(e), (inner, held, true))),
                None => {
                    let out = with_quoted_etags(&held);
                    Some((Ok(bytes::Bytes::from(out)), (inner, Vec::new(), true)))
                }
            }
        },
    );
    Body::from_stream(chunks)
}

const ETAG_OPEN: &[u8] = b"<D:getetag>";
const ETAG_CLOSE: &[u8] = b"</D:getetag>";

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

/// How much of `buf` can be rewritten now.
fn complete_up_to(buf: &[u8]) -> usize {
    if let Some(open) = rfind(buf, ETAG_OPEN)
        && find(&buf[open..], ETAG_CLOSE).is_none()
    {
        return open;
    }
    match buf.iter().rposition(|&b| b == b'<') {
        Some(lt) if !buf[lt..].contains(&b'>') => lt,
        _ => buf.len(),
    }
}

fn with_quoted_etags(buf: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(buf.len() + 64);
    let mut rest = buf;
    while let Some(open) = find(rest, ETAG_OPEN) {
        let value_at = open + ETAG_OPEN.len();
        let Some(len) = find(&rest[value_at..], ETAG_CLOSE) else {
            break;
        };
        out.extend_from_slice(&rest[..value_at]);
        let value = &rest[value_at..value_at + len];
        if value.first() == Some(&b'"') || value.starts_with(b"W/") {
            out.extend_from_slice(value);
        } else {
            out.push(b'"');
            out.extend_from_slice(value);
            out.push(b'"');
        }
        rest = &rest[value_at + len..];
    }
    out.extend_from_slice(rest);
    out
}

/// The regular file at `rel`, open, with what a short GET will send of
/// it read ahead; `Ok(None)` for a folder.
async fn open_file(
    roots: &Arc<Roots>,
    rel: &Path,
    method: &Method,
    headers: &http::HeaderMap,
) -> Result<Option<(std::fs::File, std::fs::Metadata, Prefetched)>, Response> {
    let (roots, rel) = (roots.clone(), rel.to_path_buf());
    let (method, headers) = (method.clone(), headers.clone());
    let found = tokio::task::spawn_blocking(move || -> std::io::Result<_> {
        if rel.as_os_str().is_empty() {
            return Ok(None);
        }
        let p = roots.parent(&rel)?;
        let (fd, _) = roots.open_entry(&p)?;
        let file = std::fs::File::from(fd);
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Ok(None);
        }
        let ready = Prefetched::read(&method, &headers, &file, &meta);
        Ok(Some((file, meta, ready)))
    })
    .await;
    match found {
        Ok(Ok(f)) => Ok(f),
        // Missing, or refused (which looks missing).
        Ok(Err(e))
            if matches!(
                e.raw_os_error(),
                Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::ENAMETOOLONG)
            ) =>
        {
            Err(ApiError::not_found("nothing at this WebDAV path").into_response())
        }
        // Out of descriptors: the file is there, apid is busy.
        Ok(Err(e)) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
            Err(ApiError::new(
                ErrorCode::Overloaded,
                "apid has no descriptor free; try again",
            )
            .into_response())
        }
        Ok(Err(e)) => Err(ApiError::internal(format!("cannot open the file: {e}")).into_response()),
        Err(e) => Err(ApiError::internal(format!("opening failed: {e}")).into_response()),
    }
}

/// `Depth: 0` or `1`.
fn finite_depth(h: &http::HeaderMap) -> bool {
    h.get("depth")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|d| matches!(d.trim(), "0" | "1"))
}

fn infinite_depth() -> Response {
    let mut r = (
        StatusCode::FORBIDDEN,
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n\
         <D:error xmlns:D=\"DAV:\"><D:propfind-finite-depth/></D:error>\n",
    )
        .into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/xml; charset=utf-8"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_in_any_encoding_is_refused() {
        for bad in [
            "/plugin/../etc/passwd",
            "/plugin/%2e%2e/x",
            "/plugin/%2E%2E/x",
            "/plugin/a%2fb",
            "/plugin/a%2Fb",
            "/plugin/a%00b",
            "/..",
        ] {
            assert!(checked(bad).is_err(), "{bad}");
        }
        assert_eq!(
            checked("/plugin/a%20b/./c").unwrap(),
            Path::new("plugin/a b/c")
        );
        assert_eq!(checked("").unwrap(), Path::new(""));
        assert_eq!(checked("/").unwrap(), Path::new(""));
    }

    #[test]
    fn destinations_are_read_below_the_prefix() {
        assert_eq!(
            destination("http://h:1/webdav/plugin/a?x=1"),
            Some("/plugin/a")
        );
        assert_eq!(destination("/webdav/plugin/a"), Some("/plugin/a"));
        assert_eq!(destination("http://h/webdav"), Some(""));
        assert_eq!(destination("http://h/webdavx/a"), None);
        assert_eq!(destination("http://h/other/a"), None);
    }

    #[test]
    fn etags_are_quoted_whatever_the_chunks() {
        let xml: &[u8] = b"<D:response><D:getetag>1-2-3</D:getetag><x/><D:getetag>\"q\"</D:getetag></D:response>";
        let want: &[u8] = b"<D:response><D:getetag>\"1-2-3\"</D:getetag><x/><D:getetag>\"q\"</D:getetag></D:response>";
        assert_eq!(with_quoted_etags(xml), want);
        // Every split into two chunks gives the same output.
        for at in 0..=xml.len() {
            let mut held = xml[..at].to_vec();
            let cut = complete_up_to(&held);
            let mut out = with_quoted_etags(&held[..cut]);
            held.drain(..cut);
            held.extend_from_slice(&xml[at..]);
            let cut = complete_up_to(&held);
            out.extend(with_quoted_etags(&held[..cut]));
            out.extend(with_quoted_etags(&held[cut..]));
            assert_eq!(out, want, "split at {at}");
        }
    }

    #[test]
    fn writes_need_the_writable_folders() {
        let w = |m: &str, p: &str| {
            allowed(
                needs(&Method::from_bytes(m.as_bytes()).unwrap()).unwrap(),
                Path::new(p),
            )
        };
        assert!(w("PUT", "plugin/a"));
        assert!(!w("PUT", "plugin"));
        assert!(!w("PUT", "watch/a"));
        assert!(w("MKCOL", "plugin"));
        assert!(!w("MKCOL", "watch"));
        assert!(!w("DELETE", "corn"));
        assert!(w("DELETE", "corn/x"));
        assert!(needs(&Method::GET).is_none());
    }
}
