//! mountd when things go wrong, with the real rclone and a real FUSE mount
//! (issue 15): rclone killed (the loss recorded, the mounts back through a
//! new rclone), a remote that cannot be listed (written down, then mounted
//! once it answers), a mount unmounted from outside (mounted again), a
//! SIGTERM (no mount left, even mid-request or with rclone down), a
//! SIGKILL (the next mountd replaces the stale mounts), and FILES_PATH
//! behind a symlink. Compiled as ignored where this machine has no rclone
//! or FUSE (`tests/build.rs`); CI has both.

use std::time::Duration;

use e2e::mountd::{Mountd, alive, is_mounted, local_remote, mounts_under, rclone_children_of};
use e2e::wait::until;
use http::Method;
use serde_json::json;

#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn a_killed_rclone_is_recorded_and_its_mounts_come_back() {
    let dir = e2e::daemon::test_dir();
    let (m, id, point) = Mountd::with_local_mount(dir.path()).await;
    let rclone = m.status().await.unwrap()["rclone"]["pid"].as_u64().unwrap();
    let pid = rustix::process::Pid::from_raw(rclone as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();

    // The loss is written down, in the error file while rclone is away
    // (rclone's restart backoff, 200 ms, and its start: a window the poll
    // of at most 50 ms sees), and in the log...
    let error_file = m.error_file(&id);
    let text = until("the error file", Duration::from_secs(10), || async {
        std::fs::read_to_string(&error_file).ok()
    })
    .await;
    assert!(
        text.starts_with("mount lost: rclone rcd is restarting"),
        "{text}"
    );
    m.logged("mount lost: rclone rcd is restarting").await;
    // ...and cleared once the mount is back, through a new rclone.
    until("the mount back", Duration::from_secs(20), || async {
        let s = m.mount(&id).await;
        (s["mounted"] == true && s["error"].is_null() && !error_file.exists()).then_some(())
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(point.join("a.txt")).unwrap(),
        "alpha"
    );
    let s = m.mount(&id).await;
    assert_eq!(s["remounts"], 1, "{s}");
    assert_ne!(
        m.status().await.unwrap()["rclone"]["pid"].as_u64(),
        Some(rclone)
    );
}

#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn sigterm_leaves_no_mount_and_a_killed_mountds_are_cleaned_by_the_next() {
    let dir = e2e::daemon::test_dir();
    local_remote(dir.path(), "src", &[("a.txt", "alpha")]);
    let mut m = Mountd::start(dir.path()).await;
    for name in ["one", "two"] {
        m.create(json!({"name": name, "type": "rclone", "rcloneRemote": "src"}))
            .await;
    }
    let files = m.files();
    assert!(is_mounted(&files.join("corn/one")) && is_mounted(&files.join("corn/two")));
    let rclone = rclone_children_of(m.process.pid());
    assert_eq!(rclone.len(), 1, "{rclone:?}");

    m.process.sigterm();
    m.process.wait_exit().await;
    assert_eq!(
        mounts_under(dir.path()),
        vec![],
        "no mount left after SIGTERM"
    );
    assert!(!alive(rclone[0]), "rclone stopped with mountd");
    drop(m);

    // The next mountd mounts both again (they are still wanted)...
    let mut m = Mountd::start(dir.path()).await;
    until("both mounted again", Duration::from_secs(20), || async {
        (is_mounted(&files.join("corn/one")) && is_mounted(&files.join("corn/two"))).then_some(())
    })
    .await;
    let rclone = rclone_children_of(m.process.pid());
    // ...and a SIGKILL takes rclone with it, leaving stale mounts...
    m.process.kill9();
    until(
        "rclone to end with mountd",
        Duration::from_secs(5),
        || async { rclone.iter().all(|p| !alive(*p)).then_some(()) },
    )
    .await;
    // "Transport endpoint is not connected" (or, while the kernel tears
    // the connection down, "Software caused connection abort"), once the
    // kernel's cached attributes have run out.
    let gone = [rustix::io::Errno::NOTCONN, rustix::io::Errno::CONNABORTED];
    until("the mount stale", Duration::from_secs(10), || async {
        let stale = std::fs::metadata(files.join("corn/one")).err()?;
        gone.iter()
            .any(|e| stale.raw_os_error() == Some(e.raw_os_error()))
            .then_some(())
    })
    .await;
    std::mem::forget(m);

    // ...which the next mountd detaches and mounts again.
    let m = Mountd::start(dir.path()).await;
    until(
        "the stale mounts replaced",
        Duration::from_secs(20),
        || async {
            ["one", "two"]
                .iter()
                .all(|n| std::fs::read_to_string(files.join(format!("corn/{n}/a.txt"))).is_ok())
                .then_some(())
        },
    )
    .await;
    let points: Vec<_> = mounts_under(&files).into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        points.len(),
        2,
        "one mount each, no stale one beneath: {points:?}"
    );
    drop(m);
}

