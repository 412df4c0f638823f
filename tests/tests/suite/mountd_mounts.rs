//! mountd's mounts with the real rclone and a real FUSE mount (issue 15):
//! a local-folder remote and `:memory:` mounted under `FILES_PATH/corn/`,
//! read and written through the kernel; unmount, safe-unmount with a file
//! held open, delete; a killed rclone's mounts written as an error then
//! mounted again; SIGTERM leaving no mount, a SIGKILL's leftovers cleaned
//! by the next mountd; bad requests changing nothing; SMB's password kept
//! obscured; no rclone on the PATH. Compiled as ignored where this machine
//! has no rclone or FUSE (`tests/build.rs`); CI has both.

use std::time::{Duration, Instant};

use e2e::mountd::{Mountd, alive, is_mounted, local_remote, mounts_under, rclone_children_of};
use e2e::wait::until;
use http::Method;
use metacore::error::ErrorCode;
use metacore::socket::client::ClientError;
use serde_json::{Value, json};

fn code(e: &ClientError) -> ErrorCode {
    match e {
        ClientError::Api(a) => a.code,
        other => panic!("not an API error: {other}"),
    }
}

fn message(e: &ClientError) -> String {
    match e {
        ClientError::Api(a) => a.message.clone(),
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn a_local_remote_is_mounted_read_unmounted_and_deleted() {
    let dir = e2e::daemon::test_dir();
    let src = local_remote(
        dir.path(),
        "src",
        &[("films/a.mkv", "hello"), ("b.txt", "bee")],
    );
    let m = Mountd::start(dir.path()).await;

    let remotes = m
        .call(Method::GET, "/mounts/rclone/remotes", None)
        .await
        .unwrap();
    assert_eq!(
        remotes,
        json!({"remotes": [{"name": "src", "type": "local"}]})
    );

    let mount = m
        .create(json!({
            "name": "My Src",
            "type": "rclone",
            "rcloneRemote": "src",
            "rclonePath": src.display().to_string(),
        }))
        .await;
    let id = mount["id"].as_str().unwrap().to_owned();
    let point = m.files().join("corn/My_Src");
    assert_eq!(mount["mountPath"], point.display().to_string());
    assert_eq!(mount["mounted"], true, "{mount}");
    assert_eq!(mount["error"], Value::Null);
    assert!(is_mounted(&point), "{:?}", mounts_under(dir.path()));
    assert_eq!(
        std::fs::read_to_string(point.join("films/a.mkv")).unwrap(),
        "hello"
    );
    // Kept in mounts.json, private.
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(m.mounts_file()).unwrap()).unwrap();
    assert_eq!(file["mounts"][0]["id"], id.as_str());
    assert_eq!(file["mounts"][0]["desiredMounted"], true);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(m.mounts_file())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    let list = m.call(Method::GET, "/mounts", None).await.unwrap();
    assert_eq!(list["mounts"].as_array().unwrap().len(), 1);

    // Unmount: gone from the kernel, and not wanted any more.
    let done = m
        .call(Method::POST, &format!("/mounts/{id}/unmount"), None)
        .await
        .unwrap();
    assert_eq!(done["status"], "ok");
    assert!(!is_mounted(&point));
    let s = m.mount(&id).await;
    assert_eq!(
        (s["mounted"].clone(), s["desiredMounted"].clone()),
        (json!(false), json!(false))
    );
    // Still unmounted after the keeper's next look.
    tokio::time::sleep(manager_look()).await;
    assert!(!is_mounted(&point));

    // Mount again.
    let done = m
        .call(Method::POST, &format!("/mounts/{id}/mount"), None)
        .await
        .unwrap();
    assert_eq!(done["status"], "ok", "{done}");
    assert_eq!(std::fs::read_to_string(point.join("b.txt")).unwrap(), "bee");

    // Scanning asks watcherd, which is not running here.
    let e = m
        .call(Method::POST, &format!("/mounts/{id}/scan"), None)
        .await
        .unwrap_err();
    assert!(message(&e).contains("watcherd"), "{e}");

    // Delete: unmounted, forgotten, its folder gone.
    let done = m
        .call(Method::DELETE, &format!("/mounts/{id}"), None)
        .await
        .unwrap();
    assert_eq!(done["status"], "ok");
    assert!(!is_mounted(&point));
    assert!(!point.exists());
    let e = m
        .call(Method::GET, &format!("/mounts/{id}"), None)
        .await
        .unwrap_err();
    assert_eq!(code(&e), ErrorCode::NotFound);
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(m.mounts_file()).unwrap()).unwrap();
    assert_eq!(file["mounts"], json!([]));
    // The remote's files are untouched.
    assert_eq!(
        std::fs::read_to_string(src.join("films/a.mkv")).unwrap(),
        "hello"
    );
}

