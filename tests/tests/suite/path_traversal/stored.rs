//! The paths that do not come in the URL: a record's `filePath` (served
//! by `/file/{cid}`, `/api/file/{cid}/info`, `/data/{hash}/path`), the
//! path members of request bodies (read from the document: `path`,
//! `rclonePath`, and any new `...Path`), a mount's name (its folder), the
//! raw keys of `/api/kv/value`, and the entry names of a snapshot import
//! and export. The same bait and rules as the parent module.

use std::io::{Read, Write};

use serde_json::{Value, json};

use super::{Bait, Kind, Literal, Traversal, resolve};

/// Hostile paths as a body or a record carries them (JSON, not
/// percent-decoded), relative to `FILES_PATH` or absolute.
fn paths(b: &Bait) -> Vec<(String, Kind)> {
    let d = b.dir().display().to_string();
    let m = &b.marker;
    let t = |s: String| (s, Traversal);
    let mut out: Vec<(String, Kind)> = [
        "..".into(),
        "../secret.txt".into(),
        "../../secret.txt".into(),
        format!("../{m}"),
        "plugin/../../secret.txt".into(),
        "plugin/link-out".into(),
        "plugin/link-out/secret.txt".into(),
        "plugin/link-out/files-evil/secret.txt".into(),
        "plugin/secret-link".into(),
        "../meta-core/secrets/admin-token".into(),
        "/files/../secret.txt".into(),
        "/files/plugin/link-out/outside.txt".into(),
        d.clone(),
        format!("{d}/secret.txt"),
        format!("{d}/files/../secret.txt"),
        format!("{d}/files-evil"),
        format!("{d}/files-evil/secret.txt"),
        format!("{d}/files/plugin/link-out"),
        format!("{d}/files/plugin/link-out/outside.txt"),
        format!("{d}/files/plugin/secret-link"),
        format!("{d}/meta-core/secrets/admin-token"),
        format!("{d}/{m}"),
        "/etc/passwd".into(),
        "/etc".into(),
        "plugin/a\u{0}b".into(),
    ]
    .into_iter()
    .map(t)
    .collect();
    for literal in [
        "%2e%2e/secret.txt",
        "..\\..\\secret.txt",
        "plugin/%2e%2e%2f%2e%2e%2fsecret.txt",
    ] {
        out.push((literal.into(), Literal));
    }
    out.push(("a".repeat(300), Literal));
    out
}

/// A record whose `filePath` leads out serves nothing: `/file/{cid}` is
/// a 404 as for an unknown CID, `/info` says `exists: false`, and
/// `/data/{hash}/path` does not call it existing.
#[tokio::test]
async fn a_stored_file_path_that_leads_out_serves_nothing() {
    let b = Bait::start().await;
    for (path, _) in paths(&b) {
        let cid = e2e::fixtures::random_midhash().to_string();
        let body = json!({"filePath": path, format!("cids/{cid}"): "1"});
        let r =
            b.mc.send_json("PATCH", &format!("/meta/{cid}"), &body)
                .await;
        if path.contains('\0') {
            r.assert_error(400, "schema_violation");
            continue;
        }
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        let sent = format!("a record of filePath {path:?}");
        let leads_out = !path.starts_with('%') && !path.contains('\\') && path.len() < 300;
        for method in ["GET", "HEAD"] {
            let r = b.send(method, &format!("/file/{cid}"), &[], b"").await;
            b.check(Traversal, &format!("{method} /file of {sent}"), &r);
            assert_eq!(r.status, 404, "{method} /file of {sent}");
        }
        let r = b
            .send("GET", &format!("/api/file/{cid}/info"), &[], b"")
            .await;
        b.check(Literal, &sent, &r);
        assert_eq!(r.json(), json!({"exists": false}), "/info of {sent}");
        // The mapped path is this route's answer: only the bait is looked
        // for in it.
        let r = b.send("GET", &format!("/data/{cid}/path"), &[], b"").await;
        assert!(r.status < 500, "/data/path of {sent}: {}", r.text());
        for s in &b.secrets {
            assert!(!r.text().contains(s.as_str()), "/data/path of {sent}");
        }
        if leads_out {
            assert!(
                r.status == 404 || r.json()["exists"] == false,
                "/data/path of {sent}: {} {}",
                r.status,
                r.text()
            );
        }
        b.assert_untouched(&sent);
    }
}

