//! mountd on its own, with the real `rclone` (issue 15, first part): it
//! runs `rclone rcd` as its child on loopback with credentials made at
//! start, which refuses requests without them; a killed rclone is started
//! again; rclone ends with mountd, even with a SIGKILL; without rclone on
//! the PATH mountd stays up and says so. Compiled as ignored where rclone
//! is not installed (`tests/build.rs`; CI installs it).

use std::time::Duration;

use e2e::mountd::{Mountd, alive};
use e2e::wait::until;
use serde_json::Value;

/// The credentials rclone was given, read from its environment (root
/// reads it, as it reads any process's).
fn credentials(pid: u64) -> (String, String) {
    let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let get = |k: &str| {
        env.split(|b| *b == 0)
            .filter_map(|kv| std::str::from_utf8(kv).ok())
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")).map(str::to_owned))
            .unwrap_or_else(|| panic!("{k} in rclone's environment"))
    };
    (get("RCLONE_RC_USER"), get("RCLONE_RC_PASS"))
}

fn rc_status(url: &str, auth: Option<(&str, &str)>) -> u16 {
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"]);
    if let Some((u, p)) = auth {
        cmd.args(["-u", &format!("{u}:{p}")]);
    }
    let out = cmd.arg(format!("{url}/rc/noop")).output().unwrap();
    String::from_utf8_lossy(&out.stdout).parse().unwrap_or(0)
}

#[tokio::test]
#[cfg_attr(no_rclone, ignore = "no rclone on this machine")]
async fn rclone_rcd_runs_as_a_child_with_its_own_credentials_and_comes_back() {
    let dir = e2e::daemon::test_dir();
    let mountd = Mountd::spawn(dir.path(), None);
    let r = mountd.rclone_in("running").await;
    let pid = r["pid"].as_u64().unwrap();
    let url = r["url"].as_str().unwrap().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    // Nothing without the credentials; the credentials are not on its
    // command line, and not in mountd's log.
    assert_eq!(rc_status(&url, None), 401);
    assert_eq!(rc_status(&url, Some(("mountd", "guess"))), 401);
    let (user, pass) = credentials(pid);
    assert_eq!(rc_status(&url, Some((&user, &pass))), 200);
    let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(!cmdline.contains(&pass), "{cmdline}");
    assert!(!mountd.process.stderr().contains(&pass));

    // Killed: started again, with new credentials.
    let killed = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::kill_process(killed, rustix::process::Signal::KILL).unwrap();
    let again = until("a new rclone", Duration::from_secs(20), || async {
        mountd
            .status()
            .await
            .map(|s| s["rclone"].clone())
            .filter(|r| {
                r["state"] == "running" && r["pid"].as_u64() != Some(pid) && r["restarts"] == 1
            })
    })
    .await;
    let pid2 = again["pid"].as_u64().unwrap();
    let (_, pass2) = credentials(pid2);
    assert_ne!(pass, pass2, "new credentials at each start");

    // SIGTERM of mountd: rclone stops with it.
    let mut mountd = mountd;
    mountd.process.sigterm();
    mountd.process.wait_exit().await;
    until(
        "rclone to end with mountd",
        Duration::from_secs(5),
        || async { (!alive(pid2)).then_some(()) },
    )
    .await;
    assert!(!dir.path().join("run/mountd-rclone.pid").exists());
}

#[tokio::test]
#[cfg_attr(no_rclone, ignore = "no rclone on this machine")]
async fn rclone_dies_with_a_killed_mountd_and_the_next_one_starts_clean() {
    let dir = e2e::daemon::test_dir();
    let mut mountd = Mountd::spawn(dir.path(), None);
    let pid = mountd.rclone_in("running").await["pid"].as_u64().unwrap();
    mountd.process.kill9();
    until(
        "rclone to end with mountd",
        Duration::from_secs(5),
        || async { (!alive(pid)).then_some(()) },
    )
    .await;
    // A leftover pid file (what a SIGKILL leaves) names no rclone now: the
    // next mountd starts its own and runs.
    let mut next = Mountd::spawn(dir.path(), None);
    let r = next.rclone_in("running").await;
    assert_ne!(r["pid"].as_u64(), Some(pid));
    next.process.sigterm();
    next.process.wait_exit().await;
}

/// Without rclone on the PATH, mountd serves and says why.
#[tokio::test]
async fn without_rclone_mountd_stays_up_and_says_so() {
    let dir = e2e::daemon::test_dir();
    let empty = dir.path().join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    let mut mountd = Mountd::spawn(dir.path(), Some(&empty.display().to_string()));
    let r = mountd.rclone_in("not-installed").await;
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .contains("rclone is not installed"),
        "{r}"
    );
    let h: Value = mountd.client.get("/health").await.unwrap();
    assert_eq!(h["status"], "ok");
    mountd.process.sigterm();
    mountd.process.wait_exit().await;
}

/// An unreadable `mounts.json` is set aside, kept as it was, and mountd
/// starts with no mounts; a readable one is read.
#[tokio::test]
async fn an_unreadable_mounts_file_is_set_aside_and_a_readable_one_read() {
    let dir = e2e::daemon::test_dir();
    let mounts = dir.path().join("meta-core/mounts");
    std::fs::create_dir_all(&mounts).unwrap();
    std::fs::write(mounts.join("mounts.json"), "{not json").unwrap();
    let empty = dir.path().join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    let mut mountd = Mountd::spawn(dir.path(), Some(&empty.display().to_string()));
    let s: Value = until("mountd to answer", Duration::from_secs(20), || async {
        mountd.status().await
    })
    .await;
    assert_eq!(s["mounts"], 0);
    let kept: Vec<_> = std::fs::read_dir(&mounts)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("mounts.json.unreadable-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(
        std::fs::read_to_string(mounts.join(&kept[0])).unwrap(),
        "{not json"
    );
    mountd.process.sigterm();
    mountd.process.wait_exit().await;
    drop(mountd);

    std::fs::write(
        mounts.join("mounts.json"),
        r#"{"version":1,"mounts":[{"id":"0b9a5a4e-2f3c-4e0a-9d55-3f1c2b7a8e10","name":"films","type":"rclone","enabled":true,"desiredMounted":false,"mountPath":"/files/corn/films","rcloneRemote":"local","rclonePath":"/srv"}]}"#,
    )
    .unwrap();
    let mut mountd = Mountd::spawn(dir.path(), Some(&empty.display().to_string()));
    let s: Value = until("mountd to answer", Duration::from_secs(20), || async {
        mountd.status().await
    })
    .await;
    assert_eq!(s["mounts"], 1, "{s}");
    mountd.process.sigterm();
    mountd.process.wait_exit().await;
}
