//! apid's editor (`/api/metadata/*`, `/api/files/tuples`), KV browser
//! (`/api/kv/*`) and admin token, over real HTTP with a real storaged,
//! checked by status, shape and the rows left in the database file.

use e2e::fixtures::{member, random_midhash};
use e2e::snapshot::{aliases, assert_same, assert_sound, dump, record, roots};
use e2e::{Apid, Storaged};
use serde_json::{Value, json};

async fn start_with(env: &[(&str, &str)]) -> (Storaged, Apid) {
    let s = Storaged::start().await;
    let a = Apid::start_with(&s, env).await;
    (s, a)
}

/// Mints a record by CID through `/meta` and returns its RID.
async fn mint(a: &Apid, fields: Value) -> String {
    let cid = random_midhash();
    let v = a.ok_json("PATCH", &format!("/meta/{cid}"), &fields).await;
    v["hashId"].as_str().expect("hashId").to_owned()
}

#[tokio::test]
async fn tuples_and_list_read_a_few_fields_of_every_record() {
    let (s, a) = start_with(&[]).await;
    let full = mint(&a, json!({"filePath": "/files/a.mkv", "sizeByte": "100", "mtimeNano": "7", "title": "A", "year": "2001", "fileType": "video"})).await;
    let _partial = mint(&a, json!({"filePath": "/files/b.mkv", "title": "B"})).await;
    let _bad_size = mint(
        &a,
        json!({"filePath": "/files/c.mkv", "sizeByte": "big", "mtimeNano": "1"}),
    )
    .await;

    let t = a.get_ok("/api/files/tuples").await;
    assert_eq!(t["count"], 1, "{t}");
    assert_eq!(t["totalSize"], 100);
    assert_eq!(
        t["files"],
        json!([{"hashId": full, "filePath": "/files/a.mkv", "sizeByte": 100, "mtimeNano": 7}])
    );
    let summary = a.get_ok("/api/files/tuples?summary=1").await;
    assert!(
        summary.get("files").is_none() && summary["count"] == 1,
        "{summary}"
    );

    let l = a.get_ok("/api/metadata/list?limit=2").await;
    assert_eq!(
        (l["count"].as_u64(), l["total"].as_u64()),
        (Some(2), Some(3)),
        "{l}"
    );
    let first = &l["items"][0];
    assert_eq!(
        first["hashId"],
        full.as_str(),
        "roots come in RID order: {l}"
    );
    assert_eq!(
        (
            first["title"].as_str(),
            first["type"].as_str(),
            first["year"].as_str()
        ),
        (Some("A"), Some("video"), Some("2001"))
    );
    let rest = a.get_ok("/api/metadata/list?offset=2&limit=5").await;
    assert_eq!(rest["count"], 1, "{rest}");
    let past = a.get_ok("/api/metadata/list?offset=10").await;
    assert_eq!(past["items"], json!([]), "empty is [] not null: {past}");

    let ids = a.get_ok("/api/metadata/hash-ids").await;
    assert_eq!(ids["count"], 3);
    assert_sound(&dump(&s.db_path()));
}

#[tokio::test]
async fn per_record_editor_routes_read_replace_and_delete() {
    let (s, a) = start_with(&[]).await;
    let cid = random_midhash();
    let rid = mint(
        &a,
        json!({"title": "Old", "keep": "no", member(&cid): "true"}),
    )
    .await;

    let g = a.get_ok(&format!("/api/metadata/{rid}")).await;
    assert_eq!(g["metadata"]["title"], "Old");
    let nested = a.get_ok(&format!("/api/metadata/{rid}?shape=nested")).await;
    assert_eq!(
        nested["metadata"]["cids"][cid.to_string()],
        "true",
        "{nested}"
    );

    let p = a
        .ok_json(
            "PUT",
            &format!("/api/metadata/{rid}"),
            &json!({"title": "New", "processingStatus": "busy"}),
        )
        .await;
    assert_eq!(
        (p["status"].as_str(), p["hashId"].as_str()),
        (Some("ok"), Some(rid.as_str()))
    );
    let rows = dump(&s.db_path());
    let rec = record(&rows, &rid);
    assert_eq!(rec.get("title").map(String::as_str), Some("New"));
    assert!(
        !rec.contains_key("keep") && !rec.contains_key("processingStatus"),
        "PUT replaces: {rec:?}"
    );

    let prop = a
        .get_ok(&format!("/api/metadata/{rid}/property?property=title"))
        .await;
    assert_eq!(
        prop,
        json!({"hashId": rid, "property": "title", "value": "New"})
    );
    let set = a
        .ok_json(
            "PUT",
            &format!("/api/metadata/{rid}/property"),
            &json!({"property": "year", "value": "1999"}),
        )
        .await;
    assert_eq!(
        (set["property"].as_str(), set["value"].as_str()),
        (Some("year"), Some("1999"))
    );
    assert_eq!(
        record(&dump(&s.db_path()), &rid)
            .get("year")
            .map(String::as_str),
        Some("1999")
    );
    a.send_json(
        "PUT",
        &format!("/api/metadata/{rid}/property"),
        &json!({"property": "midhash256", "value": "x"}),
    )
    .await
    .assert_error(400, "deprecated_field");

    let d = a
        .ok_json("DELETE", &format!("/api/metadata/{rid}"), &json!(null))
        .await;
    assert!(d["deletedKeys"].as_u64().is_some_and(|n| n >= 2), "{d}");
    let rows = dump(&s.db_path());
    assert!(record(&rows, &rid).is_empty() && !roots(&rows).contains(&rid));
    assert_sound(&rows);
}

