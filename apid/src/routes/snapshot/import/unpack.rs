//! The blocking side of an import: the ZIP read one entry at a time, its
//! bounds checked first (entries, expanded bytes, free space for plugin
//! output), each record sent on as an [`Item`], plugin output written.
//! Every entry is read to its end and held to its header (CRC-32 and
//! size, [`crate::routes::snapshot::checked`]): one that is not is
//! skipped and reported, never imported or written in part.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use metacore::error::{ApiError, ErrorCode};
use metacore::record::Fields;
use metacore::rid::Rid;
use tokio::sync::mpsc;
use zip::ZipArchive;

use super::report::{ImportOptions, PluginReport};
use crate::routes::snapshot::archive::{
    MAX_MANIFEST_BYTES, METADATA_PREFIX, PLUGIN_PREFIX, PluginSkip, check_manifest, read_record,
    write_plugin_file,
};
use crate::routes::snapshot::checked::read_checked;

/// One `metadata/<rid>.json` read from the archive.
pub(super) struct Item {
    pub(super) hash_id: String,
    pub(super) parsed: Result<(Rid, Fields), String>,
}

/// The blocking side of an import: checks the manifest, then sends each
/// `metadata/` entry, and writes (or counts, on a dry run) plugin output.
pub(super) fn read_zip(
    file: File,
    tx: &mpsc::Sender<Item>,
    opts: &ImportOptions,
) -> Result<Option<PluginReport>, ApiError> {
    let (plugin_dir, dry_run) = (opts.plugin_dir.as_path(), opts.dry_run);
    let mut zip = ZipArchive::new(file)
        .map_err(|e| ApiError::bad_request(format!("not a ZIP archive: {e}")))?;
    check_bounds(&mut zip, opts)?;
    read_manifest(&mut zip)?;
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
            let declared = entry.size();
            let item = record_item(stem, &mut entry, declared);
            if tx.blocking_send(item).is_err() {
                return Err(ApiError::internal("the import stopped"));
            }
        } else if let Some(rel) = name.strip_prefix(PLUGIN_PREFIX) {
            // Read to its end but never past what it declares, which the
            // bounds counted.
            let declared = entry.size();
            let written = if entry.is_symlink() {
                Err(PluginSkip::Link)
            } else {
                write_plugin_file(plugin_dir, rel, &mut entry, declared, dry_run)
            };
            plugin.get_or_insert_default().count(&name, rel, written);
        }
    }
    Ok(plugin)
}

/// Reads and checks `manifest.json`, which every snapshot has.
fn read_manifest(zip: &mut ZipArchive<File>) -> Result<(), ApiError> {
    let mut entry = zip
        .by_name("manifest.json")
        .map_err(|_| ApiError::bad_request("the snapshot has no manifest.json"))?;
    let declared = entry.size();
    let bytes = read_checked(&mut entry, declared, MAX_MANIFEST_BYTES)
        .map_err(|e| ApiError::bad_request(format!("cannot read manifest.json: {e}")))?;
    check_manifest(&bytes)
}

/// The record of `metadata/<stem>.json` (`declared` bytes long), or why
/// it is none.
fn record_item(stem: &str, entry: &mut impl Read, declared: u64) -> Item {
    match Rid::parse(stem) {
        Ok(rid) => Item {
            hash_id: rid.to_string(),
            parsed: read_record(entry, declared).map(|f| (rid, f)),
        },
        Err(e) => Item {
            hash_id: stem.to_owned(),
            parsed: Err(format!("{stem:?} is not a RID: {e}")),
        },
    }
}

/// Refuses, before anything is imported or written, an archive with more
/// entries than `max_entries` or whose entries declare more than
/// `max_bytes` expanded (413), and plugin output larger than the free
/// space where it goes (507). Each entry is then read no further than it
/// declared, so the totals hold whatever the compressed data says.
fn check_bounds(zip: &mut ZipArchive<File>, opts: &ImportOptions) -> Result<(), ApiError> {
    let entries = zip.len() as u64;
    if entries > opts.max_entries {
        return Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "the archive holds {entries} entries; at most {} are imported \
                 (META_CORE_IMPORT_MAX_ENTRIES)",
                opts.max_entries
            ),
        ));
    }
    let (mut total, mut plugin) = (0u64, 0u64);
    for i in 0..zip.len() {
        let Ok(entry) = zip.by_index_raw(i) else {
            continue;
        };
        total = total.saturating_add(entry.size());
        if entry.name().is_ok_and(|n| n.starts_with(PLUGIN_PREFIX)) {
            plugin = plugin.saturating_add(entry.size());
        }
    }
    if total > opts.max_bytes {
        return Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "the archive expands to {total} bytes; at most {} are imported \
                 (META_CORE_IMPORT_MAX_BYTES)",
                opts.max_bytes
            ),
        ));
    }
    if plugin > 0
        && !opts.dry_run
        && let Some(free) = free_bytes(&opts.plugin_dir)
        && plugin > free
    {
        return Err(ApiError::new(
            ErrorCode::InsufficientStorage,
            format!("the plugin output is {plugin} bytes; {free} are free where it goes"),
        ));
    }
    Ok(())
}

/// Free bytes for an unprivileged writer on the volume of `dir`, or of
/// its nearest existing ancestor.
fn free_bytes(dir: &Path) -> Option<u64> {
    let mut at = dir;
    loop {
        if let Ok(v) = rustix::fs::statvfs(at) {
            return Some(v.f_bavail.saturating_mul(v.f_frsize));
        }
        at = at.parent()?;
    }
}
