//! WebDAV at `/webdav/` over `FILES_PATH` (crate `dav-server` for the
//! protocol, [`volume::Volume`] for the disk).
//!
//! Before a request reaches `dav-server` it is checked here:
//! - the path and a COPY or MOVE `Destination`, decoded: a `..`
//!   segment, an encoded `/` or a NUL is a 400, whatever the encoding; a
//!   `Destination` that is neither an absolute URI nor an absolute path
//!   is a 400 too; one that is not a `/webdav/` path of this server
//!   (another host, or not literally below `/webdav/`) is a 502 (RFC 4918
//!   §9.8.5), so dav-server, which reads it more loosely, never acts on a
//!   destination apid did not check ([`target`]);
//! - writes (PUT, PATCH, DELETE, MKCOL, PROPPATCH, LOCK, and MOVE's
//!   source, COPY's and MOVE's destination) only under `plugin/` and in
//!   the mounts under `corn/`, else 403 `read_only` (the filesystem
//!   checks again where a name really leads, [`volume`]); a write below a
//!   mount that is not mounted is a 503 ([`guard`]);
//! - `PROPFIND` with `Depth: infinity` (or none, which means infinity) is
//!   refused with 403 and `propfind-finite-depth` (RFC 4918 §9.1): a walk
//!   of the whole volume is not something one request may ask for; a
//!   `LOCK` of infinite depth on the root of a writable area (`plugin/`,
//!   `corn/`, `corn/<name>/`) is refused with 403: it would lock every
//!   other client out of it; so is one on any folder that holds entries
//!   ([`guard`]);
//! - ranged writes, the room a write needs, COPY's budget, and COPY or
//!   MOVE into itself ([`guard`]);
//! - uploads and copies run [`turns::UPLOADS`] at a time, listings
//!   [`turns::LISTINGS`], and one client runs at most a quarter of either
//!   (else 429 `too_many_requests` at once); one that waits longer than
//!   [`turns::SLOT_WAIT`] for a slot gets 503 `overloaded`; both with
//!   `Retry-After` ([`turns`]).
//!
//! `GET` and `HEAD` of a file are answered by [`crate::send_file`], as
//! `/file/{cid}` is: the same ranges, validators and streaming, and the
//! same ETag as PROPFIND's `getetag` ([`reads`]). Locks live in apid's
//! memory and end with it (a client re-locks after a restart), and when
//! their timeout passes; each client holds a bounded number ([`locks`]).

mod area;
mod budget;
mod disk;
mod etags;
mod file;
mod guard;
mod locks;
mod meta;
mod props;
mod reads;
pub(crate) mod shared;
mod span;
mod target;
mod temp;
mod turns;
mod volume;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, StatusCode, header};
use metacore::error::{ApiError, ErrorCode};

use crate::confine::Roots;
use crate::conn::Conn;
use crate::paths::DAV_PREFIX;
use crate::state::{AppState, State};
use area::{Area, area};
use target::{Ours, Refused, allowed, checked, destination, needs};
use volume::Purpose;

/// The longest body of a method other than PUT and PATCH (PROPFIND,
/// PROPPATCH, LOCK, ...): what dav-server reads whole.
pub(crate) const DAV_BODY: u64 = 64 * 1024;

/// A `Destination` that is not a `/webdav/` path of this server: 502, as
/// RFC 4918 §9.8.5 answers a COPY or MOVE to another server.
fn not_here() -> Response {
    (
        StatusCode::BAD_GATEWAY,
        "the Destination is not a /webdav/ path of this server\n",
    )
        .into_response()
}

fn read_only() -> Response {
    ApiError::new(
        ErrorCode::ReadOnly,
        "this path is read-only: WebDAV writes go under /webdav/plugin/ and into the mounts \
         under /webdav/corn/",
    )
    .into_response()
}

/// `Depth` is infinity (or absent, which means infinity for LOCK and COPY).
fn deep(h: &http::HeaderMap) -> bool {
    h.get("depth")
        .and_then(|v| v.to_str().ok())
        .is_none_or(|d| d.trim().eq_ignore_ascii_case("infinity"))
}

