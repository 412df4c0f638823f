//! The snapshot routes through apid's real HTTP: export a ZIP, wipe,
//! import the same bytes (raw and multipart), and the record rows come
//! back identical; the routes' own errors (scope, bad archive) are 400s.

use e2e::fixtures::random_midhash;
use e2e::snapshot::{Rows, dump, with_prefix};
use e2e::{Apid, Storaged};
use serde_json::json;

fn record_rows(rows: &Rows) -> Rows {
    ["file:", "cid:", "idx:roots/"]
        .iter()
        .flat_map(|p| with_prefix(rows, p).map(|(k, v)| (k.clone(), v.clone())))
        .collect()
}

#[tokio::test]
async fn export_wipe_import_over_http_gives_back_the_same_rows() {
    let s = Storaged::start().await;
    let a = Apid::start(&s).await;
    for i in 0..20 {
        let body = json!({"title": format!("t{i}"), "n": "007", "e": "", "a": "x", "a/b": "y", "list/0": "p"});
        let r = a
            .send_json("PATCH", &format!("/meta/{}", random_midhash()), &body)
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let before = record_rows(&dump(&s.db_path()));

    let export = a.get("/api/snapshot/export").await;
    assert_eq!(export.status, 200, "{}", export.text());
    assert_eq!(export.header("content-type"), Some("application/zip"));
    let disposition = export.header("content-disposition").unwrap_or_default();
    assert!(
        disposition.contains("metamesh-snapshot-") && disposition.contains(".zip"),
        "{disposition}"
    );
    assert_eq!(&export.body[..2], b"PK", "a ZIP archive");

    a.send_json("POST", "/api/snapshot/wipe", &json!(null))
        .await
        .assert_error(400, "bad_request");
    let wipe = a
        .send_json("POST", "/api/snapshot/wipe?scope=metadata", &json!(null))
        .await;
    assert_eq!(wipe.status, 200, "{}", wipe.text());
    assert_eq!(wipe.json()["metadataDeleted"], 20);
    assert!(
        record_rows(&dump(&s.db_path())).is_empty(),
        "wipe leaves no record rows"
    );

    let zip = export.body.clone();
    let imported = a
        .send(
            "POST",
            "/api/snapshot/import?mode=replace",
            zip.clone(),
            &[("content-type", "application/zip")],
        )
        .await;
    assert_eq!(imported.status, 200, "{}", imported.text());
    let report = imported.json();
    assert_eq!(
        (report["totalFiles"].as_u64(), report["filesOk"].as_u64()),
        (Some(20), Some(20)),
        "{report}"
    );
    assert_eq!(
        record_rows(&dump(&s.db_path())),
        before,
        "an import of an export gives back the same rows"
    );

    // The same archive as a multipart upload, dry run: counted, nothing written.
    let boundary = "----metacoreboundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"snapshot\"; filename=\"s.zip\"\r\nContent-Type: application/zip\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&zip);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let ctype = format!("multipart/form-data; boundary={boundary}");
    let dry = a
        .send(
            "POST",
            "/api/snapshot/import?dry_run=true",
            body,
            &[("content-type", ctype.as_str())],
        )
        .await;
    assert_eq!(dry.status, 200, "{}", dry.text());
    assert_eq!(dry.json()["dryRun"], true);
    assert_eq!(
        record_rows(&dump(&s.db_path())),
        before,
        "a dry run writes nothing"
    );

    let bad = a
        .send(
            "POST",
            "/api/snapshot/import",
            b"not a zip".to_vec(),
            &[("content-type", "application/zip")],
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert_eq!(
        record_rows(&dump(&s.db_path())),
        before,
        "a refused import writes nothing"
    );
}
