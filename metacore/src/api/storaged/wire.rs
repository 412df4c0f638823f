//! The request and response types of every route of storaged's socket
//! (listed in `docs/storaged-api.md`).

use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

use crate::checked::FilePath;
use crate::cid::Cid;
use crate::record::Fields;
use crate::rid::Rid;
use crate::stream::{Entry, EntryFields, StreamId};

/// Largest request body storaged's socket accepts (a 40-field record is a
/// few KiB; apid enforces its public limits before calling).
pub const MAX_BODY: usize = 16 * 1024 * 1024;

/// Largest page any listing returns.
pub const MAX_PAGE: u32 = 10_000;

/// `PUT` / `PATCH /records/{hash}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldsBody {
    pub fields: Fields,
}

/// The answer to a record write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteResult {
    pub rid: Rid,
    /// The write made the record (a new RID or an unregistered CID).
    pub created: bool,
    /// Rows of the record that changed (set to a new value or deleted).
    pub changed: u64,
}

/// `GET /records/{hash}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordFields {
    pub rid: Rid,
    pub fields: Fields,
}

/// `GET /records/{hash}/document`: the record with its CIDs hoisted, the
/// canonical CID derived by rank, and its duplicate paths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Document {
    pub rid: Rid,
    pub fields: Fields,
    pub cids: Vec<String>,
    pub canonical_cid: Option<String>,
    pub duplicates: Vec<String>,
}

/// `DELETE /records/{hash}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deleted {
    pub rid: Rid,
    /// The record's own keys removed (`file:<rid>/<field>`), as the
    /// original counted them; its aliases, duplicates and index entry go
    /// too, uncounted.
    pub deleted: u64,
}

/// An optional query parameter given empty (`?after=`) is absent.
fn empty_is_none<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: std::fmt::Display,
{
    match Option::<String>::deserialize(d)? {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => s.parse().map(Some).map_err(serde::de::Error::custom),
    }
}

/// `GET /records?after=&offset=&limit=`: roots in RID order, strictly
/// after `after`, skipping the first `offset` of those.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageQuery {
    #[serde(default, deserialize_with = "empty_is_none")]
    pub after: Option<Rid>,
    pub offset: Option<u64>,
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootPage {
    pub rids: Vec<Rid>,
    /// Pass as `after` for the next page; absent on the last page.
    pub next: Option<Rid>,
}

/// `GET /records/fields?names=a,b&after=&offset=&limit=`: chosen fields
/// of a page of roots (the page of [`PageQuery`]), for listings that need a
/// few fields of every record. storaged decodes it as [`NamesQuery`] and
/// [`PageQuery`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FieldsPageQuery {
    /// Comma-separated field names (at most [`MAX_FIELDS_PER_PAGE`]).
    pub names: String,
    #[serde(flatten)]
    pub page: PageQuery,
}

/// The `names` of a [`FieldsPageQuery`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct NamesQuery {
    pub names: String,
}

/// Most field names one `GET /records/fields` may ask for.
pub const MAX_FIELDS_PER_PAGE: usize = 32;

/// One root of a [`FieldsPage`]: the asked fields it has (absent ones are
/// left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootFields {
    pub rid: Rid,
    pub fields: Fields,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldsPage {
    pub rows: Vec<RootFields>,
    /// Pass as `after` for the next page; absent on the last page.
    pub next: Option<Rid>,
}