/// A LOCK that refreshes a lock: an `If` header and no body.
fn refreshes(h: &http::HeaderMap) -> bool {
    h.contains_key("if")
        && !h.contains_key(header::TRANSFER_ENCODING)
        && metacore::socket::body::declared_length(h).is_none_or(|n| n == 0)
}

/// The methods WebDAV here answers; any other is a 405 with `Allow`.
const METHODS: &str =
    "GET, HEAD, PUT, PATCH, DELETE, MKCOL, COPY, MOVE, PROPFIND, PROPPATCH, OPTIONS, LOCK, UNLOCK";

/// What the checks before dav-server found of a request they let through.
struct Screened {
    method: Method,
    /// The path, relative to `FILES_PATH`.
    rel: PathBuf,
    /// What the method needs of the path (a write, or nothing).
    need: Option<Area>,
    /// A COPY's or MOVE's destination, checked like the path.
    dest: Option<PathBuf>,
}

/// `/webdav` and everything below it.
pub(crate) async fn serve(st: State, mut req: Request) -> Response {
    let screened = match screen(&st, &req) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    // dav-server lets a litmus run walk a whole tree; nobody else may.
    req.headers_mut().remove("x-litmus");
    let Some(roots) = st.roots.get(&st.config).await else {
        return ApiError::unavailable("FILES_PATH is not there").into_response();
    };
    let Screened { method, rel, .. } = &screened;
    if method == Method::GET || method == Method::HEAD {
        match reads::open_file(&roots, rel, method, req.headers()).await {
            Ok(Some((file, meta, ready))) => {
                return crate::send_file::send_with(
                    method,
                    req.headers(),
                    file,
                    &meta,
                    crate::send_file::content_type(rel),
                    ready,
                )
                .await;
            }
            // A folder: dav-server answers.
            Ok(None) => {}
            Err(r) => return r,
        }
    }
    handle(&st, req, screened, roots).await
}

/// The checks a request passes before anything touches the disk: the
/// method, the path and the Destination, where writes may go, the body's
/// declared length, PROPFIND's and LOCK's depth. A refusal is boxed: it
/// is the rare way out, and the way through stays small.
fn screen(st: &AppState, req: &Request) -> Result<Screened, Box<Response>> {
    if !METHODS.split(", ").any(|m| m == req.method().as_str()) {
        let mut r = ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!("{} is not a WebDAV method here", req.method()),
        )
        .into_response();
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static(METHODS));
        return Err(Box::new(r));
    }
    let raw = req.uri().path().strip_prefix(DAV_PREFIX).unwrap_or("");
    let rel = checked(raw).map_err(|e| Box::new(e.into_response()))?;
    let method = req.method().clone();
    let need = needs(&method);
    if let Some(need) = need
        && !allowed(need, &rel)
    {
        return Err(Box::new(read_only()));
    }
    let dest = destination_of(st, req)?;
    if let Some(r) = refused_before_run(&method, &rel, req.headers()) {
        return Err(Box::new(r));
    }
    Ok(Screened {
        method,
        rel,
        need,
        dest,
    })
}

/// COPY and MOVE: the Destination must name a writable path of this
/// server literally (`/webdav/...`, decoded and checked like the path).
/// dav-server reads the header more loosely (it resolves `..` and merges
/// slashes before it looks for the prefix, and ignores the host) and, with
/// Overwrite, removes what is at the destination first: whatever it would
/// read differently is refused here, before it runs.
fn destination_of(st: &AppState, req: &Request) -> Result<Option<PathBuf>, Box<Response>> {
    let method = req.method().as_str();
    if method != "COPY" && method != "MOVE" {
        return Ok(None);
    }
    let Some(v) = req.headers().get("destination") else {
        return Ok(None);
    };
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    let ours = Ours::new(host, st.config.base_url.as_deref());
    let below = v
        .to_str()
        .map_err(|_| Refused::Malformed)
        .and_then(|v| destination(v, &ours));
    let below = match below {
        Ok(below) => below,
        Err(Refused::NotHere) => return Err(Box::new(not_here())),
        Err(Refused::Malformed) => {
            return Err(Box::new(
                ApiError::bad_request(
                    "the Destination is neither an absolute URI nor an absolute path \
                     (RFC 4918 §10.3)",
                )
                .into_response(),
            ));
        }
    };
    match checked(below) {
        Ok(d) if allowed(Area::Writable, &d) => Ok(Some(d)),
        Ok(_) => Err(Box::new(read_only())),
        Err(e) => Err(Box::new(e.into_response())),
    }
}

