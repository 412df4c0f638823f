//! `POST /api/snapshot/import?mode=&conflict=&dry_run=`: a snapshot read
//! back. The upload is spooled to an unnamed temp file (counted, never held
//! in memory), the ZIP is read one entry at a time on a blocking thread, and
//! its records go to storaged in groups: storaged plans each record against
//! the one it meets and applies the plan in the writer transaction that read
//! it ([`StoragedClient::import`]), so a write made while an import runs is
//! neither lost nor half applied. Plugin output is written under
//! `$FILES_PATH/plugin`. Reading the ZIP is [`unpack`]'s, the options and
//! the answer are [`report`]'s; this module is the route, the upload and
//! the groups sent to storaged.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::path::Path;

use axum::Json;
use axum::extract::{FromRequest, Multipart, Request};
use futures_util::{Stream, StreamExt};
use http::header;
use metacore::api::storaged::{
    ImportBody, ImportConflict, ImportCounts, ImportMode, ImportRecord, MAX_BODY, MAX_IMPORT_GROUP,
    StoragedClient,
};
use metacore::error::{ApiError, ErrorCode};
use metacore::record::Fields;
use metacore::rid::Rid;
use metacore::socket::body::QueryParams;
use metacore::socket::client::ClientError;
use serde::Deserialize;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

mod report;
mod unpack;

pub use report::{FileReport, ImportOptions, ImportReport, PluginReport, SkippedFile};

use crate::http::choice;
use crate::state::State;
use unpack::{Item, read_zip};

/// Largest upload `POST /api/snapshot/import` takes (413 above it).
pub const MAX_IMPORT_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// What a multipart body may add around the archive (boundaries, part
/// headers) before its declared length is refused.
const MULTIPART_SLACK: u64 = 64 * 1024;
/// JSON bytes of records sent to storaged in one group (a larger record
/// goes alone; storaged's socket takes 16 MiB a body).
const GROUP_BYTES: usize = 4 * 1024 * 1024;

/// `?mode=`, the first is the default.
const MODES: &[(&str, ImportMode)] = &[
    ("merge", ImportMode::Merge),
    ("replace", ImportMode::Replace),
];
/// `?conflict=`, the first is the default.
const CONFLICTS: &[(&str, ImportConflict)] = &[
    ("source", ImportConflict::Source),
    ("mine", ImportConflict::Mine),
];
/// `?dry_run=`, the first is the default.
const DRY_RUN: &[(&str, bool)] = &[("false", false), ("true", true), ("0", false), ("1", true)];

#[derive(Debug, Default, Deserialize)]
pub(super) struct ImportQuery {
    pub mode: Option<String>,
    pub conflict: Option<String>,
    pub dry_run: Option<String>,
}

impl ImportQuery {
    fn options(&self, config: &metacore::Config) -> Result<ImportOptions, ApiError> {
        let plugin_dir = config.files_path.join("plugin");
        let mode = choice("mode", self.mode.as_deref(), MODES, "replace or merge")?;
        let conflict = choice(
            "conflict",
            self.conflict.as_deref(),
            CONFLICTS,
            "mine or source",
        )?;
        let dry_run = choice("dry_run", self.dry_run.as_deref(), DRY_RUN, "true or false")?;
        Ok(ImportOptions {
            mode,
            conflict,
            dry_run,
            plugin_dir,
            max_entries: config.import_max_entries,
            max_bytes: config.import_max_bytes,
        })
    }
}

pub(super) async fn import(
    st: State,
    QueryParams(q): QueryParams<ImportQuery>,
    req: Request,
) -> Result<Json<ImportReport>, ApiError> {
    let opts = q.options(&st.config)?;
    // Refused from the declared length, before a byte is read (a multipart
    // body may add a little around the archive).
    if metacore::socket::body::declared_length(req.headers())
        .is_some_and(|n| n > MAX_IMPORT_BYTES + MULTIPART_SLACK)
    {
        return Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("a snapshot is at most {MAX_IMPORT_BYTES} bytes"),
        ));
    }
    let ctype = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let essence = ctype
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let file = match essence.as_str() {
        "multipart/form-data" => {
            let mut parts = Multipart::from_request(req, &())
                .await
                .map_err(|e| ApiError::bad_request(format!("not a multipart body: {e}")))?;
            let mut found = None;
            while let Some(field) = parts
                .next_field()
                .await
                .map_err(|e| ApiError::bad_request(format!("bad multipart body: {e}")))?
            {
                if field.name() == Some("snapshot") {
                    found = Some(spool(field, MAX_IMPORT_BYTES).await?);
                    break;
                }
            }
            found.ok_or_else(|| {
                ApiError::bad_request("the multipart body has no field named snapshot")
            })?
        }
        "" | "application/zip" | "application/octet-stream" | "application/x-zip-compressed" => {
            spool(req.into_body().into_data_stream(), MAX_IMPORT_BYTES).await?
        }
        other => {
            return Err(ApiError::bad_request(format!(
                "send the snapshot as application/zip or multipart/form-data (field snapshot), not {other}"
            )));
        }
    };
    Ok(Json(import_from(&st.store, file, &opts).await?))
}

