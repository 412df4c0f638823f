//! The real storaged and apid release binaries for the benchmarks: one of
//! each started in a temp dir on a given port, stopped with SIGTERM, and
//! killed if the benchmark panics first.
#![allow(dead_code)] // each benchmark uses part of it

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Where the daemons are taken from: `BENCH_BIN_DIR`, else the profile's
/// folder the running benchmark was built into (`target/release`, whose
/// `deps/` holds the benchmark itself).
fn bin_dir() -> PathBuf {
    match std::env::var_os("BENCH_BIN_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => std::env::current_exe()
            .ok()
            .and_then(|exe| Some(exe.parent()?.parent()?.to_path_buf()))
            .unwrap_or_default(),
    }
}

/// The release binary `name` (`storaged`, `apid`); a clear stop when it
/// has not been built.
pub fn binary(name: &str) -> PathBuf {
    let bin = bin_dir().join(name);
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build --release --bins` first",
        bin.display()
    );
    bin
}

/// One daemon process; killed on drop unless stopped.
#[derive(Debug)]
pub struct Daemon(Option<Child>);

impl Daemon {
    /// storaged, from the profile's folder (or from `BENCH_BIN_DIR`, to
    /// measure another build's daemons with this benchmark).
    pub fn storaged(dir: &Path, port: u16) -> Self {
        Self::spawn(&binary("storaged"), dir, port)
    }

    pub fn apid(dir: &Path, port: u16) -> Self {
        Self::spawn(&binary("apid"), dir, port)
    }

    fn spawn(bin: &Path, dir: &Path, port: u16) -> Self {
        let child = Command::new(bin)
            .env("META_CORE_PATH", dir.join("meta-core"))
            .env("META_CORE_RUN_DIR", dir.join("run"))
            .env("FILES_PATH", dir.join("files"))
            .env("META_CORE_HTTP_HOST", "127.0.0.1")
            .env("META_CORE_HTTP_PORT", port.to_string())
            .env("RUST_LOG", "warn")
            // The benchmark's one address stands for many clients.
            .env("META_CORE_SSE_MAX_FOLLOWERS_PER_CLIENT", "1000000")
            .env("META_CORE_HTTP_MAX_CONNECTIONS_PER_CLIENT", "1000000")
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        Self(Some(child))
    }

    pub fn pid(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }

    /// SIGTERM, then waits for the exit.
    pub fn stop(mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let _ = child.wait();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
