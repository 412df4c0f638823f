//! apid's public routes over real HTTP, with a real storaged behind it:
//! bootstrap, the `/meta` surface, `/api/meta/{cid}`, `/data`, CORS and
//! the admin token, each checked by status, shape and the rows left in the
//! database file.

use std::collections::BTreeSet;

use e2e::fixtures::{fields, member, random_midhash, random_rid, sha2_256};
use e2e::snapshot::{aliases, assert_same, assert_sound, dump, keys_naming, record, roots};
use e2e::wait::{self, IO_DEADLINE};
use e2e::{Apid, Storaged};
use serde_json::{Value, json};

/// Both daemons in one fresh dir.
async fn start() -> (Storaged, Apid) {
    let s = Storaged::start().await;
    let a = Apid::start(&s).await;
    (s, a)
}

fn assert_url_block(v: &Value) {
    for k in [
        "hostname",
        "baseUrl",
        "apiUrl",
        "webdavUrl",
        "webdavUrlInternal",
    ] {
        assert!(v[k].as_str().is_some_and(|s| !s.is_empty()), "{k} of {v}");
    }
    assert_eq!(
        v["redisUrl"], "",
        "redisUrl is present and empty (CONTRACT 14): {v}"
    );
}

#[tokio::test]
async fn bootstrap_routes_answer_with_the_original_shapes() {
    let (_s, a) = start().await;

    let h = a.get_ok("/health").await;
    assert_eq!(h["status"], "ok");
    assert_eq!(h["redis"], true);
    let ts = h["timestamp"].as_str().expect("an RFC 3339 timestamp");
    assert!(
        ts.ends_with('Z') && ts.len() == 20,
        "RFC 3339 UTC seconds: {ts}"
    );
    assert_url_block(&h["leader"]);
    assert!(
        h["leader"]["timestamp"]
            .as_u64()
            .is_some_and(|t| t > 1_600_000_000_000),
        "Unix ms: {h}"
    );
    assert_eq!(h["leader"]["pid"], a.process().pid());
    assert!(
        h["leader"]["apiUrl"]
            .as_str()
            .unwrap()
            .ends_with(&format!("127.0.0.1:{}", a.port())),
        "a bind on 127.0.0.1 advertises it (CONTRACT 14): {h}"
    );

    let st = a.get_ok("/status").await;
    assert_eq!(
        (
            st["status"].clone(),
            st["redis"].clone(),
            st["fileCount"].clone()
        ),
        (json!("ok"), json!(true), json!(0))
    );
    for k in ["serviceName", "version"] {
        assert!(st[k].as_str().is_some_and(|s| !s.is_empty()), "{k} of {st}");
    }
    assert!(st["uptimeSeconds"].is_u64(), "{st}");
    assert_url_block(&st["leader"]);
    assert!(st["supervisor"].is_null(), "no supervisor runs here: {st}");

    let l = a.get_ok("/leader").await;
    assert_url_block(&l);
    assert_eq!(l["pid"], a.process().pid());
    assert!(l["timestamp"].is_u64());

    let u = a.get_ok("/urls").await;
    assert_url_block(&u);
    let mut keys: Vec<&str> = u.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "apiUrl",
            "baseUrl",
            "hostname",
            "redisUrl",
            "webdavUrl",
            "webdavUrlInternal"
        ]
    );
    assert_eq!(
        u["webdavUrl"],
        format!("{}/webdav", u["baseUrl"].as_str().unwrap())
    );
}