/// What is refused from the headers alone: a long body dav-server would
/// read whole, an infinite PROPFIND, a deep LOCK of a writable root.
fn refused_before_run(method: &Method, rel: &Path, headers: &http::HeaderMap) -> Option<Response> {
    // dav-server reads the body of every method but PUT and PATCH whole,
    // up to 64 KiB; a longer declared one is refused before it is waited
    // for.
    if !matches!(method.as_str(), "PUT" | "PATCH")
        && metacore::socket::body::declared_length(headers).is_some_and(|n| n > DAV_BODY)
    {
        return Some(
            ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("a {method} body is at most {DAV_BODY} bytes"),
            )
            .into_response(),
        );
    }
    if method.as_str() == "PROPFIND" && !reads::finite_depth(headers) {
        return Some(reads::infinite_depth());
    }
    if method.as_str() == "LOCK"
        && area(rel) == Area::WritableRoot
        && deep(headers)
        && !refreshes(headers)
    {
        return Some(
            ApiError::new(
                ErrorCode::ReadOnly,
                "a LOCK of Depth: infinity on the root of a writable folder (plugin/, corn/, \
                 corn/<mount>/) would lock every other client out of it: lock what you write \
                 (a file, a folder below it) or send Depth: 0",
            )
            .into_response(),
        );
    }
    None
}

/// A screened request run by dav-server over [`volume::Volume`], inside its turn
/// and after the checks on the disk ([`guard`]).
async fn handle(st: &AppState, req: Request, s: Screened, roots: Arc<Roots>) -> Response {
    let dav = &st.dav;
    let client = Conn::of(&req).map(|c| c.client);
    let method = s.method;
    // Uploads and copies write bytes; a listing holds a thread while the
    // client reads it. Each kind runs a bounded number at once, and a
    // bounded share of them per client.
    let turn = match dav.turns.take(method.as_str(), client).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let deep_lock = method.as_str() == "LOCK" && deep(req.headers()) && !refreshes(req.headers());
    let asked = guard::Asked {
        method: method.clone(),
        rel: s.rel.clone(),
        dest: s.dest,
        span: matches!(method.as_str(), "PUT" | "PATCH")
            .then(|| span::of(method.as_str(), req.headers()))
            .flatten(),
        deep: deep(req.headers()),
        writes_path: s.need.is_some(),
        deep_lock,
        copy_max: st.config.dav_copy_max_bytes,
        copy_reserve: st.config.dav_copy_reserve_bytes,
    };
    let budget = match guard::check(&roots, &dav.copies, asked).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let purpose = match (method.as_str(), budget) {
        ("COPY", Some(budget)) => Purpose::Copy {
            budget,
            source: s.rel,
        },
        ("LOCK", _) => Purpose::Lock,
        _ => Purpose::Other,
    };
    let locks = dav
        .locks
        .for_request(client, locks::asked_timeout(req.headers()));
    let handler = dav
        .config
        .clone()
        .locksystem(Box::new(locks.clone()))
        .build_handler();
    let ctx = Arc::new(volume::Ctx::new(roots, purpose));
    let resp = handler.handle_guarded(req, ctx).await.map(Body::new);
    if locks.refused() == Some(locks::Refusal::ClientFull) {
        return client_full(client);
    }
    if method.as_str() == "PROPFIND" {
        // The listing runs as its body is read: the turn goes with it.
        resp.map(|body| {
            let body = etags::quote_etags(body);
            match turn {
                Some(t) => t.hold_by(body),
                None => body,
            }
        })
    } else {
        resp
    }
}

/// A LOCK refused because its client holds as many locks as one may.
fn client_full(client: Option<crate::conn::Client>) -> Response {
    if let Some(c) = client {
        tracing::info!(client = %c, "webdav: a client holds as many locks as one may");
    }
    ApiError::new(
        ErrorCode::TooManyRequests,
        format!(
            "this client holds {} WebDAV locks, as many as one client may; \
             unlock some, or wait for their timeout",
            locks::MAX_LOCKS_PER_CLIENT
        ),
    )
    .into_response()
}
