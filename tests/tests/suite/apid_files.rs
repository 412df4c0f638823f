//! File bytes by content ID over real HTTP: `GET|HEAD /file/{cid}` with
//! ranges and validators, `GET /api/file/{cid}/info`, `POST /file/cid`,
//! and the confinement of every path to `FILES_PATH`.

use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use e2e::fixtures::random_midhash;
use e2e::raw_http::RawResponse;
use e2e::{Apid, Storaged};
use metacore::cid::Cid;
use serde_json::json;
use sha2::{Digest, Sha256};

async fn start() -> (Storaged, Apid) {
    let s = Storaged::start().await;
    let a = Apid::start(&s).await;
    (s, a)
}

/// Writes `bytes` at `rel` under FILES_PATH and a record for it by a new
/// midhash CID (as a watcher or sorter would); returns the CID and path.
async fn file(a: &Apid, rel: &str, bytes: &[u8]) -> (Cid, PathBuf) {
    let path = a.files_path().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    let cid = record_at(a, &path.display().to_string()).await;
    (cid, path)
}

async fn record_at(a: &Apid, file_path: &str) -> Cid {
    let cid = random_midhash();
    a.ok_json(
        "PATCH",
        &format!("/meta/{cid}"),
        &json!({ "filePath": file_path }),
    )
    .await;
    cid
}

fn body(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 251) as u8).collect()
}

async fn get(a: &Apid, path: &str, headers: &[(&str, &str)]) -> RawResponse {
    a.send("GET", path, "", headers).await
}

#[tokio::test]
async fn a_file_by_cid_comes_whole_or_by_ranges() {
    let (_s, a) = start().await;
    let bytes = body(100_000);
    let (cid, _) = file(&a, "watch/Film (2020).mkv", &bytes).await;
    let url = format!("/file/{cid}");

    let r = get(&a, &url, &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, bytes);
    assert_eq!(r.header("content-type"), Some("video/x-matroska"));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    assert_eq!(r.header("content-length"), Some("100000"));
    let etag = r.header("etag").unwrap().to_owned();
    let modified = r.header("last-modified").unwrap().to_owned();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");

    let h = a.send("HEAD", &url, "", &[]).await;
    assert_eq!(h.status, 200);
    assert!(h.body.is_empty());
    assert_eq!(h.header("etag"), Some(etag.as_str()));

    for (range, first, last) in [
        ("bytes=10-19", 10usize, 19usize),
        ("bytes=99990-", 99_990, 99_999),
        ("bytes=-5", 99_995, 99_999),
        ("bytes=99995-200000", 99_995, 99_999),
    ] {
        let r = get(&a, &url, &[("range", range)]).await;
        assert_eq!(r.status, 206, "{range}");
        assert_eq!(r.body, &bytes[first..=last], "{range}");
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes {first}-{last}/100000").as_str()),
            "{range}"
        );
    }

    // Two ranges: a multipart answer whose parts are the exact bytes.
    let r = get(&a, &url, &[("range", "bytes=0-3,50000-50009")]).await;
    assert_eq!(r.status, 206);
    let ct = r.header("content-type").unwrap().to_owned();
    let boundary = ct
        .strip_prefix("multipart/byteranges; boundary=")
        .expect(&ct);
    assert_eq!(
        r.header("content-length").unwrap(),
        r.body.len().to_string()
    );
    let text = r.body.clone();
    let parts: Vec<&[u8]> = split(&text, format!("\r\n--{boundary}").as_bytes());
    assert_eq!(parts.len(), 4, "preamble, two parts, closing");
    for (part, (first, last)) in parts[1..3].iter().zip([(0usize, 3usize), (50_000, 50_009)]) {
        let at = find(part, b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&part[..at]);
        assert!(
            head.contains(&format!("Content-Range: bytes {first}-{last}/100000")),
            "{head}"
        );
        assert_eq!(&part[at + 4..], &bytes[first..=last]);
    }

    // Past the end: 416 with the size.
    let r = get(&a, &url, &[("range", "bytes=100000-")]).await;
    assert_eq!(r.status, 416);
    assert_eq!(r.header("content-range"), Some("bytes */100000"));

    // Validators.
    assert_eq!(get(&a, &url, &[("if-none-match", &etag)]).await.status, 304);
    assert_eq!(
        get(&a, &url, &[("if-modified-since", &modified)])
            .await
            .status,
        304
    );
    assert_eq!(get(&a, &url, &[("if-match", "\"nope\"")]).await.status, 412);
    assert_eq!(get(&a, &url, &[("if-match", &etag)]).await.status, 200);
    let r = get(&a, &url, &[("range", "bytes=0-0"), ("if-range", &etag)]).await;
    assert_eq!((r.status, r.body.len()), (206, 1));
    let r = get(&a, &url, &[("range", "bytes=0-0"), ("if-range", "\"old\"")]).await;
    assert_eq!(
        (r.status, r.body.len()),
        (200, 100_000),
        "a stale If-Range gets it all"
    );
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn split<'a>(hay: &'a [u8], sep: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = hay;
    while let Some(at) = find(rest, sep) {
        out.push(&rest[..at]);
        rest = &rest[at + sep.len()..];
    }
    out.push(rest);
    out
}

