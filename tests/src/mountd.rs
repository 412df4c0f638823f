//! mountd on its own, beside the real `rclone`: [`Mountd`] spawns one with
//! its own dirs, drives its socket, reads the kernel's mount table, and
//! detaches what a failed test left mounted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use http::Method;
use metacore::socket::client::{ClientError, SocketClient};
use serde_json::Value;

use crate::process::{Process, command};
use crate::wait::until;

/// One mountd process: `META_CORE_PATH=<dir>/meta-core`, run dir
/// `<dir>/run`, `FILES_PATH=<dir>/files`, rclone's configuration
/// `<dir>/rclone.conf` (see [`local_remote`] and [`alias_remote`]).
#[derive(Debug)]
pub struct Mountd {
    pub process: Process,
    pub client: SocketClient,
    dir: PathBuf,
    files: PathBuf,
}

impl Mountd {
    /// Spawns mountd; `path_env` replaces its `PATH` (to hide rclone).
    pub fn spawn(dir: &Path, path_env: Option<&str>) -> Self {
        let path: Vec<(&str, String)> = path_env
            .map(|p| ("PATH", p.to_owned()))
            .into_iter()
            .collect();
        Self::spawn_with(dir, &path)
    }

    /// Spawns mountd with `env` on top of the defaults.
    pub fn spawn_with(dir: &Path, env: &[(&str, String)]) -> Self {
        let mut cmd = command("mountd");
        cmd.env("META_CORE_PATH", dir.join("meta-core"))
            .env("META_CORE_RUN_DIR", dir.join("run"))
            .env("FILES_PATH", dir.join("files"))
            .env("RCLONE_CONFIG", dir.join("rclone.conf"))
            .env("RUST_LOG", "info");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let files = env
            .iter()
            .find(|(k, _)| *k == "FILES_PATH")
            .map(|(_, v)| PathBuf::from(v))
            .unwrap_or_else(|| dir.join("files"));
        Self {
            process: Process::spawn("mountd", dir, cmd),
            client: SocketClient::new("mountd", &dir.join("run/mountd.sock")),
            dir: dir.to_owned(),
            files,
        }
    }

    /// Spawns mountd and waits until its rclone runs.
    pub async fn start(dir: &Path) -> Self {
        let m = Self::spawn(dir, None);
        m.rclone_in("running").await;
        m
    }

    /// Spawns mountd beside a folder remote `src` (an alias of a folder
    /// holding `a.txt`, "alpha"), mounted as `corn/src`: mountd, the
    /// mount's id and folder.
    pub async fn with_local_mount(dir: &Path) -> (Self, String, PathBuf) {
        local_remote(dir, "src", &[("a.txt", "alpha")]);
        let m = Self::start(dir).await;
        let made = m
            .create(serde_json::json!({"name": "src", "type": "rclone", "rcloneRemote": "src"}))
            .await;
        let id = made["id"].as_str().unwrap().to_owned();
        let point = m.files().join("corn/src");
        assert_eq!(
            std::fs::read_to_string(point.join("a.txt")).unwrap(),
            "alpha"
        );
        (m, id, point)
    }

    /// Waits until the keeper has looked at every mount `n` more times.
    pub async fn looks(&self, n: u64) {
        let first = self.status().await.unwrap()["looks"].as_u64().unwrap();
        until(
            &format!("{n} more looks"),
            Duration::from_secs(30),
            || async {
                let now = self.status().await?["looks"].as_u64()?;
                (now >= first + n).then_some(())
            },
        )
        .await;
    }

    /// Waits until mountd's log has a line containing `text`.
    pub async fn logged(&self, text: &str) {
        until(
            &format!("the log line {text:?}"),
            Duration::from_secs(30),
            || async { self.process.stderr().contains(text).then_some(()) },
        )
        .await;
    }

    pub fn files(&self) -> PathBuf {
        self.files.clone()
    }

    pub fn mounts_file(&self) -> PathBuf {
        self.dir.join("meta-core/mounts/mounts.json")
    }

    pub fn error_file(&self, id: &str) -> PathBuf {
        self.dir.join(format!("meta-core/mounts/errors/{id}.error"))
    }

    pub async fn status(&self) -> Option<Value> {
        self.client.get::<Value>("/status").await.ok()
    }