#[tokio::test]
async fn stats_count_records_and_fill_file_totals_after_the_sweep() {
    let (s, a) = start().await;
    a.ok_json(
        "PATCH",
        &format!("/meta/{}", random_midhash()),
        &json!({"filePath": "/files/a.mkv", "sizeByte": "100"}),
    )
    .await;
    a.ok_json(
        "PATCH",
        &format!("/meta/{}", random_midhash()),
        &json!({"filePath": "/files/b.mkv", "sizeByte": "23"}),
    )
    .await;
    a.ok_json(
        "PATCH",
        &format!("/meta/{}", random_rid()),
        &json!({"title": "no file"}),
    )
    .await;

    let first = a.get_ok("/api/stats").await;
    assert_eq!(first["records"], 3);
    assert_eq!(
        first["files"],
        Value::Null,
        "no sweep has finished yet: {first}"
    );
    assert_eq!(first["udlUsers"], Value::Null);
    assert_eq!(first["identities"], 0);
    assert!(
        first["redisKeys"]
            .as_u64()
            .is_some_and(|k| k as usize == dump(&s.db_path()).len()),
        "{first}"
    );
    assert!(
        first["redisMemory"].as_u64().is_some_and(|m| m > 0),
        "{first}"
    );
    assert!(first["sweeping"].is_boolean());

    let swept = wait::until("the stats sweep to finish", IO_DEADLINE, || async {
        let v = a.get_ok("/api/stats").await;
        (!v["files"].is_null()).then_some(v)
    })
    .await;
    assert_eq!(
        swept["files"],
        json!({"count": 2, "totalSize": 123}),
        "{swept}"
    );
    assert_eq!(swept["udlUsers"], 0);
    assert!(
        swept["sweptAt"]
            .as_u64()
            .is_some_and(|t| t > 1_600_000_000_000),
        "{swept}"
    );
}

#[tokio::test]
async fn patch_by_an_unregistered_cid_mints_a_record_readable_by_cid_and_rid() {
    let (s, a) = start().await;
    let cid = random_midhash();
    let body = json!({"filePath": "/files/watch/a.mkv", "title": "A", "streams/0/lang": "en", "streams/1/lang": "fr"});

    let w = a.ok_json("PATCH", &format!("/meta/{cid}"), &body).await;
    assert_eq!(
        (w["success"].clone(), w["updated"].clone()),
        (json!(true), json!(4)),
        "{w}"
    );
    let rid = w["hashId"].as_str().expect("a hashId").to_owned();
    assert_ne!(rid, cid.to_string(), "the record gets its own root");

    let want = fields(&[
        (&member(&cid), "true"),
        ("filePath", "/files/watch/a.mkv"),
        ("streams/0/lang", "en"),
        ("streams/1/lang", "fr"),
        ("title", "A"),
    ]);
    let rows = dump(&s.db_path());
    assert_eq!(
        aliases(&rows).get(cid.as_str()),
        Some(&rid),
        "cid:<cid> names the new root"
    );
    assert!(roots(&rows).contains(&rid));
    assert_eq!(record(&rows, &rid), want);
    assert_sound(&rows);

    let flat = json!({"hashId": rid, "metadata": want});
    assert_eq!(a.get_ok(&format!("/meta/{cid}")).await, flat);
    assert_eq!(a.get_ok(&format!("/meta/{rid}")).await, flat);
    assert_eq!(a.get_ok(&format!("/meta/{rid}?shape=flat")).await, flat);

    let nested = a.get_ok(&format!("/meta/{cid}?shape=nested")).await;
    assert_eq!(nested["hashId"], rid.as_str());
    assert_eq!(
        nested["metadata"]["streams"],
        json!([{"lang": "en"}, {"lang": "fr"}]),
        "{nested}"
    );
    assert_eq!(nested["metadata"]["title"], "A");
    assert_eq!(nested["metadata"]["cids"][cid.as_str()], "true");

    let again = a
        .ok_json("PATCH", &format!("/meta/{cid}"), &json!({"title": "B"}))
        .await;
    assert_eq!(
        again["hashId"],
        rid.as_str(),
        "the CID now addresses that record"
    );
    assert_eq!(roots(&dump(&s.db_path())).len(), 1, "no second record");
}

