//! `$META_CORE_PATH/watchers.json`: the polling watchers, in the
//! original's format.
//!
//! ```json
//! {"version":1,"watchers":[{"id":"1a2b3c4d","path":"/files/watch","intervalMs":30000,"enabled":true,"createdAt":1700000000000}]}
//! ```
//!
//! On first start the defaults `FILES_PATH/watch` and `FILES_PATH/plugin`
//! are seeded and their folders made; on later starts a missing default is
//! added back. The file is written whole (temp file and rename, two-space
//! indent as the original wrote it, mode 0600: only meta-core reads it). A
//! file that cannot be read as this format is set aside as
//! `watchers.json.unreadable-<ms>`, reported, and the defaults start over:
//! it is never overwritten in place.
//!
//! A watcher's path is a folder inside `FILES_PATH`, given absolute or
//! relative to it; `..`, NUL, a path outside `FILES_PATH` (symlinks
//! followed) or one that is not a folder is refused with a 400.

use std::path::{Component, Path, PathBuf};

use metacore::api::watcherd::{NewWatcher, WatcherConfig, WatcherUpdate};
use metacore::error::ApiError;
use metacore::files::{StateFile, read_state};
use serde::{Deserialize, Serialize};

/// The file's name under `META_CORE_PATH`.
pub const FILE_NAME: &str = "watchers.json";
/// The folders under `FILES_PATH` watched by default.
pub const DEFAULT_DIRS: [&str; 2] = ["watch", "plugin"];
/// An interval given below [`MIN_INTERVAL_MS`] on create becomes this.
pub const DEFAULT_INTERVAL_MS: u64 = 30_000;
/// Most watchers `watchers.json` may hold (each is a walk every interval).
pub const MAX_WATCHERS: usize = 256;
/// The shortest polling interval.
pub const MIN_INTERVAL_MS: u64 = 5_000;

const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct WatchersFile {
    version: u32,
    watchers: Vec<WatcherConfig>,
}

/// Why the file could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot read or write {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The watchers and the file that holds them.
#[derive(Debug)]
pub struct Watchers {
    file: PathBuf,
    files_path: PathBuf,
    watchers: Vec<WatcherConfig>,
}

/// What opening found worth an operator's attention.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Opened {
    /// Where an unreadable file was moved, and why it could not be read.
    pub set_aside: Option<(PathBuf, String)>,
    /// Defaults added (first start, or put back).
    pub seeded: Vec<String>,
}

impl Watchers {
    /// Reads `META_CORE_PATH/watchers.json` (or starts one), adds back any
    /// missing default, makes the default folders, and saves if anything
    /// changed.
    pub fn open(
        meta_core_path: &Path,
        files_path: &Path,
        now_ms: u64,
    ) -> Result<(Self, Opened), OpenError> {
        let file = meta_core_path.join(FILE_NAME);
        let io = |source, path: &Path| OpenError::Io {
            path: path.to_owned(),
            source,
        };
        let mut opened = Opened::default();
        let read = read_state::<WatchersFile>(&file, now_ms, |f| {
            (f.version == VERSION)
                .then_some(())
                .ok_or_else(|| format!("version {} (this meta-core reads {VERSION})", f.version))
        })
        .map_err(|e| io(e, &file))?;
        let watchers = match read {
            StateFile::Read(f) => f.watchers,
            StateFile::Missing => Vec::new(),
            StateFile::SetAside { kept, why } => {
                opened.set_aside = Some((kept, why));
                Vec::new()
            }
        };
        let mut w = Self {
            file,
            files_path: files_path.to_owned(),
            watchers,
        };
        for dir in DEFAULT_DIRS {
            let path = files_path.join(dir);
            // Other containers read them (a sorter's watch/, a plugin's
            // plugin/): 0755, whatever the umask.
            metacore::files::ensure_dir_tree(&path, metacore::files::SHARED_DIR)
                .map_err(|e| io(e, &path))?;
            let path = path.display().to_string();
            if !w.watchers.iter().any(|c| c.path == path) {
                w.watchers.push(WatcherConfig {
                    id: new_id(&w.watchers),
                    path: path.clone(),
                    interval_ms: DEFAULT_INTERVAL_MS,
                    enabled: true,
                    created_at: now_ms,
                });
                opened.seeded.push(path);
            }
        }
        if !opened.seeded.is_empty() || opened.set_aside.is_some() {
            w.save().map_err(|e| io(e, &w.file))?;
        }
        Ok((w, opened))
    }

    pub fn list(&self) -> &[WatcherConfig] {
        &self.watchers
    }

    pub fn get(&self, id: &str) -> Result<&WatcherConfig, ApiError> {
        self.watchers
            .iter()
            .find(|c| c.id == id)
            .ok_or_else(|| not_found(id))
    }

