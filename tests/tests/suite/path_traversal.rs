//! Path traversal, against the whole tree: every path parameter of every
//! operation in `docs/openapi.json` (read from the document, so a new
//! route is covered when it is added), every WebDAV method and a COPY's or
//! MOVE's `Destination`, the paths that go in bodies (`POST /file/cid`,
//! watchers, mounts) and records (`filePath`), and the entry names of a
//! snapshot import, each sent in hostile forms exactly as written (`..`,
//! `%2e%2e`, `%2E%2e%2f`, `..%2f`, `%2f`, `%00`, `..\`, `%252e%252e`,
//! absolute paths, overlong segments) over a raw connection, so that no
//! client normalises them first.
//!
//! Bait lies around `FILES_PATH`: a secret in the test dir, a sentinel just
//! outside `FILES_PATH`, a sibling folder whose name starts with
//! `files`, symlinks in `plugin/` that lead out. Every answer is held to
//! the same rules: no 5xx; a 4xx for every form that decodes to a `..`
//! segment, an encoded `/` or a NUL in a path, or goes through a symlink
//! that leads out (the one 5xx is a 502 for a well-formed `Destination`
//! on another server or outside `/webdav/`, RFC 4918 §9.8.5); no bait, no admin token, no internal path (the test
//! dir, `/tmp/`, `storaged`, a socket) in any body unless the request
//! itself carried it; and after every request the bait is unchanged and
//! nothing was made outside `FILES_PATH`. A literal form (a backslash, a
//! double encoding, an absolute path under a prefix) names an ordinary
//! name inside its root and may succeed there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use e2e::fixtures::{random_midhash, random_rid};
use e2e::openapi::document;
use e2e::raw_http::RawResponse;
use e2e::supervisor::{Launch, MetaCore};
use e2e::wait::IO_DEADLINE;
use serde_json::{Value, json};
use tempfile::TempDir;

use super::webdav_raw::{HERE, exchange};

mod stored;

/// How an answer to a hostile form must look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Decodes to a `..` segment, an encoded `/` or a NUL, or goes
    /// through a symlink that leads out: a 4xx.
    Traversal,
    /// An ordinary name inside the root once decoded as the server
    /// decodes it: any answer but a 5xx, and its effects stay inside.
    Literal,
    /// A well-formed `Destination` on another server or outside
    /// `/webdav/`: the 502 of RFC 4918 §9.8.5, and nothing done.
    Elsewhere,
}

use Kind::{Elsewhere, Literal, Traversal};

/// The hostile forms put into a path, each relative to a folder one or
/// two levels below the test dir (`files/` or `files/plugin/`), naming
/// the secret or `marker`, which exists nowhere.
fn forms(marker: &str) -> Vec<(String, Kind)> {
    let t = |s: String| (s, Traversal);
    let l = |s: String| (s, Literal);
    vec![
        t("..".into()),
        t("../secret.txt".into()),
        t("../../secret.txt".into()),
        t(format!("../../{marker}")),
        t(format!("{}etc/passwd", "../".repeat(40))),
        t("%2e%2e".into()),
        t("%2e%2e/%2e%2e/secret.txt".into()),
        t(format!("%2e%2e/%2e%2e/{marker}")),
        t("%2E%2e%2f%2E%2e%2fsecret.txt".into()),
        t("%2E%2e%2f".into()),
        t("..%2f..%2fsecret.txt".into()),
        t(".%2e/.%2e/secret.txt".into()),
        t("%2fetc%2fpasswd".into()),
        t("%00".into()),
        t("secret.txt%00".into()),
        t("..%00/secret.txt".into()),
        l("..\\..\\secret.txt".into()),
        l(format!("..\\..\\{marker}")),
        l("..%5c..%5csecret.txt".into()),
        l("%252e%252e/%252e%252e/secret.txt".into()),
        l("%252e%252e%252f%252e%252e%252fsecret.txt".into()),
        l("%c0%ae%c0%ae/secret.txt".into()),
        l("/etc/passwd".into()),
        l("a".repeat(300)),
        l(vec!["a".repeat(200); 40].join("/")),
    ]
}

/// One meta-core with bait around its `FILES_PATH`.
struct Bait {
    /// Declared first: the tree stops before its dir goes.
    mc: MetaCore,
    dir: TempDir,
    /// A name that exists nowhere, for writes that would make it.
    marker: String,
    /// The record of `filePath` `plugin/src.txt`: its RID and CID.
    rid: String,
    cid: String,
    /// Every file outside `FILES_PATH` that no daemon writes, with its
    /// bytes, as planted.
    outside: BTreeMap<PathBuf, Vec<u8>>,
    /// What no answer may carry: the bait's bytes and the admin token.
    secrets: Vec<String>,
}

