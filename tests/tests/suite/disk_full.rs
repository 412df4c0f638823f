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
