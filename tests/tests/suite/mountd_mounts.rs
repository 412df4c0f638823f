//! mountd's mounts with the real rclone and a real FUSE mount (issue 15):
//! a local folder (through an alias remote) and `:memory:` mounted under `FILES_PATH/corn/`,
//! read and written through the kernel; unmount, safe-unmount with a file
//! held open, delete; bad requests changing nothing; SMB's password kept
//! obscured; no rclone on the PATH. What goes wrong (rclone killed, stops,
//! lost mounts) is in `mountd_faults`. Compiled as ignored where this
//! machine has no rclone or FUSE (`tests/build.rs`); CI has both.

use std::time::Duration;

use e2e::mountd::{Mountd, is_mounted, local_remote, mounts_under};
use e2e::wait::until;
use http::Method;
use metacore::error::ErrorCode;
use serde_json::{Value, json};

use e2e::fixtures::api_error;

#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn a_local_folder_is_mounted_read_unmounted_and_deleted() {
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
        json!({"remotes": [{"name": "src", "type": "alias"}]})
    );

    let mount = m
        .create(json!({
            "name": "My Src",
            "type": "rclone",
            "rcloneRemote": "src",
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
    // Still unmounted after the keeper's next looks.
    m.looks(2).await;
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
        .refused(Method::POST, &format!("/mounts/{id}/scan"), None)
        .await;
    assert!(e.message.contains("watcherd"), "{e}");

    // Delete: unmounted, forgotten, its folder gone.
    let done = m
        .call(Method::DELETE, &format!("/mounts/{id}"), None)
        .await
        .unwrap();
    assert_eq!(done["status"], "ok");
    assert!(!is_mounted(&point));
    assert!(!point.exists());
    let e = m.refused(Method::GET, &format!("/mounts/{id}"), None).await;
    assert_eq!(e.code, ErrorCode::NotFound);
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(m.mounts_file()).unwrap()).unwrap();
    assert_eq!(file["mounts"], json!([]));
    // The remote's files are untouched.
    assert_eq!(
        std::fs::read_to_string(src.join("films/a.mkv")).unwrap(),
        "hello"
    );
}

#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn a_memory_remote_takes_writes_and_safe_unmount_waits_for_open_files() {
    let dir = e2e::daemon::test_dir();
    let m = Mountd::start(dir.path()).await;
    let (id, point) = m.memory_mount("mem").await;
    std::fs::write(point.join("x.txt"), "written through FUSE").unwrap();
    assert_eq!(
        std::fs::read_to_string(point.join("x.txt")).unwrap(),
        "written through FUSE"
    );

    // Held open: the wait runs out, the answer says so, it stays mounted.
    let held = std::fs::File::open(point.join("x.txt")).unwrap();
    let done = m
        .call(
            Method::POST,
            &format!("/mounts/{id}/safe-unmount?timeout=700"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(done["status"], "warning", "{done}");
    let msg = done["message"].as_str().unwrap();
    assert!(
        msg.contains("1 file") && msg.contains("corn/mem/x.txt"),
        "{msg}"
    );
    assert!(is_mounted(&point));
    assert_eq!(m.mount(&id).await["desiredMounted"], true);

    // Closed while it waits (mountd logs when it starts a wait; the first
    // one above logged too, so the second line is this request's): it is
    // unmounted then.
    let path = format!("/mounts/{id}/safe-unmount?timeout=60000");
    let asked = m.call(Method::POST, &path, None);
    let close = async {
        until("the second wait", Duration::from_secs(30), || async {
            let log = m.process.stderr();
            (log.matches("waiting for the files open under the mount")
                .count()
                >= 2)
                .then_some(())
        })
        .await;
        drop(held);
    };
    let (done, ()) = tokio::join!(asked, close);
    let done = done.unwrap();
    assert_eq!(done["status"], "ok", "{done}");
    assert!(!is_mounted(&point));
    assert_eq!(m.mount(&id).await["desiredMounted"], false);
}

#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn bad_requests_are_refused_and_change_nothing() {
    let dir = e2e::daemon::test_dir();
    local_remote(dir.path(), "src", &[("a.txt", "alpha")]);
    let m = Mountd::start(dir.path()).await;
    let id = m
        .create(json!({"name": "films", "type": "rclone", "rcloneRemote": "src", "enabled": false}))
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
        let e = m.refused(method.clone(), &path, body).await;
        assert_eq!(e.code, ErrorCode::NotFound, "{method} {path}: {e}");
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
            json!({"name": "n", "type": "rclone", "rcloneRemote": ":local", "rclonePath": "/"}),
            bad,
            "rcloneRemote",
        ),
        (
            json!({"name": "n", "type": "rclone", "rcloneRemote": "not-configured"}),
            bad,
            "no remote \"not-configured\" in rclone's configuration",
        ),
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
        let e = m.refused(Method::POST, "/mounts", Some(body.clone())).await;
        assert_eq!(e.code, expected, "{body}: {e}");
        assert!(e.message.contains(what), "{body}: {e}");
    }
    let raw = api_error(
        m.client
            .send(
                Method::POST,
                "/mounts",
                Some(bytes::Bytes::from_static(b"{not json")),
            )
            .await,
    );
    assert_eq!(raw.code, ErrorCode::BadRequest);
    let e = m
        .refused(
            Method::PUT,
            &format!("/mounts/{id}"),
            Some(json!({"dirCacheTime": "soon"})),
        )
        .await;
    assert_eq!(e.code, ErrorCode::BadRequest);
    for t in ["-1", "lots", "999999999"] {
        let e = m
            .refused(
                Method::POST,
                &format!("/mounts/{id}/safe-unmount?timeout={t}"),
                None,
            )
            .await;
        assert_eq!(e.code, ErrorCode::BadRequest, "timeout={t}");
    }
    let e = m
        .refused(Method::POST, &format!("/mounts/{id}/scan"), None)
        .await;
    assert!(e.message.contains("not mounted"), "{e}");
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
    // Nothing listens on 445 here: not mounted, and why (once rclone has
    // given up connecting, which takes longer than the create waits).
    assert_eq!(mount["mounted"], false, "{mount}");
    let mount = until("the SMB error", Duration::from_secs(60), || async {
        Some(m.mount(id).await).filter(|s| s["error"].is_string())
    })
    .await;
    let why = mount["error"].as_str().unwrap();
    assert!(why.contains("couldn't connect SMB"), "{why}");
    let error_file = std::fs::read_to_string(m.error_file(id)).unwrap();
    assert!(error_file.contains("couldn't connect SMB"), "{error_file}");
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
    for (what, text) in [
        ("the error", why.to_owned()),
        ("the error file", error_file),
        ("the log", m.process.stderr()),
    ] {
        assert!(
            !text.contains(obscured),
            "{what} shows the obscured password: {text}"
        );
    }
    let out = std::process::Command::new("rclone")
        .args(["reveal", obscured])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "correct horse",
        "rclone reveal {obscured} ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
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
    // (While mountd has not yet looked for rclone, the error says it is
    // starting; then that it is not installed.)
    let s = until("the mount's error", Duration::from_secs(20), || async {
        Some(m.mount(id).await).filter(|s| {
            s["error"]
                .as_str()
                .is_some_and(|e| e.contains("rclone is not installed"))
        })
    })
    .await;
    assert!(
        s["error"]
            .as_str()
            .unwrap()
            .starts_with("cannot mount: rclone is not installed"),
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
        let e = m.refused(method.clone(), &path, body).await;
        assert_eq!(e.code, ErrorCode::Disabled, "{method} {path}: {e}");
        assert!(e.message.contains("rclone is not installed"), "{e}");
    }
    let list = m.call(Method::GET, "/mounts", None).await.unwrap();
    assert_eq!(list["mounts"].as_array().unwrap().len(), 1);
    // What needs no rclone works: nothing is mounted to scan, and an
    // unmount and a delete have nothing to undo.
    let e = m
        .refused(Method::POST, &format!("/mounts/{id}/scan"), None)
        .await;
    assert!(e.message.contains("not mounted"), "{e}");
    let done = m
        .call(Method::POST, &format!("/mounts/{id}/unmount"), None)
        .await
        .unwrap();
    assert_eq!(done["status"], "ok");
    let done = m
        .call(Method::DELETE, &format!("/mounts/{id}"), None)
        .await
        .unwrap();
    assert_eq!(done["status"], "ok");
    let list = m.call(Method::GET, "/mounts", None).await.unwrap();
    assert_eq!(list["mounts"], json!([]));
}
