//! `POST /api/metadata/search` over HTTP against storaged on a real file:
//! the original's request and answer, its filter semantics end to end, RID
//! order, `limit` and `total`, fresh on commit, and its bad requests; the
//! schema's counters, and one rescan of them at a time.

use e2e::fixtures::random_rid;
use e2e::{Apid, Launch};
use serde_json::{Value, json};

async fn search(a: &Apid, body: Value) -> Value {
    a.ok_json("POST", "/api/metadata/search", &body).await
}

fn ids(answer: &Value) -> Vec<String> {
    answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["hashId"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn search_answers_the_original_shape_in_rid_order_and_fresh() {
    let dir = e2e::daemon::test_dir();
    let s = Launch::in_dir(dir.path()).start().await;
    let a = Apid::start(&s).await;
    let mut rids: Vec<String> = (0..4).map(|_| random_rid().to_string()).collect();
    let records = [
        json!({"title": "Night River", "fileName": "night.river.mkv", "tmdbid": "1405",
               "genres/Action": "true", "genres/Drama": "false", "year": "2019",
               "categories/newznab/2040": "true"}),
        json!({"title": "Day Lake", "tmdbid": "140", "genres": "Drama, Science Fiction",
               "year": "2020"}),
        json!({"title": "River Song", "showtitle": "Doctor", "tmdbid": "99",
               "genres/action": "1", "year": "2019"}),
        json!({"originaltitle": "Rivière", "filePath": "/files/watch/riviere.mkv"}),
    ];
    for (rid, rec) in rids.iter().zip(&records) {
        a.ok_json("PATCH", &format!("/meta/{rid}"), rec).await;
    }
    let sorted = {
        rids.sort();
        rids.clone()
    };

    // Everything, in RID order, with the record's fields.
    let all = search(&a, json!({})).await;
    assert_eq!(ids(&all), sorted);
    assert_eq!(all["count"], 4);
    assert_eq!(all["total"], 4);
    let night = all["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metadata"]["title"] == "Night River")
        .unwrap();
    assert_eq!(night["metadata"]["tmdbid"], "1405");
    assert!(
        night["metadata"].get("categories/newznab/2040").is_none(),
        "excluded prefix: {night}"
    );

    let titles = |answer: &Value| -> Vec<String> {
        answer["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                r["metadata"]["title"]
                    .as_str()
                    .or(r["metadata"]["originaltitle"].as_str())
                    .unwrap()
                    .to_owned()
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    // Free text: tokens AND over title, fileName, originaltitle,
    // showtitle, filePath.
    let r = search(&a, json!({"query": "river"})).await;
    assert_eq!(titles(&r), ["Night River", "River Song"]);
    let r = search(&a, json!({"query": "RIVER doctor"})).await;
    assert_eq!(titles(&r), ["River Song"]);
    let r = search(&a, json!({"query": "riviere"})).await;
    assert_eq!(titles(&r), ["Rivière"], "filePath is in the haystack");
    let r = search(&a, json!({"query": "2019"})).await;
    assert_eq!(ids(&r), Vec::<String>::new(), "year is not");
    // Part of a RID.
    let part = sorted[2][3..12].to_lowercase();
    let r = search(&a, json!({"query": part})).await;
    assert_eq!(ids(&r), [sorted[2].clone()]);

    // Filters: contains vs exact, key-sets, csv, OR within, AND across.
    let f = |property: &str, values: &[&str], exact: bool| json!({"filters": [{"property": property, "values": values, "exact": exact}]});
    let r = search(&a, f("tmdbid", &["140"], false)).await;
    assert_eq!(titles(&r), ["Day Lake", "Night River"]);
    let r = search(&a, f("tmdbid", &["140"], true)).await;
    assert_eq!(titles(&r), ["Day Lake"]);
    let r = search(&a, f("genres", &["action"], true)).await;
    assert_eq!(titles(&r), ["Night River", "River Song"]);
    let r = search(&a, f("genres", &["drama"], false)).await;
    assert_eq!(titles(&r), ["Day Lake"], "a false member is not set");
    let r = search(&a, f("genres", &["science fiction"], true)).await;
    assert_eq!(titles(&r), ["Day Lake"]);
    let r = search(&a, f("tmdbid", &["99", "1405"], true)).await;
    assert_eq!(titles(&r), ["Night River", "River Song"]);
    let r = search(
        &a,
        json!({"filters": [
            {"property": "year", "values": ["2019"], "exact": true},
            {"property": "genres", "values": ["Action"]}]}),
    )
    .await;
    assert_eq!(titles(&r), ["Night River", "River Song"]);
    let r = search(&a, f("year", &["20"], false)).await;
    assert_eq!(r["count"], 3, "the record without year fails closed: {r}");
    let r = search(&a, f("year", &[" ", ""], false)).await;
    assert_eq!(r["count"], 4, "a blank filter passes everything");
    let r = search(&a, f("categories/newznab", &["2040"], true)).await;
    assert_eq!(r["count"], 0, "excluded fields are not searched");
    // The legacy pair is one more substring filter.
    let r = search(&a, json!({"property": "title", "propertyValue": "lake"})).await;
    assert_eq!(titles(&r), ["Day Lake"]);
    let r = search(&a, json!({"property": "title", "propertyValue": ""})).await;
    assert_eq!(r["count"], 4);

    // limit, and 0 meaning 100.
    let r = search(&a, json!({"limit": 2})).await;
    assert_eq!(ids(&r), sorted[..2]);
    assert_eq!(
        (r["count"].clone(), r["total"].clone()),
        (json!(2), json!(4))
    );
    let r = search(&a, json!({"limit": 0})).await;
    assert_eq!(r["count"], 4);

    // hashId: that record by its RID, all of its fields, or nothing.
    let night_rid = night["hashId"].as_str().unwrap();
    let r = search(&a, json!({"hashId": night_rid, "query": "no such"})).await;
    assert_eq!(ids(&r), [night_rid.to_owned()]);
    assert_eq!(r["total"], 1);
    assert_eq!(
        r["results"][0]["metadata"]["categories/newznab/2040"],
        "true"
    );
    let r = search(&a, json!({"hashId": random_rid().to_string()})).await;
    assert_eq!(
        (r["count"].clone(), r["total"].clone()),
        (json!(0), json!(0))
    );
    let r = search(&a, json!({"hashId": "not-a-rid"})).await;
    assert_eq!(r["count"], 0);

    // Fresh on commit: a write is found by the next search, and an
    // overwritten value no longer is.
    let fresh = random_rid().to_string();
    a.ok_json(
        "PATCH",
        &format!("/meta/{fresh}"),
        &json!({"title": "Brand New Thing"}),
    )
    .await;
    let r = search(&a, json!({"query": "brand new"})).await;
    assert_eq!(ids(&r), [fresh.as_str()]);
    a.ok_json(
        "PATCH",
        &format!("/meta/{fresh}"),
        &json!({"title": "Renamed"}),
    )
    .await;
    let r = search(&a, json!({"query": "brand new"})).await;
    assert_eq!(r["count"], 0);
    assert_eq!(r["total"], 5);
}

#[tokio::test]
async fn bad_searches_are_400s_and_unknown_members_are_ignored() {
    let dir = e2e::daemon::test_dir();
    let s = Launch::in_dir(dir.path()).start().await;
    let a = Apid::start(&s).await;
    for (body, slug) in [
        (json!({"limit": -1}), "schema_violation"),
        (json!({"limit": 10_001}), "schema_violation"),
        (json!({"query": 5}), "schema_violation"),
        (json!({"filters": {"property": "x"}}), "schema_violation"),
        (
            json!({"filters": [{"property": "x", "values": "y"}]}),
            "schema_violation",
        ),
    ] {
        let r = a.send_json("POST", "/api/metadata/search", &body).await;
        r.assert_error(400, slug);
    }
    let many: Vec<Value> = (0..33)
        .map(|i| json!({"property": format!("p{i}"), "values": ["v"]}))
        .collect();
    let r = a
        .send_json("POST", "/api/metadata/search", &json!({"filters": many}))
        .await;
    r.assert_error(400, "schema_violation");
    assert!(r.text().contains("32"), "{}", r.text());
    let r = a
        .send("POST", "/api/metadata/search", "{not json", &[])
        .await;
    r.assert_error(400, "bad_request");
    let r = a
        .send_json(
            "POST",
            "/api/metadata/search",
            &json!({"query": "", "offset": 10, "sort": "title"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // null reads as absent, as a Go client's nil slice is sent.
    let r = a
        .send_json(
            "POST",
            "/api/metadata/search",
            &json!({"query": null, "hashId": null, "filters": [{"property": "x", "values": null, "exact": null}], "limit": null}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = a
        .send_json("POST", "/api/metadata/search", &json!({"filters": null}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // What a search may cost is bounded.
    let long = "word ".repeat(65);
    a.send_json("POST", "/api/metadata/search", &json!({"query": long}))
        .await
        .assert_error(400, "schema_violation");
    let values: Vec<String> = (0..200).map(|i| format!("v{i}")).collect();
    let filters: Vec<Value> = (0..6)
        .map(|i| json!({"property": format!("p{i}"), "values": values}))
        .collect();
    let r = a
        .send_json("POST", "/api/metadata/search", &json!({"filters": filters}))
        .await;
    r.assert_error(400, "schema_violation");
    assert!(r.text().contains("1024"), "{}", r.text());
}

/// `GET /api/schema` from the counters kept on every write: the kinds of
/// the values, the hints, the language-code collapse; changes and deletes
/// move the counts; `POST /api/schema/rescan` (an admin route) counts
/// everything again and agrees.
#[tokio::test]
async fn the_schema_follows_every_write() {
    let dir = e2e::daemon::test_dir();
    let s = Launch::in_dir(dir.path()).start().await;
    let a = Apid::start_with(&s, &[("META_CORE_ADMIN_TOKEN", "sekret")]).await;
    let (r1, r2) = (random_rid().to_string(), random_rid().to_string());
    a.ok_json(
        "PATCH",
        &format!("/meta/{r1}"),
        &json!({"year": "1999", "added": "1700000000", "rating": "7.5", "watched": "false",
                "plot/eng": "words", "plot/fra": "mots", "poster": "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy",
                "released": "2019-05-01", "info": "{\"a\": 1}", "cids/bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy": "true"}),
    )
    .await;
    a.ok_json("PATCH", &format!("/meta/{r2}"), &json!({"year": "unknown"}))
        .await;
    let schema = a.get_ok("/api/schema").await;
    assert_eq!(schema["source"], "live");
    assert!(schema["generated_at"].as_str().unwrap().starts_with("20"));
    let f = &schema["fields"];
    assert_eq!(f["year"]["type"], "mixed", "{f}");
    assert_eq!(f["year"]["breakdown"], json!({"int": 1, "string": 1}));
    assert_eq!(
        f["added"],
        json!({"type": "int", "hint": "timestamp", "breakdown": {"timestamp": 1}})
    );
    assert_eq!(f["rating"]["type"], "float");
    assert_eq!(f["watched"]["type"], "bool");
    assert_eq!(f["plot"]["key_hint"], "language-code");
    assert_eq!(f["plot"]["breakdown"], json!({"string": 2}));
    assert_eq!(f["poster"]["hint"], "cid");
    assert_eq!(f["released"]["hint"], "timestamp");
    assert_eq!(f["info"]["type"], "json-object");
    assert!(
        !f.as_object().unwrap().keys().any(|k| k.starts_with("cids")),
        "{f}"
    );

    // A change moves the value; a delete takes it off.
    a.ok_json("PATCH", &format!("/meta/{r2}"), &json!({"year": "2001"}))
        .await;
    a.send("DELETE", &format!("/meta/{r1}/rating"), "", &[])
        .await;
    let f = a.get_ok("/api/schema").await["fields"].clone();
    assert_eq!(f["year"], json!({"type": "int", "breakdown": {"int": 2}}));
    assert!(f.get("rating").is_none(), "{f}");

    // The rescan is an admin route, and counts the same.
    a.send("POST", "/api/schema/rescan", "", &[])
        .await
        .assert_error(401, "unauthorized");
    let r = a
        .send(
            "POST",
            "/api/schema/rescan",
            "",
            &[("authorization", "Bearer sekret")],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = r.json();
    assert_eq!(r["schema"]["source"], "rescan");
    assert_eq!(r["schema"]["fields"], f);
    // The first record's eight left besides its cids/ member, the second's one.
    assert_eq!(r["published_events"], 9, "{r}");
}

/// One rescan at a time (issue 23, N17): of two rescans asked for
/// together, one is answered 200 and the other 409 `conflict` (retryable,
/// saying a rescan is under way), and one asked for after the first has
/// finished is a 200 again. The overlap is made certain, not timed:
/// storaged is stopped (SIGSTOP) while both are sent, so the one apid
/// relays first cannot finish before the other is answered, and storaged
/// is let go (SIGCONT) only once that answer came.
#[tokio::test]
async fn a_rescan_asked_for_while_one_runs_is_a_conflict() {
    use futures_util::StreamExt;
    use rustix::process::{Pid, Signal, kill_process};
    let dir = e2e::daemon::test_dir();
    let s = Launch::in_dir(dir.path()).start().await;
    let a = Apid::start(&s).await;
    for i in 0..50 {
        let rid = random_rid();
        a.ok_json(
            "PATCH",
            &format!("/meta/{rid}"),
            &json!({"year": format!("{}", 1950 + i), "title": format!("t{i}")}),
        )
        .await;
    }
    let signal = |sig| {
        kill_process(Pid::from_raw(s.pid() as i32).unwrap(), sig).unwrap();
    };
    // The held rescan waits for storaged as long as the test keeps it
    // stopped: a generous deadline, a hang guard only.
    let admin = a.admin().with_deadline(e2e::wait::DAEMON_DEADLINE * 3);
    signal(Signal::STOP);
    let mut both: futures_util::stream::FuturesUnordered<_> = (0..2)
        .map(|_| admin.send("POST", "/api/schema/rescan", "", &[]))
        .collect();
    let refused = e2e::wait::within(
        "one of two rescans to be answered while storaged is stopped",
        e2e::wait::DAEMON_DEADLINE,
        both.next(),
    )
    .await
    .unwrap();
    signal(Signal::CONT);
    // `assert_error` holds a 4xx to `retryable: false`; this one is
    // retryable (the error table's `conflict`).
    assert_eq!(refused.status, 409, "{}", refused.text());
    let envelope = refused.json();
    assert_eq!(
        (&envelope["error"], &envelope["retryable"]),
        (&json!("conflict"), &json!(true)),
        "{envelope}"
    );
    assert!(
        envelope["message"]
            .as_str()
            .unwrap()
            .contains("rescan is under way"),
        "{envelope}"
    );
    let held = both.next().await.unwrap();
    assert_eq!(held.status, 200, "{}", held.text());
    assert_eq!(held.json()["published_events"], 100);

    let after = admin.send("POST", "/api/schema/rescan", "", &[]).await;
    assert_eq!(after.status, 200, "{}", after.text());
    assert_eq!(after.json()["schema"]["source"], "rescan");
}