#[tokio::test]
async fn put_replaces_and_retracts_the_aliases_of_dropped_members() {
    let (s, a) = start().await;
    let rid = random_rid().to_string();
    let (x, y) = (random_midhash(), random_midhash());
    a.ok_json(
        "PATCH",
        &format!("/meta/{rid}"),
        &json!({"title": "T", "year": "1999", member(&x): "true", member(&y): "true"}),
    )
    .await;
    let rows = dump(&s.db_path());
    assert_eq!(aliases(&rows).get(x.as_str()), Some(&rid));
    assert_eq!(aliases(&rows).get(y.as_str()), Some(&rid));

    let w = a
        .ok_json(
            "PUT",
            &format!("/meta/{rid}"),
            &json!({"title": "T2", member(&y): "true"}),
        )
        .await;
    assert_eq!(w, json!({"success": true, "hashId": rid}));

    let rows = dump(&s.db_path());
    assert_eq!(
        record(&rows, &rid),
        fields(&[(&member(&y), "true"), ("title", "T2")]),
        "year and cids/x are gone"
    );
    assert_eq!(
        aliases(&rows).get(x.as_str()),
        None,
        "the dropped member's alias is retracted"
    );
    assert_eq!(aliases(&rows).get(y.as_str()), Some(&rid));
    assert_sound(&rows);
    a.get(&format!("/meta/{x}"))
        .await
        .assert_error(404, "unknown_cid");
    assert_eq!(
        a.get_ok(&format!("/meta/{y}")).await["metadata"]["title"],
        "T2"
    );
}

#[tokio::test]
async fn patch_merges_into_the_record() {
    let (s, a) = start().await;
    let rid = random_rid().to_string();
    let w = a
        .ok_json(
            "PATCH",
            &format!("/meta/{rid}"),
            &json!({"a": "1", "b": "2"}),
        )
        .await;
    assert_eq!(w, json!({"success": true, "hashId": rid, "updated": 2}));
    let w = a
        .ok_json(
            "PATCH",
            &format!("/meta/{rid}"),
            &json!({"b": "3", "c": "4"}),
        )
        .await;
    assert_eq!(w["updated"], 2);

    let rows = dump(&s.db_path());
    assert_eq!(
        record(&rows, &rid),
        fields(&[("a", "1"), ("b", "3"), ("c", "4")])
    );
    assert_sound(&rows);
    assert_eq!(
        a.get_ok(&format!("/meta/{rid}")).await["metadata"],
        json!({"a": "1", "b": "3", "c": "4"})
    );
}

#[tokio::test]
async fn delete_removes_every_row_of_the_record() {
    let (s, a) = start().await;
    let (cid, other) = (random_midhash(), random_midhash());
    let w = a
        .ok_json(
            "PATCH",
            &format!("/meta/{cid}"),
            &json!({"title": "T", "filePath": "/files/x.mkv"}),
        )
        .await;
    let rid = w["hashId"].as_str().unwrap().to_owned();
    a.ok_json(
        "PATCH",
        &format!("/meta/{rid}"),
        &json!({member(&other): "true"}),
    )
    .await;
    let keep = random_rid().to_string();
    a.ok_json("PATCH", &format!("/meta/{keep}"), &json!({"title": "kept"}))
        .await;
    let before = keys_naming(&dump(&s.db_path()), &rid);
    assert!(before.len() >= 6, "file: rows, two cid: aliases, idx:roots");
    let own = before
        .iter()
        .filter(|k| k.starts_with(&format!("file:{rid}/")))
        .count();
    assert_eq!(own, 4, "title, filePath, two cids/ members: {before:?}");

    let d = a.send("DELETE", &format!("/meta/{cid}"), "", &[]).await;
    assert_eq!(d.status, 200, "{}", d.text());
    let d = d.json();
    assert_eq!(
        (d["success"].clone(), d["hashId"].clone()),
        (json!(true), json!(rid)),
        "{d}"
    );
    // The original counted the record's own keys, not its index rows.
    assert_eq!(d["deleted"], json!(own), "{d}");

    let rows = dump(&s.db_path());
    assert_eq!(
        keys_naming(&rows, &rid),
        Vec::<String>::new(),
        "nothing names the deleted root"
    );
    assert!(
        !rows.contains_key(&format!("cid:{cid}")) && !rows.contains_key(&format!("cid:{other}"))
    );
    assert_eq!(
        roots(&rows),
        BTreeSet::from([keep.clone()]),
        "the other record stays"
    );
    assert_sound(&rows);

    a.get(&format!("/meta/{rid}"))
        .await
        .assert_error(404, "unknown_root");
    a.get(&format!("/meta/{cid}"))
        .await
        .assert_error(404, "unknown_cid");
    a.send("DELETE", &format!("/meta/{rid}"), "", &[])
        .await
        .assert_error(404, "unknown_root");
}

