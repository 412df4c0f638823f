//! WebDAV locks are no denial of service (issue 23, N5): a lock of
//! infinite depth on the root of a writable folder, or on any folder that
//! holds entries (review finding 7), is refused, each
//! client holds a bounded number of locks (others are not held back),
//! a LOCK of an unmapped URL leaves no empty file behind, and the
//! `Timeout` answered is the one granted (`Infinite` is an hour).

use e2e::wait::IO_DEADLINE;
use e2e::{Apid, Storaged};

use super::webdav_raw::{HERE, OTHER, exchange};

const LOCKINFO: &str = r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>"#;

/// Locks per client (`MAX_LOCKS_PER_CLIENT` in apid's `dav/locks.rs`).
const PER_CLIENT: usize = 64;

async fn start() -> (Storaged, Apid) {
    let s = Storaged::start().await;
    let a = Apid::start(&s).await;
    std::fs::create_dir_all(a.files_path().join("plugin")).unwrap();
    (s, a)
}

/// A LOCK of `path` from `from`, over its own connection.
async fn lock_from(
    a: &Apid,
    from: std::net::IpAddr,
    path: &str,
    extra: &str,
) -> e2e::raw_http::RawResponse {
    let head = format!(
        "LOCK {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/xml\r\nContent-Length: {}{extra}",
        LOCKINFO.len()
    );
    exchange(from, a.port(), &head, &[LOCKINFO.as_bytes()], IO_DEADLINE).await
}

fn token(r: &e2e::raw_http::RawResponse) -> String {
    r.header("lock-token")
        .unwrap_or_else(|| panic!("no Lock-Token: {} {}", r.status, r.text()))
        .trim_matches(['<', '>'])
        .to_owned()
}

