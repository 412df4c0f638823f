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
//! `cargo build --release --bins && cargo bench -p apid --bench sse`
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
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use metacore::api::storaged::{EntriesQuery, StoragedClient};
use metacore::checked::CheckedFields;
use metacore::cid::Cid;
use metacore::record::Target;
use metacore::stream::{StreamId, StreamName};
use storaged::{Options, Store};

#[path = "../../storaged/benches/support/workload.rs"]
mod workload;

mod support {
    pub(crate) mod daemons;
}

use support::daemons::Daemon;

use workload::{drive, env_u64, rss_mib};

/// Latency histogram: 0.25 ms buckets up to 2 s, then one overflow bucket.
const BUCKET_US: u64 = 250;
const BUCKETS: usize = 8000;

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_micros() as u64
}

/// What one follower saw.
struct Seen {
    /// How many IDs, the last, and a hash of the whole sequence in order.
    count: u64,
    last: Option<StreamId>,
    hash: u64,
    histogram: Vec<u32>,
    max_us: u64,
    /// IDs at or before the previous one (repeats, disorder).
    disorder: u64,
}

/// Follows `path` on `port` until `stop`, then until it has seen `until`.
async fn follow(
    port: u16,
    path: &'static str,
    last_event_id: Option<&'static str>,
    stop: Arc<AtomicBool>,
    until: Arc<AtomicU64>,
    connected: Arc<AtomicU64>,
) -> Seen {
    // apid answers 503 until its hubs have reached storaged: retry a while.
    let deadline = Instant::now() + Duration::from_secs(20);
    let resp = loop {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect to apid");
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .expect("HTTP handshake");
        tokio::spawn(conn);
        let mut req = hyper::Request::get(path).header("host", "meta-core");
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let resp = sender
            .send_request(req.body(Empty::<Bytes>::new()).unwrap())
            .await
            .expect("the stream's answer");
        if resp.status() == 200 {
            break resp;
        }
        assert!(
            resp.status() == 503 && Instant::now() < deadline,
            "GET {path}: {}",
            resp.status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    connected.fetch_add(1, Ordering::Relaxed);
    let mut body = resp.into_body();
    let mut seen = Seen {
        count: 0,
        last: None,
        hash: HASH_SEED,
        histogram: vec![0; BUCKETS + 1],
        max_us: 0,
        disorder: 0,
    };
    let mut pending = Vec::new();
    loop {
        let done = stop.load(Ordering::Relaxed)
            && seen
                .last
                .is_some_and(|id| id >= StreamId::parse(&until_text(&until)).unwrap());
        if done {
            return seen;
        }
        let frame = match tokio::time::timeout(Duration::from_millis(500), body.frame()).await {
            Err(_) => continue,
            Ok(None) => return seen,
            Ok(Some(f)) => f.expect("the stream's body"),
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let at = now_us();
        pending.extend_from_slice(&data);
        let end = match pending.iter().rposition(|&b| b == b'\n') {
            Some(i) => i + 1,
            None => continue,
        };
        for line in pending[..end].split(|&b| b == b'\n') {
            if let Some(id) = line.strip_prefix(b"id: ") {
                let id = StreamId::parse(std::str::from_utf8(id).unwrap()).unwrap();
                if seen.last.is_some_and(|last| id <= last) {
                    seen.disorder += 1;
                }
                seen.last = Some(id);
                seen.count += 1;
                seen.hash = hash_step(seen.hash, id);
            } else if let Some(ts) = ts_of(line) {
                let lat = at.saturating_sub(ts * 1000);
                seen.max_us = seen.max_us.max(lat);
                seen.histogram[((lat / BUCKET_US) as usize).min(BUCKETS)] += 1;
            }
        }
        pending.drain(..end);
    }
}

const HASH_SEED: u64 = 0xcbf2_9ce4_8422_2325;

/// One step of an order-sensitive hash of an ID sequence (FNV-1a style).
fn hash_step(h: u64, id: StreamId) -> u64 {
    let mut h = h;
    for b in id.ms.to_le_bytes().into_iter().chain(id.seq.to_le_bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// The last committed ID the followers must reach, as text (0 until set).
fn until_text(until: &AtomicU64) -> String {
    let packed = until.load(Ordering::Relaxed);
    format!("{}-{}", packed >> 20, packed & 0xF_FFFF)
}

fn pack(id: StreamId) -> u64 {
    (id.ms << 20) | id.seq.min(0xF_FFFF)
}

/// The `ts` of a `data:` line: `..."ts":"1747..."...`.
fn ts_of(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(b"data: ")?;
    let at = rest.windows(6).position(|w| w == b"\"ts\":\"")? + 6;
    let digits = &rest[at..];
    let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&digits[..n]).ok()?.parse().ok()
}

fn percentile_us(histogram: &[u32], p: f64) -> f64 {
    let total: u64 = histogram.iter().map(|&c| u64::from(c)).sum();
    let want = (total as f64 * p).ceil() as u64;
    let mut acc = 0;
    for (i, &c) in histogram.iter().enumerate() {
        acc += u64::from(c);
        if acc >= want {
            return ((i as u64 + 1) * BUCKET_US) as f64;
        }
    }
    f64::NAN
}

async fn committed_after(store: &StoragedClient, from: StreamId) -> Vec<StreamId> {
    let mut out: Vec<StreamId> = Vec::new();
    loop {
        let q = EntriesQuery {
            after: Some(out.last().copied().unwrap_or(from)),
            limit: Some(1000),
        };
        let page = store.entries(StreamName::Meta, &q).await.expect("entries");
        if page.is_empty() {
            return out;
        }
        out.extend(page.into_iter().map(|e| e.id));
    }
}

async fn head(store: &StoragedClient) -> StreamId {
    store
        .stream_info(StreamName::Meta)
        .await
        .expect("stream info")
        .last
        .unwrap_or(StreamId::ZERO)
}

type Http = Client<HttpConnector, Full<Bytes>>;

async fn patch(http: &Http, base: &str, rid: &str, body: Vec<u8>) -> u16 {
    let req = hyper::Request::patch(format!("{base}/meta/{rid}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let resp = http.request(req).await.expect("apid answers");
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await;
    status
}

/// Phase 1: the followers, the paced writer, the comparison.
async fn fan_out(port: u16, apid_pid: u32, store: &StoragedClient, followers: u64, secs: u64) {
    let rate = env_u64("BENCH_SSE_RATE", 1000);
    let per_write = 10;
    let base = format!("http://127.0.0.1:{port}");
    let http: Http = Client::builder(TokioExecutor::new()).build_http();
    let (_, idle_rss) = rss_mib(apid_pid);

    let stop = Arc::new(AtomicBool::new(false));
    let until = Arc::new(AtomicU64::new(0));
    let connected = Arc::new(AtomicU64::new(0));
    let from = head(store).await;
    let tasks: Vec<_> = (0..followers)
        .map(|_| {
            tokio::spawn(follow(
                port,
                "/api/events/meta",
                None,
                stop.clone(),
                until.clone(),
                connected.clone(),
            ))
        })
        .collect();
    while connected.load(Ordering::Relaxed) < followers {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, connected_rss) = rss_mib(apid_pid);

    // The writer: `rate` field changes a second, `per_write` per PATCH.
    let rid = "01M8N10DTXEQRADXEPK8EBGMCQ";
    let writes_per_sec = rate / per_write;
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / writes_per_sec));
    let started = Instant::now();
    let mut n = 0u64;
    let mut failed = 0u64;
    let mut peak_rss: f64 = 0.0;
    while started.elapsed() < Duration::from_secs(secs) {
        tick.tick().await;
        let body: serde_json::Map<String, serde_json::Value> = (0..per_write)
            .map(|i| {
                (
                    format!("bench/f{}", (n * per_write + i) % 5000),
                    serde_json::json!(n.to_string()),
                )
            })
            .collect();
        if patch(&http, &base, rid, serde_json::to_vec(&body).unwrap()).await != 200 {
            failed += 1;
        }
        n += 1;
        if n.is_multiple_of(writes_per_sec) {
            peak_rss = peak_rss.max(rss_mib(apid_pid).1);
        }
    }
    let wrote_for = started.elapsed();
    let last = head(store).await;
    until.store(pack(last), Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let committed = committed_after(store, from).await;
    let committed_hash = committed.iter().fold(HASH_SEED, |h, id| hash_step(h, *id));
    let mut histogram = vec![0u32; BUCKETS + 1];
    let (mut delivered, mut exact, mut max_us, mut disorder) = (0u64, 0u64, 0u64, 0u64);
    for t in tasks {
        let seen = tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("a follower did not reach the last entry within 60 s")
            .expect("follower task");
        delivered += seen.count;
        if seen.count == committed.len() as u64 && seen.hash == committed_hash {
            exact += 1;
        }
        disorder += seen.disorder;
        max_us = max_us.max(seen.max_us);
        for (a, b) in histogram.iter_mut().zip(&seen.histogram) {
            *a += b;
        }
    }
    let (apid_hwm, _) = rss_mib(apid_pid);
    let per_follower_kib = (connected_rss - idle_rss) * 1024.0 / followers as f64;

    println!();
    println!(
        "fan-out: {followers} followers of /api/events/meta, {rate} field changes/s \
         ({writes_per_sec} PATCH/s of {per_write} fields) for {:.0} s",
        wrote_for.as_secs_f64()
    );
    println!(
        "  committed {} events ({:.0}/s), {failed} writes failed",
        committed.len(),
        committed.len() as f64 / wrote_for.as_secs_f64()
    );
    println!(
        "  delivered {delivered} of {} expected ({followers} x {}); {exact} of {followers} followers \
         got exactly the committed IDs in order; {disorder} repeated or out of order (target: all, 0)",
        committed.len() as u64 * followers,
        committed.len()
    );
    println!(
        "  commit -> follower: p50 {:.2} ms  p99 {:.2} ms  max {:.1} ms   (target p99 < 100 ms; \
         Centrifugo: p99 200 ms at 1M connections on 20 pods)",
        percentile_us(&histogram, 0.5) / 1e3,
        percentile_us(&histogram, 0.99) / 1e3,
        max_us as f64 / 1e3
    );
    println!(
        "  apid RSS: idle {idle_rss:.1} MiB, {followers} connected {connected_rss:.1} MiB, \
         under load {peak_rss:.1} MiB, peak (VmHWM) {apid_hwm:.1} MiB   (target < 100 MB)"
    );
    println!(
        "  memory per follower: {per_follower_kib:.1} KiB   (target < 20 KiB; ~31 KB reported per axum SSE connection)"
    );
}

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

/// Phase 3: followers of the snapshot that never read.
async fn stalled(port: u16, apid_pid: u32, n: u64) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_, before) = rss_mib(apid_pid);
    let mut conns = Vec::new();
    for _ in 0..n {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.set_recv_buffer_size(4096).unwrap();
        let mut tcp = sock
            .connect(([127, 0, 0, 1], port).into())
            .await
            .expect("connect to apid");
        tcp.write_all(b"GET /api/events/meta?lastEventId=0 HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        conns.push(tcp);
    }
    // The write stall (10 s) cuts them off once they have taken nothing for
    // that long; sample until then and a little after.
    let mut peak: f64 = 0.0;
    let until = Instant::now() + Duration::from_secs(25);
    while Instant::now() < until {
        peak = peak.max(rss_mib(apid_pid).1);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, after) = rss_mib(apid_pid);
    let mut closed = 0;
    for tcp in &mut conns {
        // A cut-off connection reads its buffered bytes, then EOF or reset.
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match tokio::time::timeout(Duration::from_millis(20), tcp.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => {
                    closed += 1;
                    break;
                }
                Ok(Ok(_)) => continue,
                Err(_) => break,
            }
        }
    }
    println!();
    println!("stalled: {n} followers of the snapshot that never read");
    println!(
        "  apid RSS: before {before:.1} MiB, peak {peak:.1} MiB (+{:.1} MiB, {:.0} KiB a follower), \
         after {after:.1} MiB; {closed} of {n} cut off   (the outside attack: 193 MB -> 1,136 MB \
         for 2,000, about 480 KiB a follower)",
        peak - before,
        (peak - before) * 1024.0 / n as f64
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
    fan_out(port, apid_pid, &client, followers, secs).await;
    // Last: the memory it takes is not all given back to the system, and
    // would be counted in the fan-out's figures.
    stalled(port, apid_pid, env_u64("BENCH_SSE_STALLED", 2000)).await;

    apid.stop();
    storaged.stop();
}
