//! Snapshots: `GET /api/snapshot/export` streams every record as a ZIP,
//! `POST /api/snapshot/import` reads one back (replace or merge),
//! `POST /api/snapshot/wipe?scope=metadata` deletes every record.
//!
//! Memory stays flat whatever the store's size: export holds the list of
//! roots (16 bytes each, for `fileCount` and `index.json`, which come
//! before the records) and one record at a time, pages through storaged's
//! `file:` rows and writes the ZIP in streaming mode (data descriptors, no
//! seek) on a blocking thread whose output goes to the response through a
//! bounded channel. Import spools the upload to a temp file, then reads the
//! ZIP one entry at a time. The functions under the routes take a
//! [`StoragedClient`] and no axum type, so they can be driven directly.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Request};
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::{Stream, StreamExt};
use http::header;
use metacore::api::storaged::{MAX_PAGE, RangeQuery, StoragedClient};
use metacore::error::{ApiError, ErrorCode};
use metacore::record::Fields;
use metacore::rid::Rid;
use metacore::socket::body::QueryParams;
use metacore::socket::client::ClientError;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

use crate::http::admin_only;
use crate::nested::{flatten, nest};
use crate::state::{AppState, State};

/// The manifest's `schemaVersion` written and the only one read.
pub const SCHEMA_VERSION: u64 = 2;
/// Largest upload `POST /api/snapshot/import` takes (413 above it).
pub const MAX_IMPORT_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// Largest `metadata/<rid>.json` entry read (a file above it fails).
pub const MAX_RECORD_BYTES: u64 = 64 * 1024 * 1024;
/// Largest `manifest.json` read.
const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;
/// Where plugin output lives in the archive.
pub const PLUGIN_PREFIX: &str = "cache/plugin-output/";
const METADATA_PREFIX: &str = "metadata/";
/// Bytes the response writer gathers before it hands a chunk over.
const CHUNK: usize = 64 * 1024;

/// The snapshot routes; import and wipe are admin routes.
pub fn routes(state: Arc<AppState>) -> Router<Arc<AppState>> {
    let admin = Router::new()
        // The 2 GiB limit is enforced while spooling, not by axum.
        .route(
            "/api/snapshot/import",
            post(import).layer(DefaultBodyLimit::disable()),
        )
        .route("/api/snapshot/wipe", post(wipe_route))
        .route_layer(from_fn_with_state(state, admin_only));
    Router::new()
        .route("/api/snapshot/export", get(export))
        .merge(admin)
}

// ---------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------

/// What an export writes besides the records.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// `$FILES_PATH/plugin` when plugin output is included.
    pub plugin_dir: Option<PathBuf>,
    pub source_host: String,
    /// RFC 3339.
    pub generated_at: String,
}

#[derive(Debug, Default, Deserialize)]
pub struct ExportQuery {
    #[serde(default)]
    pub include: Option<String>,
}

async fn export(st: State, QueryParams(q): QueryParams<ExportQuery>) -> Result<Response, ApiError> {
    let plugin = match q.include.as_deref() {
        None | Some("") => false,
        Some("plugin-output") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "include must be plugin-output, not {other:?}"
            )));
        }
    };
    let generated_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let name = archive_name(&generated_at);
    let opts = ExportOptions {
        plugin_dir: plugin.then(|| st.config.files_path.join("plugin")),
        source_host: crate::urls::hostname(),
        generated_at,
    };
    // The roots are listed before the answer starts, so a storaged that is
    // away is a clean 503 rather than a truncated download.
    let rids = super::listing::all_roots(&st.store).await?;
    let (tx, rx) = mpsc::channel::<io::Result<Bytes>>(8);
    let store = st.store.clone();
    tokio::spawn(async move {
        let err_tx = tx.clone();
        if let Err(e) = export_roots(&store, rids, opts, ChannelWriter::new(tx)).await {
            tracing::error!(
                "snapshot export stopped mid-stream, the client gets a truncated archive: {e}"
            );
            let _ = err_tx.send(Err(io::Error::other(e.to_string()))).await;
        }
    });
    let body = Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }));
    Ok((
        [
            (header::CONTENT_TYPE, "application/zip".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
        ],
        body,
    )
        .into_response())
}