impl Bait {
    async fn start() -> Self {
        let dir = e2e::daemon::test_dir();
        let d = dir.path();
        let tag = random_rid().to_string();
        std::fs::create_dir_all(d.join("files/plugin")).unwrap();
        std::fs::create_dir_all(d.join("files/watch")).unwrap();
        std::fs::create_dir_all(d.join("files-evil")).unwrap();
        let bait = [
            ("secret.txt", format!("secret {tag}")),
            ("outside.txt", format!("sentinel {tag}")),
            ("files-evil/secret.txt", format!("evil {tag}")),
        ];
        for (name, text) in &bait {
            std::fs::write(d.join(name), text).unwrap();
        }
        std::fs::write(d.join("files/plugin/src.txt"), b"source").unwrap();
        std::os::unix::fs::symlink(d, d.join("files/plugin/link-out")).unwrap();
        std::os::unix::fs::symlink(d.join("secret.txt"), d.join("files/plugin/secret-link"))
            .unwrap();
        let mc = Launch::in_dir(d, "run")
            .env("META_CORE_DAV_COPY_RESERVE_BYTES", "0")
            .start()
            .await;
        let cid = random_midhash().to_string();
        let files = d.join("files");
        let path = files.join("plugin/src.txt").display().to_string();
        let r = mc
            .ok_json(
                "PATCH",
                &format!("/meta/{cid}"),
                &json!({"title": "bait", "filePath": path, format!("cids/{cid}"): "1"}),
            )
            .await;
        let rid = r["hashId"].as_str().unwrap().to_owned();
        let mut secrets: Vec<String> = bait.into_iter().map(|(_, t)| t).collect();
        secrets.push(mc.admin_token().expect("the admin token").to_owned());
        let mut b = Self {
            mc,
            dir,
            marker: format!("pt-escape-{}", tag.to_lowercase()),
            rid,
            cid,
            outside: BTreeMap::new(),
            secrets,
        };
        b.outside = b.outside_files();
        b
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The files of the test dir outside `FILES_PATH`, but those the tree
    /// writes itself (`META_CORE_PATH`, the run dir, the processes' logs).
    fn outside_files(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![self.dir().to_owned()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let path = e.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                let top = dir == self.dir();
                if top && (["files", "meta-core", "run"].contains(&name.as_str()))
                    || name.ends_with(".stderr")
                {
                    continue;
                }
                let meta = std::fs::symlink_metadata(&path).unwrap();
                if meta.is_dir() {
                    stack.push(path);
                } else {
                    out.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
                }
            }
        }
        out
    }

    /// Panics unless everything outside `FILES_PATH` is as planted, and
    /// the marker is nowhere above it.
    fn assert_untouched(&self, what: &str) {
        assert_eq!(
            self.outside_files(),
            self.outside,
            "{what}: the files outside FILES_PATH changed"
        );
        let plugin = self.dir().join("files/plugin");
        assert!(
            std::fs::read_link(plugin.join("link-out")).is_ok_and(|t| t == self.dir()),
            "{what}: plugin/link-out is no longer the symlink planted"
        );
        for above in [self.dir().parent().unwrap(), Path::new("/")] {
            assert!(
                !above.join(&self.marker).exists(),
                "{what}: {} was made",
                above.join(&self.marker).display()
            );
        }
    }

    /// `method target` with `headers` and `body`, written as given, with
    /// the admin token: the answer.
    async fn send(
        &self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> RawResponse {
        let token = self.mc.admin_token().unwrap();
        let mut head = format!(
            "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {token}\r\nContent-Length: {}",
            self.mc.port(),
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("\r\n{k}: {v}"));
        }
        exchange(HERE, self.mc.port(), &head, &[body], IO_DEADLINE).await
    }

