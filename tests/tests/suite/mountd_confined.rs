//! Mounts confined (issue 23, finding N1), with the real rclone and a
//! real FUSE mount: a remote of type `local` is refused (at create, and
//! from `mounts.json`); an alias whose folder overlaps one of meta-core's
//! own places (META_CORE_PATH, FILES_PATH, the database's folder, the log
//! and run directories) is refused, however it gets there (a symlink, an
//! ancestor, `/`); so is an alias whose own root holds one of them (an
//! alias of `/`, however many aliases down, with `rclonePath: "etc"`),
//! and a path through a symlink out of the alias's root (review finding
//! 4); an alias keeps every `rclonePath` under its root; an
//! rclone.conf changed after the create is judged again at the next
//! mount, the API's and the keeper's; and a mount folder that resolves
//! into META_CORE_PATH is never mounted. Compiled as ignored where this
//! machine has no rclone or FUSE (`tests/build.rs`); CI has both.

use std::path::Path;
use std::time::Duration;

use e2e::mountd::{Mountd, add_remote, alias_remote, is_mounted, local_remote, mounts_under};
use e2e::wait::until;
use http::Method;
use metacore::error::ErrorCode;
use serde_json::{Value, json};

/// The folders under `corn/` (none once nothing was ever mounted).
fn corn_folders(files: &Path) -> Vec<String> {
    std::fs::read_dir(files.join("corn"))
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Waits until mount `id`'s `error` contains `text`: the status then.
async fn error_with(m: &Mountd, id: &str, text: &str) -> Value {
    until(
        &format!("the mount's error to say {text:?}"),
        Duration::from_secs(30),
        || async {
            Some(m.mount(id).await)
                .filter(|s| s["error"].as_str().is_some_and(|e| e.contains(text)))
        },
    )
    .await
}

#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn a_local_remote_is_refused_at_create_and_never_mounted_from_mounts_json() {
    let dir = e2e::daemon::test_dir();
    add_remote(dir.path(), "[loc]\ntype = local\n");
    // A hand-edited mounts.json naming it: listed with why, never mounted.
    let stored = "0b9a5a4e-2f3c-4e0a-9d55-3f1c2b7a8e10";
    let mounts = dir.path().join("meta-core/mounts");
    std::fs::create_dir_all(&mounts).unwrap();
    std::fs::write(
        mounts.join("mounts.json"),
        format!(
            r#"{{"version":1,"mounts":[{{"id":"{stored}","name":"stored","type":"rclone","enabled":true,"desiredMounted":true,"mountPath":"","rcloneRemote":"loc","rclonePath":"/"}}]}}"#
        ),
    )
    .unwrap();
    let m = Mountd::start(dir.path()).await;
    let s = error_with(&m, stored, "of type local").await;
    assert_eq!(s["mounted"], false, "{s}");
    assert!(s["error"].as_str().unwrap().contains("alias"), "{s}");
    let written = std::fs::read_to_string(m.error_file(stored)).unwrap();
    assert!(written.contains("of type local"), "{written}");
    // Tried again by the keeper, refused again.
    m.looks(2).await;
    assert!(!is_mounted(&m.files().join("corn/stored")));

    let before = std::fs::read(m.mounts_file()).unwrap();
    let e = m
        .refused(
            Method::POST,
            "/mounts",
            Some(json!({"name": "hostroot", "type": "rclone", "rcloneRemote": "loc", "rclonePath": "/"})),
        )
        .await;
    assert_eq!(e.code, ErrorCode::BadRequest, "{e}");
    assert!(e.message.starts_with("rcloneRemote"), "{e}");
    assert!(
        e.message.contains("type = alias") && e.message.contains("remote = /the/folder"),
        "it says what to configure instead: {e}"
    );
    assert_eq!(
        std::fs::read(m.mounts_file()).unwrap(),
        before,
        "nothing stored"
    );
    assert!(!m.files().join("corn/hostroot").exists());
    assert_eq!(mounts_under(dir.path()), vec![], "nothing mounted");
}

