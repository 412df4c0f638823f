//! apid's benchmark (not a test): with 169,000 records stored, reads of
//! `GET /api/meta/{cid}` and `GET /meta/{hash}` from 64 concurrent
//! connections (requests/s, p50/p99), and `PATCH /meta/{cid}` 40-field
//! records/s from 16 clients, printed beside the original's 835 records/s
//! and beside storaged's socket and in-process figures measured in this run.
//!
//! `cargo build --release --bins && cargo bench -p bench --bench http`
//! (env `BENCH_RECORDS` overrides the 169,000 preload, `BENCH_WRITES` the
//! 20,000 measured writes, `BENCH_READ_SECS` the 10 s of each read phase).
//!
//! The reads are driven by `wrk` (Debian package `wrk`) when it is on the
//! PATH, with `benches/wrk-urls.lua` cycling through the written records: a
//! C load generator leaves the two cores of a small machine to apid and
//! storaged. Without it the benchmark falls back to a hyper client in this
//! process, which competes with the daemons for CPU and reads lower.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use metacore::api::storaged::StoragedClient;
use metacore::checked::CheckedFields;
use metacore::cid::Cid;
use metacore::record::Target;
use storaged::{Options, Store};

use bench::daemons::Daemon;
use bench::workload::{drive, env_u64, percentile};

const ORIGINAL_RECORDS_PER_SEC: f64 = 835.0;
const READERS: usize = 64;

type Http = Client<HttpConnector, Full<Bytes>>;

async fn request(http: &Http, method: &str, url: &str, body: Option<Vec<u8>>) -> (u16, Bytes) {
    let req = hyper::Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json")
        .body(Full::new(body.map(Bytes::from).unwrap_or_default()))
        .expect("request");
    let resp = http.request(req).await.expect("apid answers");
    let status = resp.status().as_u16();
    (
        status,
        resp.into_body().collect().await.expect("body").to_bytes(),
    )
}

/// One read phase's figures.
struct Reads {
    /// What drove the load.
    generator: &'static str,
    rate: f64,
    p50: Duration,
    p99: Duration,
    failed: u64,
}

/// Reads `paths` (below `base`) round robin from `READERS` connections for
/// `secs`, with wrk when installed, else with the in-process client.
async fn read_phase(http: &Http, base: &str, paths: Vec<String>, secs: u64, dir: &Path) -> Reads {
    if let Some(reads) = wrk_load(base, &paths, secs, dir) {
        return reads;
    }
    let urls = paths.iter().map(|p| format!("{base}{p}")).collect();
    let (rate, lat, failed) = read_load(http, Arc::new(urls), secs).await;
    Reads {
        generator: "in-process hyper client: install wrk for fair figures",
        rate,
        p50: percentile(&lat, 0.5),
        p99: percentile(&lat, 0.99),
        failed,
    }
}

/// Runs `wrk` over `paths`; `None` when wrk is not installed.
fn wrk_load(base: &str, paths: &[String], secs: u64, dir: &Path) -> Option<Reads> {
    let list = dir.join("wrk-paths.txt");
    std::fs::write(&list, paths.join("\n")).expect("write the wrk path list");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/wrk-urls.lua");
    let out = Command::new("wrk")
        .args([
            "-t2",
            &format!("-c{READERS}"),
            &format!("-d{secs}s"),
            "--timeout",
            "5s",
            "-s",
        ])
        .arg(&script)
        .arg(base)
        .arg("--")
        .arg(&list)
        .stderr(Stdio::inherit())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("WRK "))
        .unwrap_or_else(|| panic!("wrk printed no summary:\n{text}"));
    let field = |name: &str| -> u64 {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("wrk summary lacks {name}: {line}"))
    };
    let duration = Duration::from_micros(field("duration_us"));
    Some(Reads {
        generator: "wrk, 2 threads",
        rate: field("requests") as f64 / duration.as_secs_f64(),
        p50: Duration::from_micros(field("p50_us")),
        p99: Duration::from_micros(field("p99_us")),
        failed: field("errors") + field("non2xx"),
    })
}