#[tokio::test]
async fn properties_read_write_and_delete_one_field() {
    let (s, a) = start().await;
    let rid = random_rid().to_string();
    a.ok_json("PATCH", &format!("/meta/{rid}"), &json!({"title": "T"}))
        .await;

    let r = a.get(&format!("/meta/{rid}/title")).await;
    assert_eq!((r.status, r.text().as_str()), (200, "T"));
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("text/plain")),
        "{:?}",
        r.headers
    );

    let w = a
        .send(
            "PUT",
            &format!("/meta/{rid}/info/plot"),
            r#"{"value":"P"}"#,
            &[],
        )
        .await;
    assert_eq!(w.status, 200, "{}", w.text());
    assert_eq!(
        w.json(),
        json!({"success": true, "hashId": rid, "property": "info/plot"})
    );
    let w = a
        .send("PUT", &format!("/meta/{rid}/note"), "just some text", &[])
        .await;
    assert_eq!(w.status, 200, "{}", w.text());
    assert_eq!(a.get(&format!("/meta/{rid}/info/plot")).await.text(), "P");

    let rows = dump(&s.db_path());
    assert_eq!(
        rows.get(&format!("file:{rid}/info/plot"))
            .map(String::as_str),
        Some("P"),
        "the JSON value"
    );
    assert_eq!(
        rows.get(&format!("file:{rid}/note")).map(String::as_str),
        Some("just some text"),
        "the raw body"
    );

    // A cids/<c> property registers the alias; deleting it retracts it.
    let c = random_midhash();
    let w = a
        .send("PUT", &format!("/meta/{rid}/{}", member(&c)), "true", &[])
        .await;
    assert_eq!(w.status, 200, "{}", w.text());
    assert_eq!(aliases(&dump(&s.db_path())).get(c.as_str()), Some(&rid));
    assert_eq!(
        a.get_ok(&format!("/meta/{c}")).await["hashId"],
        rid.as_str()
    );
    let d = a
        .send("DELETE", &format!("/meta/{rid}/{}", member(&c)), "", &[])
        .await;
    assert_eq!(d.status, 200, "{}", d.text());
    assert_eq!(
        d.json(),
        json!({"success": true, "hashId": rid, "property": member(&c)})
    );
    let rows = dump(&s.db_path());
    assert_eq!(
        aliases(&rows).get(c.as_str()),
        None,
        "the alias is retracted"
    );
    assert!(!rows.contains_key(&format!("file:{rid}/{}", member(&c))));

    let d = a
        .send("DELETE", &format!("/meta/{rid}/title"), "", &[])
        .await;
    assert_eq!(d.status, 200, "{}", d.text());
    assert!(!dump(&s.db_path()).contains_key(&format!("file:{rid}/title")));
    a.get(&format!("/meta/{rid}/title"))
        .await
        .assert_error(404, "not_found");
    assert_sound(&dump(&s.db_path()));
}

