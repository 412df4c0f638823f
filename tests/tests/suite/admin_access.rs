//! The admin routes closed by default (issue 23, point 2): with no token
//! configured meta-core makes one at its first start, every admin route
//! asks for it, the CLI prints it, and only `META_CORE_ADMIN_OPEN=true`
//! opens them. The calls the mesh's services make need no token at all:
//! [`the_mesh_services_calls_need_no_token`] replays exactly those.

use std::os::unix::fs::PermissionsExt;

use e2e::fixtures::{random_midhash, random_rid};
use e2e::openapi::document;
use e2e::snapshot::{assert_same, dump};
use e2e::sse::Follower;
use e2e::supervisor::Launch;
use e2e::{Apid, Storaged};
use serde_json::{Value, json};

/// Every operation the OpenAPI document marks as needing the admin
/// token, its path parameters filled in.
fn admin_operations() -> Vec<(String, String)> {
    let doc = document();
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if op.get("security").is_some_and(|s| s != &json!([])) {
                let uri = path
                    .replace("{id}", "0b9a5a4e-2f3c-4e0a-9d55-3f1c2b7a8e10")
                    .replace("{hash}", &random_rid().to_string());
                ops.push((method.to_uppercase(), uri));
            }
        }
    }
    assert!(
        ops.len() >= 29,
        "the document marks {} admin operations",
        ops.len()
    );
    ops
}

