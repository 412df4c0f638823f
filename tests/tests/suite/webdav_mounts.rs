//! `corn/` holds only mounts (issue 23, N7): a write below `corn/<name>`
//! while that folder is not a mount point is a 503 with `Retry-After`
//! and changes nothing (a write there would land on the volume under the
//! mount, and mountd never mounts over a folder that is not empty); once
//! it is mounted the same writes go through; nothing is made in `corn/`
//! itself.

use std::path::Path;

use e2e::{Apid, Storaged};

const LOCKINFO: &str = r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>"#;
const PATCH: &str = r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop><Z:p>1</Z:p></D:prop></D:set></D:propertyupdate>"#;

async fn start() -> (Storaged, Apid) {
    let s = Storaged::start().await;
    let a = Apid::start(&s).await;
    std::fs::create_dir_all(a.files_path().join("plugin")).unwrap();
    std::fs::create_dir_all(a.files_path().join("corn/m")).unwrap();
    (s, a)
}

fn count(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

/// A request: method, path, body, headers.
type Case<'a> = (&'a str, &'a str, &'a str, Vec<(&'a str, &'a str)>);

/// Every kind of write into `corn/m`, and what it answers.
async fn writes(a: &Apid) -> Vec<(String, u16, Option<String>)> {
    let sabre = [
        ("content-type", "application/x-sabredav-partialupdate"),
        ("x-update-range", "append"),
    ];
    let cases: Vec<Case<'_>> = vec![
        ("PUT", "/webdav/corn/m/new.txt", "x", vec![]),
        ("PATCH", "/webdav/corn/m/old.txt", "y", sabre.to_vec()),
        ("MKCOL", "/webdav/corn/m/dir", "", vec![]),
        ("PROPPATCH", "/webdav/corn/m/", PATCH, vec![]),
        ("LOCK", "/webdav/corn/m/locked.txt", LOCKINFO, vec![]),
        ("DELETE", "/webdav/corn/m/old.txt", "", vec![]),
        (
            "COPY",
            "/webdav/plugin/p.txt",
            "",
            vec![("destination", "/webdav/corn/m/copied.txt")],
        ),
        (
            "MOVE",
            "/webdav/plugin/q.txt",
            "",
            vec![("destination", "/webdav/corn/m/moved.txt")],
        ),
    ];
    let mut out = Vec::new();
    for (m, path, body, headers) in cases {
        let r = a.send(m, path, body, &headers).await;
        out.push((
            format!("{m} {path}: {}", r.text()),
            r.status,
            r.header("retry-after").map(str::to_owned),
        ));
    }
    out
}

#[tokio::test]
async fn writes_into_a_mount_that_is_not_mounted_are_a_503() {
    let (_s, a) = start().await;
    let files = a.files_path();
    let m = files.join("corn/m");
    std::fs::write(files.join("plugin/p.txt"), b"p").unwrap();
    std::fs::write(files.join("plugin/q.txt"), b"q").unwrap();
    for (what, status, retry) in writes(&a).await {
        assert_eq!(status, 503, "{what}");
        assert!(retry.is_some(), "{what}: Retry-After");
        assert!(what.contains("not mounted"), "{what}");
    }
    assert_eq!(count(&m), 0, "the folder stays empty, so it can be mounted");
    assert!(
        files.join("plugin/q.txt").exists(),
        "the MOVE moved nothing"
    );
    // A symlink elsewhere that leads into it does not get around it.
    std::os::unix::fs::symlink("../corn/m", files.join("plugin/lnk")).unwrap();
    let r = a.send("PUT", "/webdav/plugin/lnk/x.txt", "x", &[]).await;
    assert!(matches!(r.status, 403 | 502), "{} {}", r.status, r.text());
    assert_eq!(count(&m), 0);
    // Mounted, the same writes go through (on a filesystem with room
    // past the 1 GiB a COPY leaves free; a tmpfs takes memory only for
    // what is written).
    let mnt = e2e::mount::Tmpfs::at(&m, "1100m");
    std::fs::write(m.join("old.txt"), b"old").unwrap();
    for (what, status, _) in writes(&a).await {
        assert!(matches!(status, 200 | 201 | 204 | 207), "{what}: {status}");
    }
    assert!(m.join("new.txt").exists() && m.join("copied.txt").exists());
    assert!(m.join("moved.txt").exists() && m.join("dir").is_dir());
    drop(mnt);
    // Unmounted again: refused again, and the folder is still empty.
    let r = a.send("PUT", "/webdav/corn/m/again.txt", "x", &[]).await;
    r.assert_error(503, "storage_unavailable");
    assert_eq!(count(&m), 0);
}

#[tokio::test]
async fn nothing_is_made_in_corn_itself() {
    let (_s, a) = start().await;
    let files = a.files_path();
    for (m, path) in [
        ("PUT", "/webdav/corn/x.txt"),
        ("MKCOL", "/webdav/corn/newmount"),
        ("DELETE", "/webdav/corn/m"),
        ("LOCK", "/webdav/corn/x.txt"),
    ] {
        let body = if m == "LOCK" { LOCKINFO } else { "x" };
        let r = a.send(m, path, body, &[("depth", "0")]).await;
        r.assert_error(403, "read_only");
    }
    std::fs::write(files.join("plugin/p.txt"), b"p").unwrap();
    let r = a
        .send(
            "COPY",
            "/webdav/plugin/p.txt",
            "",
            &[("destination", "/webdav/corn/p.txt")],
        )
        .await;
    r.assert_error(403, "read_only");
    let mut names: Vec<String> = std::fs::read_dir(files.join("corn"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["m"]);
}
