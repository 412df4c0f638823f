//! Bad input over the raw socket: every case gets its 4xx with the error
//! envelope `{"error", "message", "retryable"}` and leaves every row of the
//! database as it was.

use e2e::fixtures::{
    checked, field_name, field_write, fields, file_path, key_write, member, random_midhash,
    random_rid, target,
};
use e2e::raw_http::{self, RawResponse};
use e2e::snapshot::{assert_same, dump};
use e2e::{Rows, Storaged, unchecked};
use metacore::Rid;
use metacore::api::storaged::MAX_PAGE;

/// A storaged holding one record (addressed by RID and by CID), so that
/// bad writes have something to damage.
struct Fixture {
    s: Storaged,
    rid: Rid,
    cid: String,
}

impl Fixture {
    async fn new() -> Self {
        let s = Storaged::start().await;
        let x = random_midhash();
        let w = s
            .client()
            .merge(
                &target(x.as_str()),
                &checked(fields(&[("title", "T"), ("year", "2001")])),
            )
            .await
            .unwrap();
        s.client()
            .add_duplicate(&target(x.as_str()), &file_path("/files/copy.mkv"))
            .await
            .unwrap();
        Self {
            s,
            rid: w.rid,
            cid: x.to_string(),
        }
    }

    fn rows(&self) -> Rows {
        dump(&self.s.db_path())
    }

    async fn send(&self, method: &str, target: &str, body: Option<&[u8]>) -> RawResponse {
        raw_http::request(&self.s.socket_path(), method, target, body).await
    }

    /// Sends the request; checks the status, slug and envelope, and that no
    /// row changed.
    async fn refused(
        &self,
        method: &str,
        target: &str,
        body: Option<&[u8]>,
        status: u16,
        slug: &str,
    ) {
        let before = self.rows();
        let resp = self.send(method, target, body).await;
        let what = format!(
            "{method} {target} {}",
            body.map(|b| String::from_utf8_lossy(&b[..b.len().min(120)]))
                .unwrap_or_default()
        );
        assert!(
            resp.status == status && resp.json()["error"] == slug,
            "{what}: got {} {}",
            resp.status,
            String::from_utf8_lossy(&resp.body)
        );
        resp.assert_error(status, slug);
        assert_same(&before, &self.rows(), &what);
    }
}

#[tokio::test]
async fn malformed_or_mistyped_json_is_refused() {
    let f = Fixture::new().await;
    let rec = format!("/records/{}", f.rid);
    let new_rec = format!("/records/{}", random_rid());
    let field = format!("/records/{}/fields/title", f.rid);
    for target in [&rec, &new_rec] {
        for method in ["PATCH", "PUT"] {
            let cases: [(Option<&[u8]>, &str); 11] = [
                (Some(&b"{\"fields\":"[..]), "bad_request"),
                (
                    Some(&b"{\"fields\":{\"a\":\"1\"}} trailing"[..]),
                    "bad_request",
                ),
                (Some(&b"\xff\xfe"[..]), "bad_request"),
                (Some(&b""[..]), "bad_request"),
                (Some(&b"[1,2]"[..]), "schema_violation"),
                (Some(&b"\"fields\""[..]), "schema_violation"),
                (Some(&b"{}"[..]), "schema_violation"),
                (Some(&b"{\"fields\":\"title\"}"[..]), "schema_violation"),
                (Some(&b"{\"fields\":{\"title\":1}}"[..]), "schema_violation"),
                (
                    Some(&b"{\"fields\":{\"title\":null}}"[..]),
                    "schema_violation",
                ),
                (
                    Some(&b"{\"fields\":{\"a\":{\"b\":\"c\"}}}"[..]),
                    "schema_violation",
                ),
            ];
            for (body, slug) in cases {
                f.refused(method, target, body, 400, slug).await;
            }
        }
    }
    let cases: [(&str, &str, Option<&[u8]>, &str); 6] = [
        ("PUT", &field, Some(&b"{\"value\":5}"[..]), "schema_violation"),
        ("PUT", &field, Some(&b"{\"val"[..]), "bad_request"),
        ("PUT", "/kv/value", Some(&b"{\"key\":5,\"value\":\"x\"}"[..]), "schema_violation"),
        ("PUT", "/kv/value", Some(&b"{\"key\":\"udl:x\"}"[..]), "schema_violation"),
        ("POST", "/mint", Some(&b"{\"filePath\":\"/files/a\",\"sizeByte\":-1,\"mtimeNano\":0}"[..]), "schema_violation"),
        ("POST", "/mint", Some(&b"{\"filePath\":\"/files/a\",\"sizeByte\":1,\"mtimeNano\":0,\"cids\":[\"QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG\"]}"[..]), "schema_violation"),
    ];
    for (method, target, body, slug) in cases {
        f.refused(method, target, body, 400, slug).await;
    }
    let alias = format!("/records/{}/aliases", f.rid);
    f.refused(
        "POST",
        &alias,
        Some(b"{\"cid\":\"not-a-cid\"}"),
        400,
        "schema_violation",
    )
    .await;
    f.refused(
        "POST",
        "/streams/file:events/entries",
        Some(b"{\"fields\":{\"type\":1}}"),
        400,
        "schema_violation",
    )
    .await;
}

