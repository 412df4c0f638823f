//! apid and storaged living and dying apart: apid answers 503 with
//! `Retry-After` while storaged is away and works again, without its own
//! restart, once storaged is back; apid stops cleanly on SIGTERM.

use e2e::daemon::test_dir;
use e2e::fixtures::{fields, random_rid};
use e2e::raw_http::RawResponse;
use e2e::snapshot::{assert_sound, dump, record};
use e2e::wait::{self, DAEMON_DEADLINE};
use e2e::{Apid, Storaged};
use serde_json::json;

/// A 503 `storage_unavailable` with a `Retry-After` of whole seconds.
fn assert_unavailable(r: &RawResponse, what: &str) {
    r.assert_error(503, "storage_unavailable");
    let after = r
        .header("retry-after")
        .unwrap_or_else(|| panic!("{what}: no Retry-After in {:?}", r.headers));
    assert!(
        after.parse::<u32>().is_ok_and(|s| s >= 1),
        "{what}: Retry-After {after:?}"
    );
}

async fn assert_degraded(a: &Apid) {
    let h = a.get("/health").await;
    assert_eq!(h.status, 200, "/health is always 200");
    let v = h.json();
    assert_eq!(
        (v["status"].clone(), v["redis"].clone()),
        (json!("degraded"), json!(false)),
        "{v}"
    );
    assert_eq!(v["leader"]["pid"], a.process().pid());
}

/// Polls until `PATCH /meta/<rid>` succeeds again.
async fn until_writable(a: &Apid, rid: &str, body: &serde_json::Value) {
    wait::until(
        "apid to write through storaged again",
        DAEMON_DEADLINE,
        || async {
            (a.send_json("PATCH", &format!("/meta/{rid}"), body)
                .await
                .status
                == 200)
                .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn storaged_killed_gives_503_then_apid_recovers_when_it_is_back() {
    let mut s = Storaged::start().await;
    let a = Apid::start(&s).await;
    let rid = random_rid().to_string();
    let r = a
        .send_json("PATCH", &format!("/meta/{rid}"), &json!({"title": "T"}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());

    s.kill9();
    assert_unavailable(&a.get(&format!("/meta/{rid}")).await, "GET /meta");
    assert_unavailable(
        &a.send_json("PATCH", &format!("/meta/{rid}"), &json!({"year": "1999"}))
            .await,
        "PATCH",
    );
    assert_unavailable(&a.get("/meta").await, "GET /meta");
    assert_unavailable(&a.get("/api/stats").await, "GET /api/stats");
    let head = a.send("HEAD", &format!("/data/{rid}"), "", &[]).await;
    assert_eq!(head.status, 503, "HEAD /data while storaged is away");
    assert!(
        head.header("retry-after").is_some(),
        "a 503 carries Retry-After (CONTRACT 2): {:?}",
        head.headers
    );
    assert_degraded(&a).await;
    let st = a.get("/status").await;
    assert_eq!((st.status, st.json()["redis"].clone()), (200, json!(false)));

    s.restart().await;
    until_writable(&a, &rid, &json!({"year": "1999"})).await;
    let v = a.get(&format!("/meta/{rid}")).await;
    assert_eq!(v.status, 200, "{}", v.text());
    assert_eq!(v.json()["metadata"], json!({"title": "T", "year": "1999"}));
    let h = a.get("/health").await.json();
    assert_eq!(
        (h["status"].clone(), h["redis"].clone()),
        (json!("ok"), json!(true))
    );

    let rows = dump(&s.db_path());
    assert_eq!(
        record(&rows, &rid),
        fields(&[("title", "T"), ("year", "1999")]),
        "only the accepted writes"
    );
    assert_sound(&rows);
}

#[tokio::test]
async fn apid_started_before_storaged_answers_503_then_works() {
    let dir = test_dir();
    let a = Apid::start_in(dir.path(), &[]).await;
    let rid = random_rid().to_string();
    assert_unavailable(&a.get(&format!("/meta/{rid}")).await, "GET before storaged");
    assert_unavailable(
        &a.send_json("PATCH", &format!("/meta/{rid}"), &json!({"t": "1"}))
            .await,
        "PATCH",
    );
    assert_degraded(&a).await;

    let s = Storaged::start_in(dir.path()).await;
    until_writable(&a, &rid, &json!({"t": "1"})).await;
    let v = a.get(&format!("/meta/{rid}")).await;
    assert_eq!(v.status, 200, "{}", v.text());
    assert_eq!(v.json(), json!({"hashId": rid, "metadata": {"t": "1"}}));
    assert_eq!(record(&dump(&s.db_path()), &rid), fields(&[("t", "1")]));
}

#[tokio::test]
async fn apid_exits_0_on_sigterm() {
    let s = Storaged::start().await;
    let mut a = Apid::start(&s).await;
    assert_eq!(a.get("/health").await.status, 200);
    a.process().sigterm();
    let status = a.process_mut().wait_exit().await;
    assert!(
        status.success(),
        "apid exits 0 on SIGTERM, got {status}; its stderr:\n{}",
        a.process().stderr()
    );
    assert!(
        !a.dir().join("run/apid.sock").exists(),
        "apid removes its socket on an orderly stop"
    );
}
