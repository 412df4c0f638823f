//! WebDAV at `/webdav` over real HTTP: the `litmus` suites, confinement
//! on every method, the writable folders, ranges and validators, uploads
//! that are whole or absent, and a folder listed as it is on disk.

use std::os::unix::fs::FileExt;
use std::time::Duration;

use e2e::raw_http::RawResponse;
use e2e::{Apid, Storaged};
use tokio::io::AsyncWriteExt;

async fn start() -> (Storaged, Apid) {
    let s = Storaged::start().await;
    let a = Apid::start(&s).await;
    std::fs::create_dir_all(a.files_path().join("plugin")).unwrap();
    std::fs::create_dir_all(a.files_path().join("watch")).unwrap();
    (s, a)
}

const LOCKINFO: &str = r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>"#;

async fn propfind(a: &Apid, path: &str, depth: &str) -> RawResponse {
    a.send("PROPFIND", path, "", &[("depth", depth)]).await
}

/// `<D:href>`s of a multistatus answer.
fn hrefs(r: &RawResponse) -> Vec<String> {
    let t = r.text();
    t.split("<D:href>")
        .skip(1)
        .filter_map(|s| s.split("</D:href>").next())
        .map(str::to_owned)
        .collect()
}

/// Runs litmus against `/webdav/plugin/` and asserts that every test of
/// every suite passes. The counts are printed per suite.
#[tokio::test]
async fn litmus_passes_every_suite() {
    let (_s, a) = start().await;
    let url = format!("{}/webdav/plugin/", a.base_url());
    let work = tempfile::tempdir().unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(300),
        tokio::process::Command::new("litmus")
            .arg("-k")
            .arg(&url)
            .current_dir(work.path())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("litmus finishes within 5 minutes")
    .expect("litmus is installed (Debian package `litmus`; .ci/run installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut seen = Vec::new();
    for line in text.lines().filter(|l| l.contains("<- summary for")) {
        println!("{line}");
        let suite = line
            .split('`')
            .nth(1)
            .and_then(|s| s.split('\'').next())
            .unwrap_or("?");
        let num = |after: &str| -> u32 {
            let rest = line.split(after).nth(1).unwrap_or("");
            let digits: String = rest
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().unwrap_or(0)
        };
        let (run, passed) = (num("of "), num("tests run: "));
        assert!(run > 0 && run == passed, "litmus {suite}: {line}\n{text}");
        seen.push(suite.to_owned());
    }
    assert_eq!(
        seen,
        ["basic", "copymove", "props", "locks", "http"],
        "{text}"
    );
}

#[tokio::test]
async fn no_method_leads_out_of_files_path() {
    let (_s, a) = start().await;
    let files = a.files_path();
    let outside = a.dir().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), b"do not serve").unwrap();
    std::fs::write(a.dir().join("secret.txt"), b"do not serve").unwrap();
    std::os::unix::fs::symlink("/etc", files.join("plugin/etc")).unwrap();
    std::os::unix::fs::symlink(&outside, files.join("plugin/out")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), files.join("plugin/s.txt")).unwrap();
    std::fs::write(files.join("plugin/in.txt"), b"inside").unwrap();

    let methods = [
        "GET",
        "HEAD",
        "PUT",
        "DELETE",
        "MKCOL",
        "COPY",
        "MOVE",
        "PROPFIND",
        "PROPPATCH",
        "LOCK",
        "OPTIONS",
    ];
    // Escapes by name: refused before anything is looked up.
    for path in [
        "/webdav/plugin/../../secret.txt",
        "/webdav/plugin/%2e%2e/%2e%2e/secret.txt",
        "/webdav/plugin/%2E%2E/x",
        "/webdav/plugin/..%2f..%2fsecret.txt",
        "/webdav/plugin/a%2fb",
        "/webdav/plugin/a%00b",
    ] {
        for m in methods {
            let r = a.send(m, path, "", &[("depth", "0")]).await;
            assert_eq!(r.status, 400, "{m} {path}: {}", r.text());
            assert!(!r.text().contains("do not serve"));
        }
    }
    // Escapes by symlink: look missing, write nothing.
    for path in [
        "/webdav/plugin/etc/passwd",
        "/webdav/plugin/out/secret.txt",
        "/webdav/plugin/s.txt",
    ] {
        for m in methods {
            // Removing or moving the symlink itself is fine (below).
            if path.ends_with("s.txt") && (m == "DELETE" || m == "MOVE") {
                continue;
            }
            let r = a
                .send(
                    m,
                    path,
                    match m {
                        "PUT" => "x",
                        "LOCK" => LOCKINFO,
                        _ => "",
                    },
                    &[
                        ("depth", if m == "PROPFIND" { "0" } else { "infinity" }),
                        ("destination", "/webdav/plugin/copied.txt"),
                    ],
                )
                .await;
            // OPTIONS says what could be done at a path that is not there.
            assert!(
                matches!(r.status, 403 | 404 | 405 | 409) || (m == "OPTIONS" && r.status == 200),
                "{m} {path}: {} {}",
                r.status,
                r.text()
            );
            assert!(!r.text().contains("do not serve") && !r.text().contains("root:"));
        }
    }
    // A symlink leading out is removed itself; what it led to stays.
    let r = a.send("DELETE", "/webdav/plugin/s.txt", "", &[]).await;
    assert_eq!(r.status, 204);
    assert!(files.join("plugin/s.txt").symlink_metadata().is_err());
    assert!(outside.join("secret.txt").exists());
    // A destination outside is refused as well.
    let r = a
        .send(
            "COPY",
            "/webdav/plugin/in.txt",
            "",
            &[("destination", "/webdav/plugin/out/copied.txt")],
        )
        .await;
    assert!(matches!(r.status, 403 | 404 | 409), "{}", r.status);
    let r = a
        .send(
            "MOVE",
            "/webdav/plugin/in.txt",
            "",
            &[("destination", "/webdav/plugin/%2e%2e/%2e%2e/in.txt")],
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        names(&outside),
        ["secret.txt"],
        "nothing was written outside"
    );
    assert_eq!(
        std::fs::read(outside.join("secret.txt")).unwrap(),
        b"do not serve",
        "nor changed"
    );
    assert!(!files.join("plugin/copied.txt").exists());
    assert_eq!(
        std::fs::read(files.join("plugin/in.txt")).unwrap(),
        b"inside"
    );
    // The listing hides what leads out and shows what stays in.
    let r = propfind(&a, "/webdav/plugin/", "1").await;
    assert_eq!(r.status, 207);
    let names = hrefs(&r);
    assert!(names.iter().any(|h| h.ends_with("/in.txt")), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|h| h.ends_with("/etc/") || h.contains("/out") || h.ends_with("/s.txt")),
        "{names:?}"
    );
}

