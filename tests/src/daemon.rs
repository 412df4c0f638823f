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
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use metacore::api::storaged::StoragedClient;
use tempfile::TempDir;

use crate::wait::{self, DAEMON_DEADLINE};

/// Numbers the stderr logs, so several processes can share a dir.
static LAUNCHES: AtomicU32 = AtomicU32::new(0);

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
    let mut dir = tempfile::Builder::new().prefix("e2e-").tempdir().expect("create a temp dir");
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
        Self { dir: dir.to_owned(), run_dir: dir.join("run"), db_path: None, env: Vec::new() }
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
        self.db_path.clone().unwrap_or_else(|| self.meta_core_dir().join("db").join("meta-core.db"))
    }

    /// Spawns the process without waiting for it to be ready (for starts
    /// that are expected to fail; see [`Launch::start`] otherwise).
    pub fn spawn(self) -> Storaged {
        let n = LAUNCHES.fetch_add(1, Ordering::Relaxed);
        let stderr_path = self.dir.join(format!("storaged-{n}.stderr"));
        let child = self.spawn_child(&stderr_path);
        let client = StoragedClient::new(&self.run_dir.join("storaged.sock"));
        Storaged { launch: self, owned_dir: None, child: Some(child), exit: None, client, stderr_path }
    }

    fn spawn_child(&self, stderr_path: &Path) -> Child {
        std::fs::create_dir_all(self.dir.join("files")).expect("create FILES_PATH");
        let stderr = File::create(stderr_path).expect("create the stderr log");
        let mut cmd = Command::new(binary("storaged"));
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("META_CORE_") {
                cmd.env_remove(&key);
            }
        }
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
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
        cmd.spawn().expect("spawn storaged")
    }

    /// Spawns the process and waits until it answers `/health`.
    pub async fn start(self) -> Storaged {
        let mut s = self.spawn();
        s.wait_ready().await;
        s
    }
}

/// One storaged process and its client.
#[derive(Debug)]
pub struct Storaged {
    launch: Launch,
    /// The temp dir, when this handle made it.
    owned_dir: Option<TempDir>,
    child: Option<Child>,
    exit: Option<ExitStatus>,
    client: StoragedClient,
    stderr_path: PathBuf,
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

    /// Waits until this process answers `GET /health`; panics with its
    /// stderr if it exits first or the deadline passes.
    pub async fn wait_ready(&mut self) {
        let pid = self.pid();
        let client = self.client.clone();
        let ready = wait::until("storaged to answer /health", DAEMON_DEADLINE, || {
            let exited = self.try_exit();
            let client = client.clone();
            async move {
                if let Some(status) = exited {
                    return Some(Err(status));
                }
                match client.handshake().await {
                    Ok(h) if h.pid == pid => Some(Ok(())),
                    _ => None,
                }
            }
        })
        .await;
        if let Err(status) = ready {
            panic!("storaged exited ({status}) before it was ready; its stderr:\n{}", self.stderr());
        }
    }

    /// The typed client of this process's socket.
    pub fn client(&self) -> &StoragedClient {
        &self.client
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).expect("a spawned process")
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

    pub fn stderr_path(&self) -> &Path {
        &self.stderr_path
    }

    /// Everything the process has written to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// The exit status, if the process has exited (reaps it).
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none()
            && let Some(child) = self.child.as_mut()
        {
            self.exit = child.try_wait().expect("poll the child");
        }
        self.exit
    }

    /// SIGKILL, then reap. Returns the exit status.
    pub fn kill9(&mut self) -> ExitStatus {
        if let Some(status) = self.try_exit() {
            return status;
        }
        let child = self.child.as_mut().expect("a spawned process");
        child.kill().expect("SIGKILL storaged");
        let status = child.wait().expect("reap storaged");
        self.exit = Some(status);
        status
    }

    /// SIGTERM: an orderly stop. See [`Storaged::wait_exit`].
    pub fn sigterm(&self) {
        let pid = rustix::process::Pid::from_raw(self.pid() as i32).expect("a positive pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("send SIGTERM");
    }

    /// Waits (bounded) for the process to exit and returns its status.
    pub async fn wait_exit(&mut self) -> ExitStatus {
        let status = wait::until("storaged to exit", DAEMON_DEADLINE, || std::future::ready(self.try_exit())).await;
        self.exit = Some(status);
        status
    }

    /// Starts the same launch again (same dir, database and socket), after
    /// killing this process if it still runs.
    pub async fn restart(&mut self) {
        self.kill9();
        let n = LAUNCHES.fetch_add(1, Ordering::Relaxed);
        self.stderr_path = self.launch.dir.join(format!("storaged-{n}.stderr"));
        self.child = Some(self.launch.spawn_child(&self.stderr_path));
        self.exit = None;
        // A new client: the old pool holds connections to the dead process.
        self.client = StoragedClient::new(&self.socket_path());
        self.wait_ready().await;
    }

    /// A new launch in the same dir (to start a second process there).
    pub fn launch(&self) -> Launch {
        self.launch.clone()
    }
}

impl Drop for Storaged {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut()
            && self.exit.is_none()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- stderr of storaged in {} ---\n{}", self.launch.dir.display(), self.stderr());
        }
    }
}