#[tokio::test]
async fn ranges_reach_the_end_of_a_multi_gigabyte_sparse_file() {
    let (_s, a) = start().await;
    let path = a.files_path().join("watch/big.mkv");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let size: u64 = (5 << 30) + 3;
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(size).unwrap();
    f.write_all_at(b"the end", size - 7).unwrap();
    f.write_all_at(b"past 4 GiB", 1 << 32).unwrap();
    let cid = record_at(&a, &path.display().to_string()).await;
    let url = format!("/file/{cid}");
    let r = get(&a, &url, &[("range", &format!("bytes={}-", size - 7))]).await;
    assert_eq!((r.status, r.body.as_slice()), (206, &b"the end"[..]));
    let r = get(
        &a,
        &url,
        &[(
            "range",
            &format!("bytes={}-{}", 1u64 << 32, (1u64 << 32) + 9),
        )],
    )
    .await;
    assert_eq!((r.status, r.body.as_slice()), (206, &b"past 4 GiB"[..]));
    let r = get(&a, &url, &[("range", "bytes=-7")]).await;
    assert_eq!(r.body, b"the end");
    let h = a.send("HEAD", &url, "", &[]).await;
    assert_eq!(h.header("content-length"), Some(size.to_string().as_str()));
}

#[tokio::test]
async fn info_says_whether_the_file_is_there_and_a_gone_file_is_a_404() {
    let (_s, a) = start().await;
    let (cid, path) = file(&a, "plugin/poster.JPG", b"jpeg bytes").await;
    // filePath is stored absolute and shown relative to FILES_PATH, as
    // the original showed it.
    let info = a.get_ok(&format!("/api/file/{cid}/info")).await;
    assert_eq!(
        info,
        json!({"exists": true, "contentType": "image/jpeg", "size": 10,
               "filePath": "/plugin/poster.JPG"})
    );
    assert_eq!(
        a.get_ok(&format!("/meta/{cid}")).await["metadata"]["filePath"],
        path.display().to_string()
    );
    // A record written with the conventional /files prefix or relative
    // is shown the same way.
    for stored in ["/files/plugin/poster.JPG", "plugin/poster.JPG"] {
        let other = record_at(&a, stored).await;
        assert_eq!(
            a.get_ok(&format!("/api/file/{other}/info")).await["filePath"],
            "/plugin/poster.JPG",
            "{stored}"
        );
    }
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        a.get_ok(&format!("/api/file/{cid}/info")).await,
        json!({"exists": false})
    );
    a.get(&format!("/file/{cid}"))
        .await
        .assert_error(404, "unknown_cid");
    // Unknown CID: the same.
    let unknown = random_midhash();
    assert_eq!(
        a.get_ok(&format!("/api/file/{unknown}/info")).await,
        json!({"exists": false})
    );
    a.get(&format!("/file/{unknown}"))
        .await
        .assert_error(404, "unknown_cid");
    // Not a CID at all.
    a.get("/api/file/not-a-cid/info")
        .await
        .assert_error(400, "schema_violation");
    a.get("/file/Qm123")
        .await
        .assert_error(400, "schema_violation");
}