#[tokio::test]
async fn add_to_set_keeps_a_pipe_delimited_value() {
    let (s, a) = start().await;
    let rid = random_rid().to_string();
    let add = |v: &'static str| {
        let a = &a;
        let path = format!("/meta/{rid}/_add/tags/genre");
        async move {
            let r = a.send("POST", &path, v, &[]).await;
            assert_eq!(r.status, 200, "{}", r.text());
            r.json()
        }
    };
    let first = add(r#"{"value":"a"}"#).await;
    assert_eq!(
        first,
        json!({"success": true, "hashId": rid, "property": "tags/genre", "added": true})
    );
    assert_eq!(
        add(r#"{"value":"a"}"#).await["added"],
        false,
        "the same value twice"
    );
    assert_eq!(add("b").await["added"], true, "a raw body");

    let rows = dump(&s.db_path());
    assert_eq!(
        rows.get(&format!("file:{rid}/tags/genre"))
            .map(String::as_str),
        Some("a|b")
    );
    assert_sound(&rows);
}

#[tokio::test]
async fn meta_lists_every_root() {
    let (_s, a) = start().await;
    assert_eq!(
        a.get_ok("/meta").await,
        json!({"hashIds": [], "count": 0}),
        "empty is [], not null"
    );
    let r1 = random_rid().to_string();
    a.ok_json("PATCH", &format!("/meta/{r1}"), &json!({"t": "1"}))
        .await;
    let r2 = a
        .ok_json(
            "PATCH",
            &format!("/meta/{}", random_midhash()),
            &json!({"t": "2"}),
        )
        .await["hashId"]
        .as_str()
        .unwrap()
        .to_owned();
    let l = a.get_ok("/meta").await;
    assert_eq!(l["count"], 2);
    let ids: BTreeSet<&str> = l["hashIds"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(ids, BTreeSet::from([r1.as_str(), r2.as_str()]));
}

#[tokio::test]
async fn api_meta_by_cid_gives_the_document() {
    let (_s, a) = start().await;
    let mid = random_midhash();
    let sha = sha2_256();
    let w = a
        .ok_json(
            "PATCH",
            &format!("/meta/{mid}"),
            &json!({"filePath": "/files/a.mkv", member(&sha): "true"}),
        )
        .await;
    let rid = w["hashId"].as_str().unwrap().to_owned();

    let d = a.get_ok(&format!("/api/meta/{mid}")).await;
    assert_eq!(d["cid"], mid.as_str());
    assert_eq!(
        d["metadata"],
        json!({"filePath": "/files/a.mkv", member(&mid): "true", member(&sha): "true"}),
        "flat, with the members"
    );
    let cids: BTreeSet<&str> = d["cids"]
        .as_array()
        .expect("cids")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        cids,
        BTreeSet::from([mid.as_str(), sha.as_str()]),
        "bare CIDs"
    );
    assert_eq!(
        d["canonical_cid"],
        sha.as_str(),
        "sha2-256 (30) outranks midhash256 (10)"
    );
    assert_eq!(d["duplicates"], json!([]));
    assert_eq!(
        a.get_ok(&format!("/api/meta/{sha}")).await["canonical_cid"],
        sha.as_str()
    );

    a.get(&format!("/api/meta/{}", random_midhash()))
        .await
        .assert_error(404, "unknown_cid");
    let bad = a.get("/api/meta/not-a-cid").await;
    assert_eq!(bad.status, 400, "{}", bad.text());
    bad.assert_error(400, "schema_violation");
    let by_rid = a.get(&format!("/api/meta/{rid}")).await;
    assert_eq!(by_rid.status, 400, "a RID is not a CID: {}", by_rid.text());
}

#[tokio::test]
async fn data_routes_answer_by_status_and_map_the_file_path_once() {
    let (_s, a) = start().await;
    let cid = random_midhash();
    let rid = a
        .ok_json(
            "PATCH",
            &format!("/meta/{cid}"),
            &json!({"filePath": "/files/watch/a.mkv"}),
        )
        .await["hashId"]
        .as_str()
        .unwrap()
        .to_owned();

    for (target, want) in [
        (rid.clone(), 200),
        (cid.to_string(), 200),
        (random_rid().to_string(), 404),
        (random_midhash().to_string(), 404),
        ("not-a-hash".to_owned(), 400),
    ] {
        let r = a.send("HEAD", &format!("/data/{target}"), "", &[]).await;
        assert_eq!(r.status, want, "HEAD /data/{target}");
        assert!(r.body.is_empty(), "HEAD has no body");
    }

    let disk = a.files_path().join("watch/a.mkv");
    let p = a.get_ok(&format!("/data/{rid}/path")).await;
    assert_eq!(
        p,
        json!({"hashId": rid, "path": disk.display().to_string(), "exists": false}),
        "no doubled prefix"
    );
    std::fs::create_dir_all(disk.parent().unwrap()).unwrap();
    std::fs::write(&disk, b"x").unwrap();
    let p = a.get_ok(&format!("/data/{cid}/path")).await;
    assert_eq!(
        p,
        json!({"hashId": rid, "path": disk.display().to_string(), "exists": true})
    );
    a.get(&format!("/data/{}/path", random_rid()))
        .await
        .assert_error(404, "unknown_root");
}

#[tokio::test]
async fn deprecated_fields_are_refused_on_every_write_route_and_change_nothing() {
    let (s, a) = start().await;
    let rid = random_rid().to_string();
    a.ok_json("PATCH", &format!("/meta/{rid}"), &json!({"title": "T"}))
        .await;
    let before = dump(&s.db_path());
    let new_cid = random_midhash();

    for target in [rid.clone(), new_cid.to_string()] {
        for field in ["cid_sha256", "midhash256", "canonical_cid"] {
            for method in ["PUT", "PATCH"] {
                let r = a
                    .send_json(
                        method,
                        &format!("/meta/{target}"),
                        &json!({"title": "X", field: "v"}),
                    )
                    .await;
                r.assert_error(400, "deprecated_field");
            }
            a.send(
                "PUT",
                &format!("/meta/{target}/{field}"),
                r#"{"value":"v"}"#,
                &[],
            )
            .await
            .assert_error(400, "deprecated_field");
            a.send("POST", &format!("/meta/{target}/_add/{field}"), "v", &[])
                .await
                .assert_error(400, "deprecated_field");
        }
    }
    assert_same(&before, &dump(&s.db_path()), "refused deprecated fields");
    a.get(&format!("/meta/{new_cid}"))
        .await
        .assert_error(404, "unknown_cid");
}

#[tokio::test]
async fn every_answer_carries_cors_headers_and_options_is_200() {
    let (_s, a) = start().await;
    let check = |r: &e2e::raw_http::RawResponse, what: &str| {
        assert_eq!(r.header("access-control-allow-origin"), Some("*"), "{what}");
        let methods = r.header("access-control-allow-methods").unwrap_or_default();
        for m in ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
            assert!(methods.contains(m), "{what}: {m} in {methods:?}");
        }
        let headers = r.header("access-control-allow-headers").unwrap_or_default();
        assert!(headers.contains("Content-Type"), "{what}");
        assert!(
            headers.contains("Last-Event-ID"),
            "{what}: SSE resume from a page"
        );
    };
    check(&a.get("/health").await, "GET /health");
    check(&a.get("/no/such/route").await, "a 404");
    check(
        &a.get(&format!("/meta/{}", random_rid())).await,
        "an unknown root",
    );
    let pre = a
        .send(
            "OPTIONS",
            &format!("/meta/{}", random_rid()),
            "",
            &[
                ("origin", "http://x.example"),
                ("access-control-request-method", "PATCH"),
            ],
        )
        .await;
    assert_eq!(pre.status, 200);
    assert_eq!(pre.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        pre.header("access-control-allow-methods"),
        Some("PATCH"),
        "a preflight allows what it asks, not every method"
    );
    assert_eq!(
        a.send("OPTIONS", "/anything/at/all", "", &[]).await.status,
        200
    );
}

