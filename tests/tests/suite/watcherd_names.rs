//! watcherd and names that are not UTF-8 (issue 23, finding N13), on a
//! real folder with real inotify: such a file or folder is logged once,
//! counted in `/status` as `refusedNames`, and never minted, announced,
//! watched or walked into, however often it is walked past.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use e2e::sse::{Follower, Next};
use e2e::wait::until;
use serde_json::Value;

use super::watcherd::Watched;

/// The next event, which must be the `add` of `path`.
async fn next_is_add(f: &mut Follower, path: &str) {
    match f.next(Duration::from_secs(30)).await {
        Next::Event(e) => assert_eq!((e.event.as_str(), e.field("path")), ("add", path)),
        other => panic!("no add of {path}: {other:?}"),
    }
}

/// The lines of watcherd's log that tell of a refused name.
fn logged(w: &Watched) -> usize {
    std::fs::read_to_string(w.mc.log_dir().join("watcherd.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("not UTF-8"))
        .count()
}

#[tokio::test]
async fn names_that_are_not_utf8_are_refused_once_and_never_announced() {
    let w = Watched::start(&[("DEBOUNCE_MS", "100")]).await;
    let mut f = w.follow().await;
    let watch = w.files().join("watch");
    // "café" in Latin-1: a byte that is not UTF-8.
    let bad = OsStr::from_bytes(b"caf\xe9");
    let mut file = OsString::from("film-");
    file.push(bad);
    file.push(".mkv");
    std::fs::write(watch.join(&file), b"a file with a Latin-1 name").unwrap();
    std::fs::create_dir(watch.join(bad)).unwrap();
    std::fs::write(watch.join(bad).join("inside.mkv"), b"in a Latin-1 folder").unwrap();
    // Events come in order: once this one is announced, those before it
    // were taken in.
    w.write("watch/marker.mkv", b"written after them");
    next_is_add(&mut f, "watch/marker.mkv").await;
    let s = w.status().await;
    assert_eq!(s["refusedNames"], 2, "the file and the folder: {s}");

    // Written in the refused folder: it is not watched, so nothing sees it.
    std::fs::write(watch.join(bad).join("later.mkv"), b"later").unwrap();
    // Walked again: refused again, not counted nor logged again.
    for _ in 0..2 {
        let r: Value = w
            .watcherd()
            .call(http::Method::POST, "/watchers/scan-all", None::<&()>)
            .await
            .expect("scan-all on watcherd's socket");
        assert_eq!(r["totalFiles"], 1, "only the marker: {r}");
    }
    w.write("watch/marker-2.mkv", b"written after the scans");
    next_is_add(&mut f, "watch/marker-2.mkv").await;
    let s = w.status().await;
    assert_eq!(s["refusedNames"], 2, "{s}");
    assert_eq!(s["knownFiles"], 2, "{s}");
    assert_eq!(
        s["inotify"]["watchedDirs"], 3,
        "the folder is not watched: {s}"
    );
    assert_eq!(w.roots(), 2, "nothing minted for them");
    assert_eq!(
        w.query("SELECT count(*) FROM kv WHERE k LIKE 'seen:%'"),
        2,
        "nothing seen of them"
    );
    until(
        "the refusals in watcherd's log",
        Duration::from_secs(20),
        || async { (logged(&w) >= 2).then_some(()) },
    )
    .await;
    assert_eq!(logged(&w), 2, "each logged once");
}
