//! [`Browser`]: a real headless Chromium (Debian's `chromium`), driven over
//! the W3C WebDriver protocol by a real `chromedriver`, for the console's
//! tests. The protocol is a handful of JSON calls over HTTP, spoken here
//! with the harness's own HTTP client; pages are read with small scripts
//! run in them (`run`), and clicks and typing go through WebDriver as a
//! user's would. Killed when dropped. Where there is no chromium or
//! chromedriver, the tests are compiled as ignored (`tests/build.rs`).

use base64::Engine;
use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

use crate::apid::free_port;
use crate::process::Process;
use crate::wait::{DAEMON_DEADLINE, IO_DEADLINE, until, within};

/// The key WebDriver names an element by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A browser session of one test.
#[derive(Debug)]
pub struct Browser {
    driver: Process,
    base: String,
    session: String,
    http: Client<HttpConnector, Full<Bytes>>,
    shots: PathBuf,
}

impl Browser {
    /// Starts chromedriver in `dir` and a headless Chromium session of a
    /// laptop's window; screenshots go to `target/console-screenshots/`.
    pub async fn start(dir: &Path) -> Self {
        Self::start_with(dir, &[]).await
    }

    /// [`Browser::start`] with more Chromium switches (a benchmark's
    /// `--enable-precise-memory-info`, say).
    pub async fn start_with(dir: &Path, extra: &[&str]) -> Self {
        let port = free_port();
        let mut cmd = std::process::Command::new("chromedriver");
        cmd.arg(format!("--port={port}"));
        // Its own process group: Chromium and every helper it forks go
        // with it when the group is killed (`Drop`).
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let driver = Process::spawn("chromedriver", dir, cmd);
        let http = Client::builder(TokioExecutor::new()).build_http();
        let base = format!("http://127.0.0.1:{port}");
        let mut browser = Self {
            driver,
            base,
            session: String::new(),
            http,
            shots: screenshots_dir(),
        };
        until("chromedriver to answer", DAEMON_DEADLINE, || {
            let b = &browser;
            async move { b.call(Method::GET, "/status", None).await.ok() }
        })
        .await;
        let profile = dir.join("chromium-profile");
        let mut args = vec![
            "--headless=new".to_owned(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=1366,900".into(),
            format!("--user-data-dir={}", profile.display()),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": chromium(), "args": args },
        }}});
        let answer = browser
            .call(Method::POST, "/session", Some(caps))
            .await
            .unwrap_or_else(|e| panic!("a Chromium session: {e}"));
        browser.session = answer["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned();
        browser
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Result<Value, String> {
        let bytes = body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string()));
        let req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(Full::new(bytes))
            .map_err(|e| e.to_string())?;
        let res = within(
            "a WebDriver answer",
            IO_DEADLINE * 3,
            self.http.request(req),
        )
        .await
        .map_err(|e| e.to_string())?;
        let status = res.status();
        let body = res
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        let v: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!("{status}: {}", v["value"]));
        }
        Ok(v["value"].clone())
    }

    async fn session_call(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let full = format!("/session/{}{path}", self.session);
        self.call(method, &full, body)
            .await
            .unwrap_or_else(|e| panic!("WebDriver {full}: {e}"))
    }

    /// Opens `url` in the tab.
    pub async fn goto(&self, url: &str) {
        self.session_call(Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    /// The tab's URL now.
    pub async fn url(&self) -> String {
        self.session_call(Method::GET, "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Runs `script` (a function body; `arguments[i]` are `args`) in the
    /// page and returns what it returns.
    pub async fn run(&self, script: &str, args: Value) -> Value {
        self.session_call(
            Method::POST,
            "/execute/sync",
            Some(json!({ "script": script, "args": args })),
        )
        .await
    }

    /// Waits until `script` returns something other than `null` or
    /// `false` in the page; that value.
    pub async fn wait_for(&self, what: &str, script: &str) -> Value {
        let found = crate::wait::until_or_none(DAEMON_DEADLINE, || async {
            let v = self.run(script, json!([])).await;
            (!v.is_null() && v != Value::Bool(false)).then_some(v)
        })
        .await;
        match found {
            Some(v) => v,
            None => {
                let shot = self.screenshot("timed-out").await;
                let text = self.run("return document.body.innerText", json!([])).await;
                panic!(
                    "timed out after {DAEMON_DEADLINE:?} waiting for {what}; the page ({}) \
                     reads:\n{}",
                    shot.display(),
                    text.as_str().unwrap_or_default()
                )
            }
        }
    }

    async fn element(&self, css: &str) -> String {
        let found = until(&format!("an element {css:?}"), DAEMON_DEADLINE, || async {
            self.call(
                Method::POST,
                &format!("/session/{}/element", self.session),
                Some(json!({ "using": "css selector", "value": css })),
            )
            .await
            .ok()
        })
        .await;
        found[ELEMENT].as_str().expect("an element id").to_owned()
    }

    /// Clicks the first element matching `css`, as a user would.
    pub async fn click(&self, css: &str) {
        let id = self.element(css).await;
        self.session_call(
            Method::POST,
            &format!("/element/{id}/click"),
            Some(json!({})),
        )
        .await;
    }

    /// Empties the field matching `css` and types `text` into it.
    pub async fn type_into(&self, css: &str, text: &str) {
        let id = self.element(css).await;
        self.session_call(
            Method::POST,
            &format!("/element/{id}/clear"),
            Some(json!({})),
        )
        .await;
        self.session_call(
            Method::POST,
            &format!("/element/{id}/value"),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// Ends the session: Chromium quits and chromedriver reaps it (a test
    /// that panics first leaves it to `Drop`, which kills them all).
    pub async fn close(self) {
        let path = format!("/session/{}", self.session);
        let _ = self.call(Method::DELETE, &path, None).await;
    }

    /// Makes the window `width` by `height` CSS pixels (a phone's, say).
    pub async fn resize(&self, width: u32, height: u32) {
        self.session_call(
            Method::POST,
            "/window/rect",
            Some(json!({ "width": width, "height": height })),
        )
        .await;
    }

    /// Saves the tab as `target/console-screenshots/<name>.png`.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.session_call(Method::GET, "/screenshot", None).await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().expect("a base64 picture"))
            .expect("base64");
        std::fs::create_dir_all(&self.shots).expect("make the screenshots folder");
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, bytes).expect("save the screenshot");
        path
    }

    /// The browser's memory for the page's heap (`performance.memory`, in
    /// bytes), for the console's benchmark.
    pub async fn heap_bytes(&self) -> u64 {
        self.run(
            "return performance.memory ? performance.memory.usedJSHeapSize : 0",
            json!([]),
        )
        .await
        .as_u64()
        .unwrap_or(0)
    }
}

impl Drop for Browser {
    /// chromedriver's process group: Chromium and its helpers with it.
    fn drop(&mut self) {
        if let Some(group) = rustix::process::Pid::from_raw(self.driver.pid() as i32) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}

/// The `chromium` found on the PATH (as `tests/build.rs` probed it).
fn chromium() -> String {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("chromium"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"))
        .display()
        .to_string()
}

/// `target/console-screenshots/` of the workspace.
fn screenshots_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/console-screenshots")
        .components()
        .collect()
}
