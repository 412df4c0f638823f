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
use std::ops::Deref;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::Storaged;
use crate::process::{self, Process};
use crate::raw_http::RawResponse;
use crate::wait::{IO_DEADLINE, within};

/// Where [`free_port`] looks: below Linux's default ephemeral range
/// (32768-60999), from which the kernel picks both `bind(:0)` ports and
/// the local ports of outgoing connections.
const TEST_PORTS: std::ops::Range<u32> = 20_000..32_000;

/// A port nobody listens on right now, for a daemon to bind. It is taken
/// below the ephemeral range, so that none of the suite's many outgoing
/// connections can take it between this check and the daemon's bind (as a
/// port of `bind(:0)` could be, under load), and each call of the process
/// gets a port no other call got.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static CALLS: AtomicU32 = AtomicU32::new(0);
    let span = TEST_PORTS.end - TEST_PORTS.start;
    // Processes of the suite that run at once start apart.
    let start = std::process::id().wrapping_mul(2_654_435_761) % span;
    for _ in 0..span {
        let n = CALLS.fetch_add(1, Ordering::Relaxed);
        let port = (TEST_PORTS.start + (start + n) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {TEST_PORTS:?}");
}

/// One apid process and an HTTP client of its port; the requests
/// ([`Http`]) are reached through `Deref`, the process with
/// [`Apid::process`].
#[derive(Debug)]
pub struct Apid {
    dir: PathBuf,
    port: u16,
    process: Process,
    client: Http,
    /// The extra environment it was started with.
    env: Vec<(String, String)>,
}

impl Deref for Apid {
    type Target = Http;

    fn deref(&self) -> &Http {
        &self.client
    }
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
        std::fs::create_dir_all(dir.join("files")).expect("create FILES_PATH");
        let mut cmd = process::command("apid");
        cmd.env("META_CORE_PATH", dir.join("meta-core"))
            .env("META_CORE_RUN_DIR", dir.join("run"))
            .env("FILES_PATH", dir.join("files"))
            .env("META_CORE_HTTP_HOST", "127.0.0.1")
            .env("META_CORE_HTTP_PORT", port.to_string())
            .env("LOG_FORMAT", "text")
            .env("RUST_LOG", "info")
            // The copies of the tests do not depend on how full the
            // machine's disk is; a test of the reserve sets its own.
            .env("META_CORE_DAV_COPY_RESERVE_BYTES", "0");
        for (k, v) in env {
            cmd.env(OsString::from(k), OsString::from(v));
        }
        let process = Process::spawn("apid", dir, cmd);
        Self {
            dir: dir.to_owned(),
            port,
            process,
            client: Http::new(port),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// Waits until this very process (`leader.pid`) answers `GET /health`
    /// with 200; then its admin token is known to [`Http::admin`].
    pub async fn wait_ready(&mut self) {
        let pid = self.process.pid();
        let client = self.client.clone();
        self.process
            .wait_ready(|| {
                let client = client.clone();
                async move {
                    matches!(client.try_send(Method::GET, "/health", Bytes::new(), &[]).await,
                        Ok(r) if r.status == 200 && r.json()["leader"]["pid"] == pid)
                }
            })
            .await;
        self.client.admin_token = admin_token(&self.dir, &self.env);
    }

    /// The process: pid, stderr, signals.
    pub fn process(&self) -> &Process {
        &self.process
    }

    /// The process, for waiting on its exit.
    pub fn process_mut(&mut self) -> &mut Process {
        &mut self.process
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
}

/// The admin token an apid in `dir` started with `env` asks for:
/// `META_CORE_ADMIN_TOKEN` when given, none when the admin routes were
/// opened, else the one apid made in `secrets/admin-token` of
/// `META_CORE_PATH` (`<dir>/meta-core` unless `env` says otherwise).
pub fn admin_token(dir: &Path, env: &[(String, String)]) -> Option<String> {
    let given = |k: &str| {
        env.iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
    };
    if let Some(t) = given("META_CORE_ADMIN_TOKEN").filter(|t| !t.is_empty()) {
        return Some(t);
    }
    if given("META_CORE_ADMIN_OPEN").is_some_and(|v| v == "true") {
        return None;
    }
    let meta = given("META_CORE_PATH").map_or_else(|| dir.join("meta-core"), PathBuf::from);
    let file = meta.join("secrets/admin-token");
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("apid is ready but {} is not: {e}", file.display()));
    Some(text.trim().to_owned())
}

/// A real HTTP/1.1 client over TCP (hyper's pooled client), every request
/// bounded by [`IO_DEADLINE`]. Answers come back as [`RawResponse`], whose
/// `json`, `text`, `header` and `assert_error` every test uses.
///
/// Requests go without credentials, as the mesh's services send them;
/// [`Http::admin`] is the same client sending the admin token.
#[derive(Debug, Clone)]
pub struct Http {
    port: u16,
    client: Client<HttpConnector, Full<Bytes>>,
    /// How long one request may take before the test fails.
    deadline: std::time::Duration,
    /// The server's admin token, once known.
    admin_token: Option<String>,
    /// Whether requests carry it.
    as_admin: bool,
}

impl Http {
    /// A client of `http://127.0.0.1:<port>`.
    pub fn new(port: u16) -> Self {
        Self {
            port,
            client: Client::builder(TokioExecutor::new()).build_http(),
            deadline: IO_DEADLINE,
            admin_token: None,
            as_admin: false,
        }
    }

    /// The same client, its requests bearing the admin token (unless a
    /// request names its own `Authorization`).
    pub fn admin(&self) -> Http {
        Http {
            as_admin: true,
            ..self.clone()
        }
    }

    /// A client of the same server that knows `token` as its admin token.
    pub fn with_admin_token(mut self, token: Option<String>) -> Self {
        self.admin_token = token;
        self
    }

    /// The admin token, as [`Http::admin`] sends it.
    pub fn admin_token(&self) -> Option<&str> {
        self.admin_token.as_deref()
    }

    /// The same client, waiting up to `deadline` for each answer (for
    /// requests the server may itself hold that long, such as one queued
    /// for the body budget).
    pub fn with_deadline(mut self, deadline: std::time::Duration) -> Self {
        self.deadline = deadline;
        self
    }

    pub async fn get(&self, path: &str) -> RawResponse {
        self.send("GET", path, Bytes::new(), &[]).await
    }

    /// `GET path`, which must answer 200; its JSON.
    pub async fn get_ok(&self, path: &str) -> serde_json::Value {
        let r = self.get(path).await;
        assert_eq!(r.status, 200, "GET {path}: {}", r.text());
        r.json()
    }

    /// `method path` with a JSON body.
    pub async fn send_json(
        &self,
        method: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> RawResponse {
        let bytes = serde_json::to_vec(body).expect("serialize a JSON body");
        self.send(method, path, bytes, &[("content-type", "application/json")])
            .await
    }

    /// `POST /api/mounts` of an rclone `:memory:` mount named `name` (an
    /// admin route: send it from [`Http::admin`]); the answer as it is.
    pub async fn post_memory_mount(&self, name: &str) -> RawResponse {
        self.send_json(
            "POST",
            "/api/mounts",
            &serde_json::json!({"name": name, "type": "rclone", "rcloneRemote": ":memory:"}),
        )
        .await
    }

    /// `method path` with a JSON body, which must answer 200; its JSON.
    pub async fn ok_json(
        &self,
        method: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> serde_json::Value {
        let r = self.send_json(method, path, body).await;
        assert_eq!(r.status, 200, "{method} {path}: {}", r.text());
        r.json()
    }

    /// One request over a fresh TCP connection, written while the answer
    /// is read (see [`crate::raw_http`]): for bodies apid refuses before
    /// reading them (413), which hyper's client reports as a broken pipe.
    pub async fn send_raw(&self, method: &str, path: &str, body: Option<&[u8]>) -> RawResponse {
        crate::raw_http::request_tcp(&format!("127.0.0.1:{}", self.port), method, path, body).await
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
        let mut req = Request::builder()
            .method(method)
            .uri(format!("http://127.0.0.1:{}{path}", self.port));
        for (k, v) in headers {
            req = req.header(
                HeaderName::from_bytes(k.as_bytes()).expect("a header name"),
                HeaderValue::from_str(v).expect("a header value"),
            );
        }
        let names_its_own = headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
        if self.as_admin
            && !names_its_own
            && let Some(token) = &self.admin_token
        {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let req = req
            .body(Full::new(body))
            .map_err(|e| format!("build {what}: {e}"))?;
        within(&what, self.deadline, async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| format!("{e:?}"))?;
            let (parts, body) = resp.into_parts();
            let body = body
                .collect()
                .await
                .map_err(|e| format!("read the body: {e}"))?
                .to_bytes();
            let headers = parts
                .headers
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            Ok(RawResponse {
                status: parts.status.as_u16(),
                headers,
                body: body.to_vec(),
            })
        })
        .await
    }
}