    /// Adds a watcher; an interval under the minimum becomes the default,
    /// as in the original.
    pub fn create(&mut self, new: NewWatcher, now_ms: u64) -> Result<WatcherConfig, ApiError> {
        if self.watchers.len() >= MAX_WATCHERS {
            return Err(ApiError::bad_request(format!(
                "at most {MAX_WATCHERS} watchers; delete one first"
            )));
        }
        let path = check_path(&self.files_path, &new.path)?;
        if self.watchers.iter().any(|c| c.path == path) {
            return Err(ApiError::bad_request(format!(
                "a watcher of {path} exists already"
            )));
        }
        let interval_ms = match new.interval_ms {
            Some(ms) if ms >= MIN_INTERVAL_MS => ms,
            _ => DEFAULT_INTERVAL_MS,
        };
        let config = WatcherConfig {
            id: new_id(&self.watchers),
            path,
            interval_ms,
            enabled: new.enabled.unwrap_or(false),
            created_at: now_ms,
        };
        self.watchers.push(config.clone());
        self.save_or_undo(|w| {
            w.watchers.pop();
        })?;
        Ok(config)
    }

    /// Changes a watcher; an interval under the minimum is raised to it,
    /// as in the original.
    pub fn update(&mut self, id: &str, change: WatcherUpdate) -> Result<WatcherConfig, ApiError> {
        let i = self.index(id)?;
        let before = self.watchers[i].clone();
        let mut after = before.clone();
        if let Some(p) = &change.path {
            after.path = check_path(&self.files_path, p)?;
            if self
                .watchers
                .iter()
                .any(|c| c.id != id && c.path == after.path)
            {
                return Err(ApiError::bad_request(format!(
                    "a watcher of {} exists already",
                    after.path
                )));
            }
        }
        if let Some(ms) = change.interval_ms {
            after.interval_ms = ms.max(MIN_INTERVAL_MS);
        }
        if let Some(on) = change.enabled {
            after.enabled = on;
        }
        self.watchers[i] = after.clone();
        self.save_or_undo(|w| w.watchers[i] = before)?;
        Ok(after)
    }

    pub fn delete(&mut self, id: &str) -> Result<WatcherConfig, ApiError> {
        let i = self.index(id)?;
        let gone = self.watchers.remove(i);
        let back = gone.clone();
        self.save_or_undo(|w| w.watchers.insert(i, back))?;
        Ok(gone)
    }

    fn index(&self, id: &str) -> Result<usize, ApiError> {
        self.watchers
            .iter()
            .position(|c| c.id == id)
            .ok_or_else(|| not_found(id))
    }

    /// Saves; on failure puts the change back (the file and memory agree)
    /// and answers 500.
    fn save_or_undo(&mut self, undo: impl FnOnce(&mut Self)) -> Result<(), ApiError> {
        match self.save() {
            Ok(()) => Ok(()),
            Err(e) => {
                undo(self);
                Err(ApiError::internal(format!("cannot save {FILE_NAME}: {e}")))
            }
        }
    }

    fn save(&self) -> std::io::Result<()> {
        let file = WatchersFile {
            version: VERSION,
            watchers: self.watchers.clone(),
        };
        let mut json = serde_json::to_vec_pretty(&file).expect("the file serializes");
        json.push(b'\n');
        metacore::files::write_atomic(&self.file, &json, 0o600)
    }
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("watcher not found: {id}"))
}

/// 8 lower-case hex characters no other watcher has.
fn new_id(taken: &[WatcherConfig]) -> String {
    loop {
        let id = format!("{:08x}", rand::random::<u32>());
        if !taken.iter().any(|c| c.id == id) {
            return id;
        }
    }
}

/// A watcher path checked: a folder inside `FILES_PATH` (symlinks
/// followed), returned absolute under `FILES_PATH` as given (not
/// resolved, so the configured name is kept).
pub fn check_path(files_path: &Path, raw: &str) -> Result<String, ApiError> {
    let bad = |why: &str| ApiError::bad_request(format!("watcher path {raw:?}: {why}"));
    if raw.trim().is_empty() {
        return Err(bad("empty"));
    }
    if raw.contains('\0') {
        return Err(bad("contains NUL"));
    }
    let given = Path::new(raw);
    if given
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(bad("contains .."));
    }
    // Lexically normal (no `.`, no `//`), so one folder has one spelling
    // and a second watcher of it is refused as a duplicate.
    let given: PathBuf = given
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    let path = if given.is_absolute() {
        given
    } else {
        files_path.join(given)
    };
    // Under FILES_PATH as written too (not only once symlinks are
    // resolved): events and records name paths as written.
    if !path.starts_with(files_path) {
        return Err(bad("outside FILES_PATH"));
    }
    let root = std::fs::canonicalize(files_path)
        .map_err(|e| ApiError::internal(format!("FILES_PATH cannot be resolved: {e}")))?;
    let real = std::fs::canonicalize(&path).map_err(|_| bad("no such folder"))?;
    if !real.starts_with(&root) {
        return Err(bad("outside FILES_PATH"));
    }
    if !real.is_dir() {
        return Err(bad("not a folder"));
    }
    // Absolute under FILES_PATH as configured, without a trailing slash.
    let text = path.display().to_string();
    Ok(text.trim_end_matches('/').to_owned())
}

#[cfg(test)]
#[path = "watchers_test.rs"]
mod tests;

#[cfg(test)]
#[path = "watchers_fuzz_test.rs"]
mod fuzz_test;
