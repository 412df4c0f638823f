//! `locks/kv-leader.info` as the mesh's clients see it (issue 24): they
//! watch `locks/` and call the URL the moment the file appears, and they
//! take any rewrite of it for a leader change. So it appears only once the
//! leader's public API answers, is left as it is while the same leader's
//! daemons restart (and when the same leader comes back after a crash),
//! and is removed on an orderly stop.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use e2e::apid::Http;
use e2e::daemon::test_dir;
use e2e::supervisor::{Launch, wait_gone};
use e2e::wait::{DAEMON_DEADLINE, IO_DEADLINE, until, within};
use metacore::layout::Daemon;
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;

/// The info file's events, as a client watching `locks/` with inotify
/// sees them: one message each time the file is created or renamed into
/// place, or written.
struct WatchedLocks {
    _watcher: notify::RecommendedWatcher,
    appeared: mpsc::UnboundedReceiver<EventKind>,
}

fn watch_locks(meta_core_path: &Path) -> WatchedLocks {
    let locks = meta_core_path.join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    let (tx, appeared) = mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
        let Ok(e) = e else { return };
        let ours = e.paths.iter().any(|p| p.ends_with("kv-leader.info"));
        let written = matches!(e.kind, EventKind::Create(_) | EventKind::Modify(_));
        if ours && written {
            let _ = tx.send(e.kind);
        }
    })
    .unwrap();
    watcher.watch(&locks, RecursiveMode::NonRecursive).unwrap();
    WatchedLocks {
        _watcher: watcher,
        appeared,
    }
}

/// As a client does: the moment the file appears, read the URL and call
/// `/urls` once, with no retry.
async fn call_the_moment_it_appears(w: &mut WatchedLocks, info: &Path) -> (String, u16) {
    within(
        "kv-leader.info to appear",
        DAEMON_DEADLINE,
        w.appeared.recv(),
    )
    .await
    .expect("the watcher runs");
    let url = std::fs::read_to_string(info).unwrap();
    let url = url.trim().to_owned();
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let r = Http::new(port)
        .try_send(http::Method::GET, "/urls", bytes::Bytes::new(), &[])
        .await;
    let status = match r {
        Ok(r) => r.status,
        Err(e) => panic!("{url}/urls refused the moment kv-leader.info appeared: {e}"),
    };
    (url, status)
}

fn inode(path: &PathBuf) -> (u64, i64, i64) {
    let m = std::fs::metadata(path).unwrap();
    (m.ino(), m.mtime(), m.mtime_nsec())
}

#[tokio::test]
async fn a_client_watching_locks_reaches_the_api_the_moment_the_file_appears() {
    let dir = test_dir();
    let launch = Launch::in_dir(dir.path(), "run");
    let mut watched = watch_locks(&dir.path().join("meta-core"));
    // Three starts of a leader, each stopped in order: every time, the
    // first call a watching client makes is answered, and the stop takes
    // the file away.
    for round in 0..3 {
        let mut mc = launch.clone().spawn();
        let info = mc.info_file();
        let (url, status) = call_the_moment_it_appears(&mut watched, &info).await;
        assert_eq!(url, mc.api_url(), "round {round}");
        assert_eq!(status, 200, "round {round}: /urls");
        mc.wait_all_ready().await;
        mc.process.sigterm();
        let exit = mc.process.wait_exit().await;
        assert!(exit.success(), "{exit}\n{}", mc.process.stderr());
        assert!(!info.exists(), "round {round}: an orderly stop removes it");
        // What the stop's removal and any late write queued is not this
        // round's appearance.
        while watched.appeared.try_recv().is_ok() {}
    }
}

#[tokio::test]
async fn the_same_leader_leaves_the_file_as_it_is() {
    let dir = test_dir();
    let launch = Launch::in_dir(dir.path(), "run");
    let mut mc = launch.clone().start().await;
    let info = mc.info_file();
    let first = inode(&info);
    let mut watched = watch_locks(&mc.meta_core_path());

    // Its own daemons restart, apid and storaged included: untouched.
    for daemon in [Daemon::Apid, Daemon::Storaged, Daemon::Apid] {
        let before = mc.daemon(daemon).await.restarts;
        let out = mc.cli(&["restart", daemon.name()]);
        assert!(out.status.success(), "{out:?}");
        mc.wait_status("the restarted daemon ready again", |s| {
            s.daemons
                .iter()
                .any(|d| d.name == daemon && d.ready && d.restarts > before)
        })
        .await;
    }
    assert_eq!(mc.get("/health").await.status, 200);
    assert_eq!(inode(&info), first, "a daemon's restart rewrote it");

    // The same leader killed and started again on the same volume and
    // address: the file that names it already is left as it is.
    let pids = mc.daemon_pids().await;
    mc.process.kill9();
    wait_gone(&pids, "the killed tree to be gone").await;
    assert!(info.exists(), "a crash leaves the file behind");
    let mut again = launch.start().await;
    assert_eq!(again.get("/health").await.status, 200);
    // The log says the API answered and the file already named it: the
    // announcement is done, and it wrote nothing.
    until("the announcement to be logged", IO_DEADLINE, || async {
        let log = std::fs::read_to_string(again.log_dir().join("meta-core.log"))
            .unwrap_or_default()
            + &again.process.stderr();
        log.contains("kv-leader.info already names this leader")
            .then_some(())
    })
    .await;
    assert_eq!(inode(&info), first, "the same leader rewrote it");
    assert!(
        watched.appeared.try_recv().is_err(),
        "a client watching locks/ saw a write"
    );
    again.process.sigterm();
    assert!(again.process.wait_exit().await.success());
    assert!(!info.exists());
}