#[tokio::test]
async fn an_infinite_lock_on_a_writable_root_is_refused() {
    let (_s, a) = start().await;
    for (path, depth) in [
        ("/webdav/plugin/", vec![("depth", "infinity")]),
        ("/webdav/plugin", vec![]),
        ("/webdav/corn/", vec![("depth", "infinity")]),
    ] {
        let r = a.send("LOCK", path, LOCKINFO, &depth).await;
        r.assert_error(403, "read_only");
        assert!(r.text().contains("Depth"), "{}", r.text());
    }
    // Nobody else is locked out.
    let r = a.send("PUT", "/webdav/plugin/x.txt", "x", &[]).await;
    assert_eq!(r.status, 201);
    // Depth 0 on the root, or infinity below it, is a lock as before.
    let r = a
        .send("LOCK", "/webdav/plugin/", LOCKINFO, &[("depth", "0")])
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    std::fs::create_dir_all(a.files_path().join("plugin/d")).unwrap();
    let r = a
        .send(
            "LOCK",
            "/webdav/plugin/d/",
            LOCKINFO,
            &[("depth", "infinity")],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = a.send("PUT", "/webdav/plugin/d/y.txt", "y", &[]).await;
    assert_eq!(r.status, 423);
}

/// Finding 7: one anonymous deep LOCK of a service's working folder
/// blocked everyone's writes there for an hour.
#[tokio::test]
async fn an_infinite_lock_on_a_folder_that_holds_entries_is_refused() {
    let (_s, a) = start().await;
    let plugin = a.files_path().join("plugin");
    std::fs::create_dir_all(plugin.join("out")).unwrap();
    std::fs::write(plugin.join("out/done.mkv"), b"done").unwrap();
    std::fs::create_dir_all(plugin.join("hidden")).unwrap();
    std::fs::write(plugin.join("hidden/.part"), b"").unwrap();
    for (path, depth) in [
        ("/webdav/plugin/out/", vec![("depth", "infinity")]),
        // No Depth is infinity.
        ("/webdav/plugin/out/", vec![]),
        ("/webdav/plugin/hidden/", vec![("depth", "infinity")]),
    ] {
        let r = a.send("LOCK", path, LOCKINFO, &depth).await;
        r.assert_error(403, "read_only");
        assert!(r.text().contains("Depth"), "{}", r.text());
    }
    // Another client writes there as before.
    let head = "PUT /webdav/plugin/out/new.mkv HTTP/1.1\r\nHost: x\r\nContent-Length: 3";
    let r = exchange(OTHER, a.port(), head, &[b"new"], IO_DEADLINE).await;
    assert_eq!(r.status, 201, "{}", r.text());
    // Depth 0 on the folder, and a lock of a file in it, are locks as
    // before.
    let r = a
        .send("LOCK", "/webdav/plugin/out/", LOCKINFO, &[("depth", "0")])
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = a
        .send(
            "LOCK",
            "/webdav/plugin/out/done.mkv",
            LOCKINFO,
            &[("depth", "infinity")],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // An empty folder (what litmus locks) may be locked deep, and is.
    std::fs::create_dir_all(plugin.join("empty")).unwrap();
    let r = a
        .send(
            "LOCK",
            "/webdav/plugin/empty/",
            LOCKINFO,
            &[("depth", "infinity")],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let head = "PUT /webdav/plugin/empty/x HTTP/1.1\r\nHost: x\r\nContent-Length: 1";
    let r = exchange(OTHER, a.port(), head, &[b"x"], IO_DEADLINE).await;
    assert_eq!(r.status, 423, "{}", r.text());
}

#[tokio::test]
async fn one_client_holds_a_bounded_number_of_locks() {
    let (_s, a) = start().await;
    for i in 0..PER_CLIENT {
        let r = lock_from(&a, HERE, &format!("/webdav/plugin/f{i}"), "").await;
        assert_eq!(r.status, 201, "lock {i}: {}", r.text());
    }
    let r = lock_from(&a, HERE, "/webdav/plugin/one-more", "").await;
    r.assert_error(429, "too_many_requests");
    assert!(r.header("retry-after").is_some());
    assert!(r.text().contains("64"), "{}", r.text());
    // Another client locks as it likes.
    let r = lock_from(&a, OTHER, "/webdav/plugin/theirs", "").await;
    assert_eq!(r.status, 201, "{}", r.text());
    // The first one stays at its share; its locks hold.
    let r = lock_from(&a, HERE, "/webdav/plugin/again", "").await;
    assert_eq!(r.status, 429);
    let first = lock_from(&a, OTHER, "/webdav/plugin/f0", "").await;
    assert_eq!(first.status, 423, "f0 is still locked");
    // And none of these locks made a file.
    let plugin = a.files_path().join("plugin");
    assert_eq!(std::fs::read_dir(&plugin).unwrap().count(), 0);
}

#[tokio::test]
async fn a_lock_of_an_unmapped_url_leaves_no_file() {
    let (_s, a) = start().await;
    let plugin = a.files_path().join("plugin");
    let r = a
        .send("LOCK", "/webdav/plugin/new.txt", LOCKINFO, &[])
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let t = token(&r);
    assert!(!plugin.join("new.txt").exists(), "no lock-null file");
    // It is locked all the same: others cannot write it.
    assert_eq!(
        a.send("PUT", "/webdav/plugin/new.txt", "theirs", &[])
            .await
            .status,
        423
    );
    let r = a
        .send(
            "UNLOCK",
            "/webdav/plugin/new.txt",
            "",
            &[("lock-token", &format!("<{t}>"))],
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(std::fs::read_dir(&plugin).unwrap().count(), 0);
    // The holder's PUT makes the file.
    let r = a
        .send("LOCK", "/webdav/plugin/new.txt", LOCKINFO, &[])
        .await;
    let t = token(&r);
    let r = a
        .send(
            "PUT",
            "/webdav/plugin/new.txt",
            "mine",
            &[("if", &format!("(<{t}>)"))],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(std::fs::read(plugin.join("new.txt")).unwrap(), b"mine");
}

#[tokio::test]
async fn the_timeout_answered_is_the_one_granted() {
    let (_s, a) = start().await;
    std::fs::write(a.files_path().join("plugin/f.txt"), b"f").unwrap();
    for (asked, granted) in [
        ("Infinite", "Second-3600"),
        ("Infinite, Second-4100000000", "Second-3600"),
        ("Second-86400", "Second-3600"),
        ("Second-1200", "Second-1200"),
        ("Second-30", "Second-30"),
    ] {
        let r = a
            .send(
                "LOCK",
                "/webdav/plugin/f.txt",
                LOCKINFO,
                &[("timeout", asked)],
            )
            .await;
        assert_eq!(r.status, 200, "{asked}: {}", r.text());
        assert!(
            r.text()
                .contains(&format!("<D:timeout>{granted}</D:timeout>")),
            "{asked}: {}",
            r.text()
        );
        let t = token(&r);
        // A refresh answers what it grants too.
        let r = a
            .send(
                "LOCK",
                "/webdav/plugin/f.txt",
                "",
                &[("if", &format!("(<{t}>)")), ("timeout", asked)],
            )
            .await;
        assert_eq!(r.status, 200, "refresh {asked}: {}", r.text());
        assert!(
            r.text()
                .contains(&format!("<D:timeout>{granted}</D:timeout>")),
            "refresh {asked}: {}",
            r.text()
        );
        let r = a
            .send(
                "UNLOCK",
                "/webdav/plugin/f.txt",
                "",
                &[("lock-token", &format!("<{t}>"))],
            )
            .await;
        assert_eq!(r.status, 204);
    }
}