    /// Waits until rclone's state is `want`; its part of the status then.
    pub async fn rclone_in(&self, want: &str) -> Value {
        until(
            &format!("rclone {want}"),
            Duration::from_secs(20),
            || async {
                self.status()
                    .await
                    .filter(|s| s["rclone"]["state"] == want)
                    .map(|s| s["rclone"].clone())
            },
        )
        .await
    }

    /// `method path` with an optional JSON body on the socket: the answer,
    /// or the error envelope turned back into an error.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, ClientError> {
        self.client.call(method, path, body.as_ref()).await
    }

    /// `method path` with an optional body, which must be refused: the
    /// error envelope.
    pub async fn refused(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> metacore::ApiError {
        crate::fixtures::api_error(self.call(method, path, body).await)
    }

    /// `POST /mounts` with a `:memory:` mount named `name`, mounted: its
    /// id and folder.
    pub async fn memory_mount(&self, name: &str) -> (String, PathBuf) {
        let made = self
            .create(serde_json::json!({"name": name, "type": "rclone", "rcloneRemote": ":memory:"}))
            .await;
        let point = self.files().join("corn").join(name);
        assert_eq!(made["mounted"], true, "{made}");
        (made["id"].as_str().unwrap().to_owned(), point)
    }

    /// `POST /mounts` with `body`, which must be taken: the mount.
    pub async fn create(&self, body: Value) -> Value {
        let v = self
            .call(Method::POST, "/mounts", Some(body.clone()))
            .await
            .unwrap_or_else(|e| panic!("POST /mounts {body}: {e}"));
        v["mount"].clone()
    }

    /// The mount `id` as `GET /mounts/{id}` shows it.
    pub async fn mount(&self, id: &str) -> Value {
        self.call(Method::GET, &format!("/mounts/{id}"), None)
            .await
            .unwrap_or_else(|e| panic!("GET /mounts/{id}: {e}"))["mount"]
            .clone()
    }
}

impl Drop for Mountd {
    fn drop(&mut self) {
        self.process.kill9();
        detach_all_under(&self.dir);
    }
}

/// Adds to `<dir>/rclone.conf` a remote `name` serving a local folder
/// `<dir>/remote-<name>` that holds `files` (path, content): an `alias`
/// remote, the way an operator mounts a local folder (a remote of type
/// `local` is refused). The folder.
pub fn local_remote(dir: &Path, name: &str, files: &[(&str, &str)]) -> PathBuf {
    let root = dir.join(format!("remote-{name}"));
    for (path, content) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    std::fs::create_dir_all(&root).unwrap();
    alias_remote(dir, name, &root.display().to_string());
    root
}

/// Adds to `<dir>/rclone.conf` a remote `name` of type `alias` whose root
/// is `remote` (a folder, or another remote's `name:path`).
pub fn alias_remote(dir: &Path, name: &str, remote: &str) {
    add_remote(dir, &format!("[{name}]\ntype = alias\nremote = {remote}\n"));
}

/// Adds `section` (`[name]` and its lines) to `<dir>/rclone.conf`.
pub fn add_remote(dir: &Path, section: &str) {
    let conf = dir.join("rclone.conf");
    let mut text = std::fs::read_to_string(&conf).unwrap_or_default();
    text.push_str(section);
    text.push('\n');
    std::fs::write(&conf, text).unwrap();
}

/// The mount points under `dir` in the kernel's table, with their type.
pub fn mounts_under(dir: &Path) -> Vec<(PathBuf, String)> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let point = PathBuf::from(fields.get(4)?.replace("\\040", " "));
            let dash = fields.iter().position(|f| *f == "-")?;
            let fstype = fields.get(dash + 1)?.to_string();
            point.starts_with(dir).then_some((point, fstype))
        })
        .collect()
}

/// Whether an rclone FUSE mount is at `point`.
pub fn is_mounted(point: &Path) -> bool {
    mounts_under(point)
        .iter()
        .any(|(p, t)| p == point && t == "fuse.rclone")
}

/// Detaches every mount under `dir` (what a failed test left).
pub fn detach_all_under(dir: &Path) {
    for (point, _) in mounts_under(dir).into_iter().rev() {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&point)
            .status();
    }
}

/// Whether `pid` runs (a zombie does not).
pub fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    })
}

/// The pids of the `rclone` processes whose parent is `parent`.
pub fn rclone_children_of(parent: u32) -> Vec<u64> {
    crate::supervisor::children_of(parent)
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "rclone")
        })
        .map(u64::from)
        .collect()
}