#[tokio::test]
async fn writes_outside_plugin_and_corn_are_refused() {
    let (_s, a) = start().await;
    let files = a.files_path();
    std::fs::write(files.join("watch/film.mkv"), b"film").unwrap();
    std::fs::write(files.join("plugin/a.txt"), b"a").unwrap();
    let patch = r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop><Z:p>1</Z:p></D:prop></D:set></D:propertyupdate>"#;
    for (m, path, body, headers) in [
        ("PUT", "/webdav/watch/new.mkv", "x", vec![]),
        ("PUT", "/webdav/watch/film.mkv", "x", vec![]),
        ("PUT", "/webdav/new.txt", "x", vec![]),
        ("DELETE", "/webdav/watch/film.mkv", "", vec![]),
        ("DELETE", "/webdav/plugin", "", vec![]),
        ("MKCOL", "/webdav/watch/dir", "", vec![]),
        ("PROPPATCH", "/webdav/watch/film.mkv", patch, vec![]),
        ("LOCK", "/webdav/watch/film.mkv", LOCKINFO, vec![]),
        (
            "MOVE",
            "/webdav/watch/film.mkv",
            "",
            vec![("destination", "/webdav/plugin/film.mkv")],
        ),
        (
            "MOVE",
            "/webdav/plugin/a.txt",
            "",
            vec![("destination", "/webdav/watch/a.txt")],
        ),
        (
            "COPY",
            "/webdav/plugin/a.txt",
            "",
            vec![("destination", "/webdav/watch/a.txt")],
        ),
    ] {
        let r = a.send(m, path, body, &headers).await;
        r.assert_error(403, "read_only");
    }
    assert_eq!(
        std::fs::read(files.join("watch/film.mkv")).unwrap(),
        b"film"
    );
    assert!(!files.join("watch/new.mkv").exists() && !files.join("watch/dir").exists());
    assert!(!files.join("new.txt").exists() && !files.join("watch/a.txt").exists());
    assert!(files.join("plugin/a.txt").exists());
    // Reading from anywhere and copying into plugin/ is fine.
    let r = a
        .send(
            "COPY",
            "/webdav/watch/film.mkv",
            "",
            &[("destination", "/webdav/plugin/film.mkv")],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        std::fs::read(files.join("plugin/film.mkv")).unwrap(),
        b"film"
    );
    // corn/ may be made, but holds only mounts: nothing is written
    // into it directly (the mounts in it: webdav_mounts).
    assert_eq!(a.send("MKCOL", "/webdav/corn", "", &[]).await.status, 201);
    a.send("PUT", "/webdav/corn/x.txt", "x", &[])
        .await
        .assert_error(403, "read_only");
    assert!(!files.join("corn/x.txt").exists());
}

