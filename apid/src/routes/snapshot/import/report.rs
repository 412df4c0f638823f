//! What an import is asked ([`ImportOptions`]) and what it answers
//! ([`ImportReport`]): the route, the ZIP reader and the callers in
//! `tests/` all speak these, and this module speaks none of theirs.

use std::path::PathBuf;

use metacore::api::storaged::{ImportConflict, ImportCounts, ImportMode};
use serde::Serialize;

use crate::routes::snapshot::archive::PluginSkip;

/// Skipped plugin output entries the answer names (all are counted in
/// `skipped`), so that an archive of a million bad entries does not make a
/// million-line answer.
const MAX_SKIPPED_LISTED: usize = 100;

#[derive(Debug, Clone)]
pub struct ImportOptions {
    pub mode: ImportMode,
    pub conflict: ImportConflict,
    pub dry_run: bool,
    /// `$FILES_PATH/plugin`, where `cache/plugin-output/<rel>` goes.
    pub plugin_dir: PathBuf,
    /// Most entries the archive may hold (`META_CORE_IMPORT_MAX_ENTRIES`).
    pub max_entries: u64,
    /// Most bytes it may expand to (`META_CORE_IMPORT_MAX_BYTES`).
    pub max_bytes: u64,
}

/// One `metadata/<rid>.json` of the answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileReport {
    pub hash_id: String,
    #[serde(flatten)]
    pub counts: ImportCounts,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What became of the archive's `cache/plugin-output/` entries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginReport {
    pub written: u64,
    pub skipped: u64,
    /// The first skipped entries (at most [`MAX_SKIPPED_LISTED`];
    /// `skipped` counts them all).
    pub skipped_files: Vec<SkippedFile>,
}

/// One skipped plugin output entry and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedFile {
    /// Its path under `cache/plugin-output/`, as the archive names it.
    pub path: String,
    pub error: String,
}

/// The answer of `POST /api/snapshot/import`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    pub mode: ImportMode,
    pub conflict: ImportConflict,
    pub dry_run: bool,
    pub total_files: u64,
    pub files_ok: u64,
    pub files_failed: u64,
    pub files: Vec<FileReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin_output: Option<PluginReport>,
}

impl ImportReport {
    pub(super) fn push(&mut self, file: FileReport) {
        self.total_files += 1;
        match file.error {
            None => self.files_ok += 1,
            Some(_) => self.files_failed += 1,
        }
        self.files.push(file);
    }
}

impl PluginReport {
    /// Counts the plugin output entry `name` (at `rel`) as written or
    /// skipped; the first skips are listed with their reason.
    pub(super) fn count(&mut self, name: &str, rel: &str, written: Result<(), PluginSkip>) {
        match written {
            Ok(()) => self.written += 1,
            Err(why) => {
                tracing::warn!(entry = %name, "snapshot import skips a plugin output entry: {why}");
                self.skipped += 1;
                if self.skipped_files.len() < MAX_SKIPPED_LISTED {
                    self.skipped_files.push(SkippedFile {
                        path: rel.to_owned(),
                        error: why.to_string(),
                    });
                }
            }
        }
    }
}
