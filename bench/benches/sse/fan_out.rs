//! Phase 1: 1,000 followers of `/api/events/meta` while a writer commits
//! field changes; what each follower got against what was committed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use metacore::api::storaged::{EntriesQuery, StoragedClient};
use metacore::stream::{StreamId, StreamName};

use crate::follower::{BUCKETS, HASH_SEED, follow, hash_step, pack, percentile_us};
use bench::workload::{env_u64, rss_mib};

pub(crate) async fn committed_after(store: &StoragedClient, from: StreamId) -> Vec<StreamId> {
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

pub(crate) async fn head(store: &StoragedClient) -> StreamId {
    store
        .stream_info(StreamName::Meta)
        .await
        .expect("stream info")
        .last
        .unwrap_or(StreamId::ZERO)
}

pub(crate) type Http = Client<HttpConnector, Full<Bytes>>;

pub(crate) async fn patch(http: &Http, base: &str, rid: &str, body: Vec<u8>) -> u16 {
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
pub(crate) async fn fan_out(
    port: u16,
    apid_pid: u32,
    store: &StoragedClient,
    followers: u64,
    secs: u64,
) {
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
