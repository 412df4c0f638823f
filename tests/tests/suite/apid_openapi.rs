//! What apid really answers, held against `docs/openapi.json`: one real
//! request for every operation the document says answers JSON, under the
//! real supervisor (so `/status` carries its table), each 200 body checked
//! strictly against the documented schema; the 201 of `POST /api/watchers`,
//! the snapshot's `manifest.json`, the deprecated routes' headers, the
//! statuses and headers of `GET|HEAD /file/{cid}` and meta-core's own
//! service-registry file against the document too.

use std::collections::BTreeSet;
use std::io::Read;

use e2e::fixtures::{random_midhash, random_rid};
use e2e::openapi::{check_answer, check_component, document, json_operations};
use e2e::supervisor::{Launch, MetaCore};
use e2e::wait::{DAEMON_DEADLINE, until};
use serde_json::{Value, json};

/// One request: the documented path and method, the concrete path, a body.
struct Call {
    doc_path: &'static str,
    method: &'static str,
    path: String,
    body: Body,
}

enum Body {
    None,
    Json(Value),
    Raw(Vec<u8>, &'static str),
}

fn call(doc_path: &'static str, method: &'static str, path: String, body: Body) -> Call {
    Call {
        doc_path,
        method,
        path,
        body,
    }
}

fn get(doc_path: &'static str, path: impl Into<String>) -> Call {
    call(doc_path, "get", path.into(), Body::None)
}

/// Sends the call (as an admin: the admin routes are documented too),
/// which must answer 200 with JSON; the JSON.
async fn send(mc: &MetaCore, c: &Call) -> Value {
    let method = c.method.to_uppercase();
    let mc = mc.admin();
    let r = match &c.body {
        Body::None => mc.send(&method, &c.path, Vec::new(), &[]).await,
        Body::Json(v) => mc.send_json(&method, &c.path, v).await,
        Body::Raw(bytes, ctype) => {
            mc.send(&method, &c.path, bytes.clone(), &[("content-type", ctype)])
                .await
        }
    };
    assert_eq!(r.status, 200, "{method} {}: {}", c.path, r.text());
    r.json()
}

fn zip_entry(zip: &[u8], name: &str) -> Value {
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip)).unwrap();
    let mut text = String::new();
    archive
        .by_name(name)
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A snapshot to import: one good record, one refused, one plugin file.
fn snapshot_zip() -> Vec<u8> {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default();
    let entries: [(String, &[u8]); 4] = [
        (
            "manifest.json".into(),
            br#"{"schemaVersion":2,"fileCount":2}"#,
        ),
        (
            format!("metadata/{}.json", random_rid()),
            br#"{"title":"imported"}"#,
        ),
        (
            format!("metadata/{}.json", random_rid()),
            br#"{"midhash256":"retired"}"#,
        ),
        ("cache/plugin-output/p/x.txt".into(), b"plugin"),
    ];
    for (name, bytes) in entries {
        zip.start_file(name, options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// The one value a documented header may take (its schema's `const`), its
/// `$ref` followed.
fn documented_header<'a>(doc: &'a Value, header: &'a Value) -> &'a str {
    let header = match header["$ref"].as_str() {
        Some(r) => doc
            .pointer(r.strip_prefix('#').expect("a local reference"))
            .expect("the reference resolves"),
        None => header,
    };
    header["schema"]["const"]
        .as_str()
        .unwrap_or_else(|| panic!("a header with a const value: {header}"))
}

#[tokio::test]
async fn every_json_answer_matches_the_openapi_document() {
    let dir = e2e::daemon::test_dir();
    let mut mc = Launch::in_dir(dir.path(), "run")
        .env(
            "RCLONE_CONFIG",
            &dir.path().join("rclone.conf").display().to_string(),
        )
        .start()
        .await;
    mc.wait_all_ready().await;
    let doc = document();

    // A record addressed by CID, with what the listings and totals read.
    let cid = random_midhash();
    let fields = json!({
        "filePath": "/files/watch/a.mkv", "fileName": "a.mkv", "sizeByte": "10",
        "mtimeNano": "1", "title": "A", "year": "2001", "fileinfo/duration": "5.5"
    });
    let made = send(
        &mc,
        &call(
            "/meta/{hash}",
            "patch",
            format!("/meta/{cid}"),
            Body::Json(fields),
        ),
    )
    .await;
    let rid = made["hashId"].as_str().unwrap().to_owned();
    let (other, third) = (random_rid(), random_rid());
    let zip = mc.get("/api/snapshot/export").await.body;
    check_component(&doc, "SnapshotManifest", &zip_entry(&zip, "manifest.json"))
        .unwrap_or_else(|why| panic!("{why}"));
    let raw = |text: &str| Body::Raw(text.as_bytes().to_vec(), "text/plain");

    // A watcher for the watchers routes, on a folder made for it. Creating
    // answers 201, so its body is checked here against the documented 201
    // schema; the calls below take its id.
    std::fs::create_dir_all(dir.path().join("files/corn/x")).unwrap();
    let r = mc
        .admin()
        .send_json(
            "POST",
            "/api/watchers",
            &json!({"path": "corn/x", "intervalMs": 1000}),
        )
        .await;
    assert_eq!(r.status, 201, "POST /api/watchers: {}", r.text());
    let created = r.json();
    let schema = &doc["paths"]["/api/watchers"]["post"]["responses"]["201"]["content"]["application/json"]
        ["schema"]["$ref"];
    let name = schema
        .as_str()
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
        .expect("POST /api/watchers documents its 201 schema");
    check_component(&doc, name, &created).unwrap_or_else(|why| panic!("{why}"));
    assert_eq!(created["enabled"], false, "{created}");
    assert_eq!(created["intervalMs"], 30_000, "{created}");
    let watcher = created["id"].as_str().unwrap().to_owned();

    // A file for the file routes and a record naming it by its absolute
    // path. It sits under `corn/` outside every watcher, so watcherd (which
    // neither watches `corn/` by inotify nor walks it on a reset-all)
    // announces nothing of it.
    let bytes: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
    let file_path = dir.path().join("files/corn/y/clip.bin");
    std::fs::create_dir_all(file_path.parent().unwrap()).unwrap();
    std::fs::write(&file_path, &bytes).unwrap();
    let file_cid = random_midhash();
    send(
        &mc,
        &call(
            "/meta/{hash}",
            "patch",
            format!("/meta/{file_cid}"),
            Body::Json(json!({ "filePath": file_path.display().to_string() })),
        ),
    )
    .await;

    // The bytes of a file are no JSON: each answer of `GET|HEAD
    // /file/{cid}` is held against the status the document lists and the
    // headers it names for it (before the calls below clear the records).
    let url = format!("/file/{file_cid}");
    for (method, headers, status) in [
        ("get", &[][..], "200"),
        ("head", &[][..], "200"),
        ("get", &[("range", "bytes=10-19")][..], "206"),
        ("get", &[("if-none-match", "*")][..], "304"),
        ("get", &[("if-match", "\"other\"")][..], "412"),
        ("get", &[("range", "bytes=1000-")][..], "416"),
    ] {
        let r = mc
            .send(&method.to_uppercase(), &url, Vec::new(), headers)
            .await;
        let what = format!("{method} {url} {headers:?}");
        assert_eq!(r.status.to_string(), status, "{what}: {}", r.text());
        let documented = &doc["paths"]["/file/{cid}"][method]["responses"][status];
        assert!(documented.is_object(), "{what}: {status} is not documented");
        for name in documented["headers"].as_object().into_iter().flatten() {
            assert!(r.header(name.0).is_some(), "{what}: no {} header", name.0);
        }
        if let Some(content) = documented["content"].as_object() {
            let ctype = r.header("content-type").unwrap_or_default();
            assert!(
                content.contains_key(ctype),
                "{what}: {ctype} is not documented"
            );
        }
        let want: &[u8] = match (method, status) {
            ("get", "200") => &bytes,
            ("get", "206") => &bytes[10..20],
            _ => &[],
        };
        assert_eq!(r.body, want, "{what}");
    }

    // The service registry: meta-core's own file (apid writes it just after
    // its start), then two instances of another service as the mesh writes
    // them, one fresh and one stale, so `neighbors` is not empty.
    let services = mc.meta_core_path().join("services");
    let own = until("meta-core's registry file", DAEMON_DEADLINE, || async {
        std::fs::read_dir(&services).ok()?.flatten().find_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name.starts_with("meta-core-") && name.ends_with(".json")).then(|| e.path())
        })
    })
    .await;
    let own: Value = serde_json::from_slice(&std::fs::read(&own).unwrap()).unwrap();
    check_component(&doc, "MetaCoreServiceFile", &own).unwrap_or_else(|why| panic!("{why}"));
    let beat = own["lastHeartbeat"].as_str().unwrap();
    // The same wall-clock time at +00:02 is two minutes earlier: past
    // STALE_THRESHOLD_MS (60 s), short of DEAD_SERVICE_THRESHOLD_MS.
    let earlier = format!("{}+00:02", beat.strip_suffix('Z').unwrap());
    for (host, last) in [("a", beat), ("b", earlier.as_str())] {
        let entry = json!({
            "name": "meta-sort", "hostname": host, "baseUrl": format!("http://{host}:8000"),
            "status": "running", "version": "2.1.0", "capabilities": ["sort"],
            "region": "eu", "lastHeartbeat": last
        });
        std::fs::write(
            services.join(format!("meta-sort-{host}.json")),
            entry.to_string(),
        )
        .unwrap();
    }
    // A listing read just before may be served for a moment longer.
    let all = until("the other service's instances", DAEMON_DEADLINE, || async {
        let n = mc.get_ok("/neighbors?all=1").await;
        (n["count"] == 2).then_some(n)
    })
    .await;
    let statuses: Vec<&Value> = all["neighbors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| &n["status"])
        .collect();
    assert_eq!(statuses, ["running", "stale"], "{all}");
    assert_eq!(all["self"]["name"], "meta-core", "{all}");
    let listed = mc.get_ok("/api/services").await;
    let own_entry = listed["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "meta-core")
        .unwrap_or_else(|| panic!("meta-core is not in {listed}"));
    check_component(&doc, "MetaCoreServiceFile", own_entry).unwrap_or_else(|why| panic!("{why}"));

    #[cfg_attr(no_fuse, allow(unused_mut))]
    let mut calls = vec![
        get("/health", "/health"),
        get("/status", "/status"),
        get("/leader", "/leader"),
        get("/urls", "/urls"),
        get("/api/stats", "/api/stats"),
        get("/neighbors", "/neighbors"),
        get("/neighbors", "/neighbors?all=1"),
        get("/api/neighbors", "/api/neighbors?all=true"),
        get("/api/services", "/api/services"),
        get("/meta", "/meta"),
        get("/meta/{hash}", format!("/meta/{rid}")),
        get("/meta/{hash}", format!("/meta/{cid}?shape=nested")),
        call(
            "/meta/{hash}",
            "put",
            format!("/meta/{other}"),
            Body::Json(json!({"title": "other"})),
        ),
        call(
            "/meta/{hash}",
            "patch",
            format!("/meta/{cid}"),
            Body::Json(json!({"genre": "drama"})),
        ),
        call(
            "/meta/{hash}/{key}",
            "put",
            format!("/meta/{rid}/note"),
            raw("hello"),
        ),
        call(
            "/meta/{hash}/_add/{key}",
            "post",
            format!("/meta/{rid}/_add/tags"),
            raw("x"),
        ),
        call(
            "/meta/{hash}/{key}",
            "delete",
            format!("/meta/{rid}/note"),
            Body::None,
        ),
        get("/api/meta/{cid}", format!("/api/meta/{cid}")),
        get("/api/meta/{cid}", format!("/api/meta/{cid}?shape=nested")),
        get("/data/{hash}/path", format!("/data/{rid}/path")),
        get("/api/file/{cid}/info", format!("/api/file/{file_cid}/info")),
        get(
            "/api/file/{cid}/info",
            format!("/api/file/{}/info", random_midhash()),
        ),
        call(
            "/file/cid",
            "post",
            "/file/cid".into(),
            Body::Json(json!({"path": "corn/y/clip.bin"})),
        ),
        get("/api/metadata/hash-ids", "/api/metadata/hash-ids"),
        get("/api/files/tuples", "/api/files/tuples"),
        get("/api/files/tuples", "/api/files/tuples?summary=1"),
        get("/api/metadata/list", "/api/metadata/list?offset=1&limit=5"),
        call(
            "/api/metadata/search",
            "post",
            "/api/metadata/search".into(),
            Body::Json(json!({"query": "", "filters": [{"property": "title", "values": ["t"]}]})),
        ),
        call(
            "/api/metadata/search",
            "post",
            "/api/metadata/search".into(),
            Body::Json(json!({"hashId": rid})),
        ),
        get("/api/schema", "/api/schema"),
        call(
            "/api/schema/rescan",
            "post",
            "/api/schema/rescan".into(),
            Body::None,
        ),
        call(
            "/api/metadata/batch",
            "post",
            "/api/metadata/batch".into(),
            Body::Json(json!({"updates": [{"hashId": rid, "properties": {"x": "1"}}, {}]})),
        ),
        get("/api/metadata/{hashId}", format!("/api/metadata/{rid}")),
        call(
            "/api/metadata/{hashId}",
            "put",
            format!("/api/metadata/{third}"),
            Body::Json(json!({"title": "third", "processingStatus": "done"})),
        ),
        get(
            "/api/metadata/{hashId}/property",
            format!("/api/metadata/{rid}/property?property=title"),
        ),
        call(
            "/api/metadata/{hashId}/property",
            "put",
            format!("/api/metadata/{rid}/property"),
            Body::Json(json!({"property": "title", "value": "B"})),
        ),
        call(
            "/api/metadata/{hashId}",
            "delete",
            format!("/api/metadata/{third}"),
            Body::None,
        ),
        get("/api/kv/info", "/api/kv/info"),
        get("/api/kv/keys", "/api/kv/keys?count=1"),
        get("/api/kv/tree", "/api/kv/tree?prefix=file:&max=1"),
        get("/api/kv/search", "/api/kv/search?contains=title"),
        get("/api/kv/find", "/api/kv/find?contains=b&fields=title"),
        get("/api/kv/key/{key}", format!("/api/kv/key/file:{rid}")),
        call(
            "/api/kv/value",
            "put",
            "/api/kv/value".into(),
            Body::Json(json!({"key": "udl:u/x", "value": "v"})),
        ),
        get("/api/kv/value", "/api/kv/value?key=udl:u/x"),
        get("/api/kv/value", "/api/kv/value?key=udl:nobody"),
        call(
            "/api/kv/value",
            "delete",
            "/api/kv/value?key=udl:u/x".into(),
            Body::None,
        ),
        get("/api/watchers", "/api/watchers"),
        get("/api/watchers/{id}", format!("/api/watchers/{watcher}")),
        call(
            "/api/watchers/{id}",
            "put",
            format!("/api/watchers/{watcher}"),
            Body::Json(json!({"intervalMs": 100, "enabled": false})),
        ),
        call(
            "/api/watchers/{id}/scan",
            "post",
            format!("/api/watchers/{watcher}/scan"),
            Body::None,
        ),
        call(
            "/api/watchers/{id}/reset",
            "post",
            format!("/api/watchers/{watcher}/reset"),
            Body::None,
        ),
        call(
            "/api/watchers/scan-all",
            "post",
            "/api/watchers/scan-all".into(),
            Body::None,
        ),
        call(
            "/api/watchers/reset-all",
            "post",
            "/api/watchers/reset-all".into(),
            Body::None,
        ),
        call(
            "/api/scan/trigger",
            "post",
            "/api/scan/trigger".into(),
            Body::None,
        ),
        get("/api/scan/status", "/api/scan/status"),
        call(
            "/api/watchers/{id}",
            "delete",
            format!("/api/watchers/{watcher}"),
            Body::None,
        ),
        call(
            "/api/snapshot/import",
            "post",
            "/api/snapshot/import?mode=merge".into(),
            Body::Raw(zip, "application/zip"),
        ),
        call(
            "/api/snapshot/import",
            "post",
            "/api/snapshot/import?mode=replace&dry_run=true".into(),
            Body::Raw(snapshot_zip(), "application/zip"),
        ),
        call(
            "/meta/{hash}",
            "delete",
            format!("/meta/{other}"),
            Body::None,
        ),
        call(
            "/api/metadata/clear",
            "post",
            "/api/metadata/clear".into(),
            Body::None,
        ),
        call(
            "/api/snapshot/wipe",
            "post",
            "/api/snapshot/wipe?scope=metadata".into(),
            Body::None,
        ),
        call(
            "/api/daemons/{daemon}/restart",
            "post",
            "/api/daemons/watcherd/restart".into(),
            Body::None,
        ),
    ];
    // A mount of `:memory:` for the mounts routes (where FUSE is here), its
    // 201 checked as the watcher's is; the calls below take its id.
    #[cfg(not(no_fuse))]
    {
        let r = mc.admin().post_memory_mount("mem").await;
        assert_eq!(r.status, 201, "POST /api/mounts: {}", r.text());
        let created = r.json();
        check_component(&doc, "MountOne", &created).unwrap_or_else(|why| panic!("{why}"));
        assert_eq!(created["mount"]["mounted"], true, "{created}");
        let id = created["mount"]["id"].as_str().unwrap().to_owned();
        let one = format!("/api/mounts/{id}");
        let post = |doc_path: &'static str, action: &str| {
            call(doc_path, "post", format!("{one}/{action}"), Body::None)
        };
        calls.extend([
            get("/api/mounts", "/api/mounts"),
            get("/api/mounts/rclone/remotes", "/api/mounts/rclone/remotes"),
            get("/api/mounts/{id}", one.clone()),
            call(
                "/api/mounts/{id}",
                "put",
                one.clone(),
                Body::Json(json!({"dirCacheTime": "1m"})),
            ),
            call(
                "/api/mounts/{id}",
                "patch",
                one.clone(),
                Body::Json(json!({"pollingEnabled": false})),
            ),
            post("/api/mounts/{id}/scan", "scan"),
            post("/api/mounts/{id}/unmount", "unmount"),
            post("/api/mounts/{id}/mount", "mount"),
            post("/api/mounts/{id}/safe-unmount", "safe-unmount?timeout=1000"),
            call("/api/mounts/{id}", "delete", one.clone(), Body::None),
        ]);
    }
    for c in &calls {
        let answer = send(&mc, c).await;
        if let Err(why) = check_answer(&doc, c.doc_path, c.method, &answer) {
            panic!("{why}");
        }
    }

    // The retired routes are marked so, and their answers carry the
    // documented `Deprecation` and `Link`.
    for (method, path) in [("post", "/api/scan/trigger"), ("get", "/api/scan/status")] {
        let op = &doc["paths"][path][method];
        assert_eq!(op["deprecated"], true, "{method} {path}");
        let r = mc
            .admin()
            .send(&method.to_uppercase(), path, Vec::new(), &[])
            .await;
        assert_eq!(r.status, 200, "{method} {path}: {}", r.text());
        for name in ["Deprecation", "Link"] {
            let want = documented_header(&doc, &op["responses"]["200"]["headers"][name]);
            assert_eq!(
                r.header(name),
                Some(want),
                "{method} {path}: the header {name}"
            );
        }
    }

    // The stats once the background sweep has run carry the file totals.
    let stats = until("the stats sweep", DAEMON_DEADLINE, || async {
        let s = mc.get_ok("/api/stats").await;
        s["files"].is_object().then_some(s)
    })
    .await;
    check_answer(&doc, "/api/stats", "get", &stats).unwrap_or_else(|why| panic!("{why}"));

    // Last, as it ends the tree: the console's stop.
    let stop = call(
        "/api/tree/stop",
        "post",
        "/api/tree/stop".into(),
        Body::None,
    );
    let answer = send(&mc, &stop).await;
    check_answer(&doc, stop.doc_path, stop.method, &answer).unwrap_or_else(|why| panic!("{why}"));
    calls.push(stop);
    let called: BTreeSet<(String, String)> = calls
        .iter()
        .map(|c| (c.doc_path.to_owned(), c.method.to_owned()))
        .collect();
    #[cfg_attr(not(no_fuse), allow(unused_mut))]
    let mut documented = json_operations(&doc);
    // Without FUSE here the mounts routes cannot be called.
    #[cfg(no_fuse)]
    documented.retain(|(path, _)| !path.starts_with("/api/mounts"));
    let missing: Vec<_> = documented.difference(&called).collect();
    assert!(
        missing.is_empty(),
        "documented JSON answers not checked: {missing:?}"
    );
    let undocumented: Vec<_> = called.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "checked but not documented: {undocumented:?}"
    );
}