    /// Sends, then holds the answer and the tree to the rules of the
    /// module's header; the answer.
    async fn probe(
        &self,
        kind: Kind,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> RawResponse {
        let r = self.send(method, target, headers, body).await;
        let sent = format!(
            "{method} {target} {headers:?} {}",
            String::from_utf8_lossy(body)
        );
        self.check(kind, &sent, &r);
        r
    }

    /// The rules for one answer to `sent`.
    fn check(&self, kind: Kind, sent: &str, r: &RawResponse) {
        let text = r.text();
        let what = format!("{sent} -> {} {text:.300}", r.status);
        match kind {
            Traversal => assert!((400..500).contains(&r.status), "not refused: {what}"),
            Literal => assert!(r.status < 500, "a server error: {what}"),
            Elsewhere => assert_eq!(r.status, 502, "not the 502 of another server: {what}"),
        }
        if (300..400).contains(&r.status) {
            let to = r.header("location").unwrap_or("");
            assert!(
                to.starts_with("/webdav/") && !to.starts_with("//") && !to.contains(".."),
                "a redirect out: {what}, to {to}"
            );
        }
        for s in &self.secrets {
            assert!(!text.contains(s.as_str()), "bait or token served: {what}");
        }
        // A success may name a place under FILES_PATH where its schema
        // says so (a mount's folder, a watcher's, `/data/{hash}/path`);
        // nothing else of the disk, and an error or a redirect nothing.
        let dir = self.dir().display().to_string();
        let text = if r.status < 300 {
            text.replace(&format!("{dir}/files/"), "")
        } else {
            text
        };
        // What the request itself said may come back (a key echoed), in
        // the request's words or percent-decoded.
        let decoded = percent_decoded(sent);
        for inner in [dir.as_str(), "/tmp/", "storaged", ".sock"] {
            assert!(
                sent.contains(inner) || decoded.contains(inner) || !text.contains(inner),
                "{inner:?} in the answer: {what}"
            );
        }
        self.assert_untouched(&what);
    }
}

/// `text` with every `%XX` decoded (bytes that are not UTF-8 replaced).
fn percent_decoded(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A documented parameter with its `$ref` followed.
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v["$ref"].as_str() {
        Some(r) => doc.pointer(&r[1..]).expect("the reference resolves"),
        None => v,
    }
}

/// Every `(path, method, path parameters)` of the document.
fn operations(doc: &Value) -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        let shared = item["parameters"].as_array().cloned().unwrap_or_default();
        for (method, op) in item.as_object().unwrap() {
            if method == "parameters" {
                continue;
            }
            let own = op["parameters"].as_array().cloned().unwrap_or_default();
            let names = shared
                .iter()
                .chain(&own)
                .map(|p| resolve(doc, p))
                .filter(|p| p["in"] == "path")
                .map(|p| p["name"].as_str().unwrap().to_owned())
                .collect();
            out.push((path.clone(), method.to_uppercase(), names));
        }
    }
    out
}

#[tokio::test]
async fn no_path_parameter_of_the_document_reaches_outside_its_root() {
    let b = Bait::start().await;
    let doc = document();
    let watchers = b.mc.admin().get_ok("/api/watchers").await;
    let watcher = watchers["watchers"][0]["id"].as_str().unwrap().to_owned();
    let kv_key = format!("file:{}", b.rid);
    // A value each parameter takes, and where a hostile form goes: alone,
    // and after the part of a valid value that a path continues.
    let valid = |path: &str, name: &str| -> (String, Vec<String>) {
        match name {
            "hash" | "hashId" => (b.rid.clone(), vec![String::new()]),
            "cid" => (b.cid.clone(), vec![String::new()]),
            "key" if path.starts_with("/api/kv/") => {
                (kv_key.clone(), vec!["file:".into(), format!("{kv_key}/")])
            }
            "key" => ("title".into(), vec![String::new(), "title/".into()]),
            "path" => (
                "plugin/src.txt".into(),
                vec![String::new(), "plugin/".into()],
            ),
            "id" if path.starts_with("/api/watchers/") => (watcher.clone(), vec![String::new()]),
            "id" => (
                "0b9a5a4e-2f3c-4e0a-9d55-3f1c2b7a8e10".into(),
                vec![String::new()],
            ),
            "daemon" => ("watcherd".into(), vec![String::new()]),
            "file" => ("index.html".into(), vec![String::new()]),
            other => panic!("{path}: a path parameter {other:?} this test has no value for"),
        }
    };
    let mut sent = 0;
    for (path, method, params) in operations(&doc) {
        for target in &params {
            for (form, kind) in forms(&b.marker) {
                for base in valid(&path, target).1 {
                    let mut url = path.clone();
                    for p in &params {
                        let v = if p == target {
                            format!("{base}{form}")
                        } else {
                            valid(&path, p).0
                        };
                        url = url.replace(&format!("{{{p}}}"), &v);
                    }
                    let (headers, body): (&[(&str, &str)], &[u8]) = match method.as_str() {
                        "PUT" | "PATCH" | "POST" => {
                            (&[("Content-Type", "application/json")], b"{}")
                        }
                        _ => (&[], b""),
                    };
                    b.probe(kind, &method, &url, headers, body).await;
                    sent += 1;
                }
            }
        }
    }
    assert!(
        sent > 1000,
        "only {sent} requests: the document's paths were not read"
    );
    // The record the valid values named is still there.
    let r = b.mc.get(&format!("/meta/{}/title", b.rid)).await;
    assert_eq!(r.text(), "bait");
}