#[tokio::test]
async fn gets_have_ranges_validators_and_preconditions() {
    let (_s, a) = start().await;
    let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let r = a
        .send("PUT", "/webdav/plugin/a.bin", bytes.clone(), &[])
        .await;
    assert_eq!(r.status, 201);
    let r = a.get("/webdav/plugin/a.bin").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, bytes);
    let etag = r.header("etag").unwrap().to_owned();
    let modified = r.header("last-modified").unwrap().to_owned();
    // PROPFIND's getetag is the ETag of GET.
    let p = propfind(&a, "/webdav/plugin/a.bin", "0").await;
    assert!(p.text().contains(&etag), "{} vs {etag}", p.text());

    let g = |h: Vec<(&'static str, String)>| {
        let a = &a;
        async move {
            let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
            a.send("GET", "/webdav/plugin/a.bin", "", &h).await
        }
    };
    let r = g(vec![("range", "bytes=100-199".into())]).await;
    assert_eq!((r.status, &r.body[..]), (206, &bytes[100..200]));
    assert_eq!(r.header("content-range"), Some("bytes 100-199/200000"));
    let r = g(vec![("range", "bytes=0-1,199998-".into())]).await;
    assert_eq!(r.status, 206);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("multipart/byteranges")
    );
    let r = g(vec![("range", "bytes=300000-".into())]).await;
    assert_eq!(r.status, 416);
    assert_eq!(g(vec![("if-none-match", etag.clone())]).await.status, 304);
    assert_eq!(
        g(vec![("if-modified-since", modified.clone())])
            .await
            .status,
        304
    );
    assert_eq!(g(vec![("if-match", "\"nope\"".into())]).await.status, 412);
    assert_eq!(g(vec![("if-match", etag.clone())]).await.status, 200);
    // If-Range with another validator: the whole file.
    let r = g(vec![
        ("range", "bytes=0-9".into()),
        ("if-range", "\"other\"".into()),
    ])
    .await;
    assert_eq!((r.status, r.body.len()), (200, bytes.len()));
    let r = g(vec![
        ("range", "bytes=0-9".into()),
        ("if-range", etag.clone()),
    ])
    .await;
    assert_eq!((r.status, &r.body[..]), (206, &bytes[..10]));
    let h = a.send("HEAD", "/webdav/plugin/a.bin", "", &[]).await;
    assert_eq!((h.status, h.body.len()), (200, 0));
    assert_eq!(h.header("content-length"), Some("200000"));
    // A PUT with a stale If-Match changes nothing.
    let r = a
        .send(
            "PUT",
            "/webdav/plugin/a.bin",
            "new",
            &[("if-match", "\"stale\"")],
        )
        .await;
    assert_eq!(r.status, 412);
    assert_eq!(a.get("/webdav/plugin/a.bin").await.body, bytes);
    // After a replacement the old ETag no longer matches.
    assert_eq!(
        a.send("PUT", "/webdav/plugin/a.bin", "new", &[])
            .await
            .status,
        204
    );
    assert_eq!(g(vec![("if-none-match", etag)]).await.status, 200);
}