#[tokio::test]
async fn no_path_leads_out_of_files_path() {
    let (_s, a) = start().await;
    let files = a.files_path();
    std::fs::create_dir_all(files.join("watch")).unwrap();
    let secret = a.dir().join("secret.txt");
    std::fs::write(&secret, b"do not serve").unwrap();
    std::os::unix::fs::symlink(&secret, files.join("watch/link.mkv")).unwrap();
    std::os::unix::fs::symlink("/etc", files.join("watch/etc")).unwrap();
    for fp in [
        files.join("watch/link.mkv").display().to_string(),
        files.join("watch/etc/passwd").display().to_string(),
        secret.display().to_string(),
        format!("{}/../secret.txt", files.display()),
        "/etc/passwd".to_owned(),
    ] {
        let cid = record_at(&a, &fp).await;
        let r = a.get(&format!("/file/{cid}")).await;
        r.assert_error(404, "unknown_cid");
        assert!(
            !r.text().contains("secret") && !r.text().contains("/etc"),
            "{}",
            r.text()
        );
        assert_eq!(
            a.get_ok(&format!("/api/file/{cid}/info")).await,
            json!({"exists": false}),
            "{fp}"
        );
    }
    // /data/{hash}/path maps the same paths and never says what is
    // outside: a path out is 404, a symlink out is not there.
    for (fp, want) in [
        (format!("{}/../secret.txt", files.display()), None),
        ("/etc/passwd".to_owned(), None),
        ("watch/../../secret.txt".to_owned(), None),
        (
            files.join("watch/link.mkv").display().to_string(),
            Some(false),
        ),
        (
            files.join("watch/etc/passwd").display().to_string(),
            Some(false),
        ),
    ] {
        let cid = record_at(&a, &fp).await;
        let r = a.get(&format!("/data/{cid}/path")).await;
        match want {
            None => r.assert_error(404, "not_found"),
            Some(exists) => {
                assert_eq!(r.status, 200, "{fp}: {}", r.text());
                assert_eq!(r.json()["exists"], exists, "{fp}");
            }
        }
        assert!(!r.text().contains("do not serve"));
    }
    // A FIFO is not a file to send: answered at once, nothing waits on it.
    let fifo = files.join("watch/pipe.mkv");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let cid = record_at(&a, &fifo.display().to_string()).await;
    a.get(&format!("/file/{cid}"))
        .await
        .assert_error(404, "unknown_cid");
    assert_eq!(
        a.get_ok(&format!("/api/file/{cid}/info")).await,
        json!({"exists": false})
    );
    a.send_json("POST", "/file/cid", &json!({"path": "watch/pipe.mkv"}))
        .await
        .assert_error(404, "not_found");
    for bad in [
        "../secret.txt",
        "watch/../../secret.txt",
        "/etc/passwd",
        "watch/link.mkv",
        "watch/etc/passwd",
        "watch/a\u{0}b",
        "",
    ] {
        let r = a
            .send_json("POST", "/file/cid", &json!({ "path": bad }))
            .await;
        assert!(r.status == 400 || r.status == 404, "{bad:?}: {}", r.text());
        assert!(!r.text().contains("do not serve"));
    }
}

#[tokio::test]
async fn the_cid_of_a_path_is_its_whole_file_sha256() {
    let (_s, a) = start().await;
    let bytes = body(3 << 20);
    let path = a.files_path().join("plugin/out/a.bin");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let r = a
        .ok_json("POST", "/file/cid", &json!({"path": "plugin/out/a.bin"}))
        .await;
    let want = Cid::from_digest(0x55, 0x12, &Sha256::digest(&bytes));
    assert_eq!(
        r,
        json!({"cid": want.to_string(), "path": "plugin/out/a.bin", "size": bytes.len()})
    );
    a.send_json("POST", "/file/cid", &json!({"path": "plugin/out"}))
        .await
        .assert_error(400, "bad_request");
    a.send_json("POST", "/file/cid", &json!({"path": "plugin/missing.bin"}))
        .await
        .assert_error(404, "not_found");
    a.send_json("POST", "/file/cid", &json!({"file": "x"}))
        .await
        .assert_error(400, "schema_violation");
}
