//! The wire types of the watcher's routes on storaged's socket
//! (`/files/...`): what watcherd observed of the files under `FILES_PATH`,
//! applied with the record change and the `file:events` entry in one
//! transaction; the `seen:` rows it keeps, read back at start; a reset;
//! and the repair of records whose `filePath` names no live file.

use serde::{Deserialize, Serialize};

use crate::checked::{FilePath, RelPath};
use crate::cid::Cid;
use crate::rid::Rid;
use crate::stream::StreamId;

/// Most observations one `POST /files/observe` carries.
pub const MAX_OBSERVATIONS: usize = 1024;

/// Key prefix of the watcher's rows: `seen:<path relative to FILES_PATH>`.
pub const SEEN_PREFIX: &str = "seen:";

/// What a file looked like when it was announced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileState {
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    pub midhash: Cid,
}

/// One thing watcherd saw, settled (after the debounce).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Observation {
    /// A file is at `path` with this content: `add` when the path was not
    /// seen before, `change` when it was with another state, nothing when
    /// it was with this one.
    Present { path: RelPath, file: FileState },
    /// The file seen at `path` is gone: `delete`; its record is kept.
    Gone { path: RelPath },
    /// The content seen at `from` left it and is at `path` now: `rename`;
    /// the record's `filePath` (or the duplicate path) follows.
    Moved {
        from: RelPath,
        path: RelPath,
        file: FileState,
    },
}

impl Observation {
    pub fn path(&self) -> &RelPath {
        match self {
            Observation::Present { path, .. }
            | Observation::Gone { path }
            | Observation::Moved { path, .. } => path,
        }
    }
}

/// `POST /files/observe`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObserveBody {
    /// `FILES_PATH`, absolute: a record's `filePath` and its duplicate
    /// paths are `<root>/<path>`.
    pub root: FilePath,
    pub observations: Vec<Observation>,
}

/// What one observation did, in the order they were sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObserveOutcome {
    /// The record the path belongs to now (absent after a `Gone`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rid: Option<Rid>,
    /// The record was minted by this observation.
    #[serde(default)]
    pub minted: bool,
    /// The type of the `file:events` entry appended (none when nothing
    /// changed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<StreamId>,
    /// Why this observation was refused; the others are unaffected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    pub outcomes: Vec<ObserveOutcome>,
}

/// A `seen:` row: a path and what was announced of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SeenRow {
    pub path: RelPath,
    pub file: FileState,
    pub rid: Rid,
}

/// `GET /files/seen?after=&limit=`, in path order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeenQuery {
    pub after: Option<String>,
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeenPage {
    pub rows: Vec<SeenRow>,
    /// Pass as `after` for the next page; absent on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// `POST /files/reset`: forget what was seen under `dirs` (relative
/// folders; an empty list or `""` is all of `FILES_PATH`), clear
/// `file:events` and append its first entry, `reset` with `watcherId`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResetBody {
    pub dirs: Vec<String>,
    pub watcher_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResetDone {
    /// `seen:` rows removed.
    pub forgotten: u64,
    /// The `reset` entry.
    pub id: StreamId,
}

/// Most records one `POST /files/repair` looks at: a page is one write
/// transaction, so a store with many duplicates does not hold the writer
/// for long.
pub const REPAIR_PAGE: usize = 256;

/// `POST /files/repair`: one page of the repair a rescan runs. Each record
/// with duplicates whose `filePath` names no live file of it (none, or a
/// path under `root` without its `seen:` row) gets its first live
/// duplicate with one of its midhashes as `filePath`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepairBody {
    /// `FILES_PATH`, absolute.
    pub root: FilePath,
    /// The page starts after this record (the last page's `next`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Rid>,
}

/// What one page of the repair did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepairDone {
    /// Records with duplicates looked at.
    pub records: u64,
    /// Of them, those whose `filePath` a live duplicate took over.
    pub promoted: u64,
    /// Pass as `after` for the next page; absent on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Rid>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_read_as_the_watcher_sends_them() {
        let cid = "bagacbabaec7v3fu2ygzh3e2sybg3fbzmisry2hbtpmck6vx3yftea6vzq35r4";
        let json = format!(
            r#"{{"kind":"moved","from":"watch/a","path":"sorted/a",
                "file":{{"size":11,"mtimeNs":-5,"midhash":"{cid}"}}}}"#
        );
        let o: Observation = serde_json::from_str(&json).unwrap();
        assert_eq!(o.path().as_str(), "sorted/a");
        assert!(matches!(o, Observation::Moved { ref from, .. } if from.as_str() == "watch/a"));
        for bad in [
            r#"{"kind":"gone","path":"../x"}"#,
            r#"{"kind":"gone","path":"/abs"}"#,
            r#"{"kind":"vanished","path":"a"}"#,
        ] {
            assert!(serde_json::from_str::<Observation>(bad).is_err(), "{bad}");
        }
    }
}