#[tokio::test]
async fn admin_routes_are_closed_by_default_and_open_to_the_token_made_at_first_start() {
    let s = Storaged::start().await;
    let mut a = Apid::start(&s).await;
    let file = s.dir().join("meta-core/secrets/admin-token");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600, "the token file is private");
    assert_eq!(mode(file.parent().unwrap()), 0o700, "so is its folder");
    let token = std::fs::read_to_string(&file).unwrap().trim().to_owned();
    assert_eq!(token.len(), 64, "256 random bits in hex: {token:?}");
    assert_eq!(a.admin_token(), Some(token.as_str()));

    std::fs::create_dir_all(a.files_path().join("watch")).unwrap();
    let before = dump(&s.db_path());
    for (method, path) in admin_operations() {
        let body = br#"{"key":"udl:a","value":"1","path":"watch","updates":[]}"#.to_vec();
        for auth in [
            None,
            Some("Bearer wrong"),
            Some("Basic x"),
            Some(token.as_str()),
        ] {
            let mut headers = vec![("content-type", "application/json")];
            if let Some(auth) = auth {
                headers.push(("authorization", auth));
            }
            let r = a.send(&method, &path, body.clone(), &headers).await;
            r.assert_error(401, "unauthorized");
            assert_eq!(
                r.header("www-authenticate"),
                Some("Bearer realm=\"meta-core admin\""),
                "{method} {path}"
            );
        }
    }
    assert_same(&before, &dump(&s.db_path()), "refused admin calls");

    // With the token, as a bearer credential, the routes answer.
    let r = a
        .admin()
        .send_json(
            "PUT",
            "/api/kv/value",
            &json!({"key": "udl:a", "value": "1"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = a
        .admin()
        .send("DELETE", "/api/kv/value?key=udl:a", "", &[])
        .await;
    assert_eq!(r.status, 200, "{}", r.text());

    // The log names the file, never the token.
    let log = a.process().stderr();
    assert!(log.contains("secrets/admin-token"), "{log}");
    assert!(!log.contains(&token), "the token is in apid's log");

    // A restart reads the same token back.
    a.process_mut().kill9();
    let a = Apid::start(&s).await;
    assert_eq!(a.admin_token(), Some(token.as_str()));
    let r = a
        .send(
            "PUT",
            "/api/kv/value",
            r#"{"key":"udl:a","value":"2"}"#,
            &[
                ("authorization", &format!("Bearer {token}")),
                ("content-type", "application/json"),
            ],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(a.process().stderr().contains("the admin token is in"));
}

#[tokio::test]
async fn only_an_explicit_opt_out_opens_the_admin_routes() {
    let s = Storaged::start().await;
    let a = Apid::start_with(&s, &[("META_CORE_ADMIN_OPEN", "true")]).await;
    let r = a
        .send_json(
            "PUT",
            "/api/kv/value",
            &json!({"key": "udl:b", "value": "2"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        a.process().stderr().contains("OPEN to anyone"),
        "the opt-out is a warning in the log"
    );
    // Open to the services, not to the pages their users visit: a page may
    // send a bodiless POST without asking first.
    let r = a
        .send(
            "POST",
            "/api/snapshot/wipe?scope=metadata",
            "",
            &[("origin", "http://evil.example")],
        )
        .await;
    r.assert_error(403, "origin_refused");
    let kept = a.get_ok("/api/kv/value?key=udl:b").await;
    assert_eq!(kept["value"], "2", "the wipe was refused: {kept}");
    assert!(!s.dir().join("meta-core/secrets").exists());
    drop(a);

    // An opt-out beside a token contradicts it: apid does not start.
    let mut bad = Apid::spawn_in(
        s.dir(),
        &[
            ("META_CORE_ADMIN_OPEN", "true"),
            ("META_CORE_ADMIN_TOKEN", "t"),
        ],
    );
    let status = bad.process_mut().wait_exit().await;
    assert_eq!(status.code(), Some(2));
    assert!(bad.process().stderr().contains("META_CORE_ADMIN_OPEN"));

    // So does a token file that holds no token: refused, not opened.
    let file = s.dir().join("meta-core/secrets/admin-token");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "\n").unwrap();
    let mut bad = Apid::spawn_in(s.dir(), &[]);
    let status = bad.process_mut().wait_exit().await;
    assert_eq!(status.code(), Some(1));
    assert!(
        bad.process().stderr().contains("holds no usable token"),
        "{}",
        bad.process().stderr()
    );
}

#[tokio::test]
async fn the_supervisor_makes_the_token_and_the_cli_prints_it() {
    let dir = e2e::daemon::test_dir();
    let mc = Launch::in_dir(dir.path(), "run").start().await;
    let out = mc.cli(&["admin-token"]);
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8(out.stdout).unwrap();
    let token = printed.trim();
    assert_eq!(
        mc.admin_token(),
        Some(token),
        "the CLI prints the file's token"
    );
    let r = mc
        .send(
            "GET",
            "/api/watchers",
            "",
            &[("authorization", &format!("Bearer {token}"))],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    mc.get("/api/watchers")
        .await
        .assert_error(401, "unauthorized");
    // No log of the tree holds it.
    for entry in std::fs::read_dir(mc.log_dir()).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(!text.contains(token), "the token is in {}", path.display());
    }
    assert!(!mc.process.stderr().contains(token));
}

/// What the four services of the mesh send, replayed exactly, without a
/// token: a FUSE view (the meta events, records, file bytes over WebDAV),
/// a sorter (file events, writes by CID), a streaming add-on's client
/// (CID to file), a plugin (WebDAV under `plugin/`, PATCHes).
#[tokio::test]
async fn the_mesh_services_calls_need_no_token() {
    let s = Storaged::start().await;
    let a = Apid::start(&s).await;
    assert!(
        a.admin_token().is_some(),
        "the admin routes are closed here"
    );
    let plugin = a.files_path().join("plugin");
    std::fs::create_dir_all(&plugin).unwrap();
    let ok = |r: &e2e::raw_http::RawResponse, want: &[u16], what: &str| {
        assert!(
            want.contains(&r.status),
            "{what}: {} {}",
            r.status,
            r.text()
        );
    };

    ok(&a.get("/health").await, &[200], "GET /health");
    ok(&a.get("/urls").await, &[200], "GET /urls");
    ok(&a.get("/api/services").await, &[200], "GET /api/services");

    let cid = random_midhash().to_string();
    let r = a
        .send_json(
            "PATCH",
            &format!("/meta/{cid}"),
            &json!({"filePath": "/files/watch/a.mkv", "title": "A"}),
        )
        .await;
    ok(&r, &[200], "PATCH /meta/{cid}");
    let rid = r.json()["hashId"].as_str().unwrap().to_owned();
    let r = a
        .send_json(
            "PUT",
            &format!("/meta/{cid}/year"),
            &json!({"value": "2001"}),
        )
        .await;
    ok(&r, &[200], "PUT /meta/{cid}/{key}");
    let r = a
        .send_json(
            "POST",
            &format!("/meta/{cid}/_add/tags"),
            &json!({"value": "x"}),
        )
        .await;
    ok(&r, &[200], "POST /meta/{cid}/_add/{key}");
    ok(&a.get("/meta").await, &[200], "GET /meta");
    ok(
        &a.get(&format!("/meta/{rid}")).await,
        &[200],
        "GET /meta/{h}",
    );
    let r = a
        .send(
            "GET",
            &format!("/meta/{cid}/year"),
            "",
            &[("accept", "text/plain")],
        )
        .await;
    ok(&r, &[200], "GET /meta/{h}/{key}");
    assert_eq!(r.text(), "2001");
    ok(
        &a.get(&format!("/api/meta/{cid}")).await,
        &[200],
        "GET /api/meta/{cid}",
    );
    ok(
        &a.get(&format!("/api/file/{cid}/info")).await,
        &[200],
        "GET /api/file/{cid}/info",
    );

    // Both streams from the start, as a first connection sends it.
    for stream in ["/api/events/meta", "/api/events/files"] {
        let f = Follower::connect(a.port(), stream, Some("0-0")).await;
        assert_eq!(f.status, 200, "GET {stream}");
        assert_eq!(f.header("content-type"), Some("text/event-stream"));
    }
    let mut meta = Follower::connect(a.port(), "/api/events/meta", Some("0-0")).await;
    let first = meta.event().await;
    assert!(
        first.data.to_string().contains(&rid),
        "the snapshot names the record: {first:?}"
    );

    // WebDAV under plugin/.
    ok(
        &a.send("MKCOL", "/webdav/plugin/out", "", &[]).await,
        &[201],
        "MKCOL",
    );
    ok(
        &a.send("PUT", "/webdav/plugin/out/a.txt", "hello world", &[])
            .await,
        &[201],
        "PUT",
    );
    ok(
        &a.send("HEAD", "/webdav/plugin/out/a.txt", "", &[]).await,
        &[200],
        "HEAD",
    );
    let r = a
        .send(
            "GET",
            "/webdav/plugin/out/a.txt",
            "",
            &[("range", "bytes=6-")],
        )
        .await;
    ok(&r, &[206], "GET with Range");
    assert_eq!(r.text(), "world");
    ok(
        &a.send("DELETE", "/webdav/plugin/out/a.txt", "", &[]).await,
        &[204],
        "DELETE",
    );

    ok(
        &a.send("DELETE", &format!("/meta/{cid}/year"), "", &[])
            .await,
        &[200],
        "DELETE /meta/{cid}/{key}",
    );
    ok(
        &a.send("DELETE", &format!("/meta/{cid}"), "", &[]).await,
        &[200],
        "DELETE /meta/{cid}",
    );
    let gone: Value = a.get(&format!("/api/meta/{cid}")).await.json();
    assert_eq!(gone["error"], "unknown_cid");
}