/// `PUT /records/{hash}/fields/{field}` and `POST .../set-add/{field}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueBody {
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldValue {
    pub rid: Rid,
    pub field: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldWrite {
    pub rid: Rid,
    pub field: String,
    pub created: bool,
    pub changed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldDelete {
    pub rid: Rid,
    pub field: String,
    pub existed: bool,
}

/// `POST /records/{hash}/set-add/{field}`: the field holds `a|b|c`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetAdd {
    pub rid: Rid,
    pub field: String,
    pub added: bool,
}

/// `POST /records/{hash}/aliases`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AliasBody {
    pub cid: Cid,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AliasResult {
    pub rid: Rid,
    pub cid: Cid,
    /// Who owns `cid:<cid>` after the write: the first writer keeps it.
    pub owner: Rid,
}

/// `POST /records/{hash}/duplicates`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DuplicateBody {
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DuplicateResult {
    pub rid: Rid,
    pub path: String,
    pub added: bool,
}

/// `POST /mint`: a new record for a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MintBody {
    pub file_path: FilePath,
    pub size_byte: u64,
    pub mtime_nano: u64,
    #[serde(default)]
    pub cids: Vec<Cid>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RidBody {
    pub rid: Rid,
}

/// `GET /kv/value?key=` and `DELETE /kv/value?key=`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyQuery {
    pub key: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvValue {
    pub key: String,
    pub value: Option<String>,
}

/// `PUT /kv/value`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvPut {
    pub key: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvWrite {
    pub key: String,
    pub changed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvDeleted {
    pub key: String,
    pub existed: bool,
}

/// `GET /kv/range`: rows with `start <= k < end` (or under `prefix`),
/// strictly after `after`, in key order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RangeQuery {
    pub prefix: Option<String>,
    pub start: Option<String>,
    pub end: Option<String>,
    pub after: Option<String>,
    pub limit: Option<u32>,
    #[serde(default)]
    pub keys_only: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvRow {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvRange {
    pub rows: Vec<KvRow>,
    /// Pass as `after` for the next page; absent on the last page.
    pub next: Option<String>,
}

/// `POST /streams/{stream}/entries`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendBody {
    pub fields: EntryFields,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Appended {
    pub id: StreamId,
}

/// `GET /streams/{stream}/entries?after=&limit=`: entries strictly after
/// `after` (from the oldest when absent).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntriesQuery {
    pub after: Option<StreamId>,
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entries {
    pub entries: Vec<Entry>,
    /// The oldest entry kept when the page was read: a cursor older than
    /// it has had entries after it trimmed away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<StreamId>,
}

/// `GET /streams/{stream}/bounds`: the oldest entry kept and the head, two
/// index lookups (`info` also counts the entries, a walk of up to the
/// retention).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamBounds {
    /// Oldest entry still kept.
    pub first: Option<StreamId>,
    /// Last ID ever issued and committed (the head).
    pub last: Option<StreamId>,
}

/// `GET /streams/{stream}/info`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamInfo {
    pub stream: String,
    /// Oldest entry still kept.
    pub first: Option<StreamId>,
    /// Last ID ever issued (the high-water mark), kept even when trimmed.
    pub last: Option<StreamId>,
    pub length: u64,
}

/// `GET /streams/{stream}/tail?after=`: newline-delimited JSON entries,
/// strictly after `after` (from the head, new entries only, when absent),
/// for as long as the connection lasts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TailQuery {
    pub after: Option<StreamId>,
}

/// `GET /stats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub roots: u64,
    /// Rows of the kv table, counted at `keys_counted_at_ms` (a count of a
    /// large table is cached for a minute).
    pub keys: u64,
    pub keys_counted_at_ms: u64,
    /// Database file plus its WAL, in bytes.
    pub db_bytes: u64,
}

/// Counters of the writer thread.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriterStats {
    /// Groups run (committed or not).
    pub batches: u64,
    /// Writes run (committed or not).
    pub writes: u64,
    /// Writes rolled back alone (their own error or panic).
    pub failed_writes: u64,
    /// Groups whose COMMIT did not happen: none of their writes applied.
    pub failed_commits: u64,
    pub largest_batch: u64,
    pub queued: u64,
    /// Groups committed.
    #[serde(default)]
    pub committed_groups: u64,
    /// Writes committed (acknowledged as applied).
    #[serde(default)]
    pub committed_writes: u64,
}

/// `GET /status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoragedStatus {
    pub daemon: String,
    pub version: String,
    pub pid: u32,
    pub uptime_secs: u64,
    pub db_path: String,
    pub schema_version: String,
    pub readers: u32,
    pub roots: u64,
    pub db_bytes: u64,
    pub writer: WriterStats,
}

/// `GET /records/totals`: figures over every record, computed in one read
/// transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub roots: u64,
    /// Records with a `filePath`.
    pub files: u64,
    /// Sum of `sizeByte` over the records with a `filePath`.
    pub file_bytes: u64,
    /// Sum of `sizeByte` over every record.
    pub bytes: u64,
}

/// `POST /records/wipe`: every record deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wiped {
    /// Records deleted.
    pub deleted: u64,
}

/// How an imported record meets the one in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImportMode {
    /// The record's fields become exactly the snapshot's.
    Replace,
    /// Absent fields are added; differing ones follow [`ImportConflict`].
    Merge,
}

/// In a merge, which value a field held on both sides with different
/// values keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImportConflict {
    /// Ours.
    Mine,
    /// The snapshot's.
    Source,
}

/// What one record's import did (or, on a dry run, would do) to its fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportCounts {
    pub added: u64,
    pub updated: u64,
    pub unchanged: u64,
    pub kept: u64,
    pub deleted: u64,
}

/// One record of an import group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportRecord {
    pub rid: Rid,
    pub fields: Fields,
}

/// `POST /records/import`: a group of records, each planned against the
/// record it meets and applied in the writer transaction that read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportBody {
    pub mode: ImportMode,
    pub conflict: ImportConflict,
    /// Plan and count, write nothing.
    #[serde(default)]
    pub dry_run: bool,
    pub records: Vec<ImportRecord>,
}

/// Most records one `POST /records/import` takes.
pub const MAX_IMPORT_GROUP: usize = 256;

/// The outcome of one record, in the order of the group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportOutcome {
    pub rid: Rid,
    #[serde(flatten)]
    pub counts: ImportCounts,
    /// Why the record was not imported (its counts are then zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Imported {
    pub records: Vec<ImportOutcome>,
}

#[cfg(test)]
#[path = "wire_test.rs"]
mod tests;
