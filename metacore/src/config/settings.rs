//! Every environment variable meta-core reads, as one table: its name, its
//! default, what it accepts and, for a number, its bounds. `Config` reads
//! through these rows, `docs/configuration.md` is checked against them
//! (the tests below), and an error for a bad value is made from them.

/// A variable's default, as `docs/configuration.md` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Default {
    /// A number, within the row's bounds.
    Num(u64),
    /// A text, a path or a word (`true`, `text`).
    Text(&'static str),
    /// Made from another variable (`$META_CORE_PATH/logs`).
    Derived(&'static str),
    /// Unset: the feature it names is off, or something else decides.
    Unset,
}

/// One environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub var: &'static str,
    pub default: Default,
    /// What a value must be, as a malformed one's error says it.
    pub accepts: &'static str,
    /// A number's bounds, inclusive.
    pub bounds: Option<(u64, u64)>,
}

impl Setting {
    /// What a value must be, with the bounds of a number.
    pub fn expected(&self) -> String {
        match self.bounds {
            Some((0, u64::MAX)) | None => self.accepts.to_owned(),
            Some((min, u64::MAX)) => format!("{} (at least {min})", self.accepts),
            Some((min, max)) => format!("{} ({min}-{max})", self.accepts),
        }
    }
}

const fn text(var: &'static str, default: &'static str, accepts: &'static str) -> Setting {
    Setting {
        var,
        default: Default::Text(default),
        accepts,
        bounds: None,
    }
}

const fn unset(var: &'static str, accepts: &'static str) -> Setting {
    Setting {
        var,
        default: Default::Unset,
        accepts,
        bounds: None,
    }
}

const fn num(
    var: &'static str,
    default: u64,
    accepts: &'static str,
    min: u64,
    max: u64,
) -> Setting {
    Setting {
        var,
        default: Default::Num(default),
        accepts,
        bounds: Some((min, max)),
    }
}

const MS: &str = "a number of milliseconds";
const MIB: &str = "a number of MiB";
const BYTES: &str = "a byte count";
const ANY: u64 = u64::MAX;

// Paths and names.
pub const META_CORE_PATH: Setting = text("META_CORE_PATH", "/meta-core", "a path");
pub const FILES_PATH: Setting = text("FILES_PATH", "/files", "a path");
pub const META_CORE_RUN_DIR: Setting = text("META_CORE_RUN_DIR", "/run/meta-core", "a path");
pub const META_CORE_DB_PATH: Setting = Setting {
    var: "META_CORE_DB_PATH",
    default: Default::Derived("$META_CORE_PATH/db/meta-core.db"),
    accepts: "a path",
    bounds: None,
};
pub const SERVICE_NAME: Setting = text("SERVICE_NAME", "meta-core", "a name");
pub const SERVICE_VERSION: Setting = text("SERVICE_VERSION", "1.0.0", "a version");

// The store.
pub const META_CORE_DB_CACHE_MB: Setting = num("META_CORE_DB_CACHE_MB", 64, MIB, 1, 65536);
pub const META_CORE_DB_READER_CACHE_MB: Setting =
    num("META_CORE_DB_READER_CACHE_MB", 16, MIB, 1, 65536);
pub const META_CORE_DB_READERS: Setting = num("META_CORE_DB_READERS", 8, "a reader count", 1, 256);
pub const META_CORE_DB_RESERVE_MB: Setting = num("META_CORE_DB_RESERVE_MB", 8, MIB, 0, 4096);
pub const META_CORE_INDEX_EXCLUDE_PREFIXES: Setting = text(
    "META_CORE_INDEX_EXCLUDE_PREFIXES",
    "categories/newznab/",
    "comma-separated field prefixes",
);
pub const META_CORE_STREAM_RETENTION: Setting = num(
    "META_CORE_STREAM_RETENTION",
    100_000,
    "an entry count",
    1,
    ANY,
);
pub const META_CORE_STREAM_TRIM_EVERY: Setting = num(
    "META_CORE_STREAM_TRIM_EVERY",
    10_000,
    "an append count",
    1,
    ANY,
);