#[tokio::test]
async fn a_body_over_16_mib_is_413() {
    let f = Fixture::new().await;
    let mut body = b"{\"fields\":{\"title\":\"".to_vec();
    body.resize(16 * 1024 * 1024 + 1, b'x');
    body.extend_from_slice(b"\"}}");
    f.refused(
        "PATCH",
        &format!("/records/{}", f.rid),
        Some(&body),
        413,
        "payload_too_large",
    )
    .await;
    f.refused("PUT", "/kv/value", Some(&body), 413, "payload_too_large")
        .await;
    // The socket still serves after refusing it.
    assert_eq!(
        f.s.client()
            .get_field(&target(&f.cid), &field_name("title"))
            .await
            .unwrap()
            .value,
        "T"
    );
}

#[tokio::test]
async fn invalid_rids_and_cids_in_the_path_are_400() {
    let f = Fixture::new().await;
    let body = Some(&b"{\"fields\":{\"title\":\"X\"}}"[..]);
    let value = Some(&b"{\"value\":\"X\"}"[..]);
    let bad = [
        "not-a-rid",
        "01JKR8XW5T4QMV7AHNJ2DEFGHI", // I is not Crockford
        "01jkr8xw5t4qmv7ahnj2defghk", // lower case RID
        "81JKR8XW5T4QMV7AHNJ2DEFGHK", // over 128 bits
        "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", // CIDv0
        "BAFYBEIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", // upper case CID
        "midhash256%3Abagacbabaeaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", // cut digest
        "%2E%2E",
        "01JKR8XW5T4QMV7AHNJ2DEFGHK%00",
    ];
    for hash in bad {
        let cases: [(&str, &str, Option<&[u8]>); 8] = [
            ("PATCH", &format!("/records/{hash}"), body),
            ("PUT", &format!("/records/{hash}"), body),
            ("DELETE", &format!("/records/{hash}"), None),
            ("GET", &format!("/records/{hash}"), None),
            ("GET", &format!("/resolve/{hash}"), None),
            ("PUT", &format!("/records/{hash}/fields/title"), value),
            ("POST", &format!("/records/{hash}/set-add/tags"), value),
            (
                "POST",
                &format!("/records/{hash}/duplicates"),
                Some(&b"{\"path\":\"/files/x\"}"[..]),
            ),
        ];
        for (method, target, body) in cases {
            f.refused(method, target, body, 400, "schema_violation")
                .await;
        }
    }
}

