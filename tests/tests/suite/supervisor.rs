//! The `meta-core` supervisor with the real daemons: start in dependency
//! order with readiness, the status table (CLI, control socket, apid's
//! `/status`), restarts after `kill -9` with the data still served, the
//! crash-loop rules, hang detection, orderly stop in reverse order, logs
//! written, rotated and followed, and the leader gate with a standby that
//! takes over after the leader's SIGKILL without ever two writers.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A spawned CLI process, killed when the test ends (or panics).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
use std::time::Duration;

use e2e::daemon::test_dir;
use e2e::fixtures::random_rid;
use e2e::supervisor::{Launch, MetaCore, alive, children_of, holders_of, wait_gone};
use e2e::wait::{DAEMON_DEADLINE, until, within};
use metacore::api::supervisor::{DaemonState, Role};
use metacore::layout::Daemon;
use rustix::process::{Pid, Signal, kill_process};
use serde_json::json;

fn signal(pid: u32, sig: Signal) {
    kill_process(Pid::from_raw(pid as i32).expect("a pid"), sig).expect("send a signal");
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Writes a record through apid and returns its RID.
async fn write_record(mc: &MetaCore, title: &str) -> String {
    let rid = random_rid().to_string();
    mc.ok_json("PUT", &format!("/meta/{rid}"), &json!({ "title": title }))
        .await;
    rid
}

async fn assert_served(mc: &MetaCore, rid: &str, title: &str) {
    let got = mc.get_ok(&format!("/meta/{rid}")).await;
    assert_eq!(got["metadata"]["title"], title, "{got}");
}

/// A bin dir whose `storaged` first runs `shell` in a shell that exits at
/// once (so what it leaves running is an orphan), then execs the real
/// storaged; `apid` is the real one.
fn storaged_leaving(dir: &std::path::Path, shell: &str) -> std::path::PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\nsh -c '{shell}'\nexec {}\n",
        e2e::daemon::binary("storaged").display()
    );
    std::fs::write(bin.join("storaged"), script).unwrap();
    std::fs::set_permissions(
        bin.join("storaged"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    for daemon in ["apid", "watcherd", "mountd"] {
        std::os::unix::fs::symlink(e2e::daemon::binary(daemon), bin.join(daemon)).unwrap();
    }
    bin
}

/// Whether `pid` is a `sleep` (the orphan [`storaged_leaving`] leaves).
fn is_sleep(pid: &u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
}

#[tokio::test]
async fn starts_in_order_reports_status_and_stops_in_reverse() {
    let dir = test_dir();
    let mut mc = Launch::in_dir(dir.path(), "run").start().await;
    let status = mc.status().await;
    assert_eq!(status.role, Role::Leader);
    let names: Vec<Daemon> = status.daemons.iter().map(|d| d.name).collect();
    assert_eq!(
        names,
        [
            Daemon::Storaged,
            Daemon::Apid,
            Daemon::Watcherd,
            Daemon::Mountd
        ]
    );
    assert!(
        status
            .daemons
            .iter()
            .all(|d| d.pid.is_some() && d.restarts == 0 && d.last_exit.is_none())
    );
    let pids: Vec<u32> = status.daemons.iter().filter_map(|d| d.pid).collect();

    // The info file: one line, this leader's API URL.
    let url = format!("http://127.0.0.1:{}", mc.port());
    assert_eq!(
        std::fs::read_to_string(mc.info_file()).unwrap(),
        format!("{url}\n")
    );
    assert_eq!(status.leader_url.as_deref(), Some(url.as_str()));

    // storaged was ready before apid started: apid's first line about the
    // store says it answers.
    let apid_log = std::fs::read_to_string(mc.log_dir().join("apid.log")).unwrap();
    assert!(
        apid_log.contains("storaged answers"),
        "apid started before storaged was ready:\n{apid_log}"
    );
    let storaged_log = std::fs::read_to_string(mc.log_dir().join("storaged.log")).unwrap();
    assert!(storaged_log.contains("storaged ready"), "{storaged_log}");

    // The CLI table and JSON, and apid's public /status, show the same daemons.
    let out = mc.cli(&["status"]);
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(table.starts_with("meta-core leader"), "{table}");
    for (name, pid) in ["storaged", "apid", "watcherd", "mountd"].iter().zip(&pids) {
        let line = table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row:\n{table}"));
        assert!(
            line.contains(&pid.to_string()) && line.contains("running") && line.contains("yes"),
            "{line}"
        );
    }
    let out = mc.cli(&["status", "--json"]);
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("status --json is JSON");
    assert_eq!(json["daemons"][1]["pid"], pids[1]);
    // Anyone sees the table without pids, paths or rclone's address; the
    // admin token shows them.
    let public = mc.get_ok("/status").await;
    assert_eq!(public["supervisor"]["role"], "leader", "{public}");
    assert_eq!(public["supervisor"]["daemons"][0]["state"], "running");
    for d in public["supervisor"]["daemons"].as_array().unwrap() {
        assert!(d.get("pid").is_none(), "a pid in the public /status: {d}");
    }
    assert!(public["supervisor"].get("pid").is_none(), "{public}");
    assert!(public["mounts"].get("pid").is_none(), "{public}");
    assert!(public["mounts"]["rclone"].get("pid").is_none(), "{public}");
    let text = public.to_string();
    for hidden in [
        "\"logDir\"",
        "\"url\"",
        mc.meta_core_path().to_str().unwrap(),
    ] {
        assert!(
            !text.contains(hidden),
            "{hidden} in the public /status: {text}"
        );
    }
    e2e::openapi::check_answer(&e2e::openapi::document(), "/status", "get", &public)
        .unwrap_or_else(|why| panic!("{why}"));
    let full = mc.admin().get_ok("/status").await;
    assert_eq!(full["supervisor"]["daemons"][0]["pid"], pids[0]);
    assert_eq!(full["mounts"]["pid"], pids[3], "{full}");

    let rid = write_record(&mc, "kept").await;
    assert_served(&mc, &rid, "kept").await;

    mc.process.sigterm();
    let exit = mc.process.wait_exit().await;
    assert!(
        exit.success(),
        "SIGTERM must end in exit 0: {exit}\n{}",
        mc.process.stderr()
    );
    wait_gone(&pids, "every daemon to be gone").await;
    assert!(
        !mc.info_file().exists(),
        "the info file is removed on an orderly stop"
    );
    assert!(
        !mc.run_dir().join("meta-core.sock").exists(),
        "the control socket is removed"
    );
    let log = mc.process.stderr();
    // Each exited on its own SIGTERM, apid first, storaged only then.
    let apid_at = log
        .find("apid stopped: exited with status 0")
        .unwrap_or_else(|| panic!("apid's stop:\n{log}"));
    let storaged_at = log
        .find("storaged stopped: exited with status 0")
        .unwrap_or_else(|| panic!("storaged's stop:\n{log}"));
    assert!(apid_at < storaged_at, "apid stops before storaged:\n{log}");
    let storaged_log = std::fs::read_to_string(mc.log_dir().join("storaged.log")).unwrap();
    assert!(
        storaged_log.contains("committing queued writes"),
        "storaged stopped in order:\n{storaged_log}"
    );
    // storaged committed everything: the record is in the file.
    let conn = rusqlite::Connection::open(mc.db()).unwrap();
    let v: String = conn
        .query_row(
            "SELECT v FROM kv WHERE k = ?1",
            [format!("file:{rid}/title")],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(v, "kept");
}

#[tokio::test]
async fn kill_9_of_each_daemon_restarts_it_and_keeps_the_data() {
    let dir = test_dir();
    let mut mc = Launch::in_dir(dir.path(), "run").start().await;
    let rid = write_record(&mc, "before the kills").await;

    for (i, name) in [
        Daemon::Storaged,
        Daemon::Apid,
        Daemon::Watcherd,
        Daemon::Mountd,
    ]
    .into_iter()
    .enumerate()
    {
        let old = mc.daemon(name).await.pid.expect("running");
        signal(old, Signal::KILL);
        let row = mc
            .wait_status(&format!("{name} to be replaced"), |s| {
                s.daemons[i].pid.is_some_and(|p| p != old) && s.daemons[i].ready
            })
            .await
            .daemons[i]
            .clone();
        assert_eq!(row.restarts, 1, "{row:?}");
        let last = row.last_exit.expect("the kill is recorded");
        assert_eq!(last.signal, Some(9), "{last:?}");
        assert!(last.reason.contains("SIGKILL"), "{last:?}");
        assert!(!alive(old));
        // The record written before the kill is still served, through the
        // restarted daemon.
        until("the record to be served again", DAEMON_DEADLINE, || async {
            (mc.get(&format!("/meta/{rid}")).await.status == 200).then_some(())
        })
        .await;
        assert_served(&mc, &rid, "before the kills").await;
    }
    // The other daemon was not restarted with it.
    let status = mc.status().await;
    assert!(status.daemons.iter().all(|d| d.restarts == 1), "{status:?}");
}

#[tokio::test]
async fn storaged_that_always_crashes_makes_the_supervisor_give_up() {
    let dir = test_dir();
    let db_dir = dir.path().join("meta-core/db");
    std::fs::create_dir_all(&db_dir).unwrap();
    // Not a database: storaged refuses it at every start.
    std::fs::write(db_dir.join("meta-core.db"), vec![0x5au8; 8192]).unwrap();
    let mut mc = Launch::in_dir(dir.path(), "run").spawn();
    let exit = within(
        "the supervisor to give up",
        Duration::from_secs(60),
        mc.process.wait_exit(),
    )
    .await;
    let log = mc.process.stderr();
    assert_eq!(exit.code(), Some(1), "giving up exits non-zero:\n{log}");
    assert!(log.contains("giving up"), "{log}");
    // The backoff grew from a fast first restart, by the table.
    let delays: Vec<u64> = log
        .lines()
        .filter_map(|l| {
            l.split("restarting in ")
                .nth(1)?
                .split(" ms")
                .next()?
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(delays, [10, 40, 160, 640], "{log}");
    assert!(
        !mc.info_file().exists(),
        "a leader that gave up removes its info file"
    );
    let storaged_log = std::fs::read_to_string(mc.log_dir().join("storaged.log")).unwrap();
    assert!(
        storaged_log.matches("cannot open the store").count() >= 5,
        "{storaged_log}"
    );
}

#[tokio::test]
async fn apid_that_always_crashes_keeps_retrying_in_a_visible_crash_loop() {
    let dir = test_dir();
    // Someone else has the port: apid cannot listen and exits at each start.
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = squatter.local_addr().unwrap().port();
    let mut mc = Launch::in_dir(dir.path(), "run").port(port).spawn();
    let status = mc
        .wait_status("apid to be in a crash loop", |s| {
            s.daemons[1].state == DaemonState::CrashLoop
                && s.daemons[0].state == DaemonState::Running
        })
        .await;
    let apid = &status.daemons[1];
    assert!(apid.failures >= 5 && apid.restarts >= 4, "{apid:?}");
    assert_eq!(
        apid.last_exit.as_ref().and_then(|e| e.code),
        Some(1),
        "{apid:?}"
    );
    assert!(
        apid.next_start_in_ms.is_some_and(|ms| ms <= 10_000),
        "{apid:?}"
    );
    let table = String::from_utf8_lossy(&mc.cli(&["status"]).stdout).to_string();
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("apid") && l.contains("crash-loop")),
        "{table}"
    );
    assert!(
        mc.process.try_exit().is_none(),
        "the supervisor keeps running"
    );

    // Once the port is free, an operator's restart brings it back at once.
    drop(squatter);
    let out = mc.cli(&["restart", "apid"]);
    assert!(out.status.success(), "{}", text(&out));
    let row = mc.daemon(Daemon::Apid).await;
    assert!(
        row.ready && row.state == DaemonState::Running && row.failures == 0,
        "{row:?}"
    );
    assert_eq!(mc.get("/health").await.status, 200);
}

#[tokio::test]
async fn a_hung_daemon_is_found_by_its_health_check_and_replaced() {
    let dir = test_dir();
    let mut mc = Launch::in_dir(dir.path(), "run")
        .env("HEALTH_CHECK_INTERVAL_MS", "200")
        .start()
        .await;
    let old = mc.daemon(Daemon::Storaged).await.pid.unwrap();
    signal(old, Signal::STOP);
    let row = mc
        .wait_status("the hung storaged to be replaced", |s| {
            s.daemons[0].pid.is_some_and(|p| p != old) && s.daemons[0].ready
        })
        .await
        .daemons[0]
        .clone();
    let last = row.last_exit.expect("recorded");
    assert!(last.reason.contains("/health"), "{last:?}");
    assert_eq!(last.signal, Some(9));
    assert!(!alive(old));
}

#[tokio::test]
async fn operator_commands_and_their_errors() {
    let dir = test_dir();
    let mut mc = Launch::in_dir(dir.path(), "run").start().await;
    for args in [
        &["logs", "nope"][..],
        &["restart", "nope"],
        &["logs", "redis"],
        &["frobnicate"],
        &["logs"],
    ] {
        let out = mc.cli(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(!out.stderr.is_empty(), "{args:?} says why");
    }
    let out = mc.cli(&["restart", "nope"]);
    assert!(
        text(&out).contains("storaged, apid"),
        "the error lists the daemons: {}",
        text(&out)
    );

    let old = mc.daemon(Daemon::Apid).await.pid.unwrap();
    let out = mc.cli(&["restart", "apid"]);
    assert!(out.status.success(), "{}", text(&out));
    let row = mc.daemon(Daemon::Apid).await;
    assert!(
        row.ready && row.pid != Some(old) && row.restarts == 1,
        "{row:?}"
    );
    assert!(row.last_exit.unwrap().reason.contains("restart requested"));

    let out = mc.cli(&["logs", "apid", "-n", "2"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        2,
        "{}",
        text(&out)
    );

    let pids = mc.daemon_pids().await;
    let out = mc.cli(&["stop"]);
    assert!(out.status.success(), "{}", text(&out));
    let exit = mc.process.wait_exit().await;
    assert!(exit.success(), "{exit}");
    assert!(
        pids.iter().all(|p| !alive(*p)),
        "stop returns once the tree is gone"
    );

    // Nobody answers now: a clear message and exit 1.
    let out = mc.cli(&["status"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("no supervisor answers"),
        "{}",
        text(&out)
    );
}

#[tokio::test]
async fn logs_are_rotated_followed_and_reopened_on_sighup() {
    let dir = test_dir();
    let mut mc = Launch::in_dir(dir.path(), "run")
        .env("META_CORE_LOG_MAX_BYTES", "4096")
        .env("META_CORE_LOG_KEEP", "2")
        .start()
        .await;
    let logs = mc.log_dir();

    // Restarts write lines until the 4 KiB limit has rotated the file twice.
    let restart_apid = || {
        let out = mc.cli(&["restart", "apid"]);
        assert!(out.status.success(), "{}", text(&out));
    };
    let mut restarts = 0;
    while !logs.join("apid.log.2").exists() {
        restart_apid();
        restarts += 1;
        assert!(restarts < 200, "the log never rotated");
    }
    for name in ["apid.log", "apid.log.1", "apid.log.2"] {
        let len = std::fs::metadata(logs.join(name)).unwrap().len();
        assert!(len <= 4096, "{name} is {len} bytes");
    }
    assert!(
        !logs.join("apid.log.3").exists(),
        "only META_CORE_LOG_KEEP rotated files"
    );

    // `logs -f` shows the lines written after it started, and goes on
    // with the new file once the one it reads is rotated away.
    let follower = mc
        .cli_command(&["logs", "apid", "-f", "-n", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn logs -f");
    let mut follower = KillOnDrop(follower);
    let (lines, seen) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let reader = {
        let (stdout, lines, seen) = (
            follower.0.stdout.take().unwrap(),
            lines.clone(),
            seen.clone(),
        );
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                lines.fetch_add(1, Ordering::SeqCst);
                if line.contains("apid ready") {
                    seen.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
    };
    let inode =
        |p: &std::path::Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let first = inode(&logs.join("apid.log"));
    // Its first line (the file's last) says it has the file open.
    until("the follower's first line", DAEMON_DEADLINE, || async {
        (lines.load(Ordering::SeqCst) >= 1).then_some(())
    })
    .await;
    let before = seen.load(Ordering::SeqCst);
    restart_apid();
    until("the follower to see a restart", DAEMON_DEADLINE, || async {
        (seen.load(Ordering::SeqCst) > before).then_some(())
    })
    .await;
    let mut restarts = 0;
    while inode(&logs.join("apid.log")) == first {
        restart_apid();
        restarts += 1;
        assert!(restarts < 200, "the log never rotated");
    }
    restart_apid();
    let before = seen.load(Ordering::SeqCst);
    restart_apid();
    until(
        "the follower to see the restart after the rotation",
        DAEMON_DEADLINE,
        || async { (seen.load(Ordering::SeqCst) > before).then_some(()) },
    )
    .await;
    drop(follower);
    let _ = reader.join();

    // SIGHUP reopens: after an external move, a new file takes the lines.
    std::fs::rename(logs.join("storaged.log"), logs.join("moved.log")).unwrap();
    signal(mc.process.pid(), Signal::HUP);
    until("the log to be reopened", DAEMON_DEADLINE, || async {
        logs.join("storaged.log").exists().then_some(())
    })
    .await;
    let out = mc.cli(&["restart", "storaged"]);
    assert!(out.status.success(), "{}", text(&out));
    // The supervisor writes what the daemon printed as it reads its pipe:
    // the ready line may reach the file after `restart` answered.
    until(
        "storaged's ready line in the new file",
        DAEMON_DEADLINE,
        || async {
            let fresh = std::fs::read_to_string(logs.join("storaged.log")).unwrap_or_default();
            fresh.contains("storaged ready").then_some(())
        },
    )
    .await;
    mc.wait_all_ready().await;
}

#[tokio::test]
async fn one_leader_and_a_standby_that_takes_over_without_two_writers() {
    let dir = test_dir();
    let mut leader = Launch::in_dir(dir.path(), "run-a").start().await;
    let rid = write_record(&leader, "written on the first leader").await;
    let mut standby = Launch::in_dir(dir.path(), "run-b").spawn();
    standby
        .wait_status("the second to be standby", |s| s.role == Role::Standby)
        .await;
    let st = standby.status().await;
    assert!(
        st.daemons.iter().all(|d| d.pid.is_none()),
        "a standby runs no daemon: {st:?}"
    );
    assert_eq!(
        st.leader_url,
        Some(format!("http://127.0.0.1:{}", leader.port()))
    );
    let out = standby.cli(&["restart", "apid"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("standby"), "{}", text(&out));

    // Watch the database file from now on: never two holders.
    let db = leader.db();
    let watching = Arc::new(AtomicBool::new(true));
    let max_holders = Arc::new(AtomicUsize::new(0));
    let watcher = {
        let (db, watching, max_holders) = (db.clone(), watching.clone(), max_holders.clone());
        std::thread::spawn(move || {
            let mut samples = 0u64;
            while watching.load(Ordering::SeqCst) {
                max_holders.fetch_max(holders_of(&db).len(), Ordering::SeqCst);
                samples += 1;
            }
            samples
        })
    };
    let old_pids = leader.daemon_pids().await;
    assert_eq!(
        holders_of(&db),
        vec![old_pids[0]],
        "only the leader's storaged holds the database"
    );
    leader.process.kill9();
    wait_gone(&old_pids, "the killed leader's daemons to die with it").await;
    standby.wait_all_ready().await;
    watching.store(false, Ordering::SeqCst);
    let samples = watcher.join().unwrap();
    assert!(
        samples >= 3,
        "the watcher sampled the handover ({samples} samples)"
    );
    assert_eq!(
        max_holders.load(Ordering::SeqCst),
        1,
        "two processes held the database at once"
    );

    let st = standby.status().await;
    assert_eq!(st.role, Role::Leader);
    let url = format!("http://127.0.0.1:{}", standby.port());
    assert_eq!(
        std::fs::read_to_string(standby.info_file()).unwrap(),
        format!("{url}\n")
    );
    assert_served(&standby, &rid, "written on the first leader").await;

    // A standby asked to stop while it waits exits 0 and leaves the leader be.
    let mut third = Launch::in_dir(dir.path(), "run-c").spawn();
    third
        .wait_status("the third to be standby", |s| s.role == Role::Standby)
        .await;
    third.process.sigterm();
    let exit = third.process.wait_exit().await;
    assert!(exit.success(), "{exit}\n{}", third.process.stderr());
    assert_eq!(standby.status().await.role, Role::Leader);
    assert_eq!(
        std::fs::read_to_string(standby.info_file()).unwrap(),
        format!("{url}\n")
    );
}

#[tokio::test]
async fn orphans_of_the_tree_are_reaped() {
    let dir = test_dir();
    // storaged started through a shell that leaves a short-lived orphan
    // behind: the orphan's parent exits at once, so it is reparented to
    // the supervisor (a subreaper), which must reap it when it ends.
    let bin = storaged_leaving(dir.path(), "sleep 3 &");
    // Not waiting for readiness: the orphan is looked for from the start.
    let mut mc = Launch::in_dir(dir.path(), "run")
        .env("META_CORE_BIN_DIR", &bin.display().to_string())
        .spawn();
    let me = mc.process.pid();
    // The children of the supervisor that are not its daemons.
    let strays = |zombies_only: bool| -> Vec<u32> {
        children_of(me)
            .into_iter()
            .filter(|p| is_sleep(p) && (!zombies_only || !alive(*p)))
            .collect()
    };
    let orphan = until(
        "the orphan to be adopted by the supervisor",
        DAEMON_DEADLINE,
        || async { strays(false).first().copied() },
    )
    .await;
    until("the orphan to be reaped", DAEMON_DEADLINE, || async {
        (!std::path::Path::new(&format!("/proc/{orphan}")).exists()).then_some(())
    })
    .await;
    assert!(
        strays(true).is_empty(),
        "no zombie is left under the supervisor"
    );
    mc.wait_all_ready().await;
}

#[tokio::test]
async fn a_daemon_that_ignores_sigterm_is_killed_after_its_grace() {
    let dir = test_dir();
    let mut mc = Launch::in_dir(dir.path(), "run").start().await;
    let pids = mc.daemon_pids().await;
    // A stopped process cannot act on SIGTERM: only SIGKILL ends it.
    signal(pids[1], Signal::STOP);
    mc.process.sigterm();
    let exit = within(
        "the stop, apid's 3 s grace included",
        Duration::from_secs(30),
        mc.process.wait_exit(),
    )
    .await;
    assert!(exit.success(), "{exit}");
    let log = mc.process.stderr();
    assert!(
        log.contains("apid still runs 3 s after SIGTERM: SIGKILL"),
        "{log}"
    );
    assert!(pids.iter().all(|p| !alive(*p)), "the whole tree is gone");
    assert!(!mc.info_file().exists());
}

/// Whether process `pid` has `path` open (its descriptors, as /proc lists
/// them).
fn has_open(pid: u32, path: &std::path::Path) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
        fds.flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == path))
    })
}

#[tokio::test]
async fn the_old_tree_holds_the_lock_until_its_last_process_is_gone() {
    let dir = test_dir();
    // The leader's storaged leaves a straggler behind that does not die with
    // the supervisor (no parent-death signal) and holds the inherited lock
    // descriptor: the standby must wait for it, as it would for a storaged
    // that outlived its supervisor.
    let pid_file = dir.path().join("straggler.pid");
    let bin = storaged_leaving(
        dir.path(),
        &format!("sleep 6 & echo $! > {}", pid_file.display()),
    );
    let mut leader = Launch::in_dir(dir.path(), "run-a")
        .env("META_CORE_BIN_DIR", &bin.display().to_string())
        .start()
        .await;
    let straggler: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut standby = Launch::in_dir(dir.path(), "run-b").spawn();
    standby
        .wait_status("the second to be standby", |s| s.role == Role::Standby)
        .await;

    let daemons = leader.daemon_pids().await;
    let lock = leader.meta_core_path().join("locks/kv-leader.lock");
    leader.process.kill9();
    wait_gone(&daemons, "the killed leader's daemons").await;
    let looked = std::cell::Cell::new(0);
    let (watched, seen, lock) = (&standby, &looked, &lock);
    // The lock is held while the straggler has the lock file open: an
    // exiting process closes its files before it is a zombie, so "alive"
    // alone would not say the lock is still taken.
    until(
        "the straggler of the old tree to exit",
        DAEMON_DEADLINE,
        || async move {
            if !has_open(straggler, lock) {
                return Some(());
            }
            let role = watched.status().await.role;
            if has_open(straggler, lock) {
                assert_eq!(
                    role,
                    Role::Standby,
                    "took over while a process of the old tree held the lock"
                );
                seen.set(seen.get() + 1);
            }
            None
        },
    )
    .await;
    assert!(
        looked.get() > 0,
        "the straggler died before the standby could be checked"
    );
    let st = standby.wait_all_ready().await;
    assert_eq!(
        st.role,
        Role::Leader,
        "the standby leads once the straggler is gone"
    );
}

#[tokio::test]
#[cfg_attr(
    no_pid_namespace,
    ignore = "this machine cannot make a PID namespace (unshare --pid); see tests/build.rs"
)]
async fn as_pid_1_of_a_container_it_reaps_orphans_and_stops_on_sigterm() {
    let dir = test_dir();
    let bin = storaged_leaving(dir.path(), "sleep 3 &");
    let launch =
        Launch::in_dir(dir.path(), "run").env("META_CORE_BIN_DIR", &bin.display().to_string());
    let mut mc = launch.spawn_as_pid_1();
    let status = mc.wait_all_ready().await;
    assert_eq!(status.pid, 1, "the supervisor is PID 1 of its namespace");
    let unshare = mc.process.pid();
    let supervisor = until("the supervisor's host pid", DAEMON_DEADLINE, || async {
        children_of(unshare).first().copied()
    })
    .await;
    // The orphan is reparented to PID 1, which must reap it: find it on
    // the host as a child of the supervisor.
    let orphan = until("the orphan under PID 1", DAEMON_DEADLINE, || async {
        children_of(supervisor).into_iter().find(is_sleep)
    })
    .await;
    until(
        "the orphan to be reaped by PID 1",
        DAEMON_DEADLINE,
        || async { (!std::path::Path::new(&format!("/proc/{orphan}")).exists()).then_some(()) },
    )
    .await;

    // SIGTERM to PID 1 (the kernel drops signals PID 1 has no handler
    // for): an orderly stop, exit 0, which unshare passes on.
    let daemons: Vec<u32> = children_of(supervisor);
    signal(supervisor, Signal::TERM);
    let exit = mc.process.wait_exit().await;
    assert!(exit.success(), "{exit}\n{}", mc.process.stderr());
    assert!(
        mc.process
            .stderr()
            .contains("storaged stopped: exited with status 0"),
        "{}",
        mc.process.stderr()
    );
    assert!(daemons.iter().all(|p| !alive(*p)));
    assert!(!mc.info_file().exists());
}

/// `meta-core health`, the container's health check: a leader whose API
/// answers and a standby that waits are healthy; a leader whose API does
/// not answer, or no supervisor at all, is not.
#[tokio::test]
async fn the_health_command_tells_a_healthy_container_from_a_sick_one() {
    let dir = test_dir();
    let leader = Launch::in_dir(dir.path(), "run-a").start().await;
    let out = leader.cli(&["health"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("healthy: leader"), "{}", text(&out));

    let mut standby = Launch::in_dir(dir.path(), "run-b").spawn();
    standby
        .wait_status("the second to be standby", |s| s.role == Role::Standby)
        .await;
    let out = standby.cli(&["health"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("healthy: standby"), "{}", text(&out));

    // The leader's apid frozen: its port takes the connection, nothing
    // answers, the check says so once its own timeout passes.
    let apid = leader.daemon(Daemon::Apid).await.pid.unwrap();
    signal(apid, Signal::STOP);
    let out = leader.cli(&["health"]);
    signal(apid, Signal::CONT);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("unhealthy: the API on 127.0.0.1:"),
        "{}",
        text(&out)
    );

    standby.process.sigterm();
    assert!(standby.process.wait_exit().await.success());
    let out = standby.cli(&["health"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("no supervisor answers"),
        "{}",
        text(&out)
    );
}
