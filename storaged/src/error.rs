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
    Sqlite(rusqlite::Error),
    /// SQLite found no room on the database's volume: nothing was written.
    #[error("the database's volume is full")]
    DiskFull,
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
    /// The write's group did not commit (for a reason other than space);
    /// nothing of it was applied.
    #[error("commit failed, nothing was written: {0}")]
    Commit(GroupFailure),
    /// The writer is gone (shutting down) or panicked on this write.
    #[error("the store is not accepting writes: {0}")]
    Unavailable(&'static str),
}

pub(crate) type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Why a write group did not commit: each of its writes is told, and
/// nothing of it is applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupFailure {
    /// Refused before it ran: a checkpoint cannot copy the WAL back into
    /// the database for want of space (see `engine::space`).
    #[error("the WAL cannot be copied into the database until space is freed")]
    Stuck,
    /// The volume filled up at this step.
    #[error("the database's volume is full (at {0})")]
    DiskFull(Step),
    /// Refused for a fault of the database's files (`engine::faults`),
    /// before it was queued or before its COMMIT; each write is told the
    /// reason.
    #[error("refused: {0}")]
    Refused(String),
    /// SQLite found the database damaged at this step.
    #[error("cannot {0}, the database is damaged: {1}")]
    Damaged(Step, String),
    /// The volume failed a read or a write at this step.
    #[error("cannot {0}, the volume failed: {1}")]
    Io(Step, String),
    /// SQLite failed at this step for another reason.
    #[error("cannot {0}: {1}")]
    Failed(Step, String),
    /// A test's failure point.
    #[cfg(test)]
    #[error("failure point {0}")]
    FailPoint(&'static str),
}

/// Where in a group a [`GroupFailure`] happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Begin,
    Savepoint,
    Derive,
    UndoDerive,
    MarkStale,
    CountRoots,
    StreamMarks,
    Commit,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::Begin => "begin the group's transaction",
            Step::Savepoint => "open or close a write's savepoint",
            Step::Derive => "update the search index and the schema counters",
            Step::UndoDerive => "undo a failed index update",
            Step::MarkStale => "mark the search index stale",
            Step::CountRoots => "count roots",
            Step::StreamMarks => "record stream marks",
            Step::Commit => "COMMIT",
        })
    }
}

impl GroupFailure {
    /// The failure of `step` with `error`.
    pub(crate) fn at(step: Step, error: impl Into<StoreError>) -> Self {
        match error.into() {
            StoreError::DiskFull => GroupFailure::DiskFull(step),
            StoreError::Sqlite(e) if is_damage(&e) => GroupFailure::Damaged(step, e.to_string()),
            StoreError::Sqlite(e) if is_io_error(&e) => GroupFailure::Io(step, e.to_string()),
            other => GroupFailure::Failed(step, other.to_string()),
        }
    }

    /// For want of space on the database's volume.
    pub(crate) fn is_disk_full(&self) -> bool {
        matches!(self, GroupFailure::Stuck | GroupFailure::DiskFull(_))
    }

    /// What each write of the group is told.
    pub(crate) fn to_error(&self) -> StoreError {
        if self.is_disk_full() {
            StoreError::DiskFull
        } else {
            StoreError::Commit(self.clone())
        }
    }
}

/// SQLite's "database or disk is full" is [`StoreError::DiskFull`]; every
/// other SQLite error is [`StoreError::Sqlite`].
impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        if is_disk_full(&e) {
            StoreError::DiskFull
        } else {
            StoreError::Sqlite(e)
        }
    }
}

/// SQLite's "disk I/O error", in any of its extended forms but running
/// out of memory: the volume failed (`engine::faults`).
pub(crate) fn is_io_error(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::SystemIoFailure)
        && !matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.extended_code == rusqlite::ffi::SQLITE_IOERR_NOMEM)
}

/// SQLite's "database disk image is malformed" and "file is not a
/// database".
pub(crate) fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
    )
}

/// What a write is told when SQLite found the database damaged (`what`).
pub(crate) fn damaged(what: &str) -> String {
    format!(
        "the database is damaged ({what}): writes are refused, reads go on; \
         restore it from a backup (docs/operations.md)"
    )
}

/// What a write is told when the volume failed (`what`).
pub(crate) fn volume_failed(what: &str) -> String {
    format!(
        "the database's volume failed a read or a write ({what}): writes are refused, \
         and storaged restarts to recover from what is on the disk"
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
            StoreError::DiskFull => ApiError::new(
                ErrorCode::InsufficientStorage,
                "the database's volume is full: nothing was written; free space and retry",
            ),
            StoreError::Commit(GroupFailure::Refused(why)) => {
                ApiError::new(ErrorCode::StorageUnavailable, why.clone())
            }
            StoreError::Commit(GroupFailure::Damaged(_, what)) => {
                ApiError::new(ErrorCode::StorageUnavailable, damaged(what))
            }
            StoreError::Commit(GroupFailure::Io(_, what)) => {
                ApiError::new(ErrorCode::StorageUnavailable, volume_failed(what))
            }
            StoreError::Commit(_) => {
                ApiError::new(ErrorCode::StorageUnavailable, "commit failed; retry")
            }
            StoreError::Sqlite(e) if is_damage(e) => {
                ApiError::internal("the database is damaged (see storaged's log)")
            }
            StoreError::Sqlite(e) if is_io_error(e) => {
                ApiError::internal("the database's volume failed (see storaged's log)")
            }
            _ => ApiError::internal("storage error (see storaged's log)"),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let api = e.to_api();
        // A full volume and a fault of the files are logged once where
        // they begin (`engine::space`, `engine::faults`), not per write.
        let fault_told = match &e {
            StoreError::Commit(GroupFailure::Refused(_)) => true,
            StoreError::Sqlite(s) => is_damage(s) || is_io_error(s),
            _ => false,
        };
        if api.code == ErrorCode::InsufficientStorage || fault_told {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite(code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None)
    }

    #[test]
    fn a_full_volume_is_a_variant_and_a_507_wherever_sqlite_says_so() {
        assert!(matches!(
            StoreError::from(sqlite(rusqlite::ffi::SQLITE_FULL)),
            StoreError::DiskFull
        ));
        assert!(matches!(
            StoreError::from(sqlite(rusqlite::ffi::SQLITE_IOERR)),
            StoreError::Sqlite(_)
        ));
        let full = GroupFailure::at(Step::Commit, sqlite(rusqlite::ffi::SQLITE_FULL));
        assert_eq!(full, GroupFailure::DiskFull(Step::Commit));
        for f in [full, GroupFailure::Stuck] {
            assert!(f.is_disk_full());
            let e = f.to_error();
            assert!(matches!(e, StoreError::DiskFull), "{e}");
            assert_eq!(e.to_api().code, ErrorCode::InsufficientStorage);
        }
        let other = GroupFailure::at(Step::Begin, sqlite(rusqlite::ffi::SQLITE_BUSY));
        assert!(
            matches!(other, GroupFailure::Failed(Step::Begin, _)),
            "{other}"
        );
        assert!(!other.is_disk_full());
        let e = other.to_error();
        assert!(matches!(e, StoreError::Commit(_)), "{e}");
        assert_eq!(e.to_api().code, ErrorCode::StorageUnavailable);
        assert!(
            e.to_string().contains("begin the group's transaction"),
            "{e}"
        );
    }
}
