//! [`Apid`]: one real `apid` process for one test, in the same test dir as
//! a [`Storaged`] (same `META_CORE_PATH`, `META_CORE_RUN_DIR`,
//! `FILES_PATH`), listening on 127.0.0.1 and a free TCP port, with a small
//! real HTTP client over TCP.
//!
//! ```text
//! <dir>/run/storaged.sock   where apid reaches the store
//! <dir>/run/apid.sock       apid's own socket (supervisor checks)
//! <dir>/apid-<n>.stderr     what the process logged
//! ```
//!
//! Readiness is a `GET /health` answered 200 by this very process (the
//! `leader.pid` of the answer), polled under a deadline; apid answers it
//! even while storaged is away, so an apid can be started before its
//! storaged. The process is killed when the handle drops.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::Storaged;
use crate::daemon::binary;
use crate::raw_http::RawResponse;
use crate::wait::{self, DAEMON_DEADLINE, IO_DEADLINE, within};

/// Numbers the stderr logs, so several processes can share a dir.
static LAUNCHES: AtomicU32 = AtomicU32::new(0);

/// A port nobody listens on right now: bind port 0, read it, let it go.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("the bound address").port()
}

/// One apid process and an HTTP client of its port.
#[derive(Debug)]
pub struct Apid {
    dir: PathBuf,
    env: Vec<(String, String)>,
    port: u16,
    child: Option<Child>,
    exit: Option<ExitStatus>,
    stderr_path: PathBuf,
    client: Http,
}

impl Apid {
    /// An apid beside `storaged` (its dir and run dir), ready.
    pub async fn start(storaged: &Storaged) -> Self {
        Self::start_with(storaged, &[]).await
    }

    /// An apid beside `storaged` with extra environment, ready.
    pub async fn start_with(storaged: &Storaged, env: &[(&str, &str)]) -> Self {
        Self::start_in(storaged.dir(), env).await
    }

    /// An apid in `dir` (the layout of [`crate::Launch::in_dir`]), whether
    /// or not a storaged runs there yet, ready.
    pub async fn start_in(dir: &Path, env: &[(&str, &str)]) -> Self {
        let mut a = Self::spawn_in(dir, env);
        a.wait_ready().await;
        a
    }

    /// Spawns without waiting for readiness.
    pub fn spawn_in(dir: &Path, env: &[(&str, &str)]) -> Self {
        let port = free_port();
        let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let n = LAUNCHES.fetch_add(1, Ordering::Relaxed);
        let stderr_path = dir.join(format!("apid-{n}.stderr"));
        let mut a = Self {
            dir: dir.to_owned(),
            env,
            port,
            child: None,
            exit: None,
            stderr_path,
            client: Http::new(&format!("http://127.0.0.1:{port}")),
        };
        a.child = Some(a.spawn_child());
        a
    }

    fn spawn_child(&self) -> Child {
        std::fs::create_dir_all(self.files_path()).expect("create FILES_PATH");
        let stderr = File::create(&self.stderr_path).expect("create the stderr log");
        let mut cmd = Command::new(binary("apid"));
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            if k.starts_with("META_CORE_") || k == "BASE_URL" {
                cmd.env_remove(&key);
            }
        }
        cmd.env("META_CORE_PATH", self.dir.join("meta-core"))
            .env("META_CORE_RUN_DIR", self.dir.join("run"))
            .env("FILES_PATH", self.files_path())
            .env("META_CORE_HTTP_HOST", "127.0.0.1")
            .env("META_CORE_HTTP_PORT", self.port.to_string())
            .env("LOG_FORMAT", "text")
            .env("RUST_LOG", "info");
        for (k, v) in &self.env {
            cmd.env(OsString::from(k), OsString::from(v));
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
        cmd.spawn().expect("spawn apid")
    }

