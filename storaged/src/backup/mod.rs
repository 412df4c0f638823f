//! Online backup (`POST /backup`, `meta-core backup <file>`): a
//! consistent copy of the live database, written by storaged, which owns
//! the file, while writes go on. [`target`] checks where it may go,
//! [`copy`] makes it; this module holds the one backup under way at a time
//! and maps what can fail to what the caller is told.

mod copy;
mod target;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use metacore::api::storaged::{BackupDone, BackupRequest};
use metacore::error::{ApiError, ErrorCode};
use metacore::shutdown::Shutdown;
use tokio::sync::Semaphore;

pub(crate) use copy::Stop;

/// What a backup can fail with. Only [`BackupError::Refused`] is the
/// caller's doing; the others are logged in full and told in short.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BackupError {
    /// The request is refused as it is (a bad target, one under way).
    #[error(transparent)]
    Refused(#[from] ApiError),
    #[error("the backup was abandoned: {0:?}")]
    Stopped(Stop),
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot {what}: {source}")]
    Sqlite {
        what: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    /// The copy was made but does not check out; it was removed.
    #[error("the copy failed its check: {0}")]
    Check(String),
}

impl BackupError {
    /// What the caller is told: never a path of storaged's own.
    pub(crate) fn to_api(&self) -> ApiError {
        let full = || {
            ApiError::new(
                ErrorCode::InsufficientStorage,
                "the backup's volume is full: nothing was left behind; free space there and retry",
            )
        };
        match self {
            BackupError::Refused(e) => e.clone(),
            BackupError::Stopped(_) => ApiError::unavailable(
                "storaged is stopping: the backup was abandoned and nothing was left behind; \
                 retry once it is back",
            ),
            BackupError::Io { source, .. } if is_full(source) => full(),
            BackupError::Sqlite { source, .. } if crate::error::is_disk_full(source) => full(),
            BackupError::Io { what, source, .. }
                if matches!(
                    rustix::io::Errno::from_io_error(source),
                    Some(
                        rustix::io::Errno::ACCESS
                            | rustix::io::Errno::PERM
                            | rustix::io::Errno::ROFS
                    )
                ) =>
            {
                ApiError::bad_request(format!(
                    "storaged may not write there (cannot {what} the file: {}); \
                     choose a folder storaged's user can write to",
                    std::io::Error::from(source.kind())
                ))
            }
            BackupError::Check(_) => {
                ApiError::internal("the copy failed its check and was removed (see storaged's log)")
            }
            _ => ApiError::internal(
                "the backup failed and nothing was left behind (see storaged's log)",
            ),
        }
    }
}

/// No room, or over quota.
fn is_full(e: &std::io::Error) -> bool {
    matches!(
        rustix::io::Errno::from_io_error(e),
        Some(rustix::io::Errno::NOSPC | rustix::io::Errno::DQUOT)
    )
}

/// The backups of one storaged: where the database and the run folder
/// are, and whose turn it is.
#[derive(Debug)]
pub(crate) struct Backups {
    db: PathBuf,
    run_dir: PathBuf,
    /// One permit: the turn of the backup under way. Taken without
    /// waiting (a second backup meanwhile is a 409) and given back when
    /// the copy has ended, not when its caller stops waiting.
    turn: Arc<Semaphore>,
}

/// Set when the request's future is dropped (the caller went away), so
/// that the copy stops at its next step.
struct Abandon(Arc<AtomicBool>);

impl Drop for Abandon {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl Backups {
    pub(crate) fn new(db: PathBuf, run_dir: PathBuf) -> Self {
        Self {
            db,
            run_dir,
            turn: Arc::new(Semaphore::new(1)),
        }
    }

    /// Copies the live database to `req.path`; abandoned (and its file
    /// removed) when `shutdown` fires or the caller goes away.
    pub(crate) async fn take(
        &self,
        req: BackupRequest,
        shutdown: Shutdown,
    ) -> Result<BackupDone, BackupError> {
        let started = Instant::now();
        let (db, run_dir) = (self.db.clone(), self.run_dir.clone());
        let path = req.path.clone();
        let target = tokio::task::spawn_blocking(move || target::check(&path, &db, &run_dir))
            .await
            .map_err(|_| ApiError::internal("the target check panicked"))??;
        let turn = self.turn.clone().try_acquire_owned().map_err(|_| {
            ApiError::new(
                ErrorCode::Conflict,
                "a backup is under way; retry when it has finished",
            )
        })?;
        let abandoned = Arc::new(AtomicBool::new(false));
        let _abandon = Abandon(abandoned.clone());
        let db = self.db.clone();
        tracing::info!(target = %target.path.display(), "backup started");
        let job = target.clone();
        let copied = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            let stop = || {
                if shutdown.is_triggered() {
                    Some(Stop::Shutdown)
                } else if abandoned.load(Ordering::Relaxed) {
                    Some(Stop::Abandoned)
                } else {
                    None
                }
            };
            copy::copy(&db, &job, &stop)
        })
        .await
        .map_err(|_| ApiError::internal("the backup panicked (see storaged's log)"))?;
        let elapsed_ms = started.elapsed().as_millis() as u64;
        match copied {
            Ok(c) => {
                tracing::info!(target = %target.path.display(), rows = c.rows, bytes = c.bytes, elapsed_ms, "backup written");
                Ok(BackupDone {
                    path: target.path,
                    rows: c.rows,
                    bytes: c.bytes,
                    elapsed_ms,
                })
            }
            Err(e) => {
                tracing::warn!(target = %target.path.display(), error = %e, "backup failed; its partial file is removed");
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_backup_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("meta-core.db");
        rusqlite::Connection::open(&db)
            .unwrap()
            .execute_batch("CREATE TABLE kv(k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID;")
            .unwrap();
        let backups = Backups::new(db, dir.path().join("run"));
        let req = BackupRequest {
            path: dir.path().join("b.db"),
        };
        let under_way = backups.turn.clone().try_acquire_owned().unwrap();
        let e = backups
            .take(req.clone(), Shutdown::never())
            .await
            .unwrap_err()
            .to_api();
        assert_eq!(e.code, ErrorCode::Conflict, "{e:?}");
        assert!(
            e.code.retryable() && e.message.contains("under way"),
            "{e:?}"
        );
        assert!(!req.path.exists(), "nothing written");
        drop(under_way);
        let done = backups.take(req.clone(), Shutdown::never()).await.unwrap();
        assert_eq!((done.path, done.rows), (req.path, 0));
        // A refused target is told as it is, before the turn is asked.
        let e = backups
            .take(
                BackupRequest {
                    path: "rel.db".into(),
                },
                Shutdown::never(),
            )
            .await
            .unwrap_err()
            .to_api();
        assert_eq!(e.code, ErrorCode::BadRequest);
    }
}
