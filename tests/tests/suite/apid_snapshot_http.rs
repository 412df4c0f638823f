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

    a.admin()
        .send_json("POST", "/api/snapshot/wipe", &json!(null))
        .await
        .assert_error(400, "bad_request");
    let wipe = a
        .admin()
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
        .admin()
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
        .admin()
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
        .admin()
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

/// A ZIP in memory of `(name, bytes)` entries, deflated.
fn zip_of(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in entries {
        zip.start_file(name.as_str(), opts).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

fn manifest() -> (String, Vec<u8>) {
    (
        "manifest.json".into(),
        br#"{"schemaVersion":2,"fileCount":1}"#.to_vec(),
    )
}

fn a_record() -> (String, Vec<u8>) {
    (
        format!("metadata/{}.json", e2e::fixtures::random_rid()),
        br#"{"title":"bomb"}"#.to_vec(),
    )
}

async fn import(a: &Apid, zip: Vec<u8>) -> e2e::raw_http::RawResponse {
    a.admin()
        .send(
            "POST",
            "/api/snapshot/import?mode=merge",
            zip,
            &[("content-type", "application/zip")],
        )
        .await
}

/// An archive that expands past META_CORE_IMPORT_MAX_BYTES (a "bomb" of
/// zeros) or holds more entries than META_CORE_IMPORT_MAX_ENTRIES is
/// refused whole: 413, no record imported, no file written (issue 13,
/// point 1).
#[tokio::test]
async fn an_archive_past_the_bounds_is_refused_with_nothing_written() {
    let s = Storaged::start().await;
    let a = Apid::start_with(
        &s,
        &[
            ("META_CORE_IMPORT_MAX_BYTES", &(4u64 << 20).to_string()),
            ("META_CORE_IMPORT_MAX_ENTRIES", "500"),
        ],
    )
    .await;
    let plugin = a.files_path().join("plugin");
    let before = dump(&s.db_path());

    // 8 MiB of zeros deflate to a few KiB.
    let bomb = zip_of(&[
        manifest(),
        a_record(),
        ("cache/plugin-output/zeros.bin".into(), vec![0u8; 8 << 20]),
    ]);
    assert!(bomb.len() < 64 << 10, "{} bytes", bomb.len());
    let r = import(&a, bomb).await;
    r.assert_error(413, "payload_too_large");
    assert!(
        r.text().contains("META_CORE_IMPORT_MAX_BYTES"),
        "{}",
        r.text()
    );

    let mut many = vec![manifest(), a_record()];
    for i in 0..600 {
        many.push((format!("cache/plugin-output/f{i}"), b"x".to_vec()));
    }
    let r = import(&a, zip_of(&many)).await;
    r.assert_error(413, "payload_too_large");
    assert!(
        r.text().contains("META_CORE_IMPORT_MAX_ENTRIES"),
        "{}",
        r.text()
    );

    assert_eq!(dump(&s.db_path()), before, "no record was imported");
    assert!(
        !plugin.exists() || std::fs::read_dir(&plugin).unwrap().next().is_none(),
        "no plugin output was written"
    );
    // Within the bounds the same shape imports.
    let ok = zip_of(&[
        manifest(),
        a_record(),
        ("cache/plugin-output/small.bin".into(), vec![0u8; 1 << 20]),
    ]);
    let r = import(&a, ok).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        std::fs::metadata(plugin.join("small.bin")).unwrap().len(),
        1 << 20
    );
}

/// Plugin output larger than the free space where it goes is refused
/// before anything is written: 507 `insufficient_storage`.
#[tokio::test]
async fn plugin_output_larger_than_the_free_space_is_refused() {
    let s = Storaged::start().await;
    let a = Apid::start(&s).await;
    let plugin = a.files_path().join("plugin");
    let _small = e2e::mount::Tmpfs::at(&plugin, "2m");
    let before = dump(&s.db_path());
    let zip = zip_of(&[
        manifest(),
        a_record(),
        ("cache/plugin-output/big.bin".into(), vec![7u8; 3 << 20]),
    ]);
    let r = import(&a, zip).await;
    r.assert_error(507, "insufficient_storage");
    assert_eq!(dump(&s.db_path()), before, "no record was imported");
    assert!(std::fs::read_dir(&plugin).unwrap().next().is_none());
}