#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn an_alias_onto_one_of_meta_cores_own_places_is_refused() {
    let dir = e2e::daemon::test_dir();
    let d = dir.path();
    let db = d.join("db-elsewhere");
    let logs = d.join("logs");
    for folder in [
        d.join("meta-core/db/sub"),
        d.join("files/plugin"),
        db.clone(),
        logs.clone(),
        d.join("media"),
    ] {
        std::fs::create_dir_all(folder).unwrap();
    }
    std::os::unix::fs::symlink(d.join("meta-core"), d.join("sneaky")).unwrap();
    std::os::unix::fs::symlink(d.join("meta-core"), d.join("media/link")).unwrap();
    let cases: Vec<(&str, String, &str, &str)> = vec![
        (
            "mc",
            d.join("meta-core").display().to_string(),
            "",
            "META_CORE_PATH",
        ),
        ("hostroot", "/".into(), "", "META_CORE_PATH"),
        ("parent", d.display().to_string(), "", "META_CORE_PATH"),
        (
            "dbsub",
            d.join("meta-core/db/sub").display().to_string(),
            "",
            "META_CORE_PATH",
        ),
        (
            "dbsub2",
            d.join("meta-core").display().to_string(),
            "db/sub",
            "META_CORE_PATH",
        ),
        ("db", db.display().to_string(), "", "META_CORE_DB_PATH"),
        (
            "files",
            d.join("files").display().to_string(),
            "",
            "FILES_PATH",
        ),
        (
            "plugin",
            d.join("files/plugin").display().to_string(),
            "",
            "FILES_PATH",
        ),
        ("logs", logs.display().to_string(), "", "META_CORE_LOG_DIR"),
        (
            "run",
            d.join("run").display().to_string(),
            "",
            "META_CORE_RUN_DIR",
        ),
        (
            "sneaky",
            d.join("sneaky").display().to_string(),
            "",
            "META_CORE_PATH",
        ),
        (
            "media",
            d.join("media").display().to_string(),
            "link",
            "META_CORE_PATH",
        ),
        // An alias of an alias resolves to the last folder.
        ("twice", "sneaky:db".into(), "", "META_CORE_PATH"),
    ];
    for (name, root, _, _) in &cases {
        alias_remote(d, name, root);
    }
    let m = Mountd::spawn_with(
        d,
        &[
            (
                "META_CORE_DB_PATH",
                db.join("meta-core.db").display().to_string(),
            ),
            ("META_CORE_LOG_DIR", logs.display().to_string()),
        ],
    );
    m.rclone_in("running").await;
    let shown = d.display().to_string();
    for (remote, _, path, place) in &cases {
        let body =
            json!({"name": remote, "type": "rclone", "rcloneRemote": remote, "rclonePath": path});
        let e = m.refused(Method::POST, "/mounts", Some(body.clone())).await;
        assert_eq!(e.code, ErrorCode::BadRequest, "{body}: {e}");
        assert!(e.message.starts_with("rcloneRemote"), "{body}: {e}");
        assert!(e.message.contains(place), "{body}: names {place}: {e}");
        assert!(
            !e.message.contains(&shown),
            "{body}: no path of meta-core's places: {e}"
        );
    }
    assert!(!m.mounts_file().exists(), "nothing stored");
    assert_eq!(corn_folders(&m.files()), Vec::<String>::new());
    assert_eq!(mounts_under(d), vec![], "nothing mounted");

    // The same remote, a folder of its own: taken.
    let made = m
        .create(json!({"name": "media", "type": "rclone", "rcloneRemote": "media"}))
        .await;
    assert_eq!(made["mounted"], true, "{made}");
}

