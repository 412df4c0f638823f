//! The snapshot routes through apid's real HTTP: export a ZIP, wipe,
//! import the same bytes (raw and multipart), and the record rows come
//! back identical; the routes' own errors (scope, bad archive) are 400s;
//! an archive past its bounds is refused whole, and an entry that is not
//! what its header declares (CRC-32, size) is skipped and reported.

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
        ("cache/plugin-output/sub/dir/x.txt".into(), b"x".to_vec()),
    ]);
    let r = import(&a, ok).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        std::fs::metadata(plugin.join("small.bin")).unwrap().len(),
        1 << 20
    );
    // What other containers read is theirs to read (N17), whatever apid's
    // umask (077).
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for f in [plugin.join("small.bin"), plugin.join("sub/dir/x.txt")] {
        assert_eq!(mode(&f), 0o644, "{}", f.display());
    }
    for d in [plugin.clone(), plugin.join("sub"), plugin.join("sub/dir")] {
        assert_eq!(mode(&d), 0o755, "{}", d.display());
    }
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

/// One entry of a crafted archive: its name, its bytes, how they are
/// stored, and the lie its headers tell.
struct Crafted {
    name: String,
    bytes: Vec<u8>,
    method: zip::CompressionMethod,
    lie: Option<Lie>,
}

#[derive(Clone, Copy)]
enum Lie {
    /// A CRC-32 that is not the data's.
    Crc,
    /// A declared size this many bytes off the data's (negative: fewer).
    Size(i64),
    /// This declared size, whatever the data.
    Declares(u32),
}

/// A ZIP of `entries`, each header then rewritten as its [`Lie`] says, in
/// the local header and in the central directory alike.
fn crafted(entries: &[Crafted]) -> Vec<u8> {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for e in entries {
        let opts = zip::write::SimpleFileOptions::default().compression_method(e.method);
        zip.start_file(e.name.as_str(), opts).unwrap();
        zip.write_all(&e.bytes).unwrap();
    }
    let mut bytes = zip.finish().unwrap().into_inner();
    for e in entries {
        match e.lie {
            None => {}
            Some(Lie::Crc) => {
                let crc = header_field(&bytes, &e.name, 0);
                patch_header(&mut bytes, &e.name, 0, crc ^ 0x5a5a_5a5a);
            }
            Some(Lie::Size(off)) => {
                let size = (e.bytes.len() as i64 + off) as u32;
                patch_header(&mut bytes, &e.name, 8, size);
            }
            Some(Lie::Declares(size)) => patch_header(&mut bytes, &e.name, 8, size),
        }
    }
    bytes
}

/// Where `name`'s headers are: (offset of the header, of its CRC-32) for
/// the local header and the central directory entry. The CRC, compressed
/// size and declared size follow each other (4 bytes each).
fn headers(zip: &[u8], name: &str) -> Vec<usize> {
    // (signature, offset of the name length, of the name, of the CRC-32)
    let kinds = [(*b"PK\x03\x04", 26, 30, 14), (*b"PK\x01\x02", 28, 46, 16)];
    let mut found = Vec::new();
    for (sig, len_at, name_at, crc_at) in kinds {
        for at in 0..zip.len().saturating_sub(name_at) {
            let len = || u16::from_le_bytes([zip[at + len_at], zip[at + len_at + 1]]) as usize;
            if zip[at..at + 4] == sig
                && zip.get(at + name_at..at + name_at + len()) == Some(name.as_bytes())
            {
                found.push(at + crc_at);
            }
        }
    }
    assert_eq!(
        found.len(),
        2,
        "{name}: one local header, one central entry"
    );
    found
}

fn header_field(zip: &[u8], name: &str, field: usize) -> u32 {
    let at = headers(zip, name)[0] + field;
    u32::from_le_bytes(zip[at..at + 4].try_into().unwrap())
}

fn patch_header(zip: &mut [u8], name: &str, field: usize, value: u32) {
    for at in headers(zip, name) {
        zip[at + field..at + field + 4].copy_from_slice(&value.to_le_bytes());
    }
}

fn record_entry(
    rid: &str,
    title: &str,
    method: zip::CompressionMethod,
    lie: Option<Lie>,
) -> Crafted {
    Crafted {
        name: format!("metadata/{rid}.json"),
        bytes: json!({"title": title, "plot": {"eng": "a plot long enough to deflate"}})
            .to_string()
            .into_bytes(),
        method,
        lie,
    }
}

