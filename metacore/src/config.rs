//! `Config`: every environment variable of the contract with its default,
//! read once at start. A malformed value is an error that names the
//! variable, the value and what was expected; nothing falls back silently.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

mod read;
pub mod settings;

use read::{Reader, cors_origins};

/// How daemons write their logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// The whole configuration. See `docs/configuration.md`.
#[derive(Clone)]
pub struct Config {
    pub meta_core_path: PathBuf,
    pub files_path: PathBuf,
    pub service_name: String,
    pub service_version: String,
    pub api_port: u16,
    pub base_url: Option<String>,
    pub db_path: PathBuf,
    pub db_cache_mb: u32,
    pub db_reader_cache_mb: u32,
    pub db_readers: u32,
    pub db_reserve_mb: u32,
    /// Field prefixes search does not see (`META_CORE_INDEX_EXCLUDE_PREFIXES`).
    pub index_exclude_prefixes: Vec<String>,
    pub http_port: u16,
    /// Ports apid also listens on, on the same host, serving the same API
    /// under the same budgets (`META_CORE_HTTP_EXTRA_PORTS`, comma-separated;
    /// the image sets 80, where the mesh reads `/webdav/`).
    pub http_extra_ports: Vec<u16>,
    pub http_host: String,
    pub health_check_interval: Duration,
    pub heartbeat_interval: Duration,
    pub stale_threshold: Duration,
    pub cleanup_interval: Duration,
    pub dead_service_threshold: Duration,
    pub watch_interval: Duration,
    pub debounce: Duration,
    pub enable_file_watcher: bool,
    pub election_retry: Duration,
    pub run_dir: PathBuf,
    pub log_format: LogFormat,
    /// Where the supervisor writes `<daemon>.log` (`META_CORE_LOG_DIR`,
    /// default `$META_CORE_PATH/logs`).
    pub log_dir: PathBuf,
    /// Size at which a daemon's log file is rotated (`META_CORE_LOG_MAX_BYTES`).
    pub log_max_bytes: u64,
    /// Rotated files kept per daemon, `<daemon>.log.1` newest (`META_CORE_LOG_KEEP`).
    pub log_keep: u32,
    /// Where the supervisor finds the daemon binaries (`META_CORE_BIN_DIR`,
    /// default: the directory of the `meta-core` executable).
    pub bin_dir: Option<PathBuf>,
    /// Bearer token for mutating admin routes (`META_CORE_ADMIN_TOKEN`);
    /// never printed. Unset: the token file's ([`crate::admin`]).
    pub admin_token: Option<String>,
    /// `META_CORE_ADMIN_OPEN=true`: the admin routes need no token, as in
    /// the original (an explicit opt-out; never together with a token).
    pub admin_open: bool,
    /// Entries kept per event stream (`META_CORE_STREAM_RETENTION`, the
    /// seeds' ~100k); a follower whose cursor is older gets a `gap`.
    pub stream_retention: u64,
    /// Appends between two trims of a stream (`META_CORE_STREAM_TRIM_EVERY`).
    pub stream_trim_every: u64,
    /// A connection whose peer takes no byte of an answer for this long is
    /// closed (`META_CORE_HTTP_WRITE_STALL_MS`): an SSE follower that
    /// stopped reading, a download nobody reads.
    pub http_write_stall: Duration,
    /// Most time a client may take to send a request's headers, counted
    /// from the end of the previous answer on a kept-alive connection
    /// (`META_CORE_HTTP_HEADER_TIMEOUT_MS`); then the connection is closed.
    pub http_header_timeout: Duration,
    /// Most time a request body may go without a byte
    /// (`META_CORE_HTTP_BODY_TIMEOUT_MS`); then the request fails (408).
    pub http_body_timeout: Duration,
    /// Most HTTP connections apid holds at once, SSE followers included
    /// (`META_CORE_HTTP_MAX_CONNECTIONS`); past it, new ones wait in the
    /// kernel's accept queue until one ends.
    pub http_max_connections: usize,
    /// Most connections one client (an IPv4 address, an IPv6 /64) holds
    /// at once (`META_CORE_HTTP_MAX_CONNECTIONS_PER_CLIENT`); one more is
    /// answered 429 and closed.
    pub http_max_connections_per_client: usize,
    /// Silence after which an SSE stream gets a `:keep-alive` comment
    /// (`META_CORE_SSE_KEEPALIVE_MS`, default 30 s: followers time out
    /// reads at 35 s).
    pub sse_keepalive: Duration,
    /// Batches a live SSE follower may fall behind the newest
    /// (`META_CORE_SSE_QUEUE`); past that it catches up from the store, or,
    /// if it stopped reading, is cut off to reconnect with its last ID.
    pub sse_queue: usize,
    /// How long apid gathers new entries into one batch, written to each
    /// follower at once (`META_CORE_SSE_BATCH_MS`; 0 sends each commit's
    /// entries as they come).
    pub sse_batch: Duration,
    /// SSE streams served at once per apid (`META_CORE_SSE_MAX_FOLLOWERS`);
    /// one more is answered 503 with `Retry-After`.
    pub sse_max_followers: usize,
    /// SSE streams one client holds at once
    /// (`META_CORE_SSE_MAX_FOLLOWERS_PER_CLIENT`); one more is a 429.
    pub sse_max_followers_per_client: usize,
    /// Origins whose pages may call the API from a browser
    /// (`META_CORE_CORS_ORIGINS`): `None` is any (`*`, the default, for
    /// every route but the admin ones); else the listed origins only, the
    /// admin routes included.
    pub cors_origins: Option<Vec<String>>,
    /// Most inotify watches (folders) watcherd takes
    /// (`META_CORE_WATCH_MAX_DIRS`; 0, the default, is the kernel's
    /// `max_user_watches`). Folders past it are polled every
    /// `WATCH_INTERVAL_MS`.
    pub watch_max_dirs: usize,
    /// Most entries a snapshot archive may hold
    /// (`META_CORE_IMPORT_MAX_ENTRIES`); a larger one is refused whole.
    pub import_max_entries: u64,
    /// Most bytes a snapshot archive may expand to, all entries together
    /// (`META_CORE_IMPORT_MAX_BYTES`, default [`IMPORT_MAX_BYTES_DEFAULT`]);
    /// a larger one is refused whole.
    pub import_max_bytes: u64,
    /// Most bytes one WebDAV COPY writes (`META_CORE_DAV_COPY_MAX_BYTES`);
    /// a larger one is refused (507) before it starts.
    pub dav_copy_max_bytes: u64,
    /// Free bytes a WebDAV COPY leaves its filesystem at least
    /// (`META_CORE_DAV_COPY_RESERVE_BYTES`, 1 GiB): room for the uploads,
    /// the store and the other writers of the volume.
    pub dav_copy_reserve_bytes: u64,
}