#[tokio::test]
async fn ranges_reach_the_end_of_a_multi_gigabyte_sparse_file() {
    let (_s, a) = start().await;
    let path = a.files_path().join("watch/big.mkv");
    let size: u64 = (5 << 30) + 3;
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(size).unwrap();
    f.write_all_at(b"the end", size - 7).unwrap();
    f.write_all_at(b"past 4 GiB", 1 << 32).unwrap();
    let url = "/webdav/watch/big.mkv";
    let r = a
        .send(
            "GET",
            url,
            "",
            &[("range", &format!("bytes={}-", size - 7))],
        )
        .await;
    assert_eq!((r.status, r.body.as_slice()), (206, &b"the end"[..]));
    let r = a
        .send(
            "GET",
            url,
            "",
            &[("range", &format!("bytes={}-{}", size - 3, size + 100))],
        )
        .await;
    assert_eq!((r.status, r.body.as_slice()), (206, &b"end"[..]));
    let span = format!("bytes={}-{}", 1u64 << 32, (1u64 << 32) + 9);
    let r = a.send("GET", url, "", &[("range", &span)]).await;
    assert_eq!((r.status, r.body.as_slice()), (206, &b"past 4 GiB"[..]));
    let h = a.send("HEAD", url, "", &[]).await;
    assert_eq!(h.header("content-length"), Some(size.to_string().as_str()));
    let p = propfind(&a, url, "0").await;
    assert!(
        p.text()
            .contains(&format!("<D:getcontentlength>{size}</D:getcontentlength>")),
        "{}",
        p.text()
    );
}