#[tokio::test]
async fn batch_applies_each_update_in_one_transaction_and_reports_each() {
    let (s, a) = start_with(&[]).await;
    let rid = mint(&a, json!({"title": "T", "old": "x"})).await;
    let other = mint(&a, json!({"title": "U"})).await;
    let before_other = record(&dump(&s.db_path()), &other);
    let r = a
        .admin().ok_json(
            "POST",
            "/api/metadata/batch",
            &json!({"updates": [
                {"hashId": rid, "metadata": {"title": "T2", "processingStatus": "x"}, "properties": {"year": "2000"}},
                {"metadata": {"a": "b"}},
                {"hashId": other, "properties": {"canonical_cid": "b"}},
            ]}),
        )
        .await;
    assert_eq!(
        (
            r["status"].as_str(),
            r["total"].as_u64(),
            r["success"].as_u64(),
            r["errors"].as_u64()
        ),
        (Some("completed"), Some(3), Some(1), Some(2)),
        "{r}"
    );
    assert_eq!(
        r["results"][1],
        json!({"hashId": "unknown", "status": "error", "error": "Missing hash ID"})
    );
    let rows = dump(&s.db_path());
    let rec = record(&rows, &rid);
    assert_eq!(rec.get("title").map(String::as_str), Some("T2"));
    assert_eq!(rec.get("year").map(String::as_str), Some("2000"));
    assert!(
        !rec.contains_key("old") && !rec.contains_key("processingStatus"),
        "{rec:?}"
    );
    assert_eq!(
        record(&rows, &other),
        before_other,
        "a refused update changes nothing"
    );
    a.admin()
        .send_json("POST", "/api/metadata/batch", &json!({"updates": []}))
        .await
        .assert_error(400, "schema_violation");
}

#[tokio::test]
async fn clear_deletes_every_record_and_alias() {
    let (s, a) = start_with(&[]).await;
    for i in 0..5 {
        mint(&a, json!({"title": format!("t{i}")})).await;
    }
    let c = a
        .admin()
        .ok_json("POST", "/api/metadata/clear", &json!(null))
        .await;
    assert_eq!(
        c,
        json!({"status": "ok", "message": "Metadata cleared", "deletedCount": 5})
    );
    let rows = dump(&s.db_path());
    assert!(
        roots(&rows).is_empty() && aliases(&rows).is_empty(),
        "nothing left"
    );
    assert!(
        !rows.keys().any(|k| k.starts_with("file:")),
        "no field rows left"
    );
}