// HTTP.
pub const META_CORE_HTTP_HOST: Setting = text("META_CORE_HTTP_HOST", "0.0.0.0", "an address");
pub const META_CORE_HTTP_PORT: Setting = num("META_CORE_HTTP_PORT", 9000, "a TCP port", 1, 65535);
pub const META_CORE_HTTP_EXTRA_PORTS: Setting = unset(
    "META_CORE_HTTP_EXTRA_PORTS",
    "comma-separated TCP ports (1-65535), each once",
);
pub const API_PORT: Setting = num("API_PORT", 8180, "a TCP port", 1, 65535);
pub const BASE_URL: Setting = unset("BASE_URL", "a URL");
pub const META_CORE_HTTP_WRITE_STALL_MS: Setting =
    num("META_CORE_HTTP_WRITE_STALL_MS", 10_000, MS, 100, 3_600_000);
pub const META_CORE_HTTP_HEADER_TIMEOUT_MS: Setting = num(
    "META_CORE_HTTP_HEADER_TIMEOUT_MS",
    30_000,
    MS,
    100,
    3_600_000,
);
pub const META_CORE_HTTP_BODY_TIMEOUT_MS: Setting =
    num("META_CORE_HTTP_BODY_TIMEOUT_MS", 30_000, MS, 100, 3_600_000);
pub const META_CORE_HTTP_MAX_CONNECTIONS: Setting = num(
    "META_CORE_HTTP_MAX_CONNECTIONS",
    16_384,
    "a connection count",
    16,
    1_000_000,
);
pub const META_CORE_HTTP_MAX_CONNECTIONS_PER_CLIENT: Setting = num(
    "META_CORE_HTTP_MAX_CONNECTIONS_PER_CLIENT",
    1024,
    "a connection count",
    1,
    1_000_000,
);
pub const META_CORE_CORS_ORIGINS: Setting = text(
    "META_CORE_CORS_ORIGINS",
    "*",
    "* or a comma-separated list of origins (http://host[:port], https://...)",
);

// Server-Sent Events.
pub const META_CORE_SSE_KEEPALIVE_MS: Setting = num(
    "META_CORE_SSE_KEEPALIVE_MS",
    30_000,
    "a number of milliseconds (followers time out reads at 35 s)",
    1_000,
    30_000,
);
pub const META_CORE_SSE_QUEUE: Setting =
    num("META_CORE_SSE_QUEUE", 256, "a batch count", 16, 1 << 16);
pub const META_CORE_SSE_BATCH_MS: Setting = num("META_CORE_SSE_BATCH_MS", 10, MS, 0, 1000);
pub const META_CORE_SSE_MAX_FOLLOWERS: Setting = num(
    "META_CORE_SSE_MAX_FOLLOWERS",
    10_000,
    "a follower count",
    1,
    1_000_000,
);
pub const META_CORE_SSE_MAX_FOLLOWERS_PER_CLIENT: Setting = num(
    "META_CORE_SSE_MAX_FOLLOWERS_PER_CLIENT",
    128,
    "a follower count",
    1,
    1_000_000,
);

// The registry and the supervisor's checks.
pub const HEALTH_CHECK_INTERVAL_MS: Setting = num("HEALTH_CHECK_INTERVAL_MS", 5000, MS, 1, ANY);
pub const HEARTBEAT_INTERVAL_MS: Setting = num("HEARTBEAT_INTERVAL_MS", 30_000, MS, 1, ANY);
pub const STALE_THRESHOLD_MS: Setting = num("STALE_THRESHOLD_MS", 60_000, MS, 1, ANY);
pub const CLEANUP_INTERVAL_MS: Setting = num("CLEANUP_INTERVAL_MS", 600_000, MS, 1, ANY);
pub const DEAD_SERVICE_THRESHOLD_MS: Setting =
    num("DEAD_SERVICE_THRESHOLD_MS", 600_000, MS, 1, ANY);