#[tokio::test]
async fn nul_empty_and_dot_segments_in_field_paths_are_400_on_writes() {
    let f = Fixture::new().await;
    let value = Some(&b"{\"value\":\"X\"}"[..]);
    let bad_paths = [
        "a%00b",
        "%00",
        "a//b",
        "a/",
        "a/../b",
        "..",
        ".",
        "a/./b",
        "%2E%2E",
        "a/%2E%2E/b",
    ];
    for target in [
        f.rid.to_string(),
        f.cid.clone(),
        random_rid().to_string(),
        random_midhash().to_string(),
    ] {
        for p in bad_paths {
            f.refused(
                "PUT",
                &format!("/records/{target}/fields/{p}"),
                value,
                400,
                "schema_violation",
            )
            .await;
            f.refused(
                "POST",
                &format!("/records/{target}/set-add/{p}"),
                value,
                400,
                "schema_violation",
            )
            .await;
        }
    }
    for p in bad_paths {
        f.refused(
            "DELETE",
            &format!("/records/{}/fields/{p}", f.rid),
            None,
            400,
            "schema_violation",
        )
        .await;
    }
    // The same names in a body.
    for name in [
        "a\\u0000b",
        "a//b",
        "/a",
        "a/",
        "a/../b",
        "..",
        "",
        "cids/not-a-cid",
        "cids/",
    ] {
        let body = format!("{{\"fields\":{{\"title\":\"ok\",\"{name}\":\"v\"}}}}");
        let cases: [(&str, &str); 3] = [
            ("PATCH", &format!("/records/{}", f.rid)),
            ("PUT", &format!("/records/{}", f.rid)),
            ("PATCH", &format!("/records/{}", random_midhash())),
        ];
        for (method, target) in cases {
            f.refused(
                method,
                target,
                Some(body.as_bytes()),
                400,
                "schema_violation",
            )
            .await;
        }
    }
    // NUL in a value, in a raw key, in a duplicate path.
    let rec = format!("/records/{}", f.rid);
    let cases: [(&str, &str, Option<&[u8]>); 3] = [
        (
            "PATCH",
            &rec,
            Some(&b"{\"fields\":{\"title\":\"a\\u0000b\"}}"[..]),
        ),
        (
            "PUT",
            "/kv/value",
            Some(&b"{\"key\":\"udl:a\\u0000b\",\"value\":\"v\"}"[..]),
        ),
        (
            "PUT",
            "/kv/value",
            Some(&b"{\"key\":\"udl:ab\",\"value\":\"v\\u0000\"}"[..]),
        ),
    ];
    for (method, target, body) in cases {
        f.refused(method, target, body, 400, "schema_violation")
            .await;
    }
    let dup = format!("/records/{}/duplicates", f.rid);
    f.refused(
        "POST",
        &dup,
        Some(b"{\"path\":\"/files/a\\u0000b\"}"),
        400,
        "schema_violation",
    )
    .await;
    f.refused(
        "POST",
        &dup,
        Some(b"{\"path\":\"\"}"),
        400,
        "schema_violation",
    )
    .await;
    let raw_key = format!("{{\"key\":\"file:{}/a//b\",\"value\":\"v\"}}", f.rid);
    f.refused(
        "PUT",
        "/kv/value",
        Some(raw_key.as_bytes()),
        400,
        "schema_violation",
    )
    .await;
}

/// Reads of a field name no write can create are answered with a 4xx and
/// the envelope (and, being reads, change nothing).
#[tokio::test]
async fn reads_of_impossible_field_paths_are_answered_with_the_envelope() {
    let f = Fixture::new().await;
    for p in ["a%00b", "a//b", "a/", "a/../b", ".."] {
        let before = f.rows();
        let resp = f
            .send("GET", &format!("/records/{}/fields/{p}", f.rid), None)
            .await;
        assert!(
            (400..500).contains(&resp.status),
            "GET {p}: {}",
            resp.status
        );
        let slug = resp.json()["error"].as_str().unwrap_or_default().to_owned();
        resp.assert_error(resp.status, &slug);
        assert_same(&before, &f.rows(), p);
    }
}

#[tokio::test]
async fn deprecated_fields_are_400_deprecated_field_on_every_write_route() {
    let f = Fixture::new().await;
    let value = Some(&b"{\"value\":\"X\"}"[..]);
    for name in ["cid_midhash256", "cid_x", "midhash256", "canonical_cid"] {
        let body = format!("{{\"fields\":{{\"title\":\"changed\",\"{name}\":\"v\"}}}}");
        for target in [
            f.rid.to_string(),
            f.cid.clone(),
            random_rid().to_string(),
            random_midhash().to_string(),
        ] {
            let rec = format!("/records/{target}");
            let cases: [(&str, &str, Option<&[u8]>); 4] = [
                ("PATCH", &rec, Some(body.as_bytes())),
                ("PUT", &rec, Some(body.as_bytes())),
                ("PUT", &format!("{rec}/fields/{name}"), value),
                ("POST", &format!("{rec}/set-add/{name}"), value),
            ];
            for (method, target, body) in cases {
                f.refused(method, target, body, 400, "deprecated_field")
                    .await;
            }
        }
        let raw = format!("{{\"key\":\"file:{}/{name}\",\"value\":\"v\"}}", f.rid);
        f.refused(
            "PUT",
            "/kv/value",
            Some(raw.as_bytes()),
            400,
            "deprecated_field",
        )
        .await;
    }
}

