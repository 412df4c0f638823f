//! COPY is no amplifier (issue 23, N6, N10): symlinks to folders are not
//! followed while copying, a destination inside its source (or equal to
//! it) is a 409 for COPY and MOVE alike, and a copy over its budget
//! (entries, bytes past `META_CORE_DAV_COPY_MAX_BYTES`, or bytes that
//! would leave its filesystem less than its reserve free: review finding
//! 6) is a 507 before anything is copied. And a `Destination` on another
//! host is a 502 (N12).

use std::path::Path;

use e2e::{Apid, Storaged};

async fn start() -> (Storaged, Apid) {
    start_with(&[]).await
}

async fn start_with(env: &[(&str, &str)]) -> (Storaged, Apid) {
    let s = Storaged::start().await;
    let a = Apid::start_with(&s, env).await;
    std::fs::create_dir_all(a.files_path().join("plugin")).unwrap();
    std::fs::create_dir_all(a.files_path().join("watch")).unwrap();
    (s, a)
}

/// Every path below `dir`, relative, symlinks not followed.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                todo.push(p);
            }
        }
    }
    out.sort();
    out
}

async fn copy(a: &Apid, from: &str, to: &str) -> e2e::raw_http::RawResponse {
    a.send("COPY", from, "", &[("destination", to)]).await
}

#[tokio::test]
async fn a_copy_does_not_follow_folder_links() {
    let (_s, a) = start().await;
    let files = a.files_path();
    let src = files.join("watch/show");
    std::fs::create_dir_all(src.join("s1")).unwrap();
    std::fs::write(src.join("s1/e1.mkv"), b"episode").unwrap();
    std::fs::write(src.join("poster.jpg"), b"jpg").unwrap();
    // Loops (the finding: 5 MB became 86 MB), and a link to a file.
    std::os::unix::fs::symlink("..", src.join("s1/up")).unwrap();
    std::os::unix::fs::symlink(&src, src.join("self")).unwrap();
    std::os::unix::fs::symlink("../poster.jpg", src.join("s1/cover.jpg")).unwrap();
    let r = copy(&a, "/webdav/watch/show/", "/webdav/plugin/show/").await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        tree(&files.join("plugin/show")),
        ["poster.jpg", "s1", "s1/cover.jpg", "s1/e1.mkv"]
    );
    assert_eq!(
        std::fs::read(files.join("plugin/show/s1/cover.jpg")).unwrap(),
        b"jpg",
        "a link to a file is copied as the file"
    );
    // Copied again over it, a folder link in the destination is removed
    // with the rest of what is replaced.
    std::os::unix::fs::symlink("s1", files.join("plugin/show/link")).unwrap();
    let r = copy(&a, "/webdav/watch/show/", "/webdav/plugin/show/").await;
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(
        tree(&files.join("plugin/show")),
        ["poster.jpg", "s1", "s1/cover.jpg", "s1/e1.mkv"]
    );
}

#[tokio::test]
async fn a_copy_or_move_into_itself_is_a_409() {
    let (_s, a) = start().await;
    let plugin = a.files_path().join("plugin");
    std::fs::create_dir_all(plugin.join("a/b")).unwrap();
    std::fs::write(plugin.join("a/b/f"), b"f").unwrap();
    std::fs::write(plugin.join("g"), b"g").unwrap();
    std::os::unix::fs::symlink("a", plugin.join("to-a")).unwrap();
    let before = tree(&plugin);
    for m in ["COPY", "MOVE"] {
        for (from, to) in [
            ("/webdav/plugin/a/", "/webdav/plugin/a/b/c/"),
            ("/webdav/plugin/a/", "/webdav/plugin/a/c/"),
            ("/webdav/plugin/a/", "/webdav/plugin/a/"),
            ("/webdav/plugin/g", "/webdav/plugin/g"),
            // Through a symlink to the source.
            ("/webdav/plugin/a/", "/webdav/plugin/to-a/c/"),
        ] {
            let r = a.send(m, from, "", &[("destination", to)]).await;
            assert_eq!(r.status, 409, "{m} {from} -> {to}: {}", r.text());
        }
    }
    assert_eq!(tree(&plugin), before, "nothing was copied or moved");
    // Beside itself is fine.
    assert_eq!(
        copy(&a, "/webdav/plugin/a/", "/webdav/plugin/a2/")
            .await
            .status,
        201
    );
}

#[tokio::test]
async fn a_copy_over_its_budget_is_a_507_before_it_starts() {
    let (_s, a) = start().await;
    let files = a.files_path();
    // Bytes: more than the destination's free space.
    let _mnt = e2e::mount::Tmpfs::at(&files.join("plugin/small"), "1m");
    let big = files.join("watch/big");
    std::fs::create_dir_all(&big).unwrap();
    for i in 0..4 {
        std::fs::write(big.join(format!("{i}.bin")), vec![7u8; 400 * 1024]).unwrap();
    }
    let r = copy(&a, "/webdav/watch/big/", "/webdav/plugin/small/big/").await;
    r.assert_error(507, "insufficient_storage");
    assert!(
        tree(&files.join("plugin/small")).is_empty(),
        "nothing copied"
    );
    // Entries: more than 100,000 files and folders.
    let many = files.join("watch/many");
    std::fs::create_dir_all(&many).unwrap();
    for i in 0..100_000 {
        std::fs::File::create(many.join(i.to_string())).unwrap();
    }
    let r = copy(&a, "/webdav/watch/many/", "/webdav/plugin/many/").await;
    r.assert_error(507, "insufficient_storage");
    assert!(r.text().contains("100000"), "{}", r.text());
    assert!(!files.join("plugin/many").exists());
}