pub const ELECTION_RETRY_SECS: Setting =
    num("ELECTION_RETRY_SECS", 5, "a number of seconds", 1, ANY);

// The watcher.
pub const WATCH_INTERVAL_MS: Setting = num("WATCH_INTERVAL_MS", 1000, MS, 1, ANY);
pub const DEBOUNCE_MS: Setting = num("DEBOUNCE_MS", 30_000, MS, 0, ANY);
pub const ENABLE_FILE_WATCHER: Setting = text("ENABLE_FILE_WATCHER", "true", "true or false");
pub const META_CORE_WATCH_MAX_DIRS: Setting = num(
    "META_CORE_WATCH_MAX_DIRS",
    0,
    "a folder count (0 for the kernel's limit)",
    0,
    ANY,
);

// Snapshots and WebDAV.
pub const META_CORE_IMPORT_MAX_ENTRIES: Setting = num(
    "META_CORE_IMPORT_MAX_ENTRIES",
    1_000_000,
    "an entry count",
    1,
    ANY,
);
pub const META_CORE_IMPORT_MAX_BYTES: Setting = num(
    "META_CORE_IMPORT_MAX_BYTES",
    super::IMPORT_MAX_BYTES_DEFAULT,
    BYTES,
    1 << 20,
    ANY,
);
pub const META_CORE_DAV_COPY_MAX_BYTES: Setting =
    num("META_CORE_DAV_COPY_MAX_BYTES", 4 << 30, BYTES, 1 << 20, ANY);
pub const META_CORE_DAV_COPY_RESERVE_BYTES: Setting =
    num("META_CORE_DAV_COPY_RESERVE_BYTES", 1 << 30, BYTES, 0, ANY);

// Logs, binaries, the admin routes.
pub const META_CORE_LOG_DIR: Setting = Setting {
    var: "META_CORE_LOG_DIR",
    default: Default::Derived("$META_CORE_PATH/logs"),
    accepts: "a path",
    bounds: None,
};
pub const META_CORE_LOG_MAX_BYTES: Setting = num(
    "META_CORE_LOG_MAX_BYTES",
    10 << 20,
    "a number of bytes",
    4096,
    ANY,
);
pub const META_CORE_LOG_KEEP: Setting = num("META_CORE_LOG_KEEP", 3, "a file count", 0, 100);
pub const META_CORE_BIN_DIR: Setting = Setting {
    var: "META_CORE_BIN_DIR",
    default: Default::Derived("the directory of `meta-core`"),
    accepts: "a path",
    bounds: None,
};
pub const LOG_FORMAT: Setting = text("LOG_FORMAT", "text", "text or json");
/// Read by `telemetry`, not `Config`: a filter that does not parse is
/// reported and `info` used, never an error.
pub const RUST_LOG: Setting = text("RUST_LOG", "info", "a log filter");
pub const META_CORE_ADMIN_TOKEN: Setting = unset("META_CORE_ADMIN_TOKEN", "a token");
pub const META_CORE_ADMIN_OPEN: Setting = text("META_CORE_ADMIN_OPEN", "false", "true or false");