#[tokio::test]
async fn unknown_routes_are_404_and_wrong_methods_405() {
    let f = Fixture::new().await;
    for target in [
        "/",
        "/nope",
        "/records/x/y/z",
        "/kv",
        "/kv/values",
        "/api/kv",
        "/records//fields",
    ] {
        f.refused("GET", target, None, 404, "not_found").await;
    }
    f.refused("POST", "/nope", Some(b"{}"), 404, "not_found")
        .await;
    let rec = format!("/records/{}", f.rid);
    for (method, target) in [
        ("POST", "/health"),
        ("DELETE", "/status"),
        ("PUT", "/stats"),
        ("POST", rec.as_str()),
        ("GET", "/mint"),
        ("POST", "/records"),
        ("PATCH", "/kv/value"),
        ("POST", "/kv/range"),
        ("DELETE", "/streams/file:events/entries"),
        ("GET", &format!("{rec}/aliases")),
        ("PUT", &format!("{rec}/set-add/tags")),
    ] {
        f.refused(
            method,
            target,
            Some(b"{\"fields\":{}}"),
            405,
            "method_not_allowed",
        )
        .await;
    }
}

#[tokio::test]
async fn bad_paging_parameters_are_400() {
    let f = Fixture::new().await;
    for target in [
        "/records?limit=abc".to_string(),
        "/records?limit=-1".to_string(),
        "/records?after=nope".to_string(),
        "/records?offset=-1".to_string(),
        "/records/fields?names=title&after=nope".to_string(),
        format!("/records?limit={}", u64::from(MAX_PAGE) * 1_000_000_000),
        "/streams/meta:events/entries?after=x-1".to_string(),
        "/streams/meta:events/tail?after=1-2-3".to_string(),
        "/kv/range?limit=x".to_string(),
        "/kv/range?keysOnly=maybe".to_string(),
        "/kv/value".to_string(),
    ] {
        let resp = f.send("GET", &target, None).await;
        assert_eq!(
            resp.status,
            400,
            "{target}: {}",
            String::from_utf8_lossy(&resp.body)
        );
        let slug = resp.json()["error"].as_str().unwrap_or_default().to_owned();
        assert!(
            ["bad_request", "schema_violation"].contains(&slug.as_str()),
            "{target}: {slug}"
        );
        resp.assert_error(400, &slug);
    }
    assert_eq!(
        f.s.client()
            .get_field(
                &target(&f.rid.to_string()),
                &field_name(&member(&f.cid.parse().unwrap()))
            )
            .await
            .unwrap()
            .value,
        "true"
    );
}

#[tokio::test]
async fn oversized_names_keys_paths_and_entries_are_400() {
    let f = Fixture::new().await;
    let long_field = "f".repeat(1025);
    let body = format!("{{\"fields\":{{\"{long_field}\":\"v\"}}}}");
    f.refused(
        "PATCH",
        &format!("/records/{}", f.rid),
        Some(body.as_bytes()),
        400,
        "schema_violation",
    )
    .await;
    let value = Some(&b"{\"value\":\"v\"}"[..]);
    f.refused(
        "PUT",
        &format!("/records/{}/fields/{long_field}", f.rid),
        value,
        400,
        "schema_violation",
    )
    .await;
    let key = format!("{{\"key\":\"udl:{}\",\"value\":\"v\"}}", "k".repeat(2048));
    f.refused(
        "PUT",
        "/kv/value",
        Some(key.as_bytes()),
        400,
        "schema_violation",
    )
    .await;
    let dup = format!("{{\"path\":\"/files/{}\"}}", "p".repeat(4096));
    f.refused(
        "POST",
        &format!("/records/{}/duplicates", f.rid),
        Some(dup.as_bytes()),
        400,
        "schema_violation",
    )
    .await;
    let entry = format!(
        "{{\"fields\":{{\"type\":\"add\",\"path\":\"{}\"}}}}",
        "e".repeat(64 * 1024)
    );
    f.refused(
        "POST",
        "/streams/file:events/entries",
        Some(entry.as_bytes()),
        400,
        "schema_violation",
    )
    .await;
    // Just under the limits is fine.
    let ok = "f".repeat(1024);
    f.s.client()
        .set_field(&target(&f.rid.to_string()), &field_write(&ok, "v"))
        .await
        .unwrap();
}