/// A WebDAV method, its headers and its body.
type DavCall = (&'static str, Vec<(&'static str, String)>, Vec<u8>);

/// The WebDAV methods, each with the headers and body that get it past
/// the checks of its shape to the path checks.
fn dav_methods(marker: &str) -> Vec<DavCall> {
    const PROPPATCH: &str = r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:x"><D:set><D:prop><Z:a>b</Z:a></D:prop></D:set></D:propertyupdate>"#;
    const LOCK: &str = r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>"#;
    let depth = ("Depth", "0".to_owned());
    let dest = ("Destination", format!("/webdav/plugin/{marker}-copy"));
    let xml = ("Content-Type", "application/xml".to_owned());
    vec![
        ("GET", vec![], vec![]),
        ("HEAD", vec![], vec![]),
        ("PUT", vec![], b"written".to_vec()),
        (
            "PATCH",
            vec![
                ("X-Update-Range", "bytes=0-6".into()),
                (
                    "Content-Type",
                    "application/x-sabredav-partialupdate".into(),
                ),
            ],
            b"patched".to_vec(),
        ),
        ("DELETE", vec![], vec![]),
        ("MKCOL", vec![], vec![]),
        ("COPY", vec![depth.clone(), dest.clone()], vec![]),
        ("MOVE", vec![dest], vec![]),
        ("PROPFIND", vec![depth.clone()], vec![]),
        ("PROPPATCH", vec![xml.clone()], PROPPATCH.into()),
        (
            "LOCK",
            vec![depth, xml, ("Timeout", "Second-60".into())],
            LOCK.into(),
        ),
        (
            "UNLOCK",
            vec![(
                "Lock-Token",
                "<opaquelocktoken:00000000-0000-0000-0000-000000000000>".into(),
            )],
            vec![],
        ),
        ("OPTIONS", vec![], vec![]),
    ]
}

/// Forms only a filesystem path has: an encoded `/` inside a segment, and
/// names below a symlink that leads out of `FILES_PATH`.
fn dav_forms(marker: &str) -> Vec<(String, Kind)> {
    let mut out = forms(marker);
    out.push(("a%2fb".into(), Traversal));
    for below in ["secret.txt", "outside.txt", "files-evil/secret.txt", marker] {
        out.push((format!("link-out/{below}"), Traversal));
    }
    out
}

#[tokio::test]
async fn no_webdav_method_reaches_outside_files_path() {
    let b = Bait::start().await;
    for (method, headers, body) in dav_methods(&b.marker) {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        for base in ["/webdav/", "/webdav/plugin/"] {
            for (form, kind) in dav_forms(&b.marker) {
                // OPTIONS looks nothing up (it answers Allow and DAV for
                // any name): a name below a symlink is only a name to it.
                let kind = match method {
                    "OPTIONS" if form.starts_with("link-out/") => Literal,
                    _ => kind,
                };
                let target = format!("{base}{form}");
                let r = b.probe(kind, method, &target, &headers, &body).await;
                // A lock granted on a literal name is given back, so that
                // this client's share of locks is not used up.
                if method == "LOCK"
                    && r.status < 300
                    && let Some(token) = r.header("lock-token")
                {
                    let token = token.to_owned();
                    let r = b
                        .send("UNLOCK", &target, &[("Lock-Token", &token)], b"")
                        .await;
                    assert_eq!(r.status, 204, "UNLOCK {target}: {}", r.text());
                }
            }
        }
    }
    // Through a symlink to a file outside, the secret is not read.
    for method in ["GET", "HEAD", "PROPFIND", "COPY"] {
        let headers = [("Depth", "0"), ("Destination", "/webdav/plugin/copied")];
        b.probe(
            Traversal,
            method,
            "/webdav/plugin/secret-link",
            &headers,
            b"",
        )
        .await;
    }
    assert!(!b.dir().join("files/plugin/copied").exists());
}

