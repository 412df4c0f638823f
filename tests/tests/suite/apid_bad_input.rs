//! Hostile input to apid over real HTTP: each request gets a clear 4xx with
//! the error envelope, and the database file is row for row what it was.

use e2e::fixtures::{random_midhash, random_rid};
use e2e::raw_http::RawResponse;
use e2e::snapshot::{assert_same, dump};
use e2e::{Apid, Storaged};
use serde_json::{Value, json};

/// Both daemons and one record, so there is something to damage.
async fn start() -> (Storaged, Apid, String) {
    let s = Storaged::start().await;
    let a = Apid::start(&s).await;
    let rid = random_rid().to_string();
    let r = a
        .send_json(
            "PATCH",
            &format!("/meta/{rid}"),
            &json!({"title": "T", "a/b": "c"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    (s, a, rid)
}

/// A 4xx with the envelope `{error, message, retryable: false}`, whatever
/// the slug; returns the slug.
fn assert_4xx(r: &RawResponse, what: &str) -> String {
    assert!(
        (400..500).contains(&r.status),
        "{what}: want a 4xx, got {} {}",
        r.status,
        r.text()
    );
    let v = r.json();
    let slug = v["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no slug in {v}"))
        .to_owned();
    r.assert_error(r.status, &slug);
    slug
}

#[tokio::test]
async fn malformed_and_misshapen_json_bodies_are_400() {
    let (s, a, rid) = start().await;
    let before = dump(&s.db_path());
    let json_ct = [("content-type", "application/json")];
    let targets = [
        rid.clone(),
        random_rid().to_string(),
        random_midhash().to_string(),
    ];
    for target in &targets {
        for method in ["PUT", "PATCH"] {
            let path = format!("/meta/{target}");
            for body in [r#"{"title":"#, "{", "not json", "{\"a\":\"b\"} trailing"] {
                a.send(method, &path, body, &json_ct)
                    .await
                    .assert_error(400, "bad_request");
            }
            for body in [
                "[]",
                r#""x""#,
                "42",
                "null",
                r#"{"a":1}"#,
                r#"{"a":{"b":"c"}}"#,
                r#"{"a":["x"]}"#,
                r#"{"a":null}"#,
            ] {
                let r = a.send(method, &path, body, &json_ct).await;
                assert_eq!(r.status, 400, "{method} {path} {body}: {}", r.text());
                r.assert_error(400, "schema_violation");
            }
            let r = a.send(method, &path, "", &json_ct).await;
            assert_eq!(assert_4xx(&r, "an empty body"), "bad_request");
        }
    }
    assert_same(&before, &dump(&s.db_path()), "bad JSON bodies");
}

#[tokio::test]
async fn bad_field_names_and_values_in_a_body_are_4xx() {
    let (s, a, rid) = start().await;
    let before = dump(&s.db_path());
    for body in [
        json!({"a//b": "x"}),
        json!({"/a": "x"}),
        json!({"a/": "x"}),
        json!({"a/../b": "x"}),
        json!({"..": "x"}),
        json!({"a/./b": "x"}),
        json!({"a\u{0}b": "x"}),
        json!({"": "x"}),
        json!({"ok": "x\u{0}y"}),
        json!({"ok": "fine", "cids/not-a-cid": "true"}),
    ] {
        for method in ["PUT", "PATCH"] {
            let r = a.send_json(method, &format!("/meta/{rid}"), &body).await;
            assert_4xx(&r, &format!("{method} {body}"));
        }
    }
    assert_same(&before, &dump(&s.db_path()), "bad field names");
}

#[tokio::test]
async fn oversized_bodies_are_413() {
    let (s, a, rid) = start().await;
    let before = dump(&s.db_path());
    // 10 MiB of valid JSON: over the 8 MiB of the metadata routes.
    let big = format!(r#"{{"title":"{}"}}"#, "x".repeat(10 * 1024 * 1024));
    for method in ["PUT", "PATCH"] {
        let r = a
            .send_raw(method, &format!("/meta/{rid}"), Some(big.as_bytes()))
            .await;
        r.assert_error(413, "payload_too_large");
    }
    // 2 MiB: over the 1 MiB of one property and of _add.
    let two = "y".repeat(2 * 1024 * 1024);
    let two = Some(two.as_bytes());
    a.send_raw("PUT", &format!("/meta/{rid}/title"), two)
        .await
        .assert_error(413, "payload_too_large");
    a.send_raw("POST", &format!("/meta/{rid}/_add/tags"), two)
        .await
        .assert_error(413, "payload_too_large");
    assert_same(&before, &dump(&s.db_path()), "oversized bodies");
    let r = a.get(&format!("/meta/{rid}/title")).await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "T"),
        "apid still serves"
    );
}

/// Sends a request head declaring `length` bytes and only `sent` of them
/// (with the admin token, so that admin routes answer for the body, not
/// for the credentials), then waits (bounded) for the answer without
/// sending more.
async fn declared(a: &Apid, method: &str, path: &str, length: u64, sent: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", a.port()))
        .await
        .unwrap();
    let auth = a.admin_token().expect("apid's admin token");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {auth}\r\nContent-Length: {length}\r\n\r\n"
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(sent).await.unwrap();
    let mut buf = vec![0u8; 4096];
    // The server must answer from the head alone: it is never sent the
    // rest, so a server that waits for it never answers.
    let n = tokio::time::timeout(e2e::wait::IO_DEADLINE, tcp.read(&mut buf))
        .await
        .unwrap_or_else(|_| panic!("{method} {path}: no answer to a declared {length} bytes"))
        .unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// A body declared larger than the route takes is refused from its
/// `Content-Length`, before the body is read (issue 13, point 2).
#[tokio::test]
async fn a_declared_oversized_body_is_refused_at_once() {
    let (s, a, rid) = start().await;
    std::fs::create_dir_all(a.files_path().join("plugin")).unwrap();
    let before = dump(&s.db_path());
    let huge = 99_999_999_999u64;
    for (method, path, limit) in [
        ("PATCH", format!("/meta/{rid}"), 8u64 << 20),
        ("PUT", format!("/meta/{rid}"), 8 << 20),
        ("PUT", format!("/meta/{rid}/title"), 1 << 20),
        ("POST", format!("/meta/{rid}/_add/tags"), 1 << 20),
        ("POST", "/api/metadata/batch".to_owned(), 8 << 20),
        ("POST", "/api/watchers".to_owned(), 16 << 10),
        ("POST", "/file/cid".to_owned(), 8 << 20),
        ("POST", "/api/snapshot/import".to_owned(), 2 << 30),
        ("PROPFIND", "/webdav/plugin/".to_owned(), 64 << 10),
        ("PROPPATCH", "/webdav/plugin/".to_owned(), 64 << 10),
    ] {
        for length in [huge, limit + (64 << 10) + 1] {
            let answer = declared(&a, method, &path, length, b"{\"a\":\"b\"}").await;
            assert!(
                answer.starts_with("HTTP/1.1 413"),
                "{method} {path} declaring {length}: {answer}"
            );
            assert!(answer.contains("payload_too_large"), "{answer}");
        }
    }
    assert_same(&before, &dump(&s.db_path()), "refused bodies");
}

#[tokio::test]
async fn invalid_rids_and_cids_are_400() {
    let (s, a, rid) = start().await;
    let before = dump(&s.db_path());
    let bad = [
        "not-a-hash",
        "zzzz",
        "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG",
        "BAFKREIGH2AKISCAIVRAEQ2ORX6HSWEJSKMJCJCH3YMEVPKHHXDOYTDZSPI",
        "sha256:abcd",
        "%00",
        "..",
    ];
    for h in bad {
        for (method, path, body) in [
            ("GET", format!("/meta/{h}"), ""),
            ("PATCH", format!("/meta/{h}"), r#"{"a":"b"}"#),
            ("PUT", format!("/meta/{h}"), r#"{"a":"b"}"#),
            ("DELETE", format!("/meta/{h}"), ""),
            ("GET", format!("/meta/{h}/title"), ""),
            ("PUT", format!("/meta/{h}/title"), "v"),
            ("POST", format!("/meta/{h}/_add/tags"), "v"),
            ("GET", format!("/api/meta/{h}"), ""),
            ("GET", format!("/data/{h}/path"), ""),
        ] {
            let r = a
                .send(method, &path, body, &[("content-type", "application/json")])
                .await;
            let what = format!("{method} {path}");
            if h == ".." {
                // `/meta/..` may not even reach the route; any clear 4xx.
                assert_4xx(&r, &what);
            } else {
                assert_eq!(r.status, 400, "{what}: {}", r.text());
                assert_4xx(&r, &what);
            }
        }
        let head = a.send("HEAD", &format!("/data/{h}"), "", &[]).await;
        assert!(
            (400..500).contains(&head.status),
            "HEAD /data/{h}: {}",
            head.status
        );
    }
    assert_same(&before, &dump(&s.db_path()), "invalid hashes");
    assert_eq!(a.get(&format!("/meta/{rid}")).await.status, 200);
}

/// A request wrong in its body and in its address is answered for its
/// body, as the original answered: the body is read first.
#[tokio::test]
async fn a_bad_body_is_answered_before_a_bad_address() {
    let (s, a, _rid) = start().await;
    let before = dump(&s.db_path());
    let json_ct = [("content-type", "application/json")];
    for method in ["PUT", "PATCH"] {
        a.send(method, "/meta/not-a-hash", "{", &json_ct)
            .await
            .assert_error(400, "bad_request");
    }
    a.send("PUT", "/api/metadata/not-a-hash", "{", &json_ct)
        .await
        .assert_error(400, "bad_request");
    let big = format!(r#"{{"title":"{}"}}"#, "x".repeat(10 * 1024 * 1024));
    a.send_raw("PATCH", "/meta/not-a-hash", Some(big.as_bytes()))
        .await
        .assert_error(413, "payload_too_large");
    a.send_raw("PUT", "/meta/not-a-hash/title", Some(&[0xff, 0xfe]))
        .await
        .assert_error(400, "bad_request");
    let empty = a
        .send_raw("POST", "/meta/not-a-hash/_add/tags", Some(b""))
        .await;
    empty.assert_error(400, "schema_violation");
    assert!(
        empty.text().contains("a value to add is required"),
        "{}",
        empty.text()
    );
    // With a good body, the address is what is wrong.
    let r = a
        .send("PATCH", "/meta/not-a-hash", r#"{"a":"b"}"#, &json_ct)
        .await;
    r.assert_error(400, "schema_violation");
    assert_same(&before, &dump(&s.db_path()), "bad bodies at bad addresses");
}

#[tokio::test]
async fn bad_property_keys_are_4xx() {
    let (s, a, rid) = start().await;
    let before = dump(&s.db_path());
    for key in [
        "a//b",
        "a/../b",
        "..",
        "a/..",
        "./a",
        "a%00b",
        "%00",
        "a/%2e%2e/b",
        "a/",
    ] {
        for (method, path, body) in [
            ("PUT", format!("/meta/{rid}/{key}"), "v"),
            ("POST", format!("/meta/{rid}/_add/{key}"), "v"),
            ("DELETE", format!("/meta/{rid}/{key}"), ""),
            ("GET", format!("/meta/{rid}/{key}"), ""),
        ] {
            let r = a.send(method, &path, body, &[]).await;
            assert_4xx(&r, &format!("{method} {path}"));
        }
    }
    // The empty value of _add is refused too.
    a.send("POST", &format!("/meta/{rid}/_add/tags"), "", &[])
        .await
        .assert_error(400, "schema_violation");
    assert_same(&before, &dump(&s.db_path()), "bad property keys");
}

#[tokio::test]
async fn unknown_routes_and_wrong_methods_get_the_envelope() {
    let (s, a, rid) = start().await;
    let before = dump(&s.db_path());
    for path in ["/nope", "/api", "/api/nope", "/metadata", "/data", "/meta/"] {
        let r = a.get(path).await;
        let slug = assert_4xx(&r, path);
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(slug, "not_found", "{path}");
    }
    for (method, path) in [
        ("POST", format!("/meta/{rid}")),
        ("DELETE", "/health".to_owned()),
        ("PUT", "/api/stats".to_owned()),
        ("POST", "/meta".to_owned()),
        ("PATCH", format!("/meta/{rid}/title")),
        ("GET", format!("/meta/{rid}/_add/tags")),
        ("DELETE", format!("/api/meta/{}", random_midhash())),
        ("POST", format!("/data/{rid}")),
    ] {
        let r = a
            .send(method, &path, "{}", &[("content-type", "application/json")])
            .await;
        let what = format!("{method} {path}");
        if method == "GET" && path.contains("/_add/") {
            // `GET /meta/<rid>/_add/tags` is the property `_add/tags`.
            assert!(matches!(r.status, 404 | 405), "{what}: {}", r.text());
            continue;
        }
        r.assert_error(405, "method_not_allowed");
    }
    assert_same(&before, &dump(&s.db_path()), "unknown routes");
    let v: Value = a.get(&format!("/meta/{rid}")).await.json();
    assert_eq!(v["metadata"]["title"], "T");
}

/// Smaller answers that named no cause or took one thing for another
/// (issue 13, point 9): a query whose percent-encoded bytes are not UTF-8
/// is a 400, the bearer scheme is case-insensitive, and a manifest's
/// `schemaVersion` of `2.0` is 2.
#[tokio::test]
async fn queries_tokens_and_manifests_are_read_as_meant() {
    let s = Storaged::start().await;
    let a = Apid::start_with(&s, &[("META_CORE_ADMIN_TOKEN", "s3cret")]).await;
    for path in [
        "/api/kv/search?contains=%ff",
        "/api/kv/tree?prefix=%C3",
        "/api/metadata/list?limit=1&x=%fe%ff",
    ] {
        let r = a.get(path).await;
        r.assert_error(400, "bad_request");
        assert!(r.text().contains("not UTF-8"), "{path}: {}", r.text());
    }
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let auth = format!("{scheme} s3cret");
        let r = a
            .send("GET", "/api/watchers", "", &[("authorization", &auth)])
            .await;
        assert_ne!(r.status, 401, "{scheme}: {}", r.text());
    }
    for wrong in ["Basic s3cret", "bearer nope", "s3cret"] {
        let r = a
            .send("GET", "/api/watchers", "", &[("authorization", wrong)])
            .await;
        r.assert_error(401, "unauthorized");
    }
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zip.start_file("manifest.json", zip::write::SimpleFileOptions::default())
        .unwrap();
    std::io::Write::write_all(&mut zip, br#"{"schemaVersion":2.0,"fileCount":0}"#).unwrap();
    let bytes = zip.finish().unwrap().into_inner();
    let r = a
        .send(
            "POST",
            "/api/snapshot/import?mode=merge",
            bytes,
            &[
                ("content-type", "application/zip"),
                ("authorization", "Bearer s3cret"),
            ],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}