/// A little more than the keeper's interval between looks
/// (`mountd::manager::LOOK_EVERY`, 5 s).
fn manager_look() -> Duration {
    Duration::from_millis(5_500)
}

#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn a_memory_remote_takes_writes_and_safe_unmount_waits_for_open_files() {
    let dir = e2e::daemon::test_dir();
    let m = Mountd::start(dir.path()).await;
    let mount = m
        .create(json!({"name": "mem", "type": "rclone", "rcloneRemote": ":memory:"}))
        .await;
    let id = mount["id"].as_str().unwrap().to_owned();
    let point = m.files().join("corn/mem");
    assert_eq!(mount["mounted"], true, "{mount}");
    std::fs::write(point.join("x.txt"), "written through FUSE").unwrap();
    assert_eq!(
        std::fs::read_to_string(point.join("x.txt")).unwrap(),
        "written through FUSE"
    );

    // Held open: the wait runs out, the answer says so, it stays mounted.
    let held = std::fs::File::open(point.join("x.txt")).unwrap();
    let asked = Instant::now();
    let done = m
        .call(
            Method::POST,
            &format!("/mounts/{id}/safe-unmount?timeout=700"),
            None,
        )
        .await
        .unwrap();
    assert!(asked.elapsed() >= Duration::from_millis(700));
    assert_eq!(done["status"], "warning", "{done}");
    let msg = done["message"].as_str().unwrap();
    assert!(
        msg.contains("1 file") && msg.contains("corn/mem/x.txt"),
        "{msg}"
    );
    assert!(is_mounted(&point));
    assert_eq!(m.mount(&id).await["desiredMounted"], true);

    // Closed while it waits: unmounted then.
    let closer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        drop(held);
    });
    let done = m
        .call(
            Method::POST,
            &format!("/mounts/{id}/safe-unmount?timeout=20000"),
            None,
        )
        .await
        .unwrap();
    closer.join().unwrap();
    assert_eq!(done["status"], "ok", "{done}");
    assert!(!is_mounted(&point));
    assert_eq!(m.mount(&id).await["desiredMounted"], false);
}

