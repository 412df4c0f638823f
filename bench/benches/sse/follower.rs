//! One SSE follower of the benchmark: a hyper client that reads a stream
//! and keeps what it saw (the IDs in order, hashed; the delivery latency of
//! each event, bucketed), and the histogram's percentiles.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use metacore::stream::StreamId;

/// Latency histogram: 0.25 ms buckets up to 2 s, then one overflow bucket.
pub(crate) const BUCKET_US: u64 = 250;
pub(crate) const BUCKETS: usize = 8000;

pub(crate) fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_micros() as u64
}

/// What one follower saw.
pub(crate) struct Seen {
    /// How many IDs, the last, and a hash of the whole sequence in order.
    pub(crate) count: u64,
    pub(crate) last: Option<StreamId>,
    pub(crate) hash: u64,
    pub(crate) histogram: Vec<u32>,
    pub(crate) max_us: u64,
    /// IDs at or before the previous one (repeats, disorder).
    pub(crate) disorder: u64,
}

/// Follows `path` on `port` until `stop`, then until it has seen `until`.
pub(crate) async fn follow(
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

pub(crate) const HASH_SEED: u64 = 0xcbf2_9ce4_8422_2325;

/// One step of an order-sensitive hash of an ID sequence (FNV-1a style).
pub(crate) fn hash_step(h: u64, id: StreamId) -> u64 {
    let mut h = h;
    for b in id.ms.to_le_bytes().into_iter().chain(id.seq.to_le_bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// The last committed ID the followers must reach, as text (0 until set).
pub(crate) fn until_text(until: &AtomicU64) -> String {
    let packed = until.load(Ordering::Relaxed);
    format!("{}-{}", packed >> 20, packed & 0xF_FFFF)
}

pub(crate) fn pack(id: StreamId) -> u64 {
    (id.ms << 20) | id.seq.min(0xF_FFFF)
}

/// The `ts` of a `data:` line: `..."ts":"1747..."...`.
pub(crate) fn ts_of(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(b"data: ")?;
    let at = rest.windows(6).position(|w| w == b"\"ts\":\"")? + 6;
    let digits = &rest[at..];
    let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&digits[..n]).ok()?.parse().ok()
}

pub(crate) fn percentile_us(histogram: &[u32], p: f64) -> f64 {
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