#[tokio::test]
async fn a_file_written_on_disk_is_listed_at_once() {
    let (_s, a) = start().await;
    let watch = a.files_path().join("watch");
    assert_eq!(hrefs(&propfind(&a, "/webdav/watch/", "1").await).len(), 1);
    for i in 0..20 {
        std::fs::write(watch.join(format!("new-{i}.mkv")), b"x").unwrap();
        let names = hrefs(&propfind(&a, "/webdav/watch/", "1").await);
        assert!(
            names.iter().any(|h| h.ends_with(&format!("/new-{i}.mkv"))),
            "{i}: {names:?}"
        );
        let r = a
            .send("HEAD", &format!("/webdav/watch/new-{i}.mkv"), "", &[])
            .await;
        assert_eq!(r.status, 200);
    }
    std::fs::remove_file(watch.join("new-3.mkv")).unwrap();
    let names = hrefs(&propfind(&a, "/webdav/watch/", "1").await);
    assert!(!names.iter().any(|h| h.ends_with("/new-3.mkv")));
    assert_eq!(
        a.send("HEAD", "/webdav/watch/new-3.mkv", "", &[])
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn propfind_of_infinite_depth_is_refused() {
    let (_s, a) = start().await;
    for headers in [
        vec![("depth", "infinity")],
        vec![],
        vec![("depth", "infinity"), ("x-litmus", "props: 1")],
    ] {
        let r = a.send("PROPFIND", "/webdav/", "", &headers).await;
        assert_eq!(r.status, 403, "{headers:?}");
        assert!(r.text().contains("propfind-finite-depth"), "{}", r.text());
    }
    assert_eq!(propfind(&a, "/webdav/", "1").await.status, 207);
    // A method WebDAV does not have is a 405 naming the ones it has.
    for m in ["TRACE", "SEARCH", "REPORT"] {
        let r = a.send(m, "/webdav/plugin/", "", &[]).await;
        r.assert_error(405, "method_not_allowed");
        assert!(r.header("allow").unwrap().contains("PROPFIND"), "{m}");
    }
}

/// Whether `pid` holds a file open under `dir` that is not one of its
/// entries: an upload's temporary file (unnamed, or hidden).
fn writing_under(pid: u32, dir: &std::path::Path) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .any(|t| {
            let t = t.to_string_lossy().into_owned();
            t.starts_with(&dir.display().to_string())
                && (t.ends_with("(deleted)") || t.contains(".dav-"))
        })
}

/// Sends the head and 3 MiB of a 10 MB PUT to `target` and waits until
/// apid is writing it.
async fn start_upload(a: &Apid, target: &str, dir: &std::path::Path) -> tokio::net::TcpStream {
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", a.port()))
        .await
        .unwrap();
    let head = format!("PUT {target} HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n");
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(&vec![7u8; 3 << 20]).await.unwrap();
    tcp.flush().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !writing_under(a.process().pid(), dir) {
        assert!(tokio::time::Instant::now() < deadline, "no upload began");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tcp
}

fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// An upload cut off half-way leaves neither the file nor a temporary
/// file; the one it would have replaced is untouched. So does one whose
/// apid is killed (kill -9) while it writes.
#[tokio::test]
async fn an_interrupted_upload_leaves_nothing_behind() {
    let (s, mut a) = start().await;
    let plugin = a.files_path().join("plugin");
    std::fs::write(plugin.join("keep.bin"), b"old").unwrap();
    for target in ["/webdav/plugin/new.bin", "/webdav/plugin/keep.bin"] {
        let tcp = start_upload(&a, target, &plugin).await;
        assert_eq!(
            names(&plugin),
            ["keep.bin"],
            "nothing is seen while it is written"
        );
        drop(tcp);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while writing_under(a.process().pid(), &plugin) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the upload never ended"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(names(&plugin), ["keep.bin"]);
        assert_eq!(std::fs::read(plugin.join("keep.bin")).unwrap(), b"old");
    }
    let _tcp = start_upload(&a, "/webdav/plugin/keep.bin", &plugin).await;
    a.process_mut().kill9();
    assert_eq!(
        names(&plugin),
        ["keep.bin"],
        "a killed upload leaves nothing"
    );
    assert_eq!(std::fs::read(plugin.join("keep.bin")).unwrap(), b"old");
    let a = Apid::start(&s).await;
    // A whole upload replaces the file, and its dead properties stay.
    let patch = r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop><Z:tag>kept</Z:tag></D:prop></D:set></D:propertyupdate>"#;
    assert_eq!(
        a.send("PROPPATCH", "/webdav/plugin/keep.bin", patch, &[])
            .await
            .status,
        207
    );
    assert_eq!(
        a.send("PUT", "/webdav/plugin/keep.bin", "new", &[])
            .await
            .status,
        204
    );
    assert_eq!(std::fs::read(plugin.join("keep.bin")).unwrap(), b"new");
    let body = r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:Z="urn:z"><D:prop><Z:tag/></D:prop></D:propfind>"#;
    let r = a
        .send(
            "PROPFIND",
            "/webdav/plugin/keep.bin",
            body,
            &[("depth", "0")],
        )
        .await;
    assert!(r.text().contains(">kept<"), "{}", r.text());
}

/// Dead properties live with the file, so an apid restart keeps them.
#[tokio::test]
async fn dead_properties_outlive_apid() {
    let s = Storaged::start().await;
    let dir = s.dir().to_path_buf();
    let a = Apid::start(&s).await;
    std::fs::create_dir_all(a.files_path().join("plugin")).unwrap();
    assert_eq!(
        a.send("PUT", "/webdav/plugin/p.txt", "x", &[]).await.status,
        201
    );
    let patch = r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop><Z:who>sorter</Z:who></D:prop></D:set></D:propertyupdate>"#;
    assert_eq!(
        a.send("PROPPATCH", "/webdav/plugin/p.txt", patch, &[])
            .await
            .status,
        207
    );
    drop(a);
    let a = Apid::start_in(&dir, &[]).await;
    let body = r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>"#;
    let r = a
        .send("PROPFIND", "/webdav/plugin/p.txt", body, &[("depth", "0")])
        .await;
    assert!(r.text().contains(">sorter<"), "{}", r.text());
    // A listing of the folder shows them too (read beside the listing).
    let r = a
        .send("PROPFIND", "/webdav/plugin/", body, &[("depth", "1")])
        .await;
    assert_eq!(r.status, 207);
    assert_eq!(r.text().matches(">sorter<").count(), 1, "{}", r.text());
    // Not a file of its own on the shared volume.
    assert_eq!(
        std::fs::read_dir(a.files_path().join("plugin"))
            .unwrap()
            .count(),
        1
    );
}

/// `/urls` advertises WebDAV where it is: `webdavUrl` under `BASE_URL`,
/// `webdavUrlInternal` on this host's name and apid's port.
#[tokio::test]
async fn the_advertised_webdav_urls_answer() {
    let s = Storaged::start().await;
    // The external address (a proxy in front) routes /webdav to apid.
    let base = "https://media.example:8443";
    let a = Apid::start_with(&s, &[("BASE_URL", base)]).await;
    std::fs::create_dir_all(a.files_path().join("plugin")).unwrap();
    let urls = a.get_ok("/urls").await;
    let external = urls["webdavUrl"].as_str().unwrap();
    assert_eq!(external, format!("{base}/webdav"));
    let internal = urls["webdavUrlInternal"].as_str().unwrap();
    let host = urls["hostname"].as_str().unwrap();
    let machine = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(
        host,
        machine.trim(),
        "the name other containers reach this one by"
    );
    assert_eq!(internal, format!("http://{host}:{}/webdav", a.port()));
    // Both name the same server and path; ask it there.
    for url in [external, internal] {
        let path = &url[url.find("/webdav").unwrap()..];
        let r = a
            .send("PROPFIND", &format!("{path}/"), "", &[("depth", "1")])
            .await;
        assert_eq!(r.status, 207, "{url}");
        assert!(
            hrefs(&r).iter().any(|h| h == "/webdav/plugin/"),
            "{}",
            r.text()
        );
    }
}

/// A `Destination` that dav-server would read differently from apid (a
/// `..` before the prefix, doubled slashes, an encoded prefix, a glued
/// one, the root) is refused before anything at the destination is
/// removed.
#[tokio::test]
async fn a_destination_is_read_one_way_only() {
    let (_s, a) = start().await;
    let files = a.files_path();
    std::fs::create_dir_all(files.join("plugin/empty")).unwrap();
    std::fs::create_dir_all(files.join("corn/gdrive")).unwrap();
    std::fs::write(files.join("corn/gdrive/movie.mkv"), b"movie").unwrap();
    std::fs::write(files.join("plugin/a.txt"), b"a").unwrap();
    for m in ["COPY", "MOVE"] {
        for dest in [
            "http://h/x/../webdav/corn",
            "http://h//webdav/corn",
            "http://h/%77ebdav/corn",
            "http://h/webdavXcorn",
            "http://h//webdav/",
            "http://h/webdav/",
            "http://h/webdav",
            "/webdav/corn",
            "http://h/webdav/corn/",
            "http://h/webdav/plugin/../corn",
        ] {
            for src in ["/webdav/plugin/empty/", "/webdav/plugin/a.txt"] {
                let r = a.send(m, src, "", &[("destination", dest)]).await;
                assert!(
                    matches!(r.status, 400 | 403 | 502),
                    "{m} {src} -> {dest}: {} {}",
                    r.status,
                    r.text()
                );
            }
        }
    }
    assert_eq!(
        std::fs::read(files.join("corn/gdrive/movie.mkv")).unwrap(),
        b"movie"
    );
    assert!(files.join("plugin/empty").is_dir() && files.join("plugin/a.txt").is_file());
}

/// A symlink inside a writable folder that leads to a read-only one does
/// not make it writable: the area is judged where a name really leads.
#[tokio::test]
async fn a_symlink_does_not_make_a_read_only_folder_writable() {
    let (_s, a) = start().await;
    let files = a.files_path();
    std::fs::write(files.join("watch/w.mkv"), b"w").unwrap();
    std::os::unix::fs::symlink("../watch", files.join("plugin/lnk")).unwrap();
    std::fs::write(files.join("plugin/mine.txt"), b"m").unwrap();
    let patch = r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop><Z:p>1</Z:p></D:prop></D:set></D:propertyupdate>"#;
    for (m, path, body, headers) in [
        ("DELETE", "/webdav/plugin/lnk/w.mkv", "", vec![]),
        ("PUT", "/webdav/plugin/lnk/new.mkv", "x", vec![]),
        ("PUT", "/webdav/plugin/lnk/w.mkv", "x", vec![]),
        ("MKCOL", "/webdav/plugin/lnk/d", "", vec![]),
        ("PROPPATCH", "/webdav/plugin/lnk/w.mkv", patch, vec![]),
        (
            "MOVE",
            "/webdav/plugin/lnk/w.mkv",
            "",
            vec![("destination", "/webdav/plugin/stolen.mkv")],
        ),
        (
            "COPY",
            "/webdav/plugin/mine.txt",
            "",
            vec![("destination", "/webdav/plugin/lnk/copied.txt")],
        ),
        (
            "MOVE",
            "/webdav/plugin/mine.txt",
            "",
            vec![("destination", "/webdav/plugin/lnk/moved.txt")],
        ),
    ] {
        let r = a.send(m, path, body, &headers).await;
        let refused =
            matches!(r.status, 403 | 409) || (r.status == 207 && r.text().contains("403"));
        assert!(refused, "{m} {path}: {} {}", r.status, r.text());
    }
    assert_eq!(names(&files.join("watch")), ["w.mkv"]);
    assert_eq!(std::fs::read(files.join("watch/w.mkv")).unwrap(), b"w");
    assert!(files.join("plugin/mine.txt").exists());
    assert!(!files.join("plugin/stolen.mkv").exists());
    // Reading through it is fine.
    assert_eq!(a.get("/webdav/plugin/lnk/w.mkv").await.body, b"w");
}

/// A chunked upload shorter than the length it announced
/// (`X-Expected-Entity-Length`, as macOS Finder sends) is a 400 and
/// replaces nothing.
#[tokio::test]
async fn an_upload_shorter_than_announced_replaces_nothing() {
    let (_s, a) = start().await;
    let plugin = a.files_path().join("plugin");
    std::fs::write(plugin.join("keep.txt"), b"old content").unwrap();
    for target in ["keep.txt", "new.txt"] {
        let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", a.port()))
            .await
            .unwrap();
        let req = format!(
            "PUT /webdav/plugin/{target} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\
             X-Expected-Entity-Length: 1000\r\nConnection: close\r\n\r\n5\r\nshort\r\n0\r\n\r\n"
        );
        tcp.write_all(req.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(
            Duration::from_secs(10),
            tokio::io::AsyncReadExt::read_to_end(&mut tcp, &mut answer),
        )
        .await
        .unwrap()
        .unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    }
    assert_eq!(names(&plugin), ["keep.txt"]);
    assert_eq!(
        std::fs::read(plugin.join("keep.txt")).unwrap(),
        b"old content"
    );
}

/// A MOVE to another filesystem (a mount under `corn/`): a file is copied
/// and removed; a folder is refused before anything at the destination
/// is removed.
#[tokio::test]
async fn a_move_to_another_filesystem_moves_files_and_keeps_folders() {
    let (_s, a) = start().await;
    let files = a.files_path();
    let _mnt = e2e::mount::Tmpfs::at(&files.join("corn/mnt"), "16m");
    std::fs::write(files.join("plugin/f.bin"), b"file bytes").unwrap();
    std::fs::create_dir_all(files.join("plugin/d")).unwrap();
    std::fs::write(files.join("plugin/d/x"), b"x").unwrap();
    std::fs::create_dir_all(files.join("corn/mnt/dir")).unwrap();
    std::fs::write(files.join("corn/mnt/dir/v"), b"v").unwrap();
    let r = a
        .send(
            "MOVE",
            "/webdav/plugin/f.bin",
            "",
            &[("destination", "/webdav/corn/mnt/f.bin")],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert!(!files.join("plugin/f.bin").exists());
    assert_eq!(
        std::fs::read(files.join("corn/mnt/f.bin")).unwrap(),
        b"file bytes"
    );
    let r = a
        .send(
            "MOVE",
            "/webdav/plugin/d/",
            "",
            &[("destination", "/webdav/corn/mnt/dir/")],
        )
        .await;
    assert_eq!(r.status, 502, "{}", r.text());
    assert_eq!(std::fs::read(files.join("corn/mnt/dir/v")).unwrap(), b"v");
    assert_eq!(std::fs::read(files.join("plugin/d/x")).unwrap(), b"x");
}