/// rclone killed and mountd stopped before a new rclone is up: the stale
/// mounts the dead one left are detached by mountd itself.
#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn a_stop_while_rclone_is_down_detaches_the_stale_mounts() {
    let dir = e2e::daemon::test_dir();
    let mut m = Mountd::start(dir.path()).await;
    let (_, point) = m.memory_mount("mem").await;
    assert!(is_mounted(&point));
    let rclone = rclone_children_of(m.process.pid());
    let pid = rustix::process::Pid::from_raw(rclone[0] as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    m.process.sigterm();
    m.process.wait_exit().await;
    assert_eq!(mounts_under(dir.path()), vec![], "no stale mount left");
}

/// A remote that cannot be listed is not mounted: why is in the status
/// and the error file, and once it answers the keeper mounts it (after
/// its backoff) and removes the file.
#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn a_remote_that_cannot_be_listed_is_written_down_then_mounted_once_it_answers() {
    let dir = e2e::daemon::test_dir();
    let src = local_remote(dir.path(), "src", &[]);
    let missing = src.join("later");
    let m = Mountd::start(dir.path()).await;
    let mount = m
        .create(
            json!({"name": "later", "type": "rclone", "rcloneRemote": "src",
                       "rclonePath": "later"}),
        )
        .await;
    let id = mount["id"].as_str().unwrap().to_owned();
    assert_eq!(mount["mounted"], false, "{mount}");
    let why = mount["error"].as_str().unwrap();
    assert!(why.contains("the remote cannot be listed"), "{why}");
    let written = std::fs::read_to_string(m.error_file(&id)).unwrap();
    assert_eq!(written.trim(), why);
    let point = m.files().join("corn/later");
    assert!(!is_mounted(&point));

    std::fs::create_dir_all(&missing).unwrap();
    std::fs::write(missing.join("a.txt"), "here now").unwrap();
    until(
        "mounted once it answers",
        Duration::from_secs(30),
        || async {
            let s = m.mount(&id).await;
            (s["mounted"] == true && s["error"].is_null()).then_some(())
        },
    )
    .await;
    assert!(!m.error_file(&id).exists());
    assert_eq!(
        std::fs::read_to_string(point.join("a.txt")).unwrap(),
        "here now"
    );
}

/// The health check: a mount unmounted behind mountd's back is found by
/// the keeper's next look and mounted again.
#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn a_mount_unmounted_from_outside_is_mounted_again() {
    let dir = e2e::daemon::test_dir();
    let (m, id, point) = Mountd::with_local_mount(dir.path()).await;
    let ok = std::process::Command::new("umount")
        .arg("-l")
        .arg(&point)
        .status()
        .unwrap();
    assert!(ok.success());
    assert!(!is_mounted(&point));
    until("mounted again", Duration::from_secs(30), || async {
        let s = m.mount(&id).await;
        (s["remounts"] == 1 && s["mounted"] == true && is_mounted(&point)).then_some(())
    })
    .await;
    m.logged("mount lost: it was unmounted from outside").await;
    assert_eq!(
        std::fs::read_to_string(point.join("a.txt")).unwrap(),
        "alpha"
    );
}