#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn an_alias_keeps_every_rclone_path_under_its_root() {
    let dir = e2e::daemon::test_dir();
    let own = "the alias's own hostname\n";
    local_remote(
        dir.path(),
        "media",
        &[("etc/hostname", own), ("top.txt", "top")],
    );
    let m = Mountd::start(dir.path()).await;
    let made = m
        .create(
            json!({"name": "etc", "type": "rclone", "rcloneRemote": "media", "rclonePath": "/etc"}),
        )
        .await;
    assert_eq!(made["mounted"], true, "{made}");
    let seen = std::fs::read_to_string(m.files().join("corn/etc/hostname")).unwrap();
    assert_eq!(seen, own, "the alias's etc, not the host's");
    assert_ne!(Some(seen), std::fs::read_to_string("/etc/hostname").ok());
    let made = m
        .create(
            json!({"name": "top", "type": "rclone", "rcloneRemote": "media", "rclonePath": "/"}),
        )
        .await;
    assert_eq!(made["mounted"], true, "{made}");
    assert_eq!(
        std::fs::read_to_string(m.files().join("corn/top/top.txt")).unwrap(),
        "top"
    );
    // `..` is refused before rclone is asked (rclone would clean it to
    // the alias's root).
    for path in ["../..", "etc/../.."] {
        let e = m
            .refused(
                Method::POST,
                "/mounts",
                Some(json!({"name": "up", "type": "rclone", "rcloneRemote": "media", "rclonePath": path})),
            )
            .await;
        assert!(e.message.starts_with("rclonePath"), "{path}: {e}");
    }
}

/// rclone.conf changed after the create so that the alias points into
/// META_CORE_PATH: the next mount, asked for or the keeper's after rclone
/// was restarted, is refused, and no file of META_CORE_PATH shows under
/// `corn/`.
#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn a_changed_rclone_conf_is_judged_again_at_the_next_mount() {
    let dir = e2e::daemon::test_dir();
    let media = local_remote(dir.path(), "media", &[("a.txt", "alpha")]);
    let conf = dir.path().join("rclone.conf");
    let good = std::fs::read_to_string(&conf).unwrap();
    let bad = good.replace(
        &media.display().to_string(),
        &dir.path().join("meta-core").display().to_string(),
    );
    assert_ne!(good, bad);
    let m = Mountd::start(dir.path()).await;
    let made = m
        .create(json!({"name": "m", "type": "rclone", "rcloneRemote": "media"}))
        .await;
    let id = made["id"].as_str().unwrap().to_owned();
    let point = m.files().join("corn/m");
    assert_eq!(
        std::fs::read_to_string(point.join("a.txt")).unwrap(),
        "alpha"
    );
    let kept_in_meta_core = point.join("mounts/mounts.json");
    let shown = dir.path().display().to_string();

    // Asked for: refused with why, nothing mounted.
    m.call(Method::POST, &format!("/mounts/{id}/unmount"), None)
        .await
        .unwrap();
    std::fs::write(&conf, &bad).unwrap();
    let e = m
        .refused(Method::POST, &format!("/mounts/{id}/mount"), None)
        .await;
    assert_eq!(e.code, ErrorCode::MountFailed, "{e}");
    assert!(e.message.contains("META_CORE_PATH"), "{e}");
    assert!(!e.message.contains(&shown), "{e}");
    let s = m.mount(&id).await;
    assert_eq!(s["mounted"], false, "{s}");
    assert!(
        s["error"].as_str().unwrap().contains("META_CORE_PATH"),
        "{s}"
    );
    let written = std::fs::read_to_string(m.error_file(&id)).unwrap();
    assert!(written.contains("META_CORE_PATH"), "{written}");
    assert!(!is_mounted(&point), "{:?}", mounts_under(dir.path()));
    assert!(!kept_in_meta_core.exists());
    // Still wanted: the keeper tries again, and is refused again.
    m.looks(2).await;
    assert!(!is_mounted(&point));
    assert!(!kept_in_meta_core.exists());

    // Put right, the keeper mounts it again.
    std::fs::write(&conf, &good).unwrap();
    until("mounted again", Duration::from_secs(60), || async {
        let s = m.mount(&id).await;
        (s["mounted"] == true && s["error"].is_null()).then_some(())
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(point.join("a.txt")).unwrap(),
        "alpha"
    );

    // Changed again while it is up, then rclone dies: the keeper's
    // remount through the new rclone is refused.
    std::fs::write(&conf, &bad).unwrap();
    let rclone = m.status().await.unwrap()["rclone"]["pid"].as_u64().unwrap();
    let pid = rustix::process::Pid::from_raw(rclone as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    m.rclone_in("running").await;
    let s = error_with(&m, &id, "META_CORE_PATH").await;
    assert_eq!(s["mounted"], false, "{s}");
    assert!(!is_mounted(&point), "{:?}", mounts_under(dir.path()));
    assert!(!kept_in_meta_core.exists());
}

/// The mount's folder, or `corn/`, resolving into META_CORE_PATH: never
/// mounted (META_CORE_PATH nested under `FILES_PATH/corn`, and
/// FILES_PATH a symlink into META_CORE_PATH).
#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn a_mount_folder_that_resolves_into_meta_core_path_is_refused() {
    let dir = e2e::daemon::test_dir();
    let nested = dir.path().join("files/corn/mc");
    let m = Mountd::spawn_with(
        dir.path(),
        &[("META_CORE_PATH", nested.display().to_string())],
    );
    m.rclone_in("running").await;
    let made = m
        .create(json!({"name": "mc", "type": "rclone", "rcloneRemote": ":memory:"}))
        .await;
    assert_eq!(made["mounted"], false, "{made}");
    let why = made["error"].as_str().unwrap();
    assert!(why.contains("META_CORE_PATH"), "{why}");
    assert!(!is_mounted(&nested));
    assert!(
        nested.join("mounts/mounts.json").exists(),
        "META_CORE_PATH is not hidden"
    );
    drop(m);

    let dir = e2e::daemon::test_dir();
    let inside = dir.path().join("meta-core/files");
    std::fs::create_dir_all(&inside).unwrap();
    let link = dir.path().join("files-link");
    std::os::unix::fs::symlink(&inside, &link).unwrap();
    let m = Mountd::spawn_with(dir.path(), &[("FILES_PATH", link.display().to_string())]);
    m.rclone_in("running").await;
    let made = m
        .create(json!({"name": "mem", "type": "rclone", "rcloneRemote": ":memory:"}))
        .await;
    assert_eq!(made["mounted"], false, "{made}");
    let why = made["error"].as_str().unwrap();
    assert!(why.contains("META_CORE_PATH"), "{why}");
    assert!(!why.contains(&inside.display().to_string()), "{why}");
    assert_eq!(mounts_under(dir.path()), vec![], "nothing mounted");
}