/// `metamesh-snapshot-YYYYMMDD-HHMMSS.zip` from an RFC 3339 UTC time.
fn archive_name(rfc3339: &str) -> String {
    let digits: String = rfc3339
        .chars()
        .filter(char::is_ascii_digit)
        .take(14)
        .collect();
    let (date, time) = digits.split_at(digits.len().min(8));
    format!("metamesh-snapshot-{date}-{time}.zip")
}

/// Writes a whole snapshot to `out`; returns the records written.
pub async fn export_to<W: Write + Send + 'static>(
    store: &StoragedClient,
    opts: ExportOptions,
    out: W,
) -> Result<u64, ApiError> {
    let rids = super::listing::all_roots(store).await?;
    export_roots(store, rids, opts, out).await
}

/// What the async side hands the ZIP writer.
enum Job {
    Entry {
        name: String,
        bytes: Vec<u8>,
    },
    Index(Arc<[Rid]>),
    PluginDir(PathBuf),
    /// Everything was sent: the archive may be closed. Without it the
    /// writer stops without a central directory (a truncated archive).
    Finish,
}

/// Writes the snapshot of `rids` to `out`; records made after `rids` was
/// listed are left out, records deleted since are missing from
/// `metadata/`. Returns the records written.
pub async fn export_roots<W: Write + Send + 'static>(
    store: &StoragedClient,
    mut rids: Vec<Rid>,
    opts: ExportOptions,
    out: W,
) -> Result<u64, ApiError> {
    rids.sort_unstable();
    rids.dedup();
    let rids: Arc<[Rid]> = rids.into();
    let (tx, mut rx) = mpsc::channel::<Job>(16);
    let writer = tokio::task::spawn_blocking(move || write_zip(out, &mut rx));
    let fed = feed(store, rids, &opts, &tx).await;
    drop(tx);
    let written = writer
        .await
        .map_err(|e| ApiError::internal(format!("the archive writer failed: {e}")))?;
    let count = fed?;
    written.map_err(|e| ApiError::internal(format!("cannot write the archive: {e}")))?;
    Ok(count)
}

/// Sends every entry to the writer, in archive order.
async fn feed(
    store: &StoragedClient,
    rids: Arc<[Rid]>,
    opts: &ExportOptions,
    tx: &mpsc::Sender<Job>,
) -> Result<u64, ApiError> {
    let gone = |_| ApiError::internal("the archive writer stopped");
    let mut includes = json!({"metadata": true});
    if opts.plugin_dir.is_some() {
        includes["pluginOutput"] = json!(true);
    }
    let manifest = json!({
        "schemaVersion": SCHEMA_VERSION,
        "generatedAt": opts.generated_at,
        "sourceHost": opts.source_host,
        "fileCount": rids.len(),
        "includes": includes,
    });
    let bytes = serde_json::to_vec_pretty(&manifest).expect("a JSON value serializes");
    tx.send(Job::Entry {
        name: "manifest.json".into(),
        bytes,
    })
    .await
    .map_err(gone)?;
    tx.send(Job::Index(rids.clone())).await.map_err(gone)?;

    let mut count = 0u64;
    let mut emit = async |rid: Rid, fields: Fields| -> Result<(), ApiError> {
        if rids.binary_search(&rid).is_err() {
            return Ok(());
        }
        let bytes = serde_json::to_vec_pretty(&nest(&fields)).expect("a JSON value serializes");
        tx.send(Job::Entry {
            name: format!("{METADATA_PREFIX}{rid}.json"),
            bytes,
        })
        .await
        .map_err(gone)?;
        count += 1;
        Ok(())
    };
    // Rows come in key order, so one record's rows are contiguous.
    let mut q = RangeQuery {
        prefix: Some("file:".into()),
        limit: Some(MAX_PAGE),
        ..RangeQuery::default()
    };
    let mut current: Option<(Rid, Fields)> = None;
    loop {
        let page = store.kv_range(&q).await?;
        for row in page.rows {
            let Some((rid, field)) = split_field_key(&row.key) else {
                tracing::warn!(key = %row.key, "snapshot export skips a key that is not file:<rid>/<field>");
                continue;
            };
            let value = row.value.unwrap_or_default();
            match &mut current {
                Some((r, fields)) if *r == rid => {
                    fields.insert(field.to_owned(), value);
                }
                _ => {
                    if let Some((r, fields)) = current.take() {
                        emit(r, fields).await?;
                    }
                    current = Some((rid, Fields::from([(field.to_owned(), value)])));
                }
            }
        }
        match page.next {
            Some(next) => q.after = Some(next),
            None => break,
        }
    }
    if let Some((r, fields)) = current.take() {
        emit(r, fields).await?;
    }
    if let Some(dir) = &opts.plugin_dir {
        tx.send(Job::PluginDir(dir.clone())).await.map_err(gone)?;
    }
    tx.send(Job::Finish).await.map_err(gone)?;
    Ok(count)
}

