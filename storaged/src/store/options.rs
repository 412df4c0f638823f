//! How to open a store.

use std::path::PathBuf;

use crate::engine::batch;
use crate::streams::{DEFAULT_RETENTION, DEFAULT_TRIM_EVERY};

/// How to open a store.
#[derive(Debug, Clone)]
pub struct Options {
    pub db_path: PathBuf,
    pub lock_path: PathBuf,
    pub cache_mb: u32,
    pub reader_cache_mb: u32,
    pub readers: u32,
    /// MiB kept in `<db>-reserve` for a full volume's checkpoint (0: none).
    pub reserve_mb: u32,
    /// Field prefixes search does not see.
    pub exclude_prefixes: Vec<String>,
    /// Keep the search index (always, but for the benchmark that
    /// measures what it costs: without it, search scans).
    pub search_index: bool,
    /// Entries kept per stream.
    pub retention: u64,
    /// Appends between two trims.
    pub trim_every: u64,
    pub batch: batch::BatchLimits,
}

impl Options {
    /// Options from the configuration.
    pub fn from_config(cfg: &metacore::Config) -> Self {
        let layout = cfg.layout();
        Self {
            db_path: layout.db.clone(),
            lock_path: layout.db_lock(),
            cache_mb: cfg.db_cache_mb,
            reader_cache_mb: cfg.db_reader_cache_mb,
            readers: cfg.db_readers,
            reserve_mb: cfg.db_reserve_mb,
            exclude_prefixes: cfg.index_exclude_prefixes.clone(),
            search_index: true,
            retention: cfg.stream_retention,
            trim_every: cfg.stream_trim_every,
            batch: batch::BatchLimits::default(),
        }
    }

    /// Defaults for a database at `db_path` (tests, tools, benchmarks).
    pub fn for_path(db_path: impl Into<PathBuf>) -> Self {
        let db_path = db_path.into();
        Self {
            lock_path: metacore::layout::db_lock_path(&db_path),
            db_path,
            cache_mb: 64,
            reader_cache_mb: 16,
            readers: 8,
            reserve_mb: 8,
            exclude_prefixes: crate::search::DEFAULT_EXCLUDE_PREFIXES
                .iter()
                .map(|p| p.to_string())
                .collect(),
            search_index: true,
            retention: DEFAULT_RETENTION,
            trim_every: DEFAULT_TRIM_EVERY,
            batch: batch::BatchLimits::default(),
        }
    }
}