#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn a_killed_rclone_is_written_as_an_error_and_its_mounts_come_back() {
    let dir = e2e::daemon::test_dir();
    let src = local_remote(dir.path(), "src", &[("a.txt", "alpha")]);
    let m = Mountd::start(dir.path()).await;
    let id = m
        .create(
            json!({"name": "src", "type": "rclone", "rcloneRemote": "src",
                       "rclonePath": src.display().to_string()}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let point = m.files().join("corn/src");
    assert_eq!(
        std::fs::read_to_string(point.join("a.txt")).unwrap(),
        "alpha"
    );
    let rclone = m.status().await.unwrap()["rclone"]["pid"].as_u64().unwrap();
    let pid = rustix::process::Pid::from_raw(rclone as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();

    // The failure is written down while rclone is away...
    let error_file = m.error_file(&id);
    let text = until("the error file", Duration::from_secs(10), || {
        let f = error_file.clone();
        async move { std::fs::read_to_string(f).ok() }
    })
    .await;
    assert!(text.contains("mount lost"), "{text}");
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
    let src = local_remote(dir.path(), "src", &[("a.txt", "alpha")]);
    let mut m = Mountd::start(dir.path()).await;
    for name in ["one", "two"] {
        m.create(
            json!({"name": name, "type": "rclone", "rcloneRemote": "src",
                        "rclonePath": src.display().to_string()}),
        )
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
    // the connection down, "Software caused connection abort").
    let stale = std::fs::metadata(files.join("corn/one")).unwrap_err();
    let gone = [rustix::io::Errno::NOTCONN, rustix::io::Errno::CONNABORTED];
    assert!(
        gone.iter()
            .any(|e| stale.raw_os_error() == Some(e.raw_os_error())),
        "{stale}"
    );
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

#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn bad_requests_are_refused_and_change_nothing() {
    let dir = e2e::daemon::test_dir();
    let src = local_remote(dir.path(), "src", &[("a.txt", "alpha")]);
    let m = Mountd::start(dir.path()).await;
    let id = m
        .create(
            json!({"name": "films", "type": "rclone", "rcloneRemote": "src",
                       "rclonePath": src.display().to_string(), "enabled": false}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let before = std::fs::read(m.mounts_file()).unwrap();
    let unknown = "0b9a5a4e-2f3c-4e0a-9d55-3f1c2b7a8e10";
    for (method, path) in [
        (Method::GET, format!("/mounts/{unknown}")),
        (Method::PUT, format!("/mounts/{unknown}")),
        (Method::DELETE, format!("/mounts/{unknown}")),
        (Method::POST, format!("/mounts/{unknown}/mount")),
        (Method::POST, format!("/mounts/{unknown}/unmount")),
        (Method::POST, format!("/mounts/{unknown}/safe-unmount")),
        (Method::POST, format!("/mounts/{unknown}/scan")),
    ] {
        let body = (method == Method::PUT).then(|| json!({}));
        let e = m.call(method.clone(), &path, body).await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::NotFound, "{method} {path}: {e}");
    }
    let bad = ErrorCode::BadRequest;
    for (body, expected, what) in [
        (
            json!({"type": "rclone", "rcloneRemote": "src"}),
            bad,
            "name",
        ),
        (
            json!({"name": "..", "type": "rclone", "rcloneRemote": "src"}),
            bad,
            "name",
        ),
        (
            json!({"name": "films", "type": "rclone", "rcloneRemote": "src"}),
            ErrorCode::Conflict,
            "already uses",
        ),
        (json!({"name": "n", "type": "nfs"}), bad, "nfs"),
        (
            json!({"name": "n", "type": "rclone", "rcloneRemote": "src,x"}),
            bad,
            "rcloneRemote",
        ),
        (
            json!({"name": "n", "type": "rclone", "rcloneRemote": "src", "rclonePath": "../etc"}),
            bad,
            "rclonePath",
        ),
        (
            json!({"name": "n", "type": "rclone", "rcloneRemote": "src", "cacheMaxAge": "1 week"}),
            bad,
            "cacheMaxAge",
        ),
        (
            json!({"name": "n", "type": "smb", "smbServer": "nas", "smbShare": "a/b"}),
            bad,
            "smbShare",
        ),
        (
            json!({"name": 5, "type": "rclone"}),
            ErrorCode::SchemaViolation,
            "JSON shape",
        ),
    ] {
        let e = m
            .call(Method::POST, "/mounts", Some(body.clone()))
            .await
            .unwrap_err();
        assert_eq!(code(&e), expected, "{body}: {e}");
        assert!(message(&e).contains(what), "{body}: {e}");
    }
    let raw = m
        .client
        .send(
            Method::POST,
            "/mounts",
            Some(bytes::Bytes::from_static(b"{not json")),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&raw), ErrorCode::BadRequest);
    let e = m
        .call(
            Method::PUT,
            &format!("/mounts/{id}"),
            Some(json!({"dirCacheTime": "soon"})),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), ErrorCode::BadRequest);
    for t in ["-1", "lots", "999999999"] {
        let e = m
            .call(
                Method::POST,
                &format!("/mounts/{id}/safe-unmount?timeout={t}"),
                None,
            )
            .await
            .unwrap_err();
        assert_eq!(code(&e), ErrorCode::BadRequest, "timeout={t}");
    }
    let e = m
        .call(Method::POST, &format!("/mounts/{id}/scan"), None)
        .await
        .unwrap_err();
    assert!(message(&e).contains("not mounted"), "{e}");
    assert_eq!(
        std::fs::read(m.mounts_file()).unwrap(),
        before,
        "nothing changed"
    );
    assert!(mounts_under(dir.path()).is_empty());

    // A good update is kept.
    let s = m
        .call(
            Method::PATCH,
            &format!("/mounts/{id}"),
            Some(json!({"pollingIntervalMs": 1000, "cacheMaxSize": "10G"})),
        )
        .await
        .unwrap();
    assert_eq!(
        s["mount"]["pollingIntervalMs"], 5000,
        "raised to the minimum"
    );
    assert_eq!(s["mount"]["cacheMaxSize"], "10G");
}

#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn an_smb_password_is_kept_obscured_and_an_unreachable_server_reported() {
    let dir = e2e::daemon::test_dir();
    let m = Mountd::start(dir.path()).await;
    let mount = m
        .create(
            json!({"name": "nas", "type": "smb", "smbServer": "127.0.0.1",
                       "smbShare": "media", "smbUsername": "bob",
                       "smbPassword": "correct horse"}),
        )
        .await;
    let id = mount["id"].as_str().unwrap();
    // Nothing listens on 445 here: not mounted, and why.
    assert_eq!(mount["mounted"], false, "{mount}");
    let why = mount["error"].as_str().unwrap();
    assert!(
        why.contains("couldn't connect SMB") || why.contains("connect"),
        "{why}"
    );
    assert!(
        std::fs::read_to_string(m.error_file(id))
            .unwrap()
            .contains("SMB")
    );
    assert!(
        mount.get("smbPasswordObscured").is_none(),
        "not shown: {mount}"
    );
    assert!(!is_mounted(&m.files().join("corn/nas")));
    // Stored obscured, as rclone obscures it: rclone reveals the password.
    let text = std::fs::read_to_string(m.mounts_file()).unwrap();
    assert!(!text.contains("correct horse"));
    let file: Value = serde_json::from_str(&text).unwrap();
    let obscured = file["mounts"][0]["smbPasswordObscured"].as_str().unwrap();
    let out = std::process::Command::new("rclone")
        .args(["reveal", obscured])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "correct horse");
}