/// Reads `urls` round-robin from `READERS` tasks for `secs`; returns
/// requests/s and the latencies.
async fn read_load(http: &Http, urls: Arc<Vec<String>>, secs: u64) -> (f64, Vec<Duration>, u64) {
    let end = Instant::now() + Duration::from_secs(secs);
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..READERS {
        let (http, urls, errors) = (http.clone(), urls.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut i = t * 7919;
            while Instant::now() < end {
                let url = &urls[i % urls.len()];
                i += 1;
                let t0 = Instant::now();
                let (status, _) = request(&http, "GET", url, None).await;
                lat.push(t0.elapsed());
                if status != 200 {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("reader"));
    }
    let rate = all.len() as f64 / started.elapsed().as_secs_f64();
    all.sort();
    (rate, all, errors.load(Ordering::Relaxed))
}

impl Reads {
    fn line(&self) -> String {
        format!(
            "{:>8.0} req/s  p50 {:>7.2} ms  p99 {:>7.2} ms",
            self.rate,
            self.p50.as_secs_f64() * 1e3,
            self.p99.as_secs_f64() * 1e3
        )
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let preload = env_u64("BENCH_RECORDS", 169_000) / 16 * 16;
    let measured = env_u64("BENCH_WRITES", 20_000) / 16 * 16;
    let read_secs = env_u64("BENCH_READ_SECS", 10);
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("files")).unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    println!(
        "apid benchmark: preload {preload}, measured writes {measured}, reads {READERS} connections x {read_secs} s"
    );

    let storaged = Daemon::storaged(dir.path(), port);
    let apid = Daemon::apid(dir.path(), port);
    let store = StoragedClient::new(&dir.path().join("run/storaged.sock"));
    let base = format!("http://127.0.0.1:{port}");
    let http: Http = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(READERS)
        .build_http();
    let deadline = Instant::now() + Duration::from_secs(60);
    while store.health().await.is_err()
        || http
            .get(format!("{base}/health").parse().unwrap())
            .await
            .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "storaged and apid did not become ready"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut writes: Vec<(String, f64)> = Vec::new();
    let failed = Arc::new(AtomicU64::new(0));
    let socket_merge = |seed| {
        let (store, failed) = (store.clone(), failed.clone());
        drive(
            if seed == 1 { preload } else { measured },
            seed,
            move |cid: Cid, fields| {
                let (store, failed) = (store.clone(), failed.clone());
                async move {
                    let fields = CheckedFields::check(fields).expect("generated fields are valid");
                    if store.merge(&Target::Cid(cid), &fields).await.is_err() {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            },
        )
    };
    let (rate, _) = socket_merge(1).await;
    writes.push((format!("storaged socket, loading 0 -> {preload}"), rate));
    let (rate, _) = socket_merge(2).await;
    writes.push((format!("storaged socket, {preload} stored"), rate));
    let socket_rate = rate;

    let rids = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (rate, cids) = {
        let (http, base, failed, rids) = (http.clone(), base.clone(), failed.clone(), rids.clone());
        drive(measured, 3, move |cid: Cid, fields| {
            let (http, base, failed, rids) =
                (http.clone(), base.clone(), failed.clone(), rids.clone());
            async move {
                let body = serde_json::to_vec(&fields).expect("json");
                let (status, bytes) =
                    request(&http, "PATCH", &format!("{base}/meta/{cid}"), Some(body)).await;
                if status != 200 {
                    failed.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                let v: serde_json::Value = serde_json::from_slice(&bytes).expect("json answer");
                rids.lock()
                    .unwrap()
                    .push(v["hashId"].as_str().unwrap_or_default().to_owned());
            }
        })
        .await
    };
    writes.push((
        format!(
            "apid HTTP PATCH /meta/{{cid}}, {} stored",
            preload + measured
        ),
        rate,
    ));
    let http_write_rate = rate;

    let cid_paths: Vec<String> = cids.iter().map(|c| format!("/api/meta/{c}")).collect();
    let rid_paths: Vec<String> = rids
        .lock()
        .unwrap()
        .iter()
        .map(|r| format!("/meta/{r}"))
        .collect();
    let by_cid = read_phase(&http, &base, cid_paths, read_secs, dir.path()).await;
    let by_rid = read_phase(&http, &base, rid_paths, read_secs, dir.path()).await;

    apid.stop();
    storaged.stop();
    let store = Arc::new(
        Store::open(&Options::for_path(
            dir.path().join("meta-core/db/meta-core.db"),
        ))
        .expect("open"),
    );
    let (rate, _) = {
        let store = store.clone();
        drive(measured, 4, move |cid: Cid, fields| {
            let store = store.clone();
            async move {
                let fields = CheckedFields::check(fields).expect("generated fields are valid");
                store
                    .merge(Target::Cid(cid), fields)
                    .await
                    .expect("in-process merge");
            }
        })
        .await
    };
    writes.push((
        format!("storaged in-process, {} stored", preload + 2 * measured),
        rate,
    ));
    store.close().await;

    println!();
    println!(
        "{:<62} {:>10}",
        "writes (16 concurrent writers, 40-field records)", "records/s"
    );
    println!(
        "{:<62} {:>10.0}",
        "original meta-core (seed figure)", ORIGINAL_RECORDS_PER_SEC
    );
    for (label, r) in &writes {
        println!("{label:<62} {r:>10.0}");
    }
    println!(
        "apid HTTP writes are {:.0} % of storaged's socket figure (target >= 80 %)",
        100.0 * http_write_rate / socket_rate
    );
    println!();
    println!(
        "reads ({READERS} concurrent connections, {}; target >= 10,000 req/s, p99 < 10 ms)",
        by_cid.generator
    );
    println!("  GET /api/meta/{{cid}}  {}", by_cid.line());
    println!("  GET /meta/{{hash}}     {}", by_rid.line());
    let failed = failed.load(Ordering::Relaxed) + by_cid.failed + by_rid.failed;
    if failed > 0 {
        println!("WARNING: {failed} requests failed");
    }
}