/// A SIGTERM while a safe-unmount waits on a held file: the stop does not
/// wait for the request, and leaves no mount.
#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn a_stop_during_a_long_request_still_unmounts_everything() {
    let dir = e2e::daemon::test_dir();
    let mut m = Mountd::start(dir.path()).await;
    let (id, point) = m.memory_mount("mem").await;
    std::fs::write(point.join("x.txt"), "held").unwrap();
    let held = std::fs::File::open(point.join("x.txt")).unwrap();
    let path = format!("/mounts/{id}/safe-unmount?timeout=60000");
    let client = m.client.clone();
    let asked = tokio::spawn(async move {
        client
            .call::<(), serde_json::Value>(Method::POST, &path, None)
            .await
    });
    m.logged("waiting for the files open under the mount").await;
    m.process.sigterm();
    m.process.wait_exit().await;
    assert_eq!(mounts_under(dir.path()), vec![], "no mount left");
    // The request ended with mountd (answered or cut).
    let _ = e2e::wait::within("the request to end", Duration::from_secs(10), asked).await;
    drop(held);
}

/// FILES_PATH behind a symlink: the kernel names the mounts by the real
/// path, and mountd finds them (and what is open under them) all the same.
#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn files_path_behind_a_symlink_is_followed() {
    let dir = e2e::daemon::test_dir();
    std::fs::create_dir_all(dir.path().join("real-files")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("real-files"), dir.path().join("files-link"))
        .unwrap();
    let files = dir.path().join("files-link");
    let mut m = Mountd::spawn_with(dir.path(), &[("FILES_PATH", files.display().to_string())]);
    m.rclone_in("running").await;
    let (id, _) = m.memory_mount("mem").await;
    let real = dir.path().join("real-files/corn/mem");
    assert!(is_mounted(&real), "{:?}", mounts_under(dir.path()));
    std::fs::write(files.join("corn/mem/x.txt"), "x").unwrap();
    let held = std::fs::File::open(files.join("corn/mem/x.txt")).unwrap();
    let done = m
        .call(
            Method::POST,
            &format!("/mounts/{id}/safe-unmount?timeout=300"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(done["status"], "warning", "the held file is seen: {done}");
    drop(held);
    // Still looked after: the keeper's looks find it answering.
    m.looks(1).await;
    assert_eq!(m.mount(&id).await["remounts"], 0);
    m.process.sigterm();
    m.process.wait_exit().await;
    assert_eq!(mounts_under(dir.path()), vec![], "no mount left");
}

/// An unmount while a mount attempt waits on a remote that does not
/// answer stops the attempt instead of waiting it out.
#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn an_unmount_cancels_a_mount_attempt_under_way() {
    let dir = e2e::daemon::test_dir();
    let m = Mountd::start(dir.path()).await;
    // Nothing answers SMB here; rclone takes about 11 s to give up, longer
    // than the create waits (5 s).
    let mount = m
        .create(
            json!({"name": "nas", "type": "smb", "smbServer": "127.0.0.1", "smbShare": "media"}),
        )
        .await;
    let id = mount["id"].as_str().unwrap().to_owned();
    let done = m
        .call(Method::POST, &format!("/mounts/{id}/unmount"), None)
        .await
        .unwrap();
    assert_eq!(done["status"], "ok", "{done}");
    m.logged("the mount was cancelled").await;
    let s = m.mount(&id).await;
    assert_eq!(
        (
            s["mounted"].clone(),
            s["desiredMounted"].clone(),
            s["error"].clone()
        ),
        (json!(false), json!(false), json!(null)),
        "{s}"
    );
    assert!(!m.error_file(&id).exists());
}