/// A page of another origin (issue 23, point 10, finding N9): its writes
/// that need no preflight are refused unless their body is JSON, and it
/// reaches no admin route, unless `META_CORE_CORS_ORIGINS` lists it.
#[tokio::test]
async fn pages_of_other_origins_cannot_write_cross_site_or_reach_admin_routes() {
    let (s, a) = start().await;
    let rid = random_rid().to_string();
    a.ok_json("PATCH", &format!("/meta/{rid}"), &json!({"title": "T"}))
        .await;
    let before = dump(&s.db_path());
    let page = [
        ("origin", "http://evil.example"),
        ("content-type", "text/plain"),
    ];
    for (method, path, body) in [
        ("POST", format!("/meta/{rid}/_add/tags"), "x".to_owned()),
        ("POST", "/file/cid".to_owned(), r#"{"path":"x"}"#.to_owned()),
        ("POST", "/api/metadata/search".to_owned(), "{}".to_owned()),
    ] {
        a.send(method, &path, body, &page)
            .await
            .assert_error(415, "unsupported_media_type");
    }
    // An admin route refuses a page outright, whatever it sends (even a
    // bodiless POST a page may send without asking, even with the token).
    for (path, body) in [
        ("/api/metadata/batch", r#"{"updates":[]}"#),
        ("/api/snapshot/wipe?scope=metadata", ""),
        ("/api/metadata/clear", ""),
    ] {
        a.admin()
            .send("POST", path, body, &page)
            .await
            .assert_error(403, "origin_refused");
    }
    assert_same(&before, &dump(&s.db_path()), "cross-site writes");
    // A service sends no Origin: its text body is taken as ever.
    let r = a
        .send(
            "POST",
            &format!("/meta/{rid}/_add/tags"),
            "x",
            &[("content-type", "text/plain")],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // A page's JSON write to an open route is fine.
    let r = a
        .send(
            "PATCH",
            &format!("/meta/{rid}"),
            r#"{"year":"2001"}"#,
            &[
                ("origin", "http://ui.example"),
                ("content-type", "application/json"),
            ],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));

    // No page may call an admin route: its preflight is refused, and its
    // answers carry nothing that lets a page read them.
    let pre = a
        .send(
            "OPTIONS",
            "/api/kv/value",
            "",
            &[
                ("origin", "http://evil.example"),
                ("access-control-request-method", "PUT"),
                (
                    "access-control-request-headers",
                    "authorization, content-type",
                ),
            ],
        )
        .await;
    pre.assert_error(403, "origin_refused");
    assert_eq!(pre.header("access-control-allow-origin"), None);
    let r = a
        .admin()
        .send(
            "DELETE",
            "/api/kv/value?key=udl:x",
            "",
            &[("origin", "http://evil.example")],
        )
        .await;
    assert_eq!(
        r.header("access-control-allow-origin"),
        None,
        "{}",
        r.text()
    );
    // Reading a value (GET /api/kv/value) is not an admin route.
    let pre = a
        .send(
            "OPTIONS",
            "/api/kv/value",
            "",
            &[
                ("origin", "http://evil.example"),
                ("access-control-request-method", "GET"),
            ],
        )
        .await;
    assert_eq!(pre.status, 200);
}

#[tokio::test]
async fn listed_origins_alone_are_allowed_and_may_reach_admin_routes() {
    let s = Storaged::start().await;
    let a = Apid::start_with(
        &s,
        &[(
            "META_CORE_CORS_ORIGINS",
            "http://console.lan:8080, https://ui.lan",
        )],
    )
    .await;
    let http: e2e::apid::Http = (*a).clone();
    let pre = |origin: &'static str| {
        let http = http.clone();
        async move {
            http.send(
                "OPTIONS",
                "/api/mounts",
                "",
                &[
                    ("origin", origin),
                    ("access-control-request-method", "POST"),
                    ("access-control-request-headers", "authorization"),
                ],
            )
            .await
        }
    };
    let ok = pre("http://console.lan:8080").await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(
        ok.header("access-control-allow-origin"),
        Some("http://console.lan:8080")
    );
    assert!(
        ok.header("access-control-allow-headers")
            .is_some_and(|h| h.contains("Authorization"))
    );
    assert_eq!(ok.header("vary"), Some("Origin"));
    pre("http://evil.example")
        .await
        .assert_error(403, "origin_refused");
    let r = a
        .send("GET", "/health", "", &[("origin", "https://ui.lan")])
        .await;
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://ui.lan")
    );
    let r = a
        .send("GET", "/health", "", &[("origin", "http://evil.example")])
        .await;
    assert_eq!(
        r.status, 200,
        "a browser is kept from reading it, not refused"
    );
    assert_eq!(r.header("access-control-allow-origin"), None);
}

