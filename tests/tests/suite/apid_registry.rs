//! The service registry over real files and real HTTP: meta-core's own
//! `services/<name>-<hostname>.json`, heartbeated and removed on stop;
//! other services' files listed (fresh, stale), cleaned when dead, and
//! skipped when malformed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use e2e::wait::{DAEMON_DEADLINE, until};
use e2e::{Apid, Storaged};
use serde_json::{Value, json};

const ENV: &[(&str, &str)] = &[
    ("HEARTBEAT_INTERVAL_MS", "200"),
    ("STALE_THRESHOLD_MS", "3000"),
    ("CLEANUP_INTERVAL_MS", "300"),
    ("DEAD_SERVICE_THRESHOLD_MS", "20000"),
];

fn services_dir(a: &Apid) -> PathBuf {
    a.dir().join("meta-core/services")
}

/// An RFC 3339 time `ago` in the past, with an offset as Go writes it.
fn ago(d: Duration) -> String {
    let t = SystemTime::now() - d;
    humantime_like(t)
}

fn humantime_like(t: SystemTime) -> String {
    // UTC, written with a +00:00 offset (not Z) to exercise the parser.
    let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.250+00:00",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn civil(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn write(dir: &Path, name: &str, body: &str) {
    std::fs::write(dir.join(name), body).unwrap();
}

fn entry(name: &str, host: &str, beat: &str) -> String {
    json!({"name": name, "hostname": host, "baseUrl": format!("http://{host}:8000"),
           "status": "running", "lastHeartbeat": beat})
    .to_string()
}

#[tokio::test]
async fn the_registry_lists_fresh_and_stale_services_and_skips_broken_files() {
    let s = Storaged::start().await;
    let mut a = Apid::start_with(&s, ENV).await;
    let dir = services_dir(&a);

    // Our own file, heartbeated, readable by the mesh.
    let own: PathBuf = until("apid's registry file", DAEMON_DEADLINE, || async {
        std::fs::read_dir(&dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("meta-core-"))
            })
    })
    .await;
    let mode = std::fs::metadata(&own).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    let first: Value = serde_json::from_slice(&std::fs::read(&own).unwrap()).unwrap();
    for k in ["name", "hostname", "baseUrl", "status", "lastHeartbeat"] {
        assert!(first.get(k).is_some(), "{k} in {first}");
    }
    assert_eq!(first["name"], "meta-core");
    until("a second heartbeat", DAEMON_DEADLINE, || async {
        let now: Value = serde_json::from_slice(&std::fs::read(&own).ok()?).ok()?;
        (now["lastHeartbeat"] != first["lastHeartbeat"]).then_some(())
    })
    .await;

    // Other services, written as they write them.
    write(
        &dir,
        "meta-sort-a.json",
        &entry("meta-sort", "a", &ago(Duration::ZERO)),
    );
    write(
        &dir,
        "meta-sort-b.json",
        &entry("meta-sort", "b", &ago(Duration::from_secs(1))),
    );
    write(
        &dir,
        "meta-fuse-c.json",
        &entry("meta-fuse", "c", &ago(Duration::from_secs(10))),
    );
    write(&dir, "half-written.json", "{\"name\": \"meta-stre");
    write(&dir, "no-beat.json", "{\"name\": \"x\"}");
    write(&dir, "array.json", "[1, 2]");
    write(&dir, "notes.txt", "not a registry file");

    let list = a.get_ok("/api/services").await;
    let names: Vec<(String, String)> = list["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                e["status"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(list["count"], 4, "{list}");
    assert!(
        names.contains(&("meta-core".into(), "running".into())),
        "{names:?}"
    );
    assert!(
        names.contains(&("meta-sort".into(), "running".into())),
        "{names:?}"
    );
    assert!(
        names.contains(&("meta-fuse".into(), "stale".into())),
        "{names:?}"
    );

    for path in ["/neighbors", "/api/neighbors"] {
        let n = a.get_ok(path).await;
        assert_eq!(n["current"], "meta-core");
        assert_eq!(n["enabled"], true);
        assert_eq!(n["self"]["name"], "meta-core", "{n}");
        // One row per name, its newest instance.
        assert_eq!(n["count"], 2, "{n}");
        let sort = n["neighbors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == "meta-sort")
            .unwrap()
            .clone();
        assert_eq!(sort["instance"], "a");
        assert_eq!(sort["baseUrl"], "http://a:8000");
        assert_eq!(sort["addr"], "a:8000");
        assert!(sort["lastSeen"].as_f64().unwrap() > 1.7e9);
    }
    let all = a.get_ok("/neighbors?all=1").await;
    assert_eq!(all["count"], 3, "{all}");

    // Broken files are left alone and skipped, not fatal.
    assert!(dir.join("half-written.json").exists());
    assert_eq!(a.get("/health").await.status, 200);

    // An orderly stop removes our own file.
    a.process().sigterm();
    let exit = a.process_mut().wait_exit().await;
    assert!(exit.success(), "{exit}");
    assert!(!own.exists(), "the registry file is removed on stop");
    drop(s);
}

#[tokio::test]
async fn the_cleaner_removes_services_dead_past_the_threshold() {
    let s = Storaged::start().await;
    let env = [
        ("HEARTBEAT_INTERVAL_MS", "200"),
        ("CLEANUP_INTERVAL_MS", "200"),
        ("DEAD_SERVICE_THRESHOLD_MS", "5000"),
    ];
    let a = Apid::start_with(&s, &env).await;
    let dir = services_dir(&a);
    std::fs::create_dir_all(&dir).unwrap();
    write(
        &dir,
        "gone-x.json",
        &entry("gone", "x", &ago(Duration::from_secs(60))),
    );
    write(
        &dir,
        "alive-y.json",
        &entry("alive", "y", &ago(Duration::ZERO)),
    );
    // The dead one was last written long ago: the cleaner wants both its
    // heartbeat and its mtime old...
    std::fs::File::options()
        .write(true)
        .open(dir.join("gone-x.json"))
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(60))
        .unwrap();
    // ...so one whose heartbeat is old but which was just rewritten (a
    // service that restarted, or keeps its clock wrong) stays.
    write(
        &dir,
        "rewritten-z.json",
        &entry("rewritten", "z", &ago(Duration::from_secs(60))),
    );
    until("the dead service's file to go", DAEMON_DEADLINE, || async {
        (!dir.join("gone-x.json").exists()).then_some(())
    })
    .await;
    assert!(dir.join("alive-y.json").exists());
    assert!(dir.join("rewritten-z.json").exists());
    let list = a.get_ok("/api/services").await;
    assert!(
        list["services"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["name"] != "gone"),
        "{list}"
    );
}
