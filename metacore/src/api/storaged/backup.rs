//! The wire types of `POST /backup` on storaged's socket: a consistent
//! copy of the live database, taken by storaged (the one process that
//! opens it) through SQLite's online backup API, written to a file the
//! caller names (`meta-core backup <file>`; `docs/operations.md`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `POST /backup`: where to write the copy. The path must be absolute
/// (storaged does not share the caller's current directory), in a folder
/// that exists, and neither the database nor one of its own files; a file
/// already there is replaced, atomically.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackupRequest {
    pub path: PathBuf,
}

/// The answer: the copy is in place, durable and checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupDone {
    /// Where the copy is (the request's path).
    pub path: PathBuf,
    /// Rows of the `kv` table in the copy, counted by reopening it.
    pub rows: u64,
    /// Size of the copy's file.
    pub bytes: u64,
    /// From the request to the copy renamed into place.
    pub elapsed_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_reads_as_documented() {
        let done = BackupDone {
            path: "/backups/m.db".into(),
            rows: 3,
            bytes: 8192,
            elapsed_ms: 12,
        };
        let json = serde_json::to_value(&done).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"path": "/backups/m.db", "rows": 3, "bytes": 8192, "elapsedMs": 12})
        );
        assert_eq!(serde_json::from_value::<BackupDone>(json).unwrap(), done);
    }
}