/// Each entry's bytes are held to its header (issue 23, N16): a record or
/// a plugin file whose CRC-32 is wrong, or that declares fewer or more
/// bytes than it holds, is skipped and reported, and nothing of it reaches
/// the store or the disk; the good entries beside them are imported.
#[tokio::test]
async fn entries_that_are_not_what_their_headers_declare_are_skipped_and_reported() {
    use zip::CompressionMethod::{Deflated, Stored};
    let s = Storaged::start().await;
    let a = Apid::start(&s).await;
    let plugin = a.files_path().join("plugin");
    let rid = || e2e::fixtures::random_rid().to_string();
    let (good, also_good) = (rid(), rid());
    // The zip crate catches the first two only when the entry is read to
    // its end; the third it does not catch at all.
    let bad = [
        (rid(), Deflated, Lie::Crc),
        (rid(), Deflated, Lie::Size(-7)),
        (rid(), Stored, Lie::Size(7)),
    ];
    let plugin_file = |name: &str, method, lie| Crafted {
        name: format!("cache/plugin-output/{name}"),
        bytes: format!("{name}: plugin output, some bytes of it").into_bytes(),
        method,
        lie,
    };
    let mut entries = vec![
        Crafted {
            name: "manifest.json".into(),
            bytes: br#"{"schemaVersion":2,"fileCount":5}"#.to_vec(),
            method: Deflated,
            lie: None,
        },
        record_entry(&good, "good", Deflated, None),
    ];
    for (rid, method, lie) in &bad {
        entries.push(record_entry(rid, "bad", *method, Some(*lie)));
    }
    entries.extend([
        record_entry(&also_good, "also good", Stored, None),
        plugin_file("good.bin", Deflated, None),
        plugin_file("crc.bin", Stored, Some(Lie::Crc)),
        plugin_file("fewer.bin", Deflated, Some(Lie::Size(-7))),
        plugin_file("more.bin", Stored, Some(Lie::Size(7))),
    ]);
    let r = import(&a, crafted(&entries)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let report = r.json();
    assert_eq!(
        (
            &report["totalFiles"],
            &report["filesOk"],
            &report["filesFailed"]
        ),
        (&json!(5), &json!(2), &json!(3)),
        "{report:#}"
    );
    let files = report["files"].as_array().unwrap();
    for (rid, _, _) in &bad {
        let file = files.iter().find(|f| f["hashId"] == rid.as_str()).unwrap();
        let error = file["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("declares") || error.contains("damaged"),
            "{file}"
        );
    }
    let plugin_report = &report["pluginOutput"];
    assert_eq!(
        (&plugin_report["written"], &plugin_report["skipped"]),
        (&json!(1), &json!(3)),
        "{plugin_report:#}"
    );
    let skipped: Vec<&str> = plugin_report["skippedFiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(skipped, ["crc.bin", "fewer.bin", "more.bin"]);

    let rows = dump(&s.db_path());
    assert_eq!(e2e::snapshot::record(&rows, &good)["title"], "good");
    assert_eq!(
        e2e::snapshot::record(&rows, &also_good)["title"],
        "also good"
    );
    for (rid, _, _) in &bad {
        assert_eq!(
            e2e::snapshot::keys_naming(&rows, rid),
            Vec::<String>::new(),
            "nothing of a bad entry is stored"
        );
    }
    e2e::snapshot::assert_sound(&rows);
    let mut on_disk: Vec<String> = std::fs::read_dir(&plugin)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    assert_eq!(on_disk, ["good.bin"], "no bad file, no part file");
}

/// The default expansion bound is twice the upload limit (issue 23, N16):
/// an archive declaring 11.25 GiB (under the old 16 GiB default) is a 413
/// before any record, even the good one ahead of the big entries, is
/// imported.
#[tokio::test]
async fn an_archive_declaring_more_than_the_default_expansion_is_refused_whole() {
    use zip::CompressionMethod::Deflated;
    let s = Storaged::start().await;
    let a = Apid::start(&s).await;
    let before = dump(&s.db_path());
    let mut entries = vec![
        Crafted {
            name: "manifest.json".into(),
            bytes: br#"{"schemaVersion":2,"fileCount":4}"#.to_vec(),
            method: Deflated,
            lie: None,
        },
        record_entry(
            &e2e::fixtures::random_rid().to_string(),
            "good",
            Deflated,
            None,
        ),
    ];
    for _ in 0..3 {
        let rid = e2e::fixtures::random_rid().to_string();
        entries.push(record_entry(
            &rid,
            "big",
            Deflated,
            Some(Lie::Declares(0xF000_0000)),
        ));
    }
    let zip = crafted(&entries);
    assert!(zip.len() < 64 << 10, "{} bytes", zip.len());
    let r = import(&a, zip).await;
    r.assert_error(413, "payload_too_large");
    assert!(
        r.text().contains("META_CORE_IMPORT_MAX_BYTES"),
        "{}",
        r.text()
    );
    assert!(
        r.text().contains("4294967296"),
        "the default bound: {}",
        r.text()
    );
    assert_eq!(dump(&s.db_path()), before, "no record was imported");
}
