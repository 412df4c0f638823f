//! What WebDAV answers before dav-server for reads: a GET or HEAD of a
//! file (by [`crate::send_file`], as `/file/{cid}` is), and a PROPFIND of
//! infinite depth (refused).

use std::path::Path;
use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, StatusCode, header};
use metacore::error::{ApiError, ErrorCode};

use crate::confine::Roots;
use crate::send_file::Prefetched;

/// The regular file at `rel`, open, with what a short GET will send of
/// it read ahead; `Ok(None)` for a folder.
pub(super) async fn open_file(
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
pub(super) fn finite_depth(h: &http::HeaderMap) -> bool {
    h.get("depth")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|d| matches!(d.trim(), "0" | "1"))
}

pub(super) fn infinite_depth() -> Response {
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