/// What a refusal of an alias's own root says: the remote, the place by
/// its variable, what to do, and no path.
fn refused_for_its_root(e: &metacore::ApiError, body: &Value, place: &str, shown: &str) {
    assert_eq!(e.code, ErrorCode::BadRequest, "{body}: {e}");
    assert!(e.message.starts_with("rcloneRemote"), "{body}: {e}");
    assert!(e.message.contains(place), "{body}: names {place}: {e}");
    assert!(
        e.message
            .contains("point the alias at a folder that holds none of meta-core's places"),
        "{body}: says what to do: {e}"
    );
    assert!(!e.message.contains(shown), "{body}: no path: {e}");
}

/// Review finding 4: only the joined root was judged, so an alias of `/`
/// (or of a root-less local remote's `/`) with `rclonePath: "etc"` served
/// the host's `/etc`. The remote's own root is judged too: one that holds
/// (or is in) one of meta-core's places is refused whatever the path, at
/// create, through any number of aliases; a path that leaves the
/// remote's root through a symlink is refused; a legitimate alias with a
/// sub-path still mounts.
#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn an_alias_whose_own_root_holds_a_place_is_refused_whatever_its_rclone_path() {
    let dir = e2e::daemon::test_dir();
    let d = dir.path();
    // FILES_PATH under `srv/`, as `/srv/files` beside `/srv/media`.
    let srv = d.join("srv");
    let files = srv.join("files");
    for folder in [srv.join("media/films/2024"), d.join("elsewhere")] {
        std::fs::create_dir_all(folder).unwrap();
    }
    std::fs::write(srv.join("media/films/2024/a.txt"), "alpha").unwrap();
    std::fs::write(d.join("elsewhere/b.txt"), "beta").unwrap();
    std::os::unix::fs::symlink(d.join("elsewhere"), srv.join("media/out")).unwrap();
    alias_remote(d, "hostroot", "/");
    alias_remote(d, "twice", "hostroot:");
    add_remote(d, "[loc]\ntype = local\n");
    alias_remote(d, "viloc", "loc:/");
    alias_remote(d, "srv", &srv.display().to_string());
    alias_remote(d, "media", &srv.join("media").display().to_string());
    alias_remote(d, "films", "media:films");
    let m = Mountd::spawn_with(d, &[("FILES_PATH", files.display().to_string())]);
    m.rclone_in("running").await;
    let shown = d.display().to_string();
    let cases = [
        ("hostroot", "etc", "META_CORE_PATH"),
        ("hostroot", "proc/1", "META_CORE_PATH"),
        // An alias of an alias whose last root is `/`.
        ("twice", "etc", "META_CORE_PATH"),
        // An alias of a remote of type local (the migration the refusal
        // of `local` invites), at its `/`.
        ("viloc", "etc", "META_CORE_PATH"),
        // `/srv` when FILES_PATH is `/srv/files`.
        ("srv", "media", "FILES_PATH"),
    ];
    for (remote, path, place) in cases {
        let body =
            json!({"name": "x", "type": "rclone", "rcloneRemote": remote, "rclonePath": path});
        let e = m.refused(Method::POST, "/mounts", Some(body.clone())).await;
        refused_for_its_root(&e, &body, place, &shown);
    }
    // A path through a symlink out of the alias's root.
    let body = json!({"name": "x", "type": "rclone", "rcloneRemote": "media", "rclonePath": "out"});
    let e = m.refused(Method::POST, "/mounts", Some(body.clone())).await;
    assert_eq!(e.code, ErrorCode::BadRequest, "{body}: {e}");
    assert!(e.message.starts_with("rclonePath"), "{body}: {e}");
    assert!(e.message.contains("root"), "{body}: {e}");
    assert!(!e.message.contains(&shown), "{body}: no path: {e}");
    assert!(!m.mounts_file().exists(), "nothing stored");
    assert_eq!(corn_folders(&files), Vec::<String>::new());
    assert_eq!(mounts_under(d), vec![], "nothing mounted");

    // Legitimate: an alias with a sub-path, an alias of an alias with one.
    for (name, remote, path) in [("films", "media", "films"), ("year", "films", "2024")] {
        let made = m
            .create(
                json!({"name": name, "type": "rclone", "rcloneRemote": remote, "rclonePath": path}),
            )
            .await;
        assert_eq!(made["mounted"], true, "{made}");
    }
    assert_eq!(
        std::fs::read_to_string(files.join("corn/films/2024/a.txt")).unwrap(),
        "alpha"
    );
    assert_eq!(
        std::fs::read_to_string(files.join("corn/year/a.txt")).unwrap(),
        "alpha"
    );
}