    /// Waits until this process answers `GET /health` with 200; panics
    /// with its stderr if it exits first or the deadline passes.
    pub async fn wait_ready(&mut self) {
        let pid = self.pid();
        let client = self.client.clone();
        let ready = wait::until("apid to answer /health", DAEMON_DEADLINE, || {
            let exited = self.try_exit();
            let client = client.clone();
            async move {
                if let Some(status) = exited {
                    return Some(Err(status));
                }
                match client.try_send(Method::GET, "/health", Bytes::new(), &[]).await {
                    Ok(r) if r.status == 200 && r.json()["leader"]["pid"] == pid => Some(Ok(())),
                    _ => None,
                }
            }
        })
        .await;
        if let Err(status) = ready {
            panic!("apid exited ({status}) before it was ready; its stderr:\n{}", self.stderr());
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).expect("a spawned process")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `FILES_PATH` as this process has it.
    pub fn files_path(&self) -> PathBuf {
        self.dir.join("files")
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

    /// SIGTERM: an orderly stop. See [`Apid::wait_exit`].
    pub fn sigterm(&self) {
        let pid = rustix::process::Pid::from_raw(self.pid() as i32).expect("a positive pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("send SIGTERM");
    }

    /// Waits (bounded) for the process to exit and returns its status.
    pub async fn wait_exit(&mut self) -> ExitStatus {
        let status = wait::until("apid to exit", DAEMON_DEADLINE, || std::future::ready(self.try_exit())).await;
        self.exit = Some(status);
        status
    }

    /// The HTTP client of this process's port.
    pub fn http(&self) -> &Http {
        &self.client
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> RawResponse {
        self.client.get(path).await
    }

    /// Any request; see [`Http::send`].
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: impl Into<Bytes>,
        headers: &[(&str, &str)],
    ) -> RawResponse {
        self.client.send(method, path, body, headers).await
    }

    /// One request over a fresh TCP connection, written while the answer
    /// is read (see [`crate::raw_http`]): for bodies apid refuses before
    /// reading them (413), which hyper's client reports as a broken pipe.
    pub async fn send_raw(&self, method: &str, path: &str, body: Option<&[u8]>) -> RawResponse {
        crate::raw_http::request_tcp(&format!("127.0.0.1:{}", self.port), method, path, body).await
    }

    /// `method path` with a JSON body.
    pub async fn send_json(&self, method: &str, path: &str, body: &serde_json::Value) -> RawResponse {
        let bytes = serde_json::to_vec(body).expect("serialize a JSON body");
        self.client.send(method, path, bytes, &[("content-type", "application/json")]).await
    }
}

impl Drop for Apid {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut()
            && self.exit.is_none()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- stderr of apid in {} ---\n{}", self.dir.display(), self.stderr());
        }
    }
}

/// A real HTTP/1.1 client over TCP (hyper's pooled client), every request
/// bounded by [`IO_DEADLINE`]. Answers come back as [`RawResponse`], whose
/// `json`, `text`, `header` and `assert_error` every test uses.
#[derive(Debug, Clone)]
pub struct Http {
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Http {
    pub fn new(base: &str) -> Self {
        let client = Client::builder(TokioExecutor::new()).build_http();
        Self { base: base.trim_end_matches('/').to_owned(), client }
    }

    pub async fn get(&self, path: &str) -> RawResponse {
        self.send("GET", path, Bytes::new(), &[]).await
    }

    /// Sends `method path` (the path exactly as written, query included)
    /// with `body` and `headers`; panics on a transport failure or when
    /// the deadline passes.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: impl Into<Bytes>,
        headers: &[(&str, &str)],
    ) -> RawResponse {
        let method = Method::from_bytes(method.as_bytes()).expect("a method");
        let what = format!("{method} {path}");
        match self.try_send(method, path, body.into(), headers).await {
            Ok(r) => r,
            Err(e) => panic!("{what}: {e}"),
        }
    }

    /// Like [`Http::send`], a transport failure returned, not a panic
    /// (for polling a process that may not listen yet).
    pub async fn try_send(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
        headers: &[(&str, &str)],
    ) -> Result<RawResponse, String> {
        let what = format!("{method} {path}");
        let mut req = Request::builder().method(method).uri(format!("{}{path}", self.base));
        for (k, v) in headers {
            req = req.header(
                HeaderName::from_bytes(k.as_bytes()).expect("a header name"),
                HeaderValue::from_str(v).expect("a header value"),
            );
        }
        let req = req.body(Full::new(body)).map_err(|e| format!("build {what}: {e}"))?;
        within(&what, IO_DEADLINE, async {
            let resp = self.client.request(req).await.map_err(|e| format!("{e:?}"))?;
            let (parts, body) = resp.into_parts();
            let body = body.collect().await.map_err(|e| format!("read the body: {e}"))?.to_bytes();
            let headers = parts
                .headers
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                .collect();
            Ok(RawResponse { status: parts.status.as_u16(), headers, body: body.to_vec() })
        })
        .await
    }
}
