//! The service registry of the seeds: one JSON file per service instance
//! in `$META_CORE_PATH/services/`, heartbeated by its owner, read by
//! everyone (`GET /neighbors`, `/api/neighbors`, `/api/services`).
//!
//! - meta-core's own file is `services/<SERVICE_NAME>-<hostname>.json`,
//!   written whole (temp file and rename, mode 0644: the other services of
//!   the mesh read it) at start and every `HEARTBEAT_INTERVAL_MS`, and
//!   removed on an orderly stop. apid owns it: apid runs only on the leader
//!   (a standby's supervisor starts no daemon), so a standby never
//!   heartbeats as leader.
//! - Other services write theirs with their own heartbeat, not always
//!   atomically: a file that does not parse, lacks `name` or a readable
//!   `lastHeartbeat`, or is larger than [`MAX_FILE_BYTES`] is skipped with a
//!   warning (once per file and modification time), never an error.
//! - An entry whose `lastHeartbeat` is older than `STALE_THRESHOLD_MS` is
//!   shown `stale`; every `CLEANUP_INTERVAL_MS` the files older than
//!   `DEAD_SERVICE_THRESHOLD_MS` are removed.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Instant;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use metacore::Config;
use metacore::clock::{parse_rfc3339_ms, unix_ms};
use metacore::shutdown::Shutdown;
use metacore::sync::Locked;
use metacore::urls::Urls;
use serde::Serialize;
use serde_json::{Map, Value};

/// Largest registry file read.
pub(crate) const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Most registry files read per listing.
pub(crate) const MAX_FILES: usize = 1000;

/// One entry as the registry lists it: the file's own fields, as written,
/// with `status` set to `stale` when its heartbeat is too old.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub file: String,
    pub name: String,
    pub last_heartbeat_ms: u64,
    pub stale: bool,
    pub fields: Map<String, Value>,
}

/// meta-core's own registry file: the later original's fields (`name`,
/// `hostname`, `baseUrl`, `status`, `lastHeartbeat`) and the earlier one's
/// that other services still read (`version`, `pid`, `capabilities`,
/// `startedAt`), with the API's and WebDAV's URLs. The fields go in the
/// order of their names, as the file was written before it was a type.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct OwnEntry<'a> {
    api_url: &'a str,
    base_url: &'a str,
    capabilities: &'static [&'static str],
    hostname: &'a str,
    last_heartbeat: String,
    name: &'a str,
    pid: u32,
    started_at: &'a str,
    status: &'static str,
    version: &'a str,
    webdav_url: &'a str,
}

/// An entry as a neighbour: the shape `/neighbors` had in the original,
/// `lastSeen` in Unix seconds; the fields in the order of their names, as
/// [`OwnEntry`]'s.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Neighbor {
    addr: String,
    base_url: String,
    caps: Value,
    instance: String,
    last_seen: f64,
    name: String,
    /// Always empty: meta-core's registry carries no resources.
    resources: [(); 0],
    status: String,
    version: String,
}

/// The registry folder and the settings that age its entries.
#[derive(Debug)]
pub(crate) struct Registry {
    dir: PathBuf,
    own: PathBuf,
    name: String,
    version: String,
    urls: Urls,
    started: String,
    heartbeat: Duration,
    stale_after: Duration,
    dead_after: Duration,
    cleanup_every: Duration,
    /// Files already warned about, with the mtime they had (a file written
    /// again is warned about again if still bad); pruned to the files there.
    warned: Mutex<HashMap<String, u64>>,
    /// The last listing and when it was read: listings within
    /// [`LISTING_TTL`] share it, and concurrent callers share one read.
    listing: tokio::sync::Mutex<Option<(Instant, Vec<Entry>)>>,
}

/// How long one read of the registry folder serves the listings.
const LISTING_TTL: Duration = Duration::from_secs(1);

