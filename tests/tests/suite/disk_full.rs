//! A full volume says so: a write that finds no room is a 507
//! `insufficient_storage` with the cause, `/health` is `degraded` with a
//! reason meanwhile, and both come back on their own once space is freed
//! (issue 13, point 8).

use e2e::fixtures::random_rid;
use e2e::{Apid, Launch};
use serde_json::json;

#[tokio::test]
async fn a_full_disk_is_a_507_and_a_degraded_health_until_space_is_freed() {
    let dir = e2e::daemon::test_dir();
    let launch = Launch::in_dir(dir.path());
    let db_dir = launch.db().parent().unwrap().to_path_buf();
    let mnt = e2e::mount::Tmpfs::at(&db_dir, "3m");
    let s = launch.start().await;
    let a = Apid::start(&s).await;
    let value = "x".repeat(200 * 1024);
    let mut full = None;
    for _ in 0..100 {
        let r = a
            .send_json(
                "PATCH",
                &format!("/meta/{}", random_rid()),
                &json!({ "blob": value }),
            )
            .await;
        if r.status != 200 {
            full = Some(r);
            break;
        }
    }
    let r = full.expect("3 MiB filled up");
    r.assert_error(507, "insufficient_storage");
    assert!(r.text().contains("full"), "{}", r.text());
    let h = a.get_ok("/health").await;
    assert_eq!(h["status"], "degraded", "{h}");
    assert!(h["reason"].as_str().unwrap().contains("full"), "{h}");
    assert_eq!(h["redis"], true, "the store answers");

    // Room again: the next write goes through and health is ok.
    let ok = std::process::Command::new("mount")
        .args(["-o", "remount,size=64m"])
        .arg(&db_dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "remount");
    let rid = random_rid();
    let r = a
        .send_json("PATCH", &format!("/meta/{rid}"), &json!({ "blob": value }))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let h = a.get_ok("/health").await;
    assert_eq!(h["status"], "ok", "{h}");
    assert!(h.get("reason").is_none(), "{h}");
    drop(a);
    drop(s);
    drop(mnt);
}

/// `meta-core status` says which daemon is degraded and why.
#[tokio::test]
async fn meta_core_status_names_the_full_disk() {
    let dir = e2e::daemon::test_dir();
    let _mnt = e2e::mount::Tmpfs::at(&dir.path().join("meta-core/db"), "3m");
    let mut mc = e2e::supervisor::Launch::in_dir(dir.path(), "run").spawn();
    mc.wait_all_ready().await;
    let value = "x".repeat(200 * 1024);
    let mut status = 200;
    for _ in 0..100 {
        let r = mc
            .send_json(
                "PATCH",
                &format!("/meta/{}", random_rid()),
                &json!({ "blob": value }),
            )
            .await;
        status = r.status;
        if status != 200 {
            break;
        }
    }
    assert_eq!(status, 507);
    let out = mc.cli(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("storaged is degraded: the database's volume is full"),
        "{text}"
    );
    let out = mc.cli(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let storaged = v["daemons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "storaged")
        .unwrap();
    assert!(
        storaged["degraded"].as_str().unwrap().contains("full"),
        "{v}"
    );
    mc.process.sigterm();
    mc.process.wait_exit().await;
}

/// Once the volume was full, freeing a little is enough: near a full volume
/// storaged copies the WAL back after every write group and commits
/// nothing while it cannot, so a checkpoint never needs more than one
/// group's worth of room. Before, a checkpoint took what was freed and
/// writes kept failing until the whole uncopied WAL (tens of MiB) was free.
#[tokio::test]
async fn a_little_freed_space_is_enough_once_the_volume_was_full() {
    let dir = e2e::daemon::test_dir();
    let launch = Launch::in_dir(dir.path());
    let db_dir = launch.db().parent().unwrap().to_path_buf();
    let mnt = e2e::mount::Tmpfs::at(&db_dir, "200m");
    let s = launch.start().await;
    let a = Apid::start(&s).await;
    let value = "x".repeat(64 * 1024);
    // 16 writes of 64 KiB at once (about one group of 1 MiB): their statuses.
    let burst = || {
        let (a, value) = (&a, &value);
        futures_util::future::join_all((0..16).map(|_| async move {
            a.send_json(
                "PATCH",
                &format!("/meta/{}", random_rid()),
                &json!({ "blob": value }),
            )
            .await
            .status
        }))
    };
    // A long WAL file, as a busy store has (about 40 MiB written).
    for _ in 0..40 {
        assert!(burst().await.iter().all(|s| *s == 200));
    }
    let reserve = db_dir.join("meta-core.db-reserve");
    assert_eq!(std::fs::metadata(&reserve).unwrap().len(), 8 << 20);
    // Something else fills the volume, 1 MiB at a time.
    let mut fillers = Vec::new();
    loop {
        let p = db_dir.join(format!("filler{}", fillers.len()));
        if std::fs::write(&p, vec![1u8; 1 << 20]).is_err() {
            break;
        }
        fillers.push(p);
    }
    assert!(fillers.len() > 100, "{} MiB filled", fillers.len());
    // Until a burst is refused and no write after it got through: a group
    // may still commit on the room the checkpoint found (a busy machine
    // groups the burst otherwise), and a commit says the volume has room.
    let mut refused = false;
    let mut h = serde_json::Value::Null;
    for _ in 0..100 {
        let statuses = burst().await;
        if let Some(s) = statuses.iter().find(|s| **s != 200) {
            assert_eq!(*s, 507, "{statuses:?}");
            refused = true;
        }
        if refused {
            h = a.get_ok("/health").await;
            if h["status"] == "degraded" {
                break;
            }
        }
    }
    assert!(refused, "the volume filled up");
    assert!(!reserve.exists(), "the reserve was given to the checkpoint");
    assert_eq!(h["status"], "degraded", "{h}");

    // 2 MiB freed: health comes back without a write, then writes go through.
    for p in &fillers[..2] {
        std::fs::remove_file(p).unwrap();
    }
    let mut h = serde_json::Value::Null;
    for _ in 0..50 {
        h = a.get_ok("/health").await;
        if h["status"] == "ok" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(h["status"], "ok", "{h}");
    let mut failed = Vec::new();
    for i in 0..200 {
        let r = a
            .send_json(
                "PATCH",
                &format!("/meta/{}", random_rid()),
                &json!({ "title": format!("record {i}") }),
            )
            .await;
        if r.status != 200 {
            failed.push(r.status);
        }
    }
    assert!(
        failed.is_empty(),
        "{} of 200 failed: {failed:?}",
        failed.len()
    );
    drop(a);
    drop(s);
    drop(mnt);
}