/// Copies `body` to an unnamed temp file, refusing (413) more than
/// `limit` bytes; returns the file rewound.
pub async fn spool<S, B, E>(body: S, limit: u64) -> Result<File, ApiError>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: std::fmt::Display,
{
    let tmp = tempfile::tempfile()
        .map_err(|e| ApiError::internal(format!("cannot make a temp file: {e}")))?;
    let mut file = tokio::fs::File::from_std(tmp);
    let mut total = 0u64;
    let mut body = std::pin::pin!(body);
    while let Some(chunk) = body.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::bad_request(format!("cannot read the upload: {e}")))?;
        let chunk = chunk.as_ref();
        total += chunk.len() as u64;
        if total > limit {
            return Err(ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("a snapshot is at most {limit} bytes"),
            ));
        }
        file.write_all(chunk)
            .await
            .map_err(|e| ApiError::internal(format!("cannot spool the upload: {e}")))?;
    }
    file.flush()
        .await
        .map_err(|e| ApiError::internal(format!("cannot spool the upload: {e}")))?;
    let mut file = file.into_std().await;
    file.seek(SeekFrom::Start(0))
        .map_err(|e| ApiError::internal(format!("cannot rewind the upload: {e}")))?;
    Ok(file)
}

/// Imports the snapshot at `path`.
pub async fn import_file(
    store: &StoragedClient,
    path: &Path,
    opts: &ImportOptions,
) -> Result<ImportReport, ApiError> {
    let file = File::open(path)
        .map_err(|e| ApiError::internal(format!("cannot open {}: {e}", path.display())))?;
    import_from(store, file, opts).await
}

/// Where a file of the archive stands in a group, in archive order.
enum Slot {
    /// It could not be read: its report is ready.
    Failed(FileReport),
    /// Its record is in the group; its outcome comes from storaged.
    Queued,
}

/// Records on their way to storaged, with the files that failed between
/// them, so the answer lists every file in archive order.
#[derive(Default)]
struct Group {
    slots: Vec<Slot>,
    records: Vec<ImportRecord>,
    bytes: usize,
}

impl Group {
    /// Sends the records, then reports every slot in order.
    async fn flush(
        &mut self,
        store: &StoragedClient,
        opts: &ImportOptions,
        report: &mut ImportReport,
    ) {
        let records = std::mem::take(&mut self.records);
        self.bytes = 0;
        let rids: Vec<Rid> = records.iter().map(|r| r.rid).collect();
        let answer = if records.is_empty() {
            Ok(Vec::new())
        } else {
            let body = ImportBody {
                mode: opts.mode,
                conflict: opts.conflict,
                dry_run: opts.dry_run,
                records,
            };
            match store.import(&body).await {
                Ok(done) => Ok(done.records),
                // Refused as a whole before anything was queued.
                Err(ClientError::Api(e)) if e.code.status().is_client_error() => Err(e.to_string()),
                // Each record of a group is a write of its own: when the call
                // fails otherwise, some of them may have been applied.
                Err(e) => Err(format!(
                    "outcome unknown, the group of {} records may be partly imported (import again): {}",
                    rids.len(),
                    ApiError::from(e)
                )),
            }
        };
        let mut outcomes = rids.into_iter().enumerate().map(|(i, rid)| {
            let (counts, error) = match &answer {
                Ok(list) => match list.get(i) {
                    Some(o) if o.rid == rid => (o.counts, o.error.clone()),
                    _ => (
                        ImportCounts::default(),
                        Some("storaged's answer does not match the records sent".to_owned()),
                    ),
                },
                Err(why) => (ImportCounts::default(), Some(why.clone())),
            };
            FileReport {
                hash_id: rid.to_string(),
                counts,
                error,
            }
        });
        for slot in self.slots.drain(..) {
            match slot {
                Slot::Failed(file) => report.push(file),
                Slot::Queued => {
                    if let Some(file) = outcomes.next() {
                        report.push(file);
                    }
                }
            }
        }
    }
}

