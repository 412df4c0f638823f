//! `StoreError`: everything the engine can fail with. Rejections carry the
//! client-facing [`ApiError`] as they are; database and I/O failures are
//! logged where they happen and reach clients only as `internal`.

use std::path::PathBuf;

use metacore::error::{ApiError, ErrorCode};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The request is refused (bad input, unknown record, ...).
    #[error(transparent)]
    Rejected(#[from] ApiError),
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Another process holds the database's lock.
    #[error(
        "database {path} is already open in another storaged{holder}; refusing to start a second writer"
    )]
    Locked { path: PathBuf, holder: String },
    /// The schema gate refused to boot.
    #[error("{0}")]
    SchemaGate(String),
    /// A row that storaged wrote does not read back as it should.
    #[error("corrupt row {key:?}: {detail}")]
    Corrupt { key: String, detail: String },
    /// The commit of the write's group failed; nothing of it was applied.
    #[error("commit failed, nothing was written: {0}")]
    Commit(String),
    /// The writer is gone (shutting down) or panicked on this write.
    #[error("the store is not accepting writes: {0}")]
    Unavailable(&'static str),
}

pub(crate) type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Set while the last write failed for want of space on the database's
/// volume, cleared by the next commit that succeeds: `/health` says
/// `degraded` meanwhile.
pub(crate) static DISK_FULL: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// What a write that found the volume full is told. The state is logged
/// when it begins, not for every refused write.
fn disk_full() -> ApiError {
    if !DISK_FULL.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::warn!("the database's volume is full: writes are refused until space is freed");
    }
    ApiError::new(
        ErrorCode::InsufficientStorage,
        "the database's volume is full: nothing was written; free space and retry",
    )
}

/// SQLite's "database or disk is full".
pub(crate) fn is_disk_full(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
}

impl StoreError {
    /// What a client is told.
    pub fn to_api(&self) -> ApiError {
        match self {
            StoreError::Rejected(e) => e.clone(),
            StoreError::Unavailable(why) => ApiError::new(ErrorCode::StorageUnavailable, *why),
            StoreError::Sqlite(e) if is_disk_full(e) => disk_full(),
            StoreError::Commit(why) if why.contains("database or disk is full") => disk_full(),
            StoreError::Commit(_) => {
                ApiError::new(ErrorCode::StorageUnavailable, "commit failed; retry")
            }
            _ => ApiError::internal("storage error (see storaged's log)"),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let api = e.to_api();
        if api.code == ErrorCode::InsufficientStorage {
            tracing::debug!(error = %e, "store operation failed");
        } else if !matches!(e, StoreError::Rejected(_)) {
            tracing::error!(error = %e, "store operation failed");
        }
        api
    }
}

/// Shorthand for a 400 rejection.
pub(crate) fn schema(msg: impl Into<String>) -> StoreError {
    StoreError::Rejected(ApiError::schema(msg))
}