#[tokio::test]
async fn kv_browser_reads_keys_tree_search_find_and_values() {
    let (s, a) = start_with(&[]).await;
    let r1 = mint(
        &a,
        json!({"title": "Night River", "sizeByte": "10", "fileinfo/codec": "h264"}),
    )
    .await;
    let r2 = mint(&a, json!({"title": "Day", "sizeByte": "5"})).await;

    let info = a.get_ok("/api/kv/info").await;
    assert_eq!(
        (
            info["prefix"].as_str(),
            info["fileCount"].as_u64(),
            info["totalSize"].as_u64()
        ),
        (Some("file:"), Some(2), Some(15)),
        "{info}"
    );

    let k1 = a.get_ok("/api/kv/keys?count=1").await;
    assert_eq!(k1["keys"], json!([format!("file:{r1}")]));
    assert_eq!(k1["hasMore"], true);
    let k2 = a
        .get_ok(&format!(
            "/api/kv/keys?count=1&cursor={}",
            k1["cursor"].as_str().unwrap()
        ))
        .await;
    assert_eq!(k2["keys"], json!([format!("file:{r2}")]));
    assert_eq!(
        (k2["cursor"].as_str(), k2["hasMore"].as_bool()),
        (Some("0"), Some(false)),
        "{k2}"
    );

    let top = a.get_ok("/api/kv/tree?prefix=&delimiter=:").await;
    let branches: Vec<&str> = top["branches"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        branches.contains(&"file:") && branches.contains(&"cid:"),
        "{top}"
    );
    let rec = a
        .get_ok(&format!("/api/kv/tree?prefix=file:{r1}/&delimiter=/"))
        .await;
    assert_eq!(
        rec["branches"],
        json!([format!("file:{r1}/cids/"), format!("file:{r1}/fileinfo/")]),
        "{rec}"
    );
    assert_eq!(
        rec["leaves"],
        json!([format!("file:{r1}/sizeByte"), format!("file:{r1}/title")])
    );
    let paged = a
        .get_ok(&format!("/api/kv/tree?prefix=file:{r1}/&delimiter=/&max=3"))
        .await;
    assert_eq!(paged["hasMore"], true, "{paged}");
    let next = a
        .get_ok(&format!(
            "/api/kv/tree?prefix=file:{r1}/&delimiter=/&max=3&cursor={}",
            urlencode(paged["cursor"].as_str().unwrap())
        ))
        .await;
    assert_eq!(
        next["leaves"],
        json!([format!("file:{r1}/title")]),
        "the cursor continues: {next}"
    );

    // The field's key, and its schema counter (`idx:schema/fileinfo/codec…`).
    let found = a.get_ok("/api/kv/search?contains=codec").await;
    assert_eq!(
        found["keys"],
        json!([
            format!("file:{r1}/fileinfo/codec"),
            "idx:schema/fileinfo/codec\u{1f}\u{1f}string\u{1f}"
        ])
    );
    let f = a
        .get_ok("/api/kv/find?contains=river&fields=title,fileinfo/codec")
        .await;
    assert_eq!(
        f["matches"],
        json!([{"key": format!("file:{r1}/title"), "value": "Night River", "entryPath": format!("file:{r1}"), "field": "title"}])
    );
    a.get("/api/kv/find?contains=x")
        .await
        .assert_error(400, "schema_violation");

    let v = a
        .get_ok(&format!("/api/kv/value?key=file:{r2}/title"))
        .await;
    assert_eq!(
        v,
        json!({"key": format!("file:{r2}/title"), "type": "string", "value": "Day", "exists": true})
    );
    let missing = a.get_ok("/api/kv/value?key=nope").await;
    assert_eq!(
        (missing["exists"].as_bool(), missing["type"].as_str()),
        (Some(false), Some(""))
    );
    let h = a.get_ok(&format!("/api/kv/key/file:{r2}")).await;
    assert_eq!(
        (h["type"].as_str(), h["value"]["title"].as_str()),
        (Some("hash"), Some("Day"))
    );
    a.get("/api/kv/key/udl:x")
        .await
        .assert_error(400, "schema_violation");
    assert_sound(&dump(&s.db_path()));
}

#[tokio::test]
async fn kv_writes_follow_the_record_rules_and_refuse_bookkeeping_keys() {
    let (s, a) = start_with(&[]).await;
    let rid = mint(&a, json!({"title": "x"})).await;
    let w = a
        .admin()
        .ok_json(
            "PUT",
            "/api/kv/value",
            &json!({"key": format!("file:{rid}/year"), "value": "1990"}),
        )
        .await;
    assert_eq!(
        w,
        json!({"key": format!("file:{rid}/year"), "type": "string", "value": "1990", "exists": true})
    );
    assert_eq!(
        record(&dump(&s.db_path()), &rid)
            .get("year")
            .map(String::as_str),
        Some("1990")
    );
    a.admin()
        .ok_json(
            "PUT",
            "/api/kv/value",
            &json!({"key": "udl:u1/prefs", "value": "{}"}),
        )
        .await;

    let before = dump(&s.db_path());
    for key in [
        "idx:roots/x",
        "cid:bafkreiabc",
        "ev:meta:events/1-1",
        "meta-core:schema-version",
    ] {
        let r = a
            .admin()
            .send_json("PUT", "/api/kv/value", &json!({"key": key, "value": "1"}))
            .await;
        assert!(r.status == 400, "{key}: {} {}", r.status, r.text());
    }
    assert_same(&before, &dump(&s.db_path()), "refused kv writes");

    let d = a
        .admin()
        .ok_json("DELETE", "/api/kv/value?key=udl:u1/prefs", &json!(null))
        .await;
    assert_eq!(d, json!({"key": "udl:u1/prefs", "deleted": true}));
    assert!(!dump(&s.db_path()).contains_key("udl:u1/prefs"));
}

