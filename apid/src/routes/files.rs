//! File bytes by content ID: `GET|HEAD /file/{cid}` streams the file a CID
//! resolves to (ranges, validators: [`crate::send_file`]),
//! `GET /api/file/{cid}/info` says whether it is there, and
//! `POST /file/cid` computes the whole-file SHA-256 CID of a path.
//!
//! Every path is confined to `FILES_PATH`: a record's `filePath` is mapped
//! to disk without doubling the prefix ([`disk_path`]), then resolved
//! (symlinks followed) and refused unless it stays inside `FILES_PATH`.
//! What is refused is answered as if the file were not there: the answer
//! never says where a path led.

use std::path::Path;

use axum::Json;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use metacore::checked::RelPath;
use metacore::cid::Cid;
use metacore::error::{ApiError, ErrorCode};
use metacore::record::Target;
use metacore::socket::body::{JsonBody, JsonReply, PathParams};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::confine::open_file;
use crate::file_path::{self, disk_path, shown_path};
use crate::send_file::content_type;
use crate::state::State;

/// Whole-file hashes computed at once (each reads a file to its end).
static HASHING: Semaphore = Semaphore::const_new(2);

fn parse_cid(raw: &str) -> Result<Cid, ApiError> {
    Cid::parse(raw).map_err(|e| ApiError::schema(format!("{raw:?} is not a CID: {e}")))
}

/// The record of `cid`'s `filePath` as stored, and its file opened, if it
/// has one where [`Roots`] allow. `Ok(None)`: no usable file.
async fn file_of(
    st: &State,
    cid: &Cid,
) -> Result<Option<(String, std::fs::File, std::fs::Metadata)>, ApiError> {
    let target = Target::Cid(cid.clone());
    let fp = match st.store.get_field(&target, &file_path::field()).await {
        Ok(f) => f.value,
        Err(e) => {
            let e = ApiError::from(e);
            // The record exists without a filePath: no file.
            if e.code == ErrorCode::NotFound {
                return Ok(None);
            }
            return Err(e);
        }
    };
    let files = st.config.files_path.clone();
    let Some(roots) = st.roots.get(&st.config).await else {
        return Ok(None);
    };
    let found = tokio::task::spawn_blocking(move || {
        let p = disk_path(&files, &fp)?;
        let (f, m) = open_file(&roots, &p)?;
        Some((fp, f, m))
    })
    .await
    .map_err(|e| ApiError::internal(format!("resolving a path failed: {e}")))?;
    Ok(found)
}

fn gone(cid: &Cid) -> ApiError {
    ApiError::new(
        ErrorCode::UnknownCid,
        format!("the file of {cid} is not on disk"),
    )
}

/// `GET|HEAD /file/{cid}`. The content type follows the record's
/// `filePath` (the name clients know), not a symlink's target.
pub(super) async fn bytes(
    st: State,
    PathParams(raw): PathParams<String>,
    req: Request,
) -> Response {
    let cid = match parse_cid(&raw) {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let (fp, file, meta) = match file_of(&st, &cid).await {
        Ok(Some(found)) => found,
        Ok(None) => return gone(&cid).into_response(),
        Err(e) => return e.into_response(),
    };
    crate::send_file::send(
        req.method(),
        req.headers(),
        file,
        &meta,
        content_type(Path::new(&fp)),
    )
    .await
}

/// `GET /api/file/{cid}/info`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FileInfo {
    pub exists: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_path: Option<String>,
}

/// 200 for a known or unknown CID (`exists` says which), as the original;
/// 400 for what is no CID.
pub(super) async fn info(st: State, PathParams(raw): PathParams<String>) -> JsonReply<FileInfo> {
    let cid = parse_cid(&raw)?;
    let none = FileInfo {
        exists: false,
        content_type: None,
        size: None,
        file_path: None,
    };
    match file_of(&st, &cid).await {
        Ok(Some((file_path, _, meta))) => Ok(Json(FileInfo {
            exists: true,
            content_type: Some(content_type(Path::new(&file_path))),
            size: Some(meta.len()),
            file_path: shown_path(&st.config.files_path, &file_path),
        })),
        Ok(None) => Ok(Json(none)),
        Err(e) if e.code == ErrorCode::UnknownCid => Ok(Json(none)),
        Err(e) => Err(e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CidOfPath {
    path: String,
}

/// `POST /file/cid`.
#[derive(Debug, Serialize)]
pub(crate) struct PathCid {
    pub cid: String,
    pub path: String,
    pub size: u64,
}

/// The whole-file SHA-256 raw CID of a path relative to `FILES_PATH`.
pub(super) async fn cid_of_path(
    st: State,
    JsonBody(body): JsonBody<CidOfPath>,
) -> JsonReply<PathCid> {
    let rel = RelPath::new(body.path.trim_end_matches('/'))
        .map_err(|e| ApiError::bad_request(e.message))?;
    let files = st.config.files_path.clone();
    let roots = st
        .roots
        .get(&st.config)
        .await
        .ok_or_else(|| ApiError::unavailable("FILES_PATH is not there"))?;
    let shown = rel.to_string();
    // The checks first (a missing file or a folder is answered at once),
    // then a hashing slot, held by the hashing itself: a client that goes
    // away does not free it while its hash still runs. Both slots taken:
    // 503, try again (no queue to grow).
    let opened = tokio::task::spawn_blocking(move || -> Result<std::fs::File, ApiError> {
        let missing = || ApiError::not_found(format!("no file at {rel}"));
        let path = files.join(rel.as_str());
        if roots.confined(&path).is_some_and(|real| real.is_dir()) {
            return Err(ApiError::bad_request(format!(
                "{rel} is a folder, not a file"
            )));
        }
        open_file(&roots, &path).map(|(f, _)| f).ok_or_else(missing)
    })
    .await
    .map_err(|e| ApiError::internal(format!("opening failed: {e}")))??;
    let permit = HASHING.try_acquire().map_err(|_| {
        ApiError::new(
            ErrorCode::Overloaded,
            "two whole-file hashes are running; try again shortly",
        )
    })?;
    let outcome = tokio::task::spawn_blocking(move || -> Result<(Cid, u64), ApiError> {
        let _slot = permit;
        let mut f = opened;
        let mut h = Sha256::new();
        let size = std::io::copy(&mut f, &mut h)
            .map_err(|e| ApiError::internal(format!("cannot read the file: {e}")))?;
        Ok((Cid::from_digest(0x55, 0x12, &h.finalize()), size))
    })
    .await
    .map_err(|e| ApiError::internal(format!("hashing failed: {e}")))?;
    let (cid, size) = outcome?;
    Ok(Json(PathCid {
        cid: cid.to_string(),
        path: shown,
        size,
    }))
}
