//! Memory stays bounded under concurrent large bodies: each daemon takes
//! in at most `BODY_BUDGET` (32 MiB) of request bodies at once, so 16
//! concurrent 8 MiB `PATCH`es (40 here) cannot add up (issue 13, point 4; before,
//! they took apid from 25 to 353 MB and storaged from 121 to 429 MB).

use e2e::Apid;
use e2e::fixtures::random_rid;

/// A line of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in MiB.
fn mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim_start_matches(':').split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib / 1024.0
}

/// What each daemon may grow by under any number of concurrent bodies, as
/// docs/operations.md says: six times the 32 MiB body budget (a body, its
/// parsed form, the record made of it and its copy on the way to
/// storaged, and what the allocator keeps), beyond storaged's SQLite
/// caches.
const GROWTH_MIB: f64 = 6.0 * 32.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_large_bodies_keep_memory_bounded() {
    // Small SQLite caches, so that what is measured is bodies.
    let dir = e2e::daemon::test_dir();
    let s = e2e::Launch::in_dir(dir.path())
        .env("META_CORE_DB_CACHE_MB", "4")
        .env("META_CORE_DB_READER_CACHE_MB", "1")
        .start()
        .await;
    let a = Apid::start(&s).await;
    let (apid0, storaged0) = (mib(a.process().pid(), "VmRSS"), mib(s.pid(), "VmRSS"));
    let body = format!(r#"{{"title":"{}"}}"#, "x".repeat((8 << 20) - 64));
    let body = bytes::Bytes::from(body);
    let mut tasks = Vec::new();
    // More than twice what once took apid to 353 MB.
    for _ in 0..40 {
        // A request may wait 10 s for the body budget before its 503.
        let http = e2e::apid::Http::new(a.port()).with_deadline(std::time::Duration::from_secs(60));
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            let rid = random_rid();
            http.send(
                "PATCH",
                &format!("/meta/{rid}"),
                body,
                &[("content-type", "application/json")],
            )
            .await
            .status
        }));
    }
    for t in tasks {
        let status = t.await.unwrap();
        assert!(status == 200 || status == 503, "{status}");
    }
    let apid = mib(a.process().pid(), "VmHWM") - apid0;
    let storaged = mib(s.pid(), "VmHWM") - storaged0;
    println!(
        "grew: apid {apid:.0} MiB (from {apid0:.0}), storaged {storaged:.0} MiB (from {storaged0:.0})"
    );
    assert!(apid < GROWTH_MIB, "apid grew by {apid:.0} MiB");
    assert!(storaged < GROWTH_MIB, "storaged grew by {storaged:.0} MiB");
}