#[tokio::test]
async fn with_an_admin_token_meta_writes_stay_open() {
    let s = Storaged::start().await;
    let a = Apid::start_with(&s, &[("META_CORE_ADMIN_TOKEN", "secret")]).await;
    let rid = random_rid().to_string();
    a.ok_json("PATCH", &format!("/meta/{rid}"), &json!({"title": "T"}))
        .await;
    a.ok_json("PUT", &format!("/meta/{rid}"), &json!({"title": "U"}))
        .await;
    let r = a
        .send("PUT", &format!("/meta/{rid}/year"), "2001", &[])
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = a
        .send("POST", &format!("/meta/{rid}/_add/tags"), "x", &[])
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        record(&dump(&s.db_path()), &rid),
        fields(&[("tags", "x"), ("title", "U"), ("year", "2001")])
    );
    let r = a.send("DELETE", &format!("/meta/{rid}"), "", &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(roots(&dump(&s.db_path())).is_empty());
}

#[tokio::test]
async fn bulk_writes_drop_the_reserved_field_silently() {
    let (s, a) = start().await;
    let rid = random_rid().to_string();
    let w = a
        .ok_json(
            "PATCH",
            &format!("/meta/{rid}"),
            &json!({"__fields__": "x", "title": "T"}),
        )
        .await;
    assert_eq!(w["updated"], 1, "__fields__ is not counted: {w}");
    a.ok_json(
        "PUT",
        &format!("/meta/{rid}"),
        &json!({"__fields__": "x", "title": "U"}),
    )
    .await;
    let before = dump(&s.db_path());
    assert_eq!(record(&before, &rid), fields(&[("title", "U")]));
    // One property is not a bulk write: naming the reserved field is refused.
    a.send("PUT", &format!("/meta/{rid}/__fields__"), "x", &[])
        .await
        .assert_error(400, "schema_violation");
    assert_same(&before, &dump(&s.db_path()), "a refused reserved property");
}