/// What a body needs besides the member under test to reach its checks.
fn base_body(path: &str, n: usize) -> Value {
    match path {
        "/api/mounts" => {
            json!({"name": format!("pt-{n}"), "type": "rclone", "rcloneRemote": ":memory:", "enabled": false})
        }
        _ => json!({}),
    }
}

/// Every request body member the document names `path` or `...Path`, as
/// `(path, method, member)`.
fn path_members(doc: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let schema = resolve(
                doc,
                &op["requestBody"]["content"]["application/json"]["schema"],
            );
            let mut props: Vec<&String> = Vec::new();
            for part in std::iter::once(schema).chain(
                schema["allOf"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| resolve(doc, p)),
            ) {
                props.extend(
                    part["properties"]
                        .as_object()
                        .into_iter()
                        .flat_map(|o| o.keys()),
                );
            }
            for p in props {
                if p == "path" || p.ends_with("Path") {
                    out.push((path.clone(), method.to_uppercase(), p.clone()));
                }
            }
        }
    }
    out
}

#[tokio::test]
async fn paths_in_bodies_and_keys_stay_inside() {
    let b = Bait::start().await;
    let doc = e2e::openapi::document();
    let members = path_members(&doc);
    let names: Vec<String> = members
        .iter()
        .map(|(p, m, k)| format!("{m} {p} {k}"))
        .collect();
    for expected in [
        "POST /file/cid path",
        "POST /api/watchers path",
        "POST /api/mounts rclonePath",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} not among {names:?}"
        );
    }
    let watchers = b.mc.admin().get_ok("/api/watchers").await;
    let watcher = watchers["watchers"][0]["id"].as_str().unwrap().to_owned();
    let mut n = 0;
    for (path, method, member) in &members {
        let target = path.replace("{id}", &watcher);
        assert!(
            !target.contains('{'),
            "{path}: a path parameter this test has no value for"
        );
        for (value, kind) in paths(&b) {
            // `rclonePath` is a folder of the remote (`:memory:` here),
            // not of this disk: rclone's own `..` and NUL are what is
            // refused (a local alias kept under its root is
            // `mountd_confined`'s).
            let kind = match member.as_str() {
                "rclonePath" if !value.split('/').any(|s| s == "..") && !value.contains('\0') => {
                    Literal
                }
                _ => kind,
            };
            n += 1;
            let mut body = base_body(path, n);
            body[member.as_str()] = json!(value);
            let bytes = serde_json::to_vec(&body).unwrap();
            let r = b
                .probe(
                    kind,
                    method,
                    &target,
                    &[("Content-Type", "application/json")],
                    &bytes,
                )
                .await;
            forget(&b, path, &r).await;
        }
    }
    // A mount's name names its folder under corn/: whatever it is, the
    // folder stays there.
    let corn = b.dir().join("files/corn").display().to_string();
    for (value, _) in paths(&b) {
        let body =
            json!({"name": value, "type": "rclone", "rcloneRemote": ":memory:", "enabled": false});
        let bytes = serde_json::to_vec(&body).unwrap();
        let r = b
            .send(
                "POST",
                "/api/mounts",
                &[("Content-Type", "application/json")],
                &bytes,
            )
            .await;
        assert!(r.status < 500, "mount {value:?}: {}", r.text());
        if r.status == 201 {
            let folder = r.json()["mount"]["mountPath"].as_str().unwrap().to_owned();
            let name = folder.strip_prefix(&format!("{corn}/")).unwrap_or_default();
            assert!(
                !name.is_empty() && !name.contains('/') && !name.starts_with('.'),
                "mount {value:?} at {folder}"
            );
        }
        for s in &b.secrets {
            assert!(
                !r.text().contains(s.as_str()),
                "mount {value:?}: {}",
                r.text()
            );
        }
        forget(&b, "/api/mounts", &r).await;
        b.assert_untouched(&format!("a mount named {value:?}"));
    }
    // Raw keys are names in the store, not paths: any of them may be
    // read, written and deleted, and none reaches a file.
    for (value, _) in paths(&b) {
        let key: String = url_encoded(&value);
        for method in ["GET", "DELETE"] {
            b.probe(
                Literal,
                method,
                &format!("/api/kv/value?key={key}"),
                &[],
                b"",
            )
            .await;
        }
    }
}

