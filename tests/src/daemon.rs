//! [`Storaged`]: one real `storaged` process for one test.
//!
//! A test dir holds everything the process touches:
//!
//! ```text
//! <dir>/meta-core/db/meta-core.db   META_CORE_PATH=<dir>/meta-core
//! <dir>/run/storaged.sock           META_CORE_RUN_DIR=<dir>/run
//! <dir>/files/                      FILES_PATH=<dir>/files
//! <dir>/storaged-<n>.stderr         what the process logged
//! ```
//!
//! The binary is found beside the test executable (`target/<profile>/`),
//! or in `META_CORE_BIN_DIR`. Readiness is a successful `GET /health`
//! answered by this very process (its pid), polled under a deadline; every
//! wait is bounded; the process is killed when the handle drops.

use std::ffi::OsString;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};

use metacore::api::storaged::StoragedClient;
use tempfile::TempDir;

use crate::process::{self, Process};

/// Where the daemons' binaries are: `META_CORE_BIN_DIR`, else the profile
/// directory of the running test (`target/<profile>/deps/..`), else
/// `target/debug` of the workspace.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("META_CORE_BIN_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Ok(exe) = std::env::current_exe()
        && let Some(profile) = exe.parent().and_then(Path::parent)
        && profile.join("storaged").is_file()
    {
        return profile.to_owned();
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug")
}

/// The path of one daemon's binary, or a panic that says how to build it.
pub fn binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} does not exist: run `cargo build --workspace --bins` before `cargo test -p e2e` \
         (or set META_CORE_BIN_DIR)",
        path.display()
    );
    path
}

/// A fresh temp dir for one test (kept when `E2E_KEEP_DIRS` is set).
pub fn test_dir() -> TempDir {
    let mut dir = tempfile::Builder::new()
        .prefix("e2e-")
        .tempdir()
        .expect("create a temp dir");
    if std::env::var_os("E2E_KEEP_DIRS").is_some() {
        dir.disable_cleanup(true);
        eprintln!("e2e: keeping {}", dir.path().display());
    }
    dir
}

/// How to start a storaged: its dir, run dir, database path and any extra
/// environment. Every `META_CORE_*` variable of the test's own environment
/// is dropped so an operator's settings cannot leak into a test.
#[derive(Debug, Clone)]
pub struct Launch {
    dir: PathBuf,
    run_dir: PathBuf,
    db_path: Option<PathBuf>,
    env: Vec<(String, String)>,
}

impl Launch {
    /// The default layout under `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
            run_dir: dir.join("run"),
            db_path: None,
            env: Vec::new(),
        }
    }

    /// Another run dir (another socket), same database.
    pub fn run_dir(mut self, run_dir: impl Into<PathBuf>) -> Self {
        self.run_dir = run_dir.into();
        self
    }

    /// Sets `META_CORE_DB_PATH`.
    pub fn db_path(mut self, db: impl Into<PathBuf>) -> Self {
        self.db_path = Some(db.into());
        self
    }

    /// Sets `META_CORE_PATH` to another directory than `<dir>/meta-core`.
    pub fn meta_core_path(self, path: impl AsRef<Path>) -> Self {
        self.env("META_CORE_PATH", &path.as_ref().display().to_string())
    }

    /// Any other variable.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// `$META_CORE_PATH` as this launch sets it.
    fn meta_core_dir(&self) -> PathBuf {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == "META_CORE_PATH")
            .map(|(_, v)| PathBuf::from(v))
            .unwrap_or_else(|| self.dir.join("meta-core"))
    }

    /// The database file this launch opens.
    pub fn db(&self) -> PathBuf {
        self.db_path
            .clone()
            .unwrap_or_else(|| self.meta_core_dir().join("db").join("meta-core.db"))
    }

    /// Spawns the process without waiting for it to be ready (for starts
    /// that are expected to fail; see [`Launch::start`] otherwise).
    pub fn spawn(self) -> Storaged {
        let process = self.spawn_process();
        let client = StoragedClient::new(&self.run_dir.join("storaged.sock"));
        Storaged {
            launch: self,
            process,
            owned_dir: None,
            client,
        }
    }

    fn spawn_process(&self) -> Process {
        std::fs::create_dir_all(self.dir.join("files")).expect("create FILES_PATH");
        let mut cmd = process::command("storaged");
        cmd.env("META_CORE_PATH", self.dir.join("meta-core"))
            .env("META_CORE_RUN_DIR", &self.run_dir)
            .env("FILES_PATH", self.dir.join("files"))
            .env("LOG_FORMAT", "text")
            .env("RUST_LOG", "info")
            .env("META_CORE_DB_READERS", "4");
        if let Some(db) = &self.db_path {
            cmd.env("META_CORE_DB_PATH", db);
        }
        for (k, v) in &self.env {
            cmd.env(OsString::from(k), OsString::from(v));
        }
        Process::spawn("storaged", &self.dir, cmd)
    }

    /// Spawns the process and waits until it answers `/health`.
    pub async fn start(self) -> Storaged {
        let mut s = self.spawn();
        s.wait_ready().await;
        s
    }
}

/// One storaged process and its client. The process's own handle
/// ([`Process`]: pid, stderr, signals, exit) is reached through `Deref`.
#[derive(Debug)]
pub struct Storaged {
    launch: Launch,
    /// Declared before the dir so the process dies before its dir goes.
    process: Process,
    /// The temp dir, when this handle made it.
    owned_dir: Option<TempDir>,
    client: StoragedClient,
}

impl Deref for Storaged {
    type Target = Process;

    fn deref(&self) -> &Process {
        &self.process
    }
}

impl DerefMut for Storaged {
    fn deref_mut(&mut self) -> &mut Process {
        &mut self.process
    }
}

impl Storaged {
    /// A storaged in a fresh temp dir that lives as long as the handle.
    pub async fn start() -> Self {
        let dir = test_dir();
        let mut s = Launch::in_dir(dir.path()).start().await;
        s.owned_dir = Some(dir);
        s
    }

    /// A storaged in `dir` (made by the caller, reused across restarts).
    pub async fn start_in(dir: &Path) -> Self {
        Launch::in_dir(dir).start().await
    }

    /// Waits until this very process (its pid) answers `GET /health`.
    pub async fn wait_ready(&mut self) {
        let pid = self.pid();
        let client = self.client.clone();
        self.process
            .wait_ready(|| {
                let client = client.clone();
                async move { matches!(client.handshake().await, Ok(h) if h.pid == pid) }
            })
            .await;
    }

    /// The typed client of this process's socket.
    pub fn client(&self) -> &StoragedClient {
        &self.client
    }

    pub fn dir(&self) -> &Path {
        &self.launch.dir
    }

    pub fn socket_path(&self) -> PathBuf {
        self.launch.run_dir.join("storaged.sock")
    }

    pub fn db_path(&self) -> PathBuf {
        self.launch.db()
    }

    /// Starts the same launch again (same dir, database and socket), after
    /// killing this process if it still runs.
    pub async fn restart(&mut self) {
        self.kill9();
        self.process = self.launch.spawn_process();
        // A new client: the old pool holds connections to the dead process.
        self.client = StoragedClient::new(&self.socket_path());
        self.wait_ready().await;
    }

    /// A new launch in the same dir (to start a second process there).
    pub fn launch(&self) -> Launch {
        self.launch.clone()
    }
}