/// `file:<rid>/<field>` → `(rid, field)`.
fn split_field_key(key: &str) -> Option<(Rid, &str)> {
    let rest = key.strip_prefix("file:")?;
    let (rid, field) = rest.split_once('/')?;
    Some((Rid::parse(rid).ok()?, field))
}

fn deflated() -> SimpleFileOptions {
    SimpleFileOptions::default().compression_method(CompressionMethod::Deflated)
}

/// The blocking side of an export: the ZIP in streaming mode.
fn write_zip<W: Write>(out: W, rx: &mut mpsc::Receiver<Job>) -> io::Result<()> {
    let mut zip = ZipWriter::new_stream(out);
    while let Some(job) = rx.blocking_recv() {
        match job {
            Job::Entry { name, bytes } => {
                zip.start_file(name, deflated())?;
                zip.write_all(&bytes)?;
            }
            Job::Index(rids) => {
                zip.start_file("index.json", deflated())?;
                let mut w = io::BufWriter::with_capacity(CHUNK, &mut zip);
                w.write_all(b"{\"hashIds\":[")?;
                for (i, rid) in rids.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "," };
                    write!(w, "{sep}\"{rid}\"")?;
                }
                w.write_all(b"]}")?;
                w.flush()?;
            }
            Job::PluginDir(dir) => add_plugin_dir(&mut zip, &dir)?,
            Job::Finish => {
                let mut out = zip.finish()?.into_inner();
                return out.flush();
            }
        }
    }
    Err(io::Error::other("the export stopped before its end"))
}