/// The default of `META_CORE_IMPORT_MAX_BYTES`: 4 GiB, twice the 2 GiB a
/// snapshot upload may be. A measured export of video records expands to
/// about twice its size (records alone; less with plugin output, which is
/// mostly images that do not compress), so an export as large as an
/// upload can be imports, and a 2 GiB upload cannot make meta-core expand
/// more than 4 GiB (docs/decisions.md, "An import expands at most twice
/// the upload").
pub const IMPORT_MAX_BYTES_DEFAULT: u64 = 4 << 30;

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("meta_core_path", &self.meta_core_path)
            .field("files_path", &self.files_path)
            .field("service_name", &self.service_name)
            .field("db_path", &self.db_path)
            .field(
                "http",
                &format_args!("{}:{}", self.http_host, self.http_port),
            )
            .field("run_dir", &self.run_dir)
            .field("log_format", &self.log_format)
            .field(
                "admin_token",
                &self.admin_token.as_ref().map(|_| "<redacted>"),
            )
            .field("admin_open", &self.admin_open)
            .finish_non_exhaustive()
    }
}

/// A variable that is set but cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("environment variable {var}={value:?} is invalid: expected {expected}")]
pub struct ConfigError {
    pub var: &'static str,
    pub value: String,
    pub expected: String,
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads variables through `lookup`, each by its row of [`settings`].
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        use settings as set;
        let r = Reader(lookup);
        let meta_core_path = r.path(&set::META_CORE_PATH);
        let (http_port, http_extra_ports) = http_ports(&r)?;
        Ok(Self {
            files_path: r.path(&set::FILES_PATH),
            service_name: r.text(&set::SERVICE_NAME),
            service_version: r.text(&set::SERVICE_VERSION),
            api_port: r.num(&set::API_PORT)?,
            base_url: r
                .raw(&set::BASE_URL)
                .map(|u| u.trim_end_matches('/').to_owned()),
            db_path: r.raw(&set::META_CORE_DB_PATH).map_or_else(
                || meta_core_path.join("db").join("meta-core.db"),
                PathBuf::from,
            ),
            db_cache_mb: r.num(&set::META_CORE_DB_CACHE_MB)?,
            db_reader_cache_mb: r.num(&set::META_CORE_DB_READER_CACHE_MB)?,
            db_readers: r.num(&set::META_CORE_DB_READERS)?,
            db_reserve_mb: r.num(&set::META_CORE_DB_RESERVE_MB)?,
            index_exclude_prefixes: exclude_prefixes(&r),
            http_port,
            http_extra_ports,
            http_host: r.text(&set::META_CORE_HTTP_HOST),
            health_check_interval: r.millis(&set::HEALTH_CHECK_INTERVAL_MS)?,
            heartbeat_interval: r.millis(&set::HEARTBEAT_INTERVAL_MS)?,
            stale_threshold: r.millis(&set::STALE_THRESHOLD_MS)?,
            cleanup_interval: r.millis(&set::CLEANUP_INTERVAL_MS)?,
            dead_service_threshold: r.millis(&set::DEAD_SERVICE_THRESHOLD_MS)?,
            watch_interval: r.millis(&set::WATCH_INTERVAL_MS)?,
            debounce: r.millis(&set::DEBOUNCE_MS)?,
            enable_file_watcher: r.bool(&set::ENABLE_FILE_WATCHER)?,
            election_retry: Duration::from_secs(r.num(&set::ELECTION_RETRY_SECS)?),
            run_dir: r.path(&set::META_CORE_RUN_DIR),
            log_format: log_format(&r)?,
            log_dir: r
                .raw(&set::META_CORE_LOG_DIR)
                .map_or_else(|| meta_core_path.join("logs"), PathBuf::from),
            log_max_bytes: r.num(&set::META_CORE_LOG_MAX_BYTES)?,
            log_keep: r.num(&set::META_CORE_LOG_KEEP)?,
            bin_dir: r.raw(&set::META_CORE_BIN_DIR).map(PathBuf::from),
            admin_token: r.raw(&set::META_CORE_ADMIN_TOKEN),
            admin_open: admin_open(&r)?,
            stream_retention: r.num(&set::META_CORE_STREAM_RETENTION)?,
            stream_trim_every: r.num(&set::META_CORE_STREAM_TRIM_EVERY)?,
            http_write_stall: r.millis(&set::META_CORE_HTTP_WRITE_STALL_MS)?,
            http_header_timeout: r.millis(&set::META_CORE_HTTP_HEADER_TIMEOUT_MS)?,
            http_body_timeout: r.millis(&set::META_CORE_HTTP_BODY_TIMEOUT_MS)?,
            http_max_connections: r.num(&set::META_CORE_HTTP_MAX_CONNECTIONS)?,
            http_max_connections_per_client: r
                .num(&set::META_CORE_HTTP_MAX_CONNECTIONS_PER_CLIENT)?,
            sse_keepalive: r.millis(&set::META_CORE_SSE_KEEPALIVE_MS)?,
            sse_queue: r.num(&set::META_CORE_SSE_QUEUE)?,
            sse_batch: r.millis(&set::META_CORE_SSE_BATCH_MS)?,
            sse_max_followers: r.num(&set::META_CORE_SSE_MAX_FOLLOWERS)?,
            sse_max_followers_per_client: r.num(&set::META_CORE_SSE_MAX_FOLLOWERS_PER_CLIENT)?,
            cors_origins: cors_origins(r.raw(&set::META_CORE_CORS_ORIGINS))?,
            watch_max_dirs: r.num(&set::META_CORE_WATCH_MAX_DIRS)?,
            import_max_entries: r.num(&set::META_CORE_IMPORT_MAX_ENTRIES)?,
            import_max_bytes: r.num(&set::META_CORE_IMPORT_MAX_BYTES)?,
            dav_copy_max_bytes: r.num(&set::META_CORE_DAV_COPY_MAX_BYTES)?,
            dav_copy_reserve_bytes: r.num(&set::META_CORE_DAV_COPY_RESERVE_BYTES)?,
            meta_core_path,
        })
    }

    /// The on-disk layout under `META_CORE_PATH` and `META_CORE_RUN_DIR`.
    pub fn layout(&self) -> crate::layout::Layout {
        crate::layout::Layout {
            root: self.meta_core_path.clone(),
            files: self.files_path.clone(),
            db: self.db_path.clone(),
            run_dir: self.run_dir.clone(),
        }
    }
}