/// 64 concurrent writes: good merges, merges storaged refuses as it
/// decodes them (a retired field), and writes that fail inside the writer,
/// in their own savepoint of a shared group (a duplicate path for a record
/// that does not exist). Only the good ones leave rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_writes_among_good_ones_fail_alone() {
    let f = Fixture::new().await;
    let mut tasks = Vec::new();
    for i in 0..64 {
        let c = f.s.client().clone();
        tasks.push(tokio::spawn(async move {
            let r = random_rid().to_string();
            let n = i.to_string();
            let res = match i % 3 {
                0 => unchecked::merge(&c, &r, fields(&[("n", &n), ("title", "v")]))
                    .await
                    .map(drop),
                1 => unchecked::merge(&c, &r, fields(&[("n", &n), ("canonical_cid", "v")]))
                    .await
                    .map(drop),
                _ => c
                    .add_duplicate(&target(&r), &file_path("/files/copy.mkv"))
                    .await
                    .map(drop),
            };
            (r, i % 3, res)
        }));
    }
    let mut good_rids = Vec::new();
    for t in tasks {
        let (r, kind, res) = t.await.unwrap();
        match (kind, res) {
            (0, Ok(())) => good_rids.push(r),
            (1, Err(metacore::socket::client::ClientError::Api(e))) => {
                assert_eq!(e.code, metacore::ErrorCode::DeprecatedField)
            }
            (2, Err(metacore::socket::client::ClientError::Api(e))) => {
                assert_eq!(
                    e.code,
                    metacore::ErrorCode::UnknownRoot,
                    "refused in the writer"
                )
            }
            (kind, res) => panic!("kind {kind}: {res:?}"),
        }
    }
    let rows = f.rows();
    e2e::snapshot::assert_sound(&rows);
    assert_eq!(
        e2e::snapshot::roots(&rows).len(),
        1 + good_rids.len(),
        "only the good writes made records"
    );
    for r in &good_rids {
        assert_eq!(e2e::snapshot::record(&rows, r).len(), 2, "{r}");
    }
    let w = f.s.client().status().await.unwrap().writer;
    assert!(
        w.failed_writes >= 21,
        "the writer itself refused {} writes",
        w.failed_writes
    );
}

/// A body over the limit is refused before it is read, so the connection
/// cannot carry another request: the answer says `Connection: close`, and
/// the pooled client's next call gets a fresh connection instead of a dead
/// one (each round would otherwise fail now and then).
#[tokio::test]
async fn a_refused_oversized_body_does_not_poison_the_pooled_connection() {
    let f = Fixture::new().await;
    let c = f.s.client();
    let big = bytes::Bytes::from(vec![b'x'; metacore::api::storaged::MAX_BODY + (2 << 20)]);
    for round in 0..30 {
        let refused = c
            .socket()
            .send(http::Method::PUT, "/kv/value", Some(big.clone()))
            .await;
        match refused {
            Err(metacore::socket::client::ClientError::Api(e)) => {
                assert_eq!(
                    e.code,
                    metacore::ErrorCode::PayloadTooLarge,
                    "round {round}"
                )
            }
            other => panic!("round {round}: {other:?}"),
        }
        c.kv_put(&key_write("udl:u/pool", &round.to_string()))
            .await
            .unwrap_or_else(|e| panic!("round {round}: the next call failed: {e:?}"));
    }
}
