//! WebDAV writes are bounded (issue 23): a ranged write starts at most at
//! the end of its file (416 `bytes */<size>`), a write that does not fit
//! the free space of its filesystem is a 507 before anything is written,
//! or fails without leaving anything when a streamed body passes it, and
//! a body that stops coming is a 408 with the error envelope, on WebDAV
//! and on the JSON routes alike.

use std::time::Duration;

use e2e::fixtures::random_rid;
use e2e::wait::IO_DEADLINE;
use e2e::{Apid, Storaged};

use super::webdav_raw::{HERE, chunk, exchange};

async fn start_with(env: &[(&str, &str)]) -> (Storaged, Apid) {
    let s = Storaged::start().await;
    let a = Apid::start_with(&s, env).await;
    std::fs::create_dir_all(a.files_path().join("plugin")).unwrap();
    (s, a)
}

fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn a_ranged_write_past_the_end_is_a_416_and_makes_nothing() {
    let (_s, a) = start_with(&[]).await;
    let plugin = a.files_path().join("plugin");
    // The finding: 4 bytes at 1 TiB made a 1 TiB sparse file.
    let r = a
        .send(
            "PUT",
            "/webdav/plugin/sparse.bin",
            "abcd",
            &[("content-range", "bytes 1099511627776-1099511627779/*")],
        )
        .await;
    assert_eq!(r.status, 416, "{}", r.text());
    assert_eq!(r.header("content-range"), Some("bytes */0"));
    assert!(!plugin.join("sparse.bin").exists());
    // At the end of a file is fine (a resumed upload), past it is not.
    std::fs::write(plugin.join("f.bin"), b"0123456789").unwrap();
    let put = |range: &'static str| {
        let a = &a;
        async move {
            a.send(
                "PUT",
                "/webdav/plugin/f.bin",
                "abcd",
                &[("content-range", range)],
            )
            .await
        }
    };
    assert_eq!(put("bytes 10-13/*").await.status, 204);
    assert_eq!(put("bytes 2-5/*").await.status, 204);
    let r = put("bytes 15-18/*").await;
    assert_eq!(r.status, 416);
    assert_eq!(r.header("content-range"), Some("bytes */14"));
    assert_eq!(
        std::fs::read(plugin.join("f.bin")).unwrap(),
        b"01abcd6789abcd"
    );
    // The same with PATCH and its range header.
    let patch = |range: &'static str| {
        let a = &a;
        async move {
            a.send(
                "PATCH",
                "/webdav/plugin/f.bin",
                "xy",
                &[
                    ("content-type", "application/x-sabredav-partialupdate"),
                    ("x-update-range", range),
                ],
            )
            .await
        }
    };
    let r = patch("bytes=1000000000000-1000000000001").await;
    assert_eq!(r.status, 416, "{}", r.text());
    assert_eq!(r.header("content-range"), Some("bytes */14"));
    let r = patch("bytes=20-").await;
    assert_eq!(r.status, 416);
    assert_eq!(patch("bytes=14-15").await.status, 204);
    assert_eq!(patch("append").await.status, 204);
    let f = std::fs::metadata(plugin.join("f.bin")).unwrap();
    assert_eq!(f.len(), 18, "nothing was written past the end");
    assert_eq!(names(&plugin), ["f.bin"]);
}

#[tokio::test]
async fn a_write_larger_than_the_free_space_is_refused() {
    let (_s, a) = start_with(&[]).await;
    let small = a.files_path().join("plugin/small");
    let _mnt = e2e::mount::Tmpfs::at(&small, "1m");
    std::fs::write(small.join("keep.bin"), vec![1u8; 100 * 1024]).unwrap();
    // Declared up front: 507 before a byte of the body is read.
    let head = format!(
        "PUT /webdav/plugin/small/big.bin HTTP/1.1\r\nHost: x\r\nContent-Length: {}",
        4 << 20
    );
    let r = exchange(HERE, a.port(), &head, &[], IO_DEADLINE).await;
    r.assert_error(507, "insufficient_storage");
    // A ranged write whose end passes the room, and one far past the end
    // of a file (which never fitted), alike.
    let r = a
        .send(
            "PUT",
            "/webdav/plugin/small/keep.bin",
            vec![2u8; 16],
            &[("content-range", "bytes 102400-102415/*")],
        )
        .await;
    assert_eq!(r.status, 204, "at the end, and it fits");
    let len = 2u64 << 20;
    let range = format!("bytes 0-{}/*", len - 1);
    let head = format!(
        "PUT /webdav/plugin/small/keep.bin HTTP/1.1\r\nHost: x\r\nContent-Range: {range}\r\nContent-Length: {len}"
    );
    let r = exchange(HERE, a.port(), &head, &[], IO_DEADLINE).await;
    r.assert_error(507, "insufficient_storage");
    // Streamed (chunked, no length to refuse it by): the write fails once
    // it passes the room, the old file is intact, nothing is left.
    let piece = chunk(&vec![3u8; 256 * 1024]);
    let mut pieces: Vec<&[u8]> = vec![&piece; 8];
    pieces.push(b"0\r\n\r\n");
    let head =
        "PUT /webdav/plugin/small/keep.bin HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked";
    let r = exchange(HERE, a.port(), head, &pieces, IO_DEADLINE).await;
    assert_eq!(r.status, 507, "{}", r.text());
    assert_eq!(names(&small), ["keep.bin"]);
    let kept = std::fs::read(small.join("keep.bin")).unwrap();
    assert_eq!(kept.len(), 100 * 1024 + 16);
    assert!(kept[..100 * 1024].iter().all(|&b| b == 1));
    // What fits is written.
    let r = a
        .send("PUT", "/webdav/plugin/small/ok.bin", vec![4u8; 1000], &[])
        .await;
    assert_eq!(r.status, 201);
}

/// A body that stops coming is a 408 with the envelope, on every route
/// that reads one (N11: a WebDAV PUT answered 502).
#[tokio::test]
async fn a_stalled_body_is_a_408_everywhere() {
    let (_s, a) = start_with(&[
        ("META_CORE_HTTP_BODY_TIMEOUT_MS", "300"),
        ("META_CORE_ADMIN_TOKEN", "secret-token"),
    ])
    .await;
    let plugin = a.files_path().join("plugin");
    std::fs::write(plugin.join("keep.txt"), b"old").unwrap();
    let rid = random_rid();
    let heads = [
        "PUT /webdav/plugin/keep.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 1000".to_owned(),
        "PUT /webdav/plugin/new.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked".to_owned(),
        format!(
            "PATCH /meta/{rid} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000"
        ),
        "POST /api/snapshot/import HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret-token\r\n\
         Content-Type: application/zip\r\nContent-Length: 100000"
            .to_owned(),
    ];
    for head in &heads {
        let first: &[u8] = if head.contains("chunked") {
            b"5\r\nhello\r\n"
        } else if head.contains("json") {
            b"{\"title\": "
        } else {
            b"PK\x03\x04 a start"
        };
        // The client sends a start, then nothing: it never closes.
        let r = exchange(HERE, a.port(), head, &[first], Duration::from_secs(30)).await;
        r.assert_error(408, "request_timeout");
    }
    assert_eq!(names(&plugin), ["keep.txt"]);
    assert_eq!(std::fs::read(plugin.join("keep.txt")).unwrap(), b"old");
}