const MIB: u64 = 1 << 20;

/// A file of `len` bytes that takes no room (a hole), to copy from.
fn sparse(path: &Path, len: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::File::create(path).unwrap().set_len(len).unwrap();
}

/// A filesystem of 1,100 MiB: a COPY leaves it 1 GiB free, so 76 MiB may
/// be copied into it.
fn roomy(a: &Apid) -> e2e::mount::Tmpfs {
    e2e::mount::Tmpfs::at(&a.files_path().join("plugin/roomy"), "1100m")
}

#[tokio::test]
async fn a_copy_into_the_reserve_is_a_507_before_it_starts() {
    // The default reserve (the harness sets none, so that the other tests
    // do not depend on the machine's free space).
    let (_s, a) = start_with(&[("META_CORE_DAV_COPY_RESERVE_BYTES", "1073741824")]).await;
    let files = a.files_path();
    let _mnt = roomy(&a);
    // Within the free space (1,100 MiB), not within the reserve.
    sparse(&files.join("watch/big.mkv"), 100 * MIB);
    let r = copy(&a, "/webdav/watch/big.mkv", "/webdav/plugin/roomy/big.mkv").await;
    r.assert_error(507, "insufficient_storage");
    assert!(r.text().contains("leaves"), "{}", r.text());
    // A folder alike, measured whole before anything is made.
    sparse(&files.join("watch/season/e1.mkv"), 40 * MIB);
    sparse(&files.join("watch/season/e2.mkv"), 40 * MIB);
    let r = copy(&a, "/webdav/watch/season/", "/webdav/plugin/roomy/season/").await;
    r.assert_error(507, "insufficient_storage");
    assert!(
        tree(&files.join("plugin/roomy")).is_empty(),
        "nothing copied"
    );
    // What leaves the reserve is copied.
    let r = copy(
        &a,
        "/webdav/watch/season/e1.mkv",
        "/webdav/plugin/roomy/e1.mkv",
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        std::fs::metadata(files.join("plugin/roomy/e1.mkv"))
            .unwrap()
            .len(),
        40 * MIB
    );
}

#[tokio::test]
async fn a_copy_past_the_ceiling_is_a_507_before_it_starts() {
    let (_s, a) = start_with(&[("META_CORE_DAV_COPY_MAX_BYTES", "8388608")]).await;
    let files = a.files_path();
    let _mnt = roomy(&a);
    sparse(&files.join("watch/nine.bin"), 9 * MIB);
    let r = copy(
        &a,
        "/webdav/watch/nine.bin",
        "/webdav/plugin/roomy/nine.bin",
    )
    .await;
    r.assert_error(507, "insufficient_storage");
    assert!(
        r.text().contains("META_CORE_DAV_COPY_MAX_BYTES"),
        "{}",
        r.text()
    );
    sparse(&files.join("watch/d/a.bin"), 5 * MIB);
    sparse(&files.join("watch/d/b.bin"), 5 * MIB);
    let r = copy(&a, "/webdav/watch/d/", "/webdav/plugin/roomy/d/").await;
    r.assert_error(507, "insufficient_storage");
    assert!(
        tree(&files.join("plugin/roomy")).is_empty(),
        "nothing copied"
    );
    let r = copy(&a, "/webdav/watch/d/a.bin", "/webdav/plugin/roomy/a.bin").await;
    assert_eq!(r.status, 201, "{}", r.text());
}

#[tokio::test]
async fn a_destination_on_another_host_is_a_502() {
    let (_s, a) = start().await;
    let plugin = a.files_path().join("plugin");
    std::fs::write(plugin.join("a.txt"), b"a").unwrap();
    let here = format!("127.0.0.1:{}", a.port());
    for m in ["COPY", "MOVE"] {
        for dest in [
            "http://elsewhere.example/webdav/plugin/b.txt".to_owned(),
            format!("http://127.0.0.1:{}/webdav/plugin/b.txt", a.port() ^ 1),
            "https://elsewhere.example/webdav/plugin/b.txt".to_owned(),
        ] {
            let r = a
                .send(m, "/webdav/plugin/a.txt", "", &[("destination", &dest)])
                .await;
            assert_eq!(r.status, 502, "{m} -> {dest}: {}", r.text());
        }
    }
    assert_eq!(tree(&plugin), ["a.txt"]);
    // Its own host (the request's Host), or a path alone, is here.
    let r = copy(
        &a,
        "/webdav/plugin/a.txt",
        &format!("http://{here}/webdav/plugin/b.txt"),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = copy(&a, "/webdav/plugin/a.txt", "/webdav/plugin/c.txt").await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(tree(&plugin), ["a.txt", "b.txt", "c.txt"]);
}
