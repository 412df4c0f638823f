//! The SSE benchmark (not a test), against the real storaged and apid
//! release binaries:
//!
//! 1. **Fan-out.** 1,000 followers of `/api/events/meta` while a writer
//!    commits 1,000 field changes a second (100 `PATCH`es of 10 fields)
//!    for 60 s: delivery latency from commit to follower (p50, p99, max),
//!    events delivered against events committed (each follower must get
//!    exactly the committed IDs, in order), apid's RSS idle, with the
//!    followers connected, and at its peak, and the memory per follower.
//! 2. **Snapshot.** One follower of `meta` from `0` on a store of 169,000
//!    records of 40 fields: events per second and apid's RSS while it
//!    streams (sampled every 100 ms), which must stay flat.
//! 3. **Stalled followers.** 2,000 followers ask for the snapshot and never
//!    read (a 4 KiB receive buffer each): apid's RSS before, at its peak
//!    over the write stall (sampled every 100 ms), and once they are cut
//!    off, beside the figure the outside attack measured (193 MB to 1,136
//!    MB for 2,000).
//!
//! Printed beside the targets and the figures it cites for scale:
//! Centrifugo's p99 of 200 ms at a million connections on 20 pods, ~31 KB
//! reported per axum SSE connection, and the original's boot-time
//! republish of every field, which took about 6 minutes.
//!
//! `cargo build --release --bins && cargo bench -p bench --bench sse`
//! (env: `BENCH_SSE_FOLLOWERS` 1000, `BENCH_SSE_SECS` 60,
//! `BENCH_SSE_RATE` 1000 field changes/s, `BENCH_RECORDS` 169000,
//! `BENCH_SSE_STALLED` 2000).
//!
//! Latency is the follower's clock at receipt minus the entry's `ts`
//! (storaged's clock when the transaction began, in whole ms): both on this
//! machine, and never shorter than the true delay.

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use metacore::api::storaged::StoragedClient;
use metacore::checked::CheckedFields;
use metacore::cid::Cid;
use metacore::record::Target;
use storaged::{Options, Store};

mod fan_out;
mod follower;
mod stalled;

use bench::daemons::Daemon;
use bench::workload::{drive, env_u64, rss_mib};
use follower::follow;

/// Phase 2: one follower of the `meta` snapshot.
async fn snapshot(port: u16, apid_pid: u32, records: u64) {
    let stop = Arc::new(AtomicBool::new(true));
    let connected = Arc::new(AtomicU64::new(0));
    let (_, before) = rss_mib(apid_pid);
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let sampling = sampling.clone();
        tokio::spawn(async move {
            let mut samples = Vec::new();
            while sampling.load(Ordering::Relaxed) {
                samples.push(rss_mib(apid_pid).1);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            samples
        })
    };
    let started = Instant::now();
    // The snapshot's last event carries the only id: `until` 0 means "the
    // first id seen".
    let seen = follow(
        port,
        "/api/events/meta",
        Some("0"),
        stop,
        Arc::new(AtomicU64::new(0)),
        connected,
    )
    .await;
    let took = started.elapsed();
    sampling.store(false, Ordering::Relaxed);
    let samples = sampler.await.unwrap();
    let events: u32 = seen.histogram.iter().sum();
    let max = samples.iter().copied().fold(0.0, f64::max);
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    println!();
    println!("snapshot: one follower of /api/events/meta from 0, {records} records of 40 fields");
    println!(
        "  {events} set events in {:.1} s: {:.0} events/s   (target > 200,000/s; the original \
         republished every field at each boot in ~6 min)",
        took.as_secs_f64(),
        events as f64 / took.as_secs_f64()
    );
    println!(
        "  apid RSS while streaming: {min:.1}-{max:.1} MiB over {} samples (before {before:.1} MiB)",
        samples.len()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let followers = env_u64("BENCH_SSE_FOLLOWERS", 1000);
    let secs = env_u64("BENCH_SSE_SECS", 60);
    let records = env_u64("BENCH_RECORDS", 169_000) / 16 * 16;
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("files")).unwrap();
    let db = dir.path().join("meta-core/db/meta-core.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();

    println!("SSE benchmark: preloading {records} records of 40 fields in-process ...");
    let store = Arc::new(Store::open(&Options::for_path(&db)).expect("open the store"));
    let (rate, _) = {
        let store = store.clone();
        drive(records, 1, move |cid: Cid, fields| {
            let store = store.clone();
            async move {
                let fields = CheckedFields::check(fields).expect("generated fields are valid");
                store.merge(Target::Cid(cid), fields).await.expect("merge");
            }
        })
        .await
    };
    println!("  loaded at {rate:.0} records/s");
    Arc::into_inner(store).expect("one owner").close().await;

    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let storaged = Daemon::storaged(dir.path(), port);
    let apid = Daemon::apid(dir.path(), port);
    let client = StoragedClient::new(&dir.path().join("run/storaged.sock"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while client.health().await.is_err()
        || std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
    {
        assert!(Instant::now() < deadline, "the daemons did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let apid_pid = apid.pid();

    snapshot(port, apid_pid, records).await;
    fan_out::fan_out(port, apid_pid, &client, followers, secs).await;
    // Last: the memory it takes is not all given back to the system, and
    // would be counted in the fan-out's figures.
    stalled::stalled(port, apid_pid, env_u64("BENCH_SSE_STALLED", 2000)).await;

    apid.stop();
    storaged.stop();
}
