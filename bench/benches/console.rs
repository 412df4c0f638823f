//! The console's benchmark (not a test), in headless Chromium against the
//! release storaged and apid with 169,000 records stored (issue 27):
//!
//! - first paint of the dashboard and of the editor's record list: the
//!   browser's own `first-contentful-paint`, and the page's marks
//!   `meta-core:tree-shown` / `meta-core:list-shown` (set when the first
//!   answer is on the screen), median of 5 fresh loads each; the list
//!   shows one page (50), never every record;
//! - the dashboard's memory over a live feed: writes at 100 events/s for
//!   10 minutes while the page follows both streams; its JS heap (after a
//!   forced GC) and DOM size sampled every 30 s.
//!
//! Targets: first paint under 500 ms, the list paginated, memory flat.
//!
//! `cargo build --release --bins && cargo bench -p bench --bench console`
//! (env `BENCH_RECORDS`, 169,000; `BENCH_FEED_SECS`, 600;
//! `BENCH_EVENTS_PER_SEC`, 100). Needs chromium and chromedriver.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use metacore::api::storaged::StoragedClient;
use metacore::checked::CheckedFields;
use metacore::cid::Cid;
use metacore::record::Target;
use serde_json::json;

use bench::daemons::Daemon;
use bench::workload::{drive, env_u64};
use e2e::browser::Browser;

const LOADS: usize = 5;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Loads `url` fresh `LOADS` times: the medians of first-contentful-paint
/// and of the page's `mark`, in ms, and what `after` says of the last load.
async fn paint(b: &Browser, url: &str, mark: &str, after: &str) -> (f64, f64, serde_json::Value) {
    let (mut fcp, mut shown) = (Vec::new(), Vec::new());
    let mut last = serde_json::Value::Null;
    for _ in 0..LOADS {
        b.goto("about:blank").await;
        b.goto(url).await;
        let v = b
            .wait_for(
                &format!("{mark} on {url}"),
                &format!(
                    "const m = performance.getEntriesByName('{mark}')[0]; \
                     const p = performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint'); \
                     return m && p && [p.startTime, m.startTime]"
                ),
            )
            .await;
        fcp.push(v[0].as_f64().unwrap());
        shown.push(v[1].as_f64().unwrap());
        last = b.run(after, json!([])).await;
    }
    (median(fcp), median(shown), last)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let records = env_u64("BENCH_RECORDS", 169_000) / 16 * 16;
    let feed_secs = env_u64("BENCH_FEED_SECS", 600);
    let rate = env_u64("BENCH_EVENTS_PER_SEC", 100).max(1);
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("files")).unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let storaged = Daemon::storaged(dir.path(), port);
    let apid = Daemon::apid(dir.path(), port);
    let store = StoragedClient::new(&dir.path().join("run/storaged.sock"));
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while store.health().await.is_err() {
        assert!(Instant::now() < deadline, "storaged did not become ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("console benchmark: {records} records, a feed of {rate} events/s for {feed_secs} s");
    let started = Instant::now();
    drive(records, 1, move |cid: Cid, fields| {
        let store = store.clone();
        async move {
            let fields = CheckedFields::check(fields).expect("generated fields are valid");
            store
                .merge(&Target::Cid(cid), &fields)
                .await
                .expect("a preload write");
        }
    })
    .await;
    println!("  preloaded in {:.0} s", started.elapsed().as_secs_f64());

    let b = Browser::start_with(
        dir.path(),
        &["--enable-precise-memory-info", "--js-flags=--expose-gc"],
    )
    .await;
    // apid is up once the browser can load a page from it.
    let (fcp, shown, rows) = paint(
        &b,
        &format!("{base}/ui/"),
        "meta-core:tree-shown",
        "return document.querySelectorAll('#summary dd').length",
    )
    .await;
    println!(
        "{:<44} {:>10} {:>12} {:>8}",
        "page", "FCP ms", "shown ms", "target"
    );
    println!(
        "{:<44} {fcp:>10.0} {shown:>12.0} {:>8}   ({rows} summary rows)",
        "dashboard /ui/", "500"
    );
    let (fcp, shown, rows) = paint(
        &b,
        &format!("{base}/ui/editor.html"),
        "meta-core:list-shown",
        "return [document.querySelectorAll('#list tbody tr').length, document.querySelector('#page').textContent]",
    )
    .await;
    println!(
        "{:<44} {fcp:>10.0} {shown:>12.0} {:>8}   (rows shown, page: {rows})",
        format!("editor record list, {records} records"),
        "500"
    );

    // The live feed: the dashboard follows both streams while writes make
    // `rate` meta events a second.
    b.goto(&format!("{base}/ui/")).await;
    b.wait_for(
        "the dashboard",
        "return performance.getEntriesByName('meta-core:tree-shown').length > 0",
    )
    .await;
    let sample = async || {
        b.run(
            "if (window.gc) gc(); return [performance.memory.usedJSHeapSize, \
             document.getElementsByTagName('*').length, document.querySelectorAll('#meta-feed li').length]",
            json!([]),
        )
        .await
    };
    let writer = {
        let base = base.clone();
        tokio::spawn(async move {
            let http =
                hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                    .build_http::<http_body_util::Full<bytes::Bytes>>();
            let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate));
            let rid = "7ZZZZZZZZZZZZZZZZZZZZZZZZZ";
            let end = Instant::now() + Duration::from_secs(feed_secs);
            let mut n = 0u64;
            while Instant::now() < end {
                tick.tick().await;
                let body = serde_json::to_vec(&json!({ "n": n.to_string() })).unwrap();
                let req = hyper::Request::builder()
                    .method("PATCH")
                    .uri(format!("{base}/meta/{rid}"))
                    .header("content-type", "application/json")
                    .body(http_body_util::Full::new(bytes::Bytes::from(body)))
                    .unwrap();
                let _ = http.request(req).await;
                n += 1;
            }
            n
        })
    };
    println!(
        "{:>8} {:>14} {:>10} {:>10}",
        "second", "JS heap MiB", "DOM nodes", "feed rows"
    );
    let t0 = Instant::now();
    let mut heaps = Vec::new();
    loop {
        let s = sample().await;
        let heap = s[0].as_f64().unwrap() / 1048576.0;
        heaps.push(heap);
        println!(
            "{:>8} {heap:>14.2} {:>10} {:>10}",
            t0.elapsed().as_secs(),
            s[1],
            s[2]
        );
        if t0.elapsed() >= Duration::from_secs(feed_secs) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(30.min(feed_secs.max(1)))).await;
    }
    let sent = writer.await.unwrap();
    let first = heaps[1.min(heaps.len() - 1)];
    let last = *heaps.last().unwrap();
    println!(
        "  {sent} writes sent; heap after the first sample {first:.2} MiB, at the end {last:.2} MiB ({:+.1}%)",
        (last - first) / first * 100.0
    );
    drop(b);
    apid.stop();
    storaged.stop();
}