#[tokio::test]
async fn a_cid_owned_by_one_record_stays_with_it_when_another_claims_it() {
    let (s, a) = start().await;
    let cid = random_midhash();
    let owner = a
        .ok_json("PATCH", &format!("/meta/{cid}"), &json!({"title": "first"}))
        .await["hashId"]
        .as_str()
        .unwrap()
        .to_owned();
    let other = random_rid().to_string();
    a.ok_json(
        "PATCH",
        &format!("/meta/{other}"),
        &json!({"title": "second", member(&cid): "true"}),
    )
    .await;
    let w = a
        .send(
            "PUT",
            &format!("/meta/{other}/{}", member(&cid)),
            "true",
            &[],
        )
        .await;
    assert_eq!(w.status, 200, "{}", w.text());

    let rows = dump(&s.db_path());
    assert_eq!(
        aliases(&rows).get(cid.as_str()),
        Some(&owner),
        "the first owner keeps the alias"
    );
    assert_sound(&rows);
    assert_eq!(
        a.get_ok(&format!("/meta/{cid}")).await["hashId"],
        owner.as_str()
    );

    // The other record dropping its member leaves the owner's alias alone.
    let d = a
        .send(
            "DELETE",
            &format!("/meta/{other}/{}", member(&cid)),
            "",
            &[],
        )
        .await;
    assert_eq!(d.status, 200, "{}", d.text());
    assert_eq!(aliases(&dump(&s.db_path())).get(cid.as_str()), Some(&owner));
}