#[tokio::test]
async fn copy_and_move_destinations_stay_under_files_path() {
    let b = Bait::start().await;
    let (d, m, port) = (b.dir().display().to_string(), &b.marker, b.mc.port());
    let here = format!("http://127.0.0.1:{port}");
    let long = "a".repeat(300);
    let destinations: Vec<(String, Kind)> = vec![
        ("/webdav/plugin/../../outside.txt".into(), Traversal),
        ("/webdav/plugin/%2e%2e/%2e%2e/outside.txt".into(), Traversal),
        (format!("/webdav/plugin/%2e%2e/%2e%2e/{m}"), Traversal),
        (
            "/webdav/plugin/%2E%2e%2f%2E%2e%2foutside.txt".into(),
            Traversal,
        ),
        ("/webdav/plugin/..%2f..%2foutside.txt".into(), Traversal),
        ("/webdav/plugin/a%2fb".into(), Traversal),
        ("/webdav/plugin/x%00".into(), Traversal),
        ("/webdav/%2e%2e/outside.txt".into(), Traversal),
        ("/webdav/../files-evil/secret.txt".into(), Traversal),
        ("/webdav/plugin/link-out/outside.txt".into(), Traversal),
        (format!("/webdav/plugin/link-out/{m}"), Traversal),
        (format!("{here}/webdav/plugin/../../outside.txt"), Traversal),
        (format!("{here}/webdav/%2e%2e/outside.txt"), Traversal),
        (format!("/webdav//{d}/outside.txt"), Traversal),
        (format!("/webdav/plugin/{long}"), Traversal),
        // Not a Simple-ref (RFC 4918 §10.3): malformed.
        (String::new(), Traversal),
        ("../outside.txt".into(), Traversal),
        ("plugin/outside.txt".into(), Traversal),
        ("//127.0.0.1/webdav/plugin/x".into(), Traversal),
        // Well formed, and somewhere else.
        (format!("{d}/outside.txt"), Elsewhere),
        ("/etc/passwd".into(), Elsewhere),
        (format!("file://{d}/outside.txt"), Elsewhere),
        (format!("{here}/x/../webdav/plugin/x"), Elsewhere),
        ("http://elsewhere.example/webdav/plugin/x".into(), Elsewhere),
        // Ordinary names inside plugin/.
        ("/webdav/plugin/..\\..\\outside.txt".into(), Literal),
        ("/webdav/plugin/..%5c..%5coutside.txt".into(), Literal),
        (
            "/webdav/plugin/%252e%252e/%252e%252e/outside.txt".into(),
            Literal,
        ),
        (format!("/webdav/plugin//{d}/outside.txt"), Literal),
    ];
    let src = b.dir().join("files/plugin/src.txt");
    for method in ["COPY", "MOVE"] {
        for (dest, kind) in &destinations {
            for depth in ["0", "infinity"] {
                std::fs::write(&src, b"source").unwrap();
                let headers = [
                    ("Destination", dest.as_str()),
                    ("Overwrite", "T"),
                    ("Depth", depth),
                ];
                let headers = if method == "MOVE" {
                    &headers[..2]
                } else {
                    &headers[..]
                };
                b.probe(*kind, method, "/webdav/plugin/src.txt", headers, b"")
                    .await;
            }
        }
    }
}

/// A COPY or MOVE whose `Destination` is no absolute URI or path is the
/// client's mistake: a 400 with the envelope, and nothing copied or moved
/// (it was a 502, the answer for another server).
#[tokio::test]
async fn a_malformed_destination_is_a_400_and_changes_nothing() {
    let b = Bait::start().await;
    let plugin = b.dir().join("files/plugin");
    for method in ["COPY", "MOVE"] {
        for dest in [
            "",
            "../outside.txt",
            "plugin/x",
            "x",
            "//127.0.0.1/webdav/plugin/x",
        ] {
            let r = b
                .send(
                    method,
                    "/webdav/plugin/src.txt",
                    &[("Destination", dest)],
                    b"",
                )
                .await;
            r.assert_error(400, "bad_request");
            assert!(r.text().contains("Destination"), "{}", r.text());
        }
    }
    assert_eq!(std::fs::read(plugin.join("src.txt")).unwrap(), b"source");
    assert!(!plugin.join("x").exists());
    b.assert_untouched("malformed destinations");
}
