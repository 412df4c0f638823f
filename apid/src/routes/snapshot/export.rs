//! `GET /api/snapshot/export[?include=plugin-output]`: every record as a
//! ZIP, streamed.
//!
//! Memory stays flat whatever the store's size: the export holds the list
//! of roots (16 bytes each, for `fileCount` and `index.json`, which come
//! before the records) and one record at a time, pages through storaged's
//! `file:` rows and writes the ZIP in streaming mode (data descriptors, no
//! seek) on a blocking thread whose output goes to the response through a
//! bounded channel, so a slow client slows the export, it never grows a
//! buffer.

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use http::header;
use metacore::api::storaged::{MAX_PAGE, RangeQuery, StoragedClient};
use metacore::error::ApiError;
use metacore::record::Fields;
use metacore::rid::Rid;
use metacore::socket::body::QueryParams;
use serde::Deserialize;
use tokio::sync::mpsc;
use zip::ZipWriter;

use super::archive::{
    Includes, METADATA_PREFIX, Manifest, SCHEMA_VERSION, add_plugin_dir, archive_name, deflated,
    split_field_key,
};
use crate::nested::nest;
use crate::state::State;

/// Bytes the response writer gathers before it hands a chunk over.
const CHUNK: usize = 64 * 1024;

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
pub(super) struct ExportQuery {
    pub include: Option<String>,
}

pub(super) async fn export(
    st: State,
    QueryParams(q): QueryParams<ExportQuery>,
) -> Result<Response, ApiError> {
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
    let rids = crate::routes::listing::all_roots(&st.store).await?;
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

/// Writes a whole snapshot to `out`; returns the records written.
pub async fn export_to<W: Write + Send + 'static>(
    store: &StoragedClient,
    opts: ExportOptions,
    out: W,
) -> Result<u64, ApiError> {
    let rids = crate::routes::listing::all_roots(store).await?;
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
    tx.send(Job::Entry {
        name: "manifest.json".into(),
        bytes: manifest(opts, rids.len()),
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

/// `manifest.json` of an export of `file_count` records.
fn manifest(opts: &ExportOptions, file_count: usize) -> Vec<u8> {
    let manifest = Manifest {
        schema_version: SCHEMA_VERSION,
        generated_at: opts.generated_at.clone(),
        source_host: opts.source_host.clone(),
        file_count,
        includes: Includes {
            metadata: true,
            plugin_output: opts.plugin_dir.is_some().then_some(true),
        },
    };
    serde_json::to_vec_pretty(&manifest).expect("a manifest serializes")
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