/// Adds the regular files under `root` as `cache/plugin-output/<rel>`,
/// in name order. Symbolic links are skipped (and `root` itself when it is
/// one), so nothing outside `root` is read.
fn add_plugin_dir<W: Write + Seek>(zip: &mut ZipWriter<W>, root: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            tracing::warn!(dir = %root.display(), "plugin output is not a directory; left out of the snapshot");
            return Ok(());
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(root.join(&rel))?.collect::<io::Result<_>>()?;
        entries.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for entry in entries {
            let kind = entry.file_type()?;
            let rel = rel.join(entry.file_name());
            let Some(name) = rel.to_str() else {
                tracing::warn!(path = %rel.display(), "plugin output name is not UTF-8; left out of the snapshot");
                continue;
            };
            if kind.is_dir() {
                subdirs.push(rel.clone());
            } else if kind.is_file() {
                let Ok(mut file) = open_no_follow(&root.join(&rel)) else {
                    continue;
                };
                let len = file.metadata()?.len();
                let opts = deflated().large_file(len >= u64::from(u32::MAX));
                zip.start_file(format!("{PLUGIN_PREFIX}{name}"), opts)?;
                io::copy(&mut file, zip)?;
            }
        }
        // Depth first, in name order.
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

fn open_no_follow(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// A [`Write`] for a blocking thread that hands chunks to an async
/// response body through a bounded channel (so a slow client slows the
/// export, it never grows a buffer).
#[derive(Debug)]
pub struct ChannelWriter {
    tx: mpsc::Sender<io::Result<Bytes>>,
    buf: Vec<u8>,
}

impl ChannelWriter {
    pub fn new(tx: mpsc::Sender<io::Result<Bytes>>) -> Self {
        Self {
            tx,
            buf: Vec::with_capacity(CHUNK),
        }
    }

    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

// ---------------------------------------------------------------------------
// Import
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The record's fields become exactly the snapshot's.
    Replace,
    /// Absent fields are added; differing ones follow [`Conflict`].
    Merge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Conflict {
    /// A differing field keeps our value.
    Mine,
    /// A differing field takes the snapshot's value.
    Source,
}

#[derive(Debug, Clone)]
pub struct ImportOptions {
    pub mode: Mode,
    pub conflict: Conflict,
    pub dry_run: bool,
    /// `$FILES_PATH/plugin`, where `cache/plugin-output/<rel>` goes.
    pub plugin_dir: PathBuf,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub added: u64,
    pub updated: u64,
    pub unchanged: u64,
    pub kept: u64,
    pub deleted: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileReport {
    pub hash_id: String,
    #[serde(flatten)]
    pub counts: Counts,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PluginReport {
    pub written: u64,
    pub skipped: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    pub mode: Mode,
    pub conflict: Conflict,
    pub dry_run: bool,
    pub total_files: u64,
    pub files_ok: u64,
    pub files_failed: u64,
    pub files: Vec<FileReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin_output: Option<PluginReport>,
}

/// What one record's import writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordWrite {
    Nothing,
    /// `PATCH`: these fields set, the others kept.
    Merge(Fields),
    /// `PUT`: the record's fields become these.
    Replace(Fields),
    /// Replace by nothing: the record goes.
    Delete,
}

/// The counts and the write of one record, from our fields and the
/// snapshot's. Pure, so a dry run computes exactly what a run does.
pub fn plan(
    current: &Fields,
    incoming: &Fields,
    mode: Mode,
    conflict: Conflict,
) -> (Counts, RecordWrite) {
    let mut c = Counts::default();
    let mut merge = Fields::new();
    for (k, v) in incoming {
        match current.get(k) {
            None => {
                c.added += 1;
                merge.insert(k.clone(), v.clone());
            }
            Some(ours) if ours == v => c.unchanged += 1,
            Some(_) if mode == Mode::Replace || conflict == Conflict::Source => {
                c.updated += 1;
                merge.insert(k.clone(), v.clone());
            }
            Some(_) => c.kept += 1,
        }
    }
    let write = match mode {
        Mode::Merge if merge.is_empty() => RecordWrite::Nothing,
        Mode::Merge => RecordWrite::Merge(merge),
        Mode::Replace => {
            c.deleted = current
                .keys()
                .filter(|k| !incoming.contains_key(*k))
                .count() as u64;
            if c.added + c.updated + c.deleted == 0 {
                RecordWrite::Nothing
            } else if incoming.is_empty() {
                RecordWrite::Delete
            } else {
                RecordWrite::Replace(incoming.clone())
            }
        }
    };
    (c, write)
}

/// Checks `manifest.json`.
pub fn check_manifest(bytes: &[u8]) -> Result<(), ApiError> {
    let v: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("manifest.json is not JSON: {e}")))?;
    match v.get("schemaVersion").and_then(Value::as_u64) {
        Some(SCHEMA_VERSION) => Ok(()),
        Some(other) => Err(ApiError::bad_request(format!(
            "the snapshot's schemaVersion is {other}; this server reads {SCHEMA_VERSION}"
        ))),
        None => Err(ApiError::bad_request(
            "manifest.json has no numeric schemaVersion",
        )),
    }
}

/// `rel` as a relative path that stays under its base: plain segments
/// only (no `..`, no root, no empty name).
pub fn confined(rel: &str) -> Option<PathBuf> {
    if rel.is_empty() || rel.contains('\0') || rel.contains('\\') {
        return None;
    }
    let path = Path::new(rel);
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::Normal(seg) => out.push(seg),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

#[derive(Debug, Default, Deserialize)]
pub struct ImportQuery {
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub conflict: Option<String>,
    #[serde(default)]
    pub dry_run: Option<String>,
}

impl ImportQuery {
    fn options(&self, plugin_dir: PathBuf) -> Result<ImportOptions, ApiError> {
        let mode = match self.mode.as_deref() {
            None | Some("") | Some("merge") => Mode::Merge,
            Some("replace") => Mode::Replace,
            Some(o) => {
                return Err(ApiError::bad_request(format!(
                    "mode must be replace or merge, not {o:?}"
                )));
            }
        };
        let conflict = match self.conflict.as_deref() {
            None | Some("") | Some("source") => Conflict::Source,
            Some("mine") => Conflict::Mine,
            Some(o) => {
                return Err(ApiError::bad_request(format!(
                    "conflict must be mine or source, not {o:?}"
                )));
            }
        };
        let dry_run = match self.dry_run.as_deref() {
            None | Some("") | Some("false") | Some("0") => false,
            Some("true") | Some("1") => true,
            Some(o) => {
                return Err(ApiError::bad_request(format!(
                    "dry_run must be true or false, not {o:?}"
                )));
            }
        };
        Ok(ImportOptions {
            mode,
            conflict,
            dry_run,
            plugin_dir,
        })
    }
}

async fn import(
    st: State,
    QueryParams(q): QueryParams<ImportQuery>,
    req: Request,
) -> Result<Json<ImportReport>, ApiError> {
    let opts = q.options(st.config.files_path.join("plugin"))?;
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

/// One `metadata/<rid>.json` read from the archive.
struct Item {
    hash_id: String,
    parsed: Result<(Rid, Fields), String>,
}

/// Imports the snapshot in `file` (a ZIP, read from the start).
pub async fn import_from(
    store: &StoragedClient,
    file: File,
    opts: &ImportOptions,
) -> Result<ImportReport, ApiError> {
    let (tx, mut rx) = mpsc::channel::<Item>(16);
    let (plugin_dir, dry_run) = (opts.plugin_dir.clone(), opts.dry_run);
    let reader = tokio::task::spawn_blocking(move || read_zip(file, &tx, &plugin_dir, dry_run));
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
    while let Some(item) = rx.recv().await {
        let file = match item.parsed {
            Ok((rid, fields)) => import_record(store, rid, &fields, opts).await,
            Err(e) => Err(e),
        };
        report.total_files += 1;
        report.files.push(match file {
            Ok(counts) => {
                report.files_ok += 1;
                FileReport {
                    hash_id: item.hash_id,
                    counts,
                    error: None,
                }
            }
            Err(e) => {
                report.files_failed += 1;
                FileReport {
                    hash_id: item.hash_id,
                    counts: Counts::default(),
                    error: Some(e),
                }
            }
        });
    }
    report.plugin_output = reader
        .await
        .map_err(|e| ApiError::internal(format!("the archive reader failed: {e}")))??;
    Ok(report)
}

/// Plans and (unless a dry run) applies one record.
async fn import_record(
    store: &StoragedClient,
    rid: Rid,
    incoming: &Fields,
    opts: &ImportOptions,
) -> Result<Counts, String> {
    let hash = rid.to_string();
    let current = match store.get_record(&hash).await {
        Ok(rec) => rec.fields,
        Err(ClientError::Api(e)) if e.code.is_not_found() => Fields::new(),
        Err(e) => return Err(ApiError::from(e).to_string()),
    };
    let (counts, write) = plan(&current, incoming, opts.mode, opts.conflict);
    if opts.dry_run {
        return Ok(counts);
    }
    let done = match write {
        RecordWrite::Nothing => Ok(()),
        RecordWrite::Merge(f) => store.merge(&hash, f).await.map(drop),
        RecordWrite::Replace(f) => store.replace(&hash, f).await.map(drop),
        RecordWrite::Delete => store.delete_record(&hash).await.map(drop),
    };
    done.map_err(|e| ApiError::from(e).to_string())?;
    Ok(counts)
}

/// The blocking side of an import: checks the manifest, then sends each
/// `metadata/` entry, and writes (or counts, on a dry run) plugin output.
fn read_zip(
    file: File,
    tx: &mpsc::Sender<Item>,
    plugin_dir: &Path,
    dry_run: bool,
) -> Result<Option<PluginReport>, ApiError> {
    let mut zip = ZipArchive::new(file)
        .map_err(|e| ApiError::bad_request(format!("not a ZIP archive: {e}")))?;
    {
        let entry = zip
            .by_name("manifest.json")
            .map_err(|_| ApiError::bad_request("the snapshot has no manifest.json"))?;
        let mut bytes = Vec::new();
        entry
            .take(MAX_MANIFEST_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|e| ApiError::bad_request(format!("cannot read manifest.json: {e}")))?;
        check_manifest(&bytes)?;
    }
    let mut plugin: Option<PluginReport> = None;
    for i in 0..zip.len() {
        let mut entry = match zip.by_index(i) {
            Ok(e) => e,
            Err(e) => {
                let item = Item {
                    hash_id: format!("#{i}"),
                    parsed: Err(format!("unreadable ZIP entry: {e}")),
                };
                if tx.blocking_send(item).is_err() {
                    return Err(ApiError::internal("the import stopped"));
                }
                continue;
            }
        };
        let Ok(name) = entry.name().map(|n| n.into_owned()) else {
            continue;
        };
        if entry.is_dir() {
            continue;
        }
        if let Some(stem) = name
            .strip_prefix(METADATA_PREFIX)
            .and_then(|s| s.strip_suffix(".json"))
        {
            let item = match Rid::parse(stem) {
                Ok(rid) => Item {
                    hash_id: rid.to_string(),
                    parsed: read_record(&mut entry).map(|f| (rid, f)),
                },
                Err(e) => Item {
                    hash_id: stem.to_owned(),
                    parsed: Err(format!("{stem:?} is not a RID: {e}")),
                },
            };
            if tx.blocking_send(item).is_err() {
                return Err(ApiError::internal("the import stopped"));
            }
        } else if let Some(rel) = name.strip_prefix(PLUGIN_PREFIX) {
            let p = plugin.get_or_insert_default();
            let ok = !entry.is_symlink() && write_plugin_file(plugin_dir, rel, &mut entry, dry_run);
            if ok {
                p.written += 1;
            } else {
                tracing::warn!(entry = %name, "snapshot import skips a plugin output entry");
                p.skipped += 1;
            }
        }
    }
    Ok(plugin)
}

fn read_record(entry: &mut impl Read) -> Result<Fields, String> {
    let mut bytes = Vec::new();
    entry
        .take(MAX_RECORD_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the entry: {e}"))?;
    if bytes.len() as u64 > MAX_RECORD_BYTES {
        return Err(format!("the entry is larger than {MAX_RECORD_BYTES} bytes"));
    }
    let doc: Value = serde_json::from_slice(&bytes).map_err(|e| format!("not JSON: {e}"))?;
    if !doc.is_object() {
        return Err("not a JSON object".into());
    }
    Ok(flatten(&doc))
}

/// Writes `base/rel`, refusing a path that leaves `base`, or goes through
/// or onto a symbolic link. On a dry run only the path is checked.
fn write_plugin_file(base: &Path, rel: &str, data: &mut impl Read, dry_run: bool) -> bool {
    let Some(rel) = confined(rel) else {
        return false;
    };
    if dry_run {
        return true;
    }
    let mut dir = base.to_path_buf();
    let parents = rel
        .parent()
        .map(|p| p.components().collect::<Vec<_>>())
        .unwrap_or_default();
    if !real_dir(&dir, true) {
        return false;
    }
    for comp in parents {
        dir.push(comp);
        if !real_dir(&dir, false) {
            return false;
        }
    }
    use std::os::unix::fs::OpenOptionsExt;
    let dest = base.join(&rel);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&dest);
    match file {
        Ok(mut f) => io::copy(data, &mut f).is_ok(),
        Err(_) => false,
    }
}

/// `dir` is (or is made) a directory that is not a symbolic link.
fn real_dir(dir: &Path, all: bool) -> bool {
    match std::fs::symlink_metadata(dir) {
        Ok(m) => m.is_dir(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => if all {
            std::fs::create_dir_all(dir)
        } else {
            std::fs::create_dir(dir)
        }
        .is_ok(),
        Err(_) => false,
    }
}

// ---------------------------------------------------------------------------
// Wipe
// ---------------------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
pub struct WipeQuery {
    #[serde(default)]
    pub scope: Option<String>,
}

async fn wipe_route(
    st: State,
    QueryParams(q): QueryParams<WipeQuery>,
) -> Result<Json<Value>, ApiError> {
    match q.scope.as_deref() {
        Some("metadata") => Ok(Json(json!({ "metadataDeleted": wipe(&st.store).await? }))),
        Some(other) => Err(ApiError::bad_request(format!(
            "scope must be metadata, not {other:?}"
        ))),
        None => Err(ApiError::bad_request("say what to wipe: ?scope=metadata")),
    }
}

/// Deletes every record; returns the roots deleted.
pub async fn wipe(store: &StoragedClient) -> Result<u64, ApiError> {
    super::listing::delete_all_records(store).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn merge_source_adds_and_updates() {
        let ours = fields(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let theirs = fields(&[("a", "1"), ("b", "X"), ("d", "4")]);
        let (c, w) = plan(&ours, &theirs, Mode::Merge, Conflict::Source);
        assert_eq!(
            c,
            Counts {
                added: 1,
                updated: 1,
                unchanged: 1,
                kept: 0,
                deleted: 0
            }
        );
        assert_eq!(w, RecordWrite::Merge(fields(&[("b", "X"), ("d", "4")])));
    }

    #[test]
    fn merge_mine_keeps_ours() {
        let ours = fields(&[("a", "1"), ("b", "2")]);
        let theirs = fields(&[("a", "1"), ("b", "X"), ("d", "4")]);
        let (c, w) = plan(&ours, &theirs, Mode::Merge, Conflict::Mine);
        assert_eq!(
            c,
            Counts {
                added: 1,
                updated: 0,
                unchanged: 1,
                kept: 1,
                deleted: 0
            }
        );
        assert_eq!(w, RecordWrite::Merge(fields(&[("d", "4")])));
        let (_, w) = plan(&ours, &fields(&[("b", "X")]), Mode::Merge, Conflict::Mine);
        assert_eq!(w, RecordWrite::Nothing, "nothing to write is no write");
    }

    #[test]
    fn replace_counts_deletions_and_ignores_conflict() {
        let ours = fields(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let theirs = fields(&[("a", "1"), ("b", "X"), ("d", "4")]);
        for conflict in [Conflict::Mine, Conflict::Source] {
            let (c, w) = plan(&ours, &theirs, Mode::Replace, conflict);
            assert_eq!(
                c,
                Counts {
                    added: 1,
                    updated: 1,
                    unchanged: 1,
                    kept: 0,
                    deleted: 1
                }
            );
            assert_eq!(w, RecordWrite::Replace(theirs.clone()));
        }
        let (c, w) = plan(&ours, &ours, Mode::Replace, Conflict::Source);
        assert_eq!((c.unchanged, w), (3, RecordWrite::Nothing));
        let (c, w) = plan(&ours, &Fields::new(), Mode::Replace, Conflict::Source);
        assert_eq!((c.deleted, w), (3, RecordWrite::Delete));
    }

    #[test]
    fn manifest_needs_schema_version_2() {
        assert!(check_manifest(br#"{"schemaVersion":2,"fileCount":0}"#).is_ok());
        for bad in [
            &br#"{"schemaVersion":3}"#[..],
            br#"{"schemaVersion":"2"}"#,
            b"{}",
            b"not json",
        ] {
            let e = check_manifest(bad).unwrap_err();
            assert_eq!(
                e.code,
                ErrorCode::BadRequest,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn plugin_paths_stay_inside() {
        assert_eq!(confined("a/b.txt"), Some(PathBuf::from("a/b.txt")));
        assert_eq!(confined("./a"), Some(PathBuf::from("a")));
        for bad in [
            "",
            "../x",
            "a/../../x",
            "a/../b",
            "/etc/passwd",
            "a\\..\\b",
            "a\0b",
            ".",
        ] {
            assert_eq!(confined(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn plugin_files_are_written_inside_and_never_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("plugin");
        assert!(write_plugin_file(&base, "x/y.txt", &mut &b"hi"[..], false));
        assert_eq!(std::fs::read(base.join("x/y.txt")).unwrap(), b"hi");
        assert!(!write_plugin_file(
            &base,
            "../escaped",
            &mut &b"no"[..],
            false
        ));
        assert!(!dir.path().join("escaped").exists());
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), base.join("link")).unwrap();
        assert!(!write_plugin_file(
            &base,
            "link/z.txt",
            &mut &b"no"[..],
            false
        ));
        assert!(!outside.path().join("z.txt").exists());
        assert!(write_plugin_file(&base, "dry.txt", &mut &b"no"[..], true));
        assert!(!base.join("dry.txt").exists(), "a dry run writes nothing");
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

    #[test]
    fn archive_names_follow_the_original() {
        assert_eq!(
            archive_name("2024-03-05T07:08:09Z"),
            "metamesh-snapshot-20240305-070809.zip"
        );
    }

    #[test]
    fn field_keys_split() {
        let rid = Rid::mint();
        assert_eq!(
            split_field_key(&format!("file:{rid}/a/b")),
            Some((rid, "a/b"))
        );
        assert_eq!(split_field_key("file:events"), None);
        assert_eq!(split_field_key("cid:x"), None);
    }
}