/// At least the bytes of `fields` as JSON: each name and value with its
/// quotes and separators, a byte JSON escapes counted as the 6 of `\u00XX`.
fn json_bytes(fields: &Fields) -> usize {
    let text = |s: &str| {
        2 + s
            .bytes()
            .map(|b| {
                if b < 0x20 || b == b'"' || b == b'\\' {
                    6
                } else {
                    1
                }
            })
            .sum::<usize>()
    };
    2 + fields
        .iter()
        .map(|(k, v)| text(k) + text(v) + 2)
        .sum::<usize>()
}

/// Why a record cannot go to storaged at all: its JSON, alone in a group,
/// is over the socket's body limit (measured exactly only when the
/// estimate says it might be).
fn too_large(fields: &Fields, estimate: usize) -> Option<String> {
    // The group's envelope around one record, generously.
    const ENVELOPE: usize = 256;
    if estimate + ENVELOPE <= MAX_BODY {
        return None;
    }
    let exact = serde_json::to_vec(fields).map_or(usize::MAX, |j| j.len());
    (exact + ENVELOPE > MAX_BODY).then(|| {
        ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "the record is {exact} bytes of JSON; storaged takes at most {MAX_BODY} a request"
            ),
        )
        .to_string()
    })
}

/// Imports the snapshot in `file` (a ZIP, read from the start).
pub async fn import_from(
    store: &StoragedClient,
    file: File,
    opts: &ImportOptions,
) -> Result<ImportReport, ApiError> {
    let (tx, mut rx) = mpsc::channel::<Item>(16);
    let o = opts.clone();
    let reader = tokio::task::spawn_blocking(move || read_zip(file, &tx, &o));
    let mut report = ImportReport {
        mode: opts.mode,
        conflict: opts.conflict,
        dry_run: opts.dry_run,
        total_files: 0,
        files_ok: 0,
        files_failed: 0,
        files: Vec::new(),
        plugin_output: None,
    };
    let mut group = Group::default();
    while let Some(item) = rx.recv().await {
        match item.parsed {
            Ok((rid, fields)) => {
                let bytes = json_bytes(&fields);
                if let Some(why) = too_large(&fields, bytes) {
                    group.slots.push(Slot::Failed(FileReport {
                        hash_id: rid.to_string(),
                        counts: ImportCounts::default(),
                        error: Some(why),
                    }));
                    continue;
                }
                if !group.records.is_empty()
                    && (group.records.len() == MAX_IMPORT_GROUP
                        || group.bytes + bytes > GROUP_BYTES)
                {
                    group.flush(store, opts, &mut report).await;
                }
                group.records.push(ImportRecord { rid, fields });
                group.bytes += bytes;
                group.slots.push(Slot::Queued);
            }
            Err(e) => group.slots.push(Slot::Failed(FileReport {
                hash_id: item.hash_id,
                counts: ImportCounts::default(),
                error: Some(e),
            })),
        }
    }
    group.flush(store, opts, &mut report).await;
    report.plugin_output = reader
        .await
        .map_err(|e| ApiError::internal(format!("the archive reader failed: {e}")))??;
    Ok(report)
}

#[cfg(test)]
mod fuzz_test;

#[cfg(test)]
mod tests {
    use std::io::{self, Read};

    use super::*;

    #[test]
    fn the_json_size_estimate_is_never_short() {
        for pairs in [
            &[][..],
            &[("a", "1")][..],
            &[("title", "say \"hi\"\n"), ("path", "C:\\x"), ("ü", "\u{1}")][..],
        ] {
            let f = metacore::record::fields_of(pairs);
            let exact = serde_json::to_vec(&f).unwrap().len();
            assert!(
                json_bytes(&f) >= exact,
                "{pairs:?}: {} < {exact}",
                json_bytes(&f)
            );
        }
    }

    /// The expansion bound's default is twice the upload limit
    /// (docs/decisions.md, "An import expands at most twice the upload").
    #[test]
    fn the_default_expansion_is_twice_the_upload_limit() {
        assert_eq!(
            metacore::config::IMPORT_MAX_BYTES_DEFAULT,
            2 * MAX_IMPORT_BYTES
        );
    }

    #[tokio::test]
    async fn spooling_stops_over_the_limit() {
        let chunks =
            || futures_util::stream::iter([Ok::<_, io::Error>(vec![1u8; 6]), Ok(vec![2u8; 6])]);
        let mut file = spool(chunks(), 12).await.unwrap();
        let mut back = Vec::new();
        file.read_to_end(&mut back).unwrap();
        assert_eq!(back.len(), 12, "the spooled file is rewound and whole");
        let e = spool(chunks(), 11).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::PayloadTooLarge);
    }
}