/// Removes what a request made (a watcher, a mount), so that the next one
/// meets the tree as it was.
async fn forget(b: &Bait, path: &str, r: &e2e::raw_http::RawResponse) {
    if r.status != 201 {
        return;
    }
    let v = r.json();
    let id = v["mount"]["id"]
        .as_str()
        .or(v["id"].as_str())
        .unwrap_or_default();
    let r = b.send("DELETE", &format!("{path}/{id}"), &[], b"").await;
    assert_eq!(r.status, 200, "DELETE {path}/{id}: {}", r.text());
}

fn url_encoded(s: &str) -> String {
    serde_urlencoded::to_string([("k", s)]).unwrap()[2..].to_owned()
}

/// A ZIP of `(name, bytes)` entries, and one symlink entry.
fn archive(entries: &[(String, &[u8])], link: (&str, &str)) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default();
    for (name, bytes) in entries {
        zip.start_file(name.as_str(), options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.add_symlink(link.0, link.1, options).unwrap();
    zip.finish().unwrap().into_inner()
}

#[tokio::test]
async fn a_snapshot_import_writes_only_under_plugin() {
    let b = Bait::start().await;
    let (d, m) = (b.dir().display().to_string(), b.marker.clone());
    let p = "cache/plugin-output/";
    let hostile = [
        format!("{p}../../{m}"),
        format!("{p}../../secret.txt"),
        format!("{p}../../../outside.txt"),
        format!("{p}a/../../../secret.txt"),
        format!("{p}/{d}/outside.txt"),
        format!("{p}..\\..\\{m}"),
        format!("{p}link-out/{m}"),
        format!("{p}link-out/outside.txt"),
        format!("{p}secret-link"),
        format!("metadata/../../{m}.json"),
        format!("/{d}/{m}"),
        format!("../{m}"),
    ];
    let mut entries: Vec<(String, &[u8])> = vec![(
        "manifest.json".into(),
        br#"{"schemaVersion":2,"fileCount":0}"#,
    )];
    entries.extend(hostile.iter().map(|n| (n.clone(), &b"pwned"[..])));
    entries.push((format!("{p}kept.txt"), b"kept"));
    let zip = archive(
        &entries,
        (&format!("{p}evil-link"), &format!("{d}/outside.txt")),
    );
    let r = b
        .probe(
            Literal,
            "POST",
            "/api/snapshot/import",
            &[("Content-Type", "application/zip")],
            &zip,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let report = r.json();
    assert_eq!(report["pluginOutput"]["written"], 1, "{report:#}");
    let plugin = b.dir().join("files/plugin");
    assert_eq!(std::fs::read(plugin.join("kept.txt")).unwrap(), b"kept");
    assert!(
        std::fs::symlink_metadata(plugin.join("evil-link")).is_err(),
        "no symlink is made"
    );
    assert!(
        std::fs::read_link(plugin.join("secret-link")).is_ok(),
        "the symlink is not written through"
    );
}

/// A file of `plugin/` named with a `\` is left out of an export: ZIP
/// readers that take `\` for a separator would unpack
/// `cache/plugin-output/..\..\x` two folders above where they were asked.
#[tokio::test]
async fn an_export_leaves_out_names_a_zip_reader_would_unpack_outside() {
    let b = Bait::start().await;
    for name in ["..%5c..%5cescaped.txt", "ordinary.txt"] {
        let r = b
            .send(
                "PUT",
                &format!("/webdav/plugin/{name}"),
                &[],
                b"plugin output",
            )
            .await;
        assert_eq!(r.status, 201, "PUT {name}: {}", r.text());
    }
    assert!(b.dir().join("files/plugin/..\\..\\escaped.txt").is_file());
    let r = b
        .send(
            "GET",
            "/api/snapshot/export?include=plugin-output",
            &[],
            b"",
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(r.body)).unwrap();
    let mut names = Vec::new();
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).unwrap();
        let name = entry.name().unwrap().into_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        for s in &b.secrets {
            assert!(
                !String::from_utf8_lossy(&bytes).contains(s.as_str()),
                "{name} holds bait"
            );
        }
        names.push(name);
    }
    assert!(
        names
            .iter()
            .any(|n| n == "cache/plugin-output/ordinary.txt"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains('\\')), "{names:?}");
}