/// Every row, in the order of `docs/configuration.md`'s table.
pub const SETTINGS: &[Setting] = &[
    META_CORE_PATH,
    FILES_PATH,
    META_CORE_RUN_DIR,
    META_CORE_DB_PATH,
    META_CORE_DB_CACHE_MB,
    META_CORE_DB_READER_CACHE_MB,
    META_CORE_DB_READERS,
    META_CORE_DB_RESERVE_MB,
    META_CORE_INDEX_EXCLUDE_PREFIXES,
    META_CORE_HTTP_HOST,
    META_CORE_HTTP_PORT,
    META_CORE_HTTP_EXTRA_PORTS,
    API_PORT,
    BASE_URL,
    SERVICE_NAME,
    SERVICE_VERSION,
    HEALTH_CHECK_INTERVAL_MS,
    HEARTBEAT_INTERVAL_MS,
    STALE_THRESHOLD_MS,
    CLEANUP_INTERVAL_MS,
    DEAD_SERVICE_THRESHOLD_MS,
    WATCH_INTERVAL_MS,
    DEBOUNCE_MS,
    ENABLE_FILE_WATCHER,
    META_CORE_IMPORT_MAX_ENTRIES,
    META_CORE_IMPORT_MAX_BYTES,
    META_CORE_DAV_COPY_MAX_BYTES,
    META_CORE_DAV_COPY_RESERVE_BYTES,
    META_CORE_WATCH_MAX_DIRS,
    ELECTION_RETRY_SECS,
    META_CORE_LOG_DIR,
    META_CORE_LOG_MAX_BYTES,
    META_CORE_LOG_KEEP,
    META_CORE_BIN_DIR,
    LOG_FORMAT,
    RUST_LOG,
    META_CORE_ADMIN_TOKEN,
    META_CORE_ADMIN_OPEN,
    META_CORE_STREAM_RETENTION,
    META_CORE_STREAM_TRIM_EVERY,
    META_CORE_HTTP_WRITE_STALL_MS,
    META_CORE_HTTP_HEADER_TIMEOUT_MS,
    META_CORE_HTTP_BODY_TIMEOUT_MS,
    META_CORE_HTTP_MAX_CONNECTIONS,
    META_CORE_HTTP_MAX_CONNECTIONS_PER_CLIENT,
    META_CORE_SSE_KEEPALIVE_MS,
    META_CORE_SSE_BATCH_MS,
    META_CORE_SSE_QUEUE,
    META_CORE_SSE_MAX_FOLLOWERS,
    META_CORE_SSE_MAX_FOLLOWERS_PER_CLIENT,
    META_CORE_CORS_ORIGINS,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/configuration.md`'s table: each row's variable and default cell.
    fn documented() -> Vec<(String, String)> {
        include_str!("../../../docs/configuration.md")
            .lines()
            .filter_map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let var = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
                let default = cells.get(2)?;
                var.chars()
                    .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit())
                    .then(|| (var.to_owned(), default.to_string()))
            })
            .collect()
    }

    /// How the document writes a default.
    fn shown(d: Default) -> String {
        match d {
            Default::Num(n) => format!("`{n}`"),
            Default::Text(t) => format!("`{t}`"),
            Default::Derived(t) if t.starts_with('$') => format!("`{t}`"),
            Default::Derived(t) => t.to_owned(),
            Default::Unset => "—".to_owned(),
        }
    }

    #[test]
    fn the_document_lists_every_setting_with_its_default_and_nothing_else() {
        let doc = documented();
        let vars: Vec<&str> = doc.iter().map(|(v, _)| v.as_str()).collect();
        let table: Vec<&str> = SETTINGS.iter().map(|s| s.var).collect();
        assert_eq!(vars, table, "docs/configuration.md's rows, in order");
        for (s, (_, cell)) in SETTINGS.iter().zip(&doc) {
            assert!(
                cell.starts_with(&shown(s.default)),
                "{}: the document says {cell:?}, the table {:?}",
                s.var,
                s.default
            );
        }
    }

    #[test]
    fn each_setting_is_named_once_and_its_default_is_within_its_bounds() {
        for (i, s) in SETTINGS.iter().enumerate() {
            assert!(
                SETTINGS[i + 1..].iter().all(|o| o.var != s.var),
                "{} twice",
                s.var
            );
            match (s.default, s.bounds) {
                (Default::Num(n), Some((min, max))) => {
                    assert!((min..=max).contains(&n), "{}", s.var)
                }
                (Default::Num(_), None) => panic!("{}: a number without bounds", s.var),
                (_, Some(_)) => panic!("{}: bounds without a number", s.var),
                _ => {}
            }
        }
    }

    #[test]
    fn an_error_says_the_bounds() {
        assert_eq!(META_CORE_DB_READERS.expected(), "a reader count (1-256)");
        assert_eq!(
            META_CORE_LOG_MAX_BYTES.expected(),
            "a number of bytes (at least 4096)"
        );
        assert_eq!(DEBOUNCE_MS.expected(), "a number of milliseconds");
    }
}