/// A time as RFC 3339 in UTC with milliseconds.
fn rfc3339(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// A file name safe for one path segment.
fn segment(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Registry {
    pub(crate) fn new(config: &Config, urls: &Urls) -> Self {
        let dir = config.meta_core_path.join("services");
        let name = config.service_name.clone();
        let own = dir.join(format!(
            "{}-{}.json",
            segment(&name),
            segment(&urls.hostname)
        ));
        Self {
            dir,
            own,
            name,
            version: config.service_version.clone(),
            urls: urls.clone(),
            started: rfc3339(SystemTime::now()),
            heartbeat: config.heartbeat_interval,
            stale_after: config.stale_threshold,
            dead_after: config.dead_service_threshold,
            cleanup_every: config.cleanup_interval,
            warned: Mutex::new(HashMap::new()),
            listing: tokio::sync::Mutex::new(None),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// meta-core's own entry, as written to its file.
    fn own_entry(&self) -> OwnEntry<'_> {
        OwnEntry {
            name: &self.name,
            hostname: &self.urls.hostname,
            base_url: &self.urls.base_url,
            api_url: &self.urls.api_url,
            webdav_url: &self.urls.webdav_url,
            status: "running",
            version: &self.version,
            pid: std::process::id(),
            capabilities: &["meta-core"],
            started_at: &self.started,
            last_heartbeat: rfc3339(SystemTime::now()),
        }
    }

    /// Writes meta-core's own file.
    fn beat(&self) -> std::io::Result<()> {
        metacore::files::ensure_dir(&self.dir, metacore::files::SHARED_DIR)?;
        let mut json = serde_json::to_vec_pretty(&self.own_entry()).expect("the entry serializes");
        json.push(b'\n');
        metacore::files::write_atomic(&self.own, &json, metacore::files::SHARED_FILE)
    }

    /// Heartbeats until `shutdown`, cleans every `CLEANUP_INTERVAL_MS`,
    /// and removes its own file at the end.
    pub(crate) async fn run(self: std::sync::Arc<Self>, shutdown: Shutdown) {
        let mut beat = tokio::time::interval(self.heartbeat);
        let mut clean = tokio::time::interval(self.cleanup_every);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        clean.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tokio::select! {
                () = shutdown.wait() => break,
                _ = beat.tick() => {
                    let me = self.clone();
                    let r = tokio::task::spawn_blocking(move || me.beat()).await;
                    match r {
                        Ok(Ok(())) => failing = false,
                        Ok(Err(e)) if !failing => {
                            failing = true;
                            tracing::warn!(file = %self.own.display(), "cannot write the registry file: {e}");
                        }
                        _ => {}
                    }
                }
                _ = clean.tick() => {
                    let me = self.clone();
                    let _ = tokio::task::spawn_blocking(move || me.clean()).await;
                }
            }
        }
        match std::fs::remove_file(&self.own) {
            Ok(()) => tracing::info!("removed the registry file"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("cannot remove the registry file: {e}"),
        }
    }

    /// Removes the files of dead services: both the heartbeat inside (when
    /// it can be read, and is not in the future by more than the threshold:
    /// a skewed clock) and the file's mtime older than the dead threshold,
    /// the mtime looked at just before the removal (a service that
    /// restarted meanwhile keeps its fresh file).
    fn clean(&self) {
        let now = unix_ms();
        let dead = self.dead_after.as_millis() as u64;
        let old = |t: u64| now.saturating_sub(t) > dead;
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let files = dir
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .filter(|p| *p != self.own && p.extension().is_some_and(|x| x == "json"))
            .take(MAX_FILES);
        for path in files {
            let beat = self
                .read(&path)
                .map(|en| en.last_heartbeat_ms)
                .filter(|b| *b <= now + dead);
            if beat.is_some_and(|b| !old(b)) || !mtime_ms(&path).is_some_and(old) {
                continue;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    tracing::info!(file = %path.display(), "removed a dead service's registry file")
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(file = %path.display(), "cannot remove a dead service's file: {e}")
                }
            }
        }
    }

    /// One file, tolerantly: `None` (warned once) when it cannot be used.
    fn read(&self, path: &Path) -> Option<Entry> {
        let file = path.file_name()?.to_string_lossy().into_owned();
        let mtime = mtime_ms(path).unwrap_or(0);
        let warn = |why: &str| {
            let mut warned = self.warned.locked();
            if warned.insert(file.clone(), mtime) != Some(mtime) {
                tracing::warn!(file, "skipping a registry file: {why}");
            }
        };
        // Opened without blocking (a FIFO is no registry file), checked by
        // fstat, read no further than the limit.
        let f = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .ok()?
        };
        if !f.metadata().is_ok_and(|m| m.is_file()) {
            return None;
        }
        let mut bytes = Vec::new();
        f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).ok()?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            warn("larger than 64 KiB");
            return None;
        }
        let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(&bytes) else {
            warn("not a JSON object (half-written?)");
            return None;
        };
        let Some(name) = fields
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            warn("no name");
            return None;
        };
        let Some(last) = fields
            .get("lastHeartbeat")
            .and_then(Value::as_str)
            .and_then(parse_rfc3339_ms)
        else {
            warn("no readable lastHeartbeat");
            return None;
        };
        let stale = unix_ms().saturating_sub(last) > self.stale_after.as_millis() as u64;
        Some(Entry {
            file,
            name,
            last_heartbeat_ms: last,
            stale,
            fields,
        })
    }

    /// Every usable entry, newest heartbeat first, read at most once per
    /// [`LISTING_TTL`] whatever the number of callers.
    pub(crate) async fn listing(self: &Arc<Self>) -> Vec<Entry> {
        let mut cache = self.listing.lock().await;
        if let Some((at, list)) = cache.as_ref()
            && at.elapsed() < LISTING_TTL
        {
            return list.clone();
        }
        let me = self.clone();
        let list = tokio::task::spawn_blocking(move || me.entries())
            .await
            .unwrap_or_default();
        *cache = Some((Instant::now(), list.clone()));
        list
    }

    /// Every usable entry, newest heartbeat first (blocking).
    fn entries(&self) -> Vec<Entry> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        // meta-core's own file first, so the cap never leaves it out.
        let mut paths: Vec<PathBuf> = vec![self.own.clone()];
        paths.extend(
            dir.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.path())
                .filter(|p| *p != self.own && p.extension().is_some_and(|x| x == "json"))
                .take(MAX_FILES - 1),
        );
        {
            let names: std::collections::HashSet<String> = paths
                .iter()
                .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .collect();
            let mut warned = self.warned.locked();
            warned.retain(|f, _| names.contains(f));
        }
        let mut out: Vec<Entry> = paths.iter().filter_map(|p| self.read(p)).collect();
        out.sort_by(|a, b| {
            b.last_heartbeat_ms
                .cmp(&a.last_heartbeat_ms)
                .then_with(|| a.file.cmp(&b.file))
        });
        out
    }

    pub(crate) fn own_file_name(&self) -> String {
        self.own
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

fn mtime_ms(path: &Path) -> Option<u64> {
    let m = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(m.duration_since(UNIX_EPOCH).ok()?.as_millis() as u64)
}

impl Entry {
    /// The file's fields, with `status` `stale` when the heartbeat is old.
    pub(crate) fn service(&self) -> Map<String, Value> {
        let mut f = self.fields.clone();
        if self.stale {
            f.insert("status".into(), Value::String("stale".into()));
        } else if !f.get("status").is_some_and(Value::is_string) {
            // As /neighbors shows it: a fresh entry without a status runs.
            f.insert("status".into(), Value::String("running".into()));
        }
        f
    }

    /// The entry as a neighbour ([`Neighbor`]).
    pub(crate) fn neighbor(&self) -> Neighbor {
        let s = |k: &str| self.fields.get(k).and_then(Value::as_str).unwrap_or("");
        let base = if s("baseUrl").is_empty() {
            s("api")
        } else {
            s("baseUrl")
        };
        let addr = base
            .split("://")
            .nth(1)
            .map(|rest| rest.split('/').next().unwrap_or(""))
            .unwrap_or("");
        let caps = self
            .fields
            .get("capabilities")
            .filter(|v| v.is_array())
            .cloned()
            .unwrap_or(Value::Array(Vec::new()));
        let status = if self.stale {
            "stale"
        } else if s("status").is_empty() {
            "running"
        } else {
            s("status")
        };
        Neighbor {
            name: self.name.clone(),
            instance: s("hostname").to_owned(),
            version: s("version").to_owned(),
            status: status.to_owned(),
            caps,
            resources: [],
            base_url: base.to_owned(),
            addr: addr.to_owned(),
            last_seen: self.last_heartbeat_ms as f64 / 1000.0,
        }
    }
}

#[cfg(test)]
#[path = "registry_test.rs"]
mod tests;

#[cfg(test)]
#[path = "registry_fuzz_test.rs"]
mod fuzz_test;

#[cfg(test)]
mod clean_tests {
    use super::*;

    #[test]
    fn a_file_written_lately_survives_the_cleaner() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry {
            dir: dir.path().to_owned(),
            own: dir.path().join("me.json"),
            name: "meta-core".into(),
            version: "1".into(),
            urls: Urls {
                hostname: "h".into(),
                base_url: "b".into(),
                api_url: "a".into(),
                redis_url: String::new(),
                webdav_url: "w".into(),
                webdav_url_internal: "wi".into(),
            },
            started: String::new(),
            heartbeat: Duration::from_secs(1),
            stale_after: Duration::from_secs(3),
            dead_after: Duration::from_secs(5),
            cleanup_every: Duration::from_secs(1),
            warned: Mutex::new(HashMap::new()),
            listing: tokio::sync::Mutex::new(None),
        };
        // A heartbeat long past, in a file just written: the mtime says
        // the service is alive (restarted, or its clock is wrong).
        let beat = "2026-12-01T14:51:20.250+00:00";
        assert_eq!(parse_rfc3339_ms(beat), Some(1_796_136_680_250));
        std::fs::write(
            dir.path().join("alive.json"),
            format!(r#"{{"name":"alive","lastHeartbeat":"{beat}"}}"#),
        )
        .unwrap();
        assert!(reg.read(&dir.path().join("alive.json")).is_some());
        reg.clean();
        assert!(dir.path().join("alive.json").exists());
    }
}