#[tokio::test]
async fn the_admin_token_guards_mutating_admin_routes_only() {
    let (s, a) = start_with(&[("META_CORE_ADMIN_TOKEN", "secret")]).await;
    let rid = mint(&a, json!({"title": "x"})).await; // /meta stays open
    let before = dump(&s.db_path());
    let guarded: [(&str, String, Value); 6] = [
        (
            "PUT",
            "/api/kv/value".into(),
            json!({"key": "udl:a", "value": "1"}),
        ),
        (
            "DELETE",
            format!("/api/kv/value?key=file:{rid}/title"),
            json!(null),
        ),
        (
            "POST",
            "/api/metadata/batch".into(),
            json!({"updates": [{"hashId": rid, "properties": {"a": "b"}}]}),
        ),
        ("POST", "/api/metadata/clear".into(), json!(null)),
        (
            "POST",
            "/api/snapshot/wipe?scope=metadata".into(),
            json!(null),
        ),
        ("POST", "/api/snapshot/import".into(), json!(null)),
    ];
    for (method, path, body) in &guarded {
        a.send_json(method, path, body)
            .await
            .assert_error(401, "unauthorized");
        let wrong = a
            .send(
                method,
                path,
                serde_json::to_vec(body).unwrap(),
                &[
                    ("authorization", "Bearer nope"),
                    ("content-type", "application/json"),
                ],
            )
            .await;
        wrong.assert_error(401, "unauthorized");
    }
    assert_same(&before, &dump(&s.db_path()), "refused admin calls");

    a.get_ok(&format!("/api/kv/value?key=file:{rid}/title"))
        .await; // reads stay open
    let r = a
        .send(
            "PUT",
            "/api/kv/value",
            r#"{"key":"udl:a","value":"1"}"#,
            &[
                ("authorization", "Bearer secret"),
                ("content-type", "application/json"),
            ],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        dump(&s.db_path()).get("udl:a").map(String::as_str),
        Some("1")
    );
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Page sizes beyond their caps are refused with the cap in the message,
/// 0 is refused, and a key search stops after the keys it may examine
/// (issue 13, point 5).
#[tokio::test]
async fn expensive_reads_are_bounded() {
    let s = Storaged::start().await;
    let a = Apid::start(&s).await;
    for (path, cap) in [
        ("/api/kv/tree?prefix=file:&max=5001", "5000"),
        ("/api/kv/keys?count=10001", "10000"),
        ("/api/kv/search?contains=x&limit=10001", "10000"),
        ("/api/kv/find?contains=x&fields=title&limit=10001", "10000"),
        ("/api/metadata/list?limit=10001", "10000"),
    ] {
        let r = a.get(path).await;
        r.assert_error(400, "schema_violation");
        assert!(r.text().contains(cap), "{path}: {}", r.text());
    }
    for path in [
        "/api/kv/tree?prefix=file:&max=0",
        "/api/kv/keys?count=0",
        "/api/kv/search?contains=x&limit=0",
        "/api/metadata/list?limit=0",
    ] {
        a.get(path).await.assert_error(400, "schema_violation");
    }
    // One record of 120,000 fields: more keys than a search examines.
    let rid = e2e::fixtures::random_rid();
    let mut fields = serde_json::Map::new();
    for i in 0..120_000 {
        fields.insert(format!("f{i:06}"), serde_json::Value::String("v".into()));
    }
    // A write this large takes seconds in a debug build on a busy machine:
    // the client waits as long as it takes (this test bounds rows, not time).
    let slow: e2e::apid::Http = (*a)
        .clone()
        .with_deadline(std::time::Duration::from_secs(300));
    let r = slow
        .send_json(
            "PUT",
            &format!("/meta/{rid}"),
            &serde_json::Value::Object(fields),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let a = &slow;
    let r = a
        .get_ok("/api/kv/search?contains=no-such-key&limit=5")
        .await;
    assert_eq!(r["keys"], json!([]));
    assert_eq!(
        r["truncated"],
        json!(true),
        "stopped at the examined bound: {r}"
    );
    // The write's 120,000 meta events (`ev:meta:events/...`, sorted before
    // `file:`) are passed over, so the record's own keys are examined
    // and found, and no stream row is returned.
    let r = a.get_ok("/api/kv/search?contains=/f00001&limit=20").await;
    let want: Vec<String> = (10..20).map(|i| format!("file:{rid}/f{i:06}")).collect();
    assert_eq!(r["keys"], json!(want), "{r}");
    let r = a.get_ok("/api/kv/search?contains=ev:meta&limit=5").await;
    assert_eq!(r["keys"], json!([]), "{r}");
}