#[tokio::test]
async fn without_rclone_every_mount_route_says_so() {
    let dir = e2e::daemon::test_dir();
    let mounts = dir.path().join("meta-core/mounts");
    std::fs::create_dir_all(&mounts).unwrap();
    let id = "0b9a5a4e-2f3c-4e0a-9d55-3f1c2b7a8e10";
    std::fs::write(
        mounts.join("mounts.json"),
        format!(r#"{{"version":1,"mounts":[{{"id":"{id}","name":"films","type":"rclone","enabled":true,"desiredMounted":true,"mountPath":"{}","rcloneRemote":"src"}}]}}"#,
            dir.path().join("files/corn/films").display()),
    )
    .unwrap();
    let empty = dir.path().join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    let m = Mountd::spawn(dir.path(), Some(&empty.display().to_string()));
    m.rclone_in("not-installed").await;
    let s = until("the mount's error", Duration::from_secs(20), || async {
        Some(m.mount(id).await).filter(|s| s["error"].is_string())
    })
    .await;
    assert!(
        s["error"]
            .as_str()
            .unwrap()
            .contains("rclone is not installed"),
        "{s}"
    );
    for (method, path, body) in [
        (
            Method::POST,
            "/mounts".to_owned(),
            Some(json!({"name": "n", "type": "rclone", "rcloneRemote": "x"})),
        ),
        (Method::POST, format!("/mounts/{id}/mount"), None),
        (Method::GET, "/mounts/rclone/remotes".to_owned(), None),
    ] {
        let e = m.call(method.clone(), &path, body).await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::Disabled, "{method} {path}: {e}");
        assert!(message(&e).contains("rclone is not installed"), "{e}");
    }
    let list = m.call(Method::GET, "/mounts", None).await.unwrap();
    assert_eq!(list["mounts"].as_array().unwrap().len(), 1);
}

/// rclone killed and mountd stopped before a new rclone is up: the stale
/// mounts the dead one left are detached by mountd itself.
#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn a_stop_while_rclone_is_down_detaches_the_stale_mounts() {
    let dir = e2e::daemon::test_dir();
    let mut m = Mountd::start(dir.path()).await;
    m.create(json!({"name": "mem", "type": "rclone", "rcloneRemote": ":memory:"}))
        .await;
    let point = m.files().join("corn/mem");
    assert!(is_mounted(&point));
    let rclone = rclone_children_of(m.process.pid());
    let pid = rustix::process::Pid::from_raw(rclone[0] as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    m.process.sigterm();
    m.process.wait_exit().await;
    assert_eq!(mounts_under(dir.path()), vec![], "no stale mount left");
}
