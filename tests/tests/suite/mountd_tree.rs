//! The mounts through the whole tree (issue 15): apid's admin routes
//! relayed to mountd, a mount's files walked by watcherd and announced
//! (asked for, and on the polling interval), a
//! kill -9 of mountd under the supervisor (restarted, no orphan rclone,
//! the mount back), and a stop of meta-core leaving no mount. Compiled as
//! ignored where this machine has no rclone or FUSE (`tests/build.rs`).

use std::time::Duration;

use e2e::mountd::{alive, is_mounted, local_remote, mounts_under, rclone_children_of};
use e2e::supervisor::{Launch, MetaCore};
use e2e::wait::until;
use metacore::layout::Daemon;
use serde_json::{Value, json};

const TOKEN: &str = "mount-admin";

async fn admin(mc: &MetaCore, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let auth = format!("Bearer {TOKEN}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
    ];
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let r = mc.send(method, path, bytes, &headers).await;
    (
        r.status,
        serde_json::from_slice(&r.body).unwrap_or(Value::Null),
    )
}

#[tokio::test]
#[cfg_attr(no_fuse, ignore = "no rclone or FUSE on this machine")]
async fn mounts_through_apid_survive_a_killed_mountd_and_end_with_meta_core() {
    let dir = e2e::daemon::test_dir();
    local_remote(
        dir.path(),
        "src",
        &[
            ("show/s01e01.mkv", "episode one"),
            ("show/s01e02.mkv", "episode two"),
        ],
    );
    let mut mc = Launch::in_dir(dir.path(), "run")
        .env("META_CORE_ADMIN_TOKEN", TOKEN)
        .env("DEBOUNCE_MS", "200")
        .env(
            "RCLONE_CONFIG",
            &dir.path().join("rclone.conf").display().to_string(),
        )
        .start()
        .await;

    // Admin routes: nothing without the token.
    let r = mc.get("/api/mounts").await;
    assert_eq!(r.status, 401, "{}", r.text());
    let r = mc
        .send_json(
            "POST",
            "/api/mounts",
            &json!({"name": "x", "type": "rclone", "rcloneRemote": "src"}),
        )
        .await;
    assert_eq!(r.status, 401);
    // Ids that are no UUID are answered by apid; unknown UUIDs by mountd.
    let (status, e) = admin(&mc, "GET", "/api/mounts/..%2Fetc", None).await;
    assert_eq!(
        (status, e["error"].as_str()),
        (404, Some("not_found")),
        "{e}"
    );
    let (status, e) = admin(
        &mc,
        "POST",
        "/api/mounts/0b9a5a4e-2f3c-4e0a-9d55-3f1c2b7a8e10/mount",
        None,
    )
    .await;
    assert_eq!(status, 404, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("mount not found"),
        "{e}"
    );
    let (status, _) = admin(
        &mc,
        "POST",
        "/api/mounts/0b9a5a4e-2f3c-4e0a-9d55-3f1c2b7a8e10/explode",
        None,
    )
    .await;
    assert_eq!(status, 404);

    // The remotes, then a mount of one; its files are read through FUSE.
    let (status, remotes) = admin(&mc, "GET", "/api/mounts/rclone/remotes", None).await;
    assert_eq!(status, 200, "{remotes}");
    assert_eq!(remotes["remotes"][0]["name"], "src");
    let (status, made) = admin(
        &mc,
        "POST",
        "/api/mounts",
        Some(json!({"name": "tv", "type": "rclone", "rcloneRemote": "src"})),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let id = made["mount"]["id"].as_str().unwrap().to_owned();
    let point = dir.path().join("files/corn/tv");
    assert_eq!(
        std::fs::read_to_string(point.join("show/s01e01.mkv")).unwrap(),
        "episode one"
    );

    // Scan: watcherd walks the mount and announces its files.
    let (status, scanned) = admin(&mc, "POST", &format!("/api/mounts/{id}/scan"), None).await;
    assert_eq!(status, 200, "{scanned}");
    assert_eq!(
        (scanned["fileCount"].as_u64(), scanned["mountId"].as_str()),
        (Some(2), Some(id.as_str())),
        "{scanned}"
    );
    let wanted = point.join("show/s01e02.mkv").display().to_string();
    until(
        "the mount's files on file:events",
        Duration::from_secs(20),
        || async {
            let tuples = mc.get_ok("/api/files/tuples").await;
            tuples.to_string().contains(&wanted).then_some(())
        },
    )
    .await;

    // Polling: a second mount, never scanned by hand, is walked by
    // watcherd on its own after it is mounted, and its file announced.
    local_remote(dir.path(), "more", &[("film.mkv", "a film")]);
    let (status, made) = admin(
        &mc,
        "POST",
        "/api/mounts",
        Some(
            json!({"name": "films", "type": "rclone", "rcloneRemote": "more",
                    "pollingIntervalMs": 5000}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let films = made["mount"]["id"].as_str().unwrap().to_owned();
    let wanted = dir
        .path()
        .join("files/corn/films/film.mkv")
        .display()
        .to_string();
    until(
        "the polled mount's file on file:events",
        Duration::from_secs(30),
        || async {
            let tuples = mc.get_ok("/api/files/tuples").await;
            tuples.to_string().contains(&wanted).then_some(())
        },
    )
    .await;
    let (_, s) = admin(&mc, "GET", &format!("/api/mounts/{films}"), None).await;
    assert!(s["mount"]["lastPolledScan"].is_u64(), "{s}");
    assert_eq!(s["mount"]["pollingActive"], true);

    // kill -9 of mountd: the supervisor starts it again, its rclone died
    // with it, and the mount comes back through the new one.
    let old = mc.daemon(Daemon::Mountd).await.pid.unwrap();
    let old_rclone = rclone_children_of(old);
    assert_eq!(old_rclone.len(), 1);
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(old as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let new = until("mountd restarted", Duration::from_secs(30), || async {
        let d = mc.daemon(Daemon::Mountd).await;
        d.pid.filter(|p| *p != old && d.ready)
    })
    .await;
    assert!(!alive(old_rclone[0]), "no orphan rclone");
    until("the mount back", Duration::from_secs(20), || async {
        let (status, s) = admin(&mc, "GET", &format!("/api/mounts/{id}"), None).await;
        (status == 200 && s["mount"]["mounted"] == true).then_some(())
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(point.join("show/s01e02.mkv")).unwrap(),
        "episode two"
    );
    assert_eq!(rclone_children_of(new).len(), 1);
    assert_eq!(mounts_under(&point).len(), 1, "no stale mount beneath");

    // Stopping meta-core unmounts.
    mc.process.sigterm();
    mc.process.wait_exit().await;
    assert!(!is_mounted(&point));
    assert_eq!(mounts_under(dir.path()), vec![]);
}
