//! The database's own lock: an exclusive `flock` on `<db>.lock` (std's
//! `File::try_lock`, which is `flock` on Linux), taken
//! before the database is opened and held for the life of the process, so a
//! second storaged on the same file refuses to start whatever started it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::{Result, StoreError};

/// Held while the process has the database open.
#[derive(Debug)]
pub(crate) struct DbLock {
    _file: File,
}

impl DbLock {
    /// Takes the lock without waiting, or says who holds it.
    pub(crate) fn acquire(lock_path: &Path, db_path: &Path) -> Result<Self> {
        let io = |what, source| StoreError::Io {
            what,
            path: lock_path.to_owned(),
            source,
        };
        if let Some(dir) = lock_path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io("create the directory of", e))?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(lock_path)
            .map_err(|e| io("open", e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let holder = if holder.is_empty() {
                    String::new()
                } else {
                    format!(" (pid {holder})")
                };
                return Err(StoreError::Locked {
                    path: db_path.to_owned(),
                    holder,
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io("lock", e)),
        }
        // Record our pid for the next one's error message.
        let _ = file.set_len(0);
        let _ = file.seek(SeekFrom::Start(0));
        let _ = writeln!(file, "{}", std::process::id());
        Ok(Self { _file: file })
    }
}