/// The same judgement at every mount attempt: a hand-edited mounts.json
/// naming an alias of `/` with `rclonePath: "etc"` is never mounted, and
/// its error says why and what to do.
#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn an_alias_of_the_hosts_root_in_mounts_json_is_never_mounted() {
    let dir = e2e::daemon::test_dir();
    alias_remote(dir.path(), "hostroot", "/");
    let stored = "5d0c7c2e-8a1b-4f6e-9c3d-2b7a1e0f4c59";
    let mounts = dir.path().join("meta-core/mounts");
    std::fs::create_dir_all(&mounts).unwrap();
    std::fs::write(
        mounts.join("mounts.json"),
        format!(
            r#"{{"version":1,"mounts":[{{"id":"{stored}","name":"etc","type":"rclone","enabled":true,"desiredMounted":true,"mountPath":"","rcloneRemote":"hostroot","rclonePath":"etc"}}]}}"#
        ),
    )
    .unwrap();
    let m = Mountd::start(dir.path()).await;
    let s = error_with(&m, stored, "META_CORE_PATH").await;
    assert_eq!(s["mounted"], false, "{s}");
    let why = s["error"].as_str().unwrap();
    assert!(why.contains("holds none of meta-core's places"), "{why}");
    assert!(!why.contains(&dir.path().display().to_string()), "{why}");
    let written = std::fs::read_to_string(m.error_file(stored)).unwrap();
    assert!(written.contains("META_CORE_PATH"), "{written}");
    // Tried again by the keeper, refused again.
    m.looks(2).await;
    assert!(!is_mounted(&m.files().join("corn/etc")));
    assert_eq!(mounts_under(dir.path()), vec![], "nothing mounted");
}