/// `META_CORE_HTTP_PORT`, and the extra ports, none of them the same.
fn http_ports<F: Fn(&str) -> Option<String>>(
    r: &Reader<F>,
) -> Result<(u16, Vec<u16>), ConfigError> {
    let port = r.num(&settings::META_CORE_HTTP_PORT)?;
    let extra = r.ports(&settings::META_CORE_HTTP_EXTRA_PORTS)?;
    if extra.contains(&port) {
        return Err(ConfigError {
            var: settings::META_CORE_HTTP_EXTRA_PORTS.var,
            value: r.text(&settings::META_CORE_HTTP_EXTRA_PORTS),
            expected: "ports other than META_CORE_HTTP_PORT".into(),
        });
    }
    Ok((port, extra))
}

/// `META_CORE_INDEX_EXCLUDE_PREFIXES`: set but empty, nothing is excluded.
fn exclude_prefixes<F: Fn(&str) -> Option<String>>(r: &Reader<F>) -> Vec<String> {
    let s = &settings::META_CORE_INDEX_EXCLUDE_PREFIXES;
    let list = (r.0)(s.var).unwrap_or_else(|| r.text(s));
    list.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

fn log_format<F: Fn(&str) -> Option<String>>(r: &Reader<F>) -> Result<LogFormat, ConfigError> {
    let s = &settings::LOG_FORMAT;
    match r.raw(s).map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(LogFormat::Text),
        Some(v) if v == "text" || v == "pretty" => Ok(LogFormat::Text),
        Some(v) if v == "json" => Ok(LogFormat::Json),
        Some(v) => Err(Reader::<F>::bad(s, v)),
    }
}

/// `META_CORE_ADMIN_OPEN`, never together with a token.
fn admin_open<F: Fn(&str) -> Option<String>>(r: &Reader<F>) -> Result<bool, ConfigError> {
    let open = r.bool(&settings::META_CORE_ADMIN_OPEN)?;
    if open && r.raw(&settings::META_CORE_ADMIN_TOKEN).is_some() {
        return Err(ConfigError {
            var: settings::META_CORE_ADMIN_OPEN.var,
            value: "true".into(),
            expected: "false or unset when META_CORE_ADMIN_TOKEN is set \
                       (a token and open admin routes contradict each other)"
                .into(),
        });
    }
    Ok(open)
}

#[cfg(test)]
#[path = "config_test.rs"]
mod tests;
