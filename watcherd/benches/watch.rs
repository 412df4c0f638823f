//! watcherd against the real release storaged, on a real folder.
//!
//! 1. The reference: storaged's raw write rate for the watcher's record
//!    shape (`filePath`, `sizeByte`, `mtimeNano`, the midhash member),
//!    minted by 64 concurrent `POST /mint` calls, on a fresh store.
//! 2. The initial scan: 100,000 small files in 1,000 folders and 20
//!    sparse files of 2 GiB, all older than the debounce, found by
//!    watcherd's first walk: files/s, time to the last `add`, watcherd's
//!    peak RSS (VmHWM).
//! 3. Event latency: 200 files written 20 ms apart while watcherd runs;
//!    for each, from the close of its last write to its `add` on
//!    storaged's tail of `file:events`, minus `DEBOUNCE_MS`.
//!
//! `cargo build --release --bins && cargo bench -p watcherd --bench watch`
//! (`WATCH_BENCH_FILES=<n>` for another count of small files).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use metacore::api::storaged::{MintBody, StoragedClient};
use metacore::api::watcherd::WatcherdClient;
use metacore::checked::FilePath;
use metacore::cid::Cid;
use metacore::stream::StreamName;

const DEBOUNCE_MS: u64 = 1000;
const LATENCY_DEBOUNCE_MS: u64 = 200;

struct Proc(Child);

impl Proc {
    fn spawn(name: &str, dir: &Path, env: &[(&str, String)]) -> Self {
        let bin = PathBuf::from(env!("CARGO_BIN_EXE_watcherd")).with_file_name(name);
        assert!(
            bin.is_file(),
            "{} is missing: run `cargo build --release --bins` first",
            bin.display()
        );
        let mut cmd = Command::new(&bin);
        cmd.env("META_CORE_PATH", dir.join("meta-core"))
            .env("META_CORE_RUN_DIR", dir.join("run"))
            .env("FILES_PATH", dir.join("files"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        Self(cmd.spawn().expect("spawn"))
    }

    fn peak_rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.0.id())).unwrap();
        let kb: f64 = status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        kb / 1024.0
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.0.id().to_string())
            .status();
        let _ = self.0.wait();
    }
}

async fn wait_socket(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{} never came",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Files announced so far, from watcherd's status (cheap, unlike counting
/// the stream's entries in storaged, which would compete with the scan).
async fn announced(watcherd: &WatcherdClient) -> u64 {
    watcherd.status().await.map(|s| s.announced).unwrap_or(0)
}

/// Distinct bytes per file.
fn small(i: u32) -> Vec<u8> {
    format!("small file {i:08} {}\n", "x".repeat((i % 200) as usize)).into_bytes()
}

fn make_tree(files: &Path, n: u32) {
    let per_dir = n.div_ceil(1000).max(1);
    for i in 0..n {
        let dir = files.join(format!("watch/d{:04}", i / per_dir));
        if i % per_dir == 0 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        std::fs::write(dir.join(format!("f{i:06}.bin")), small(i)).unwrap();
    }
    let big = files.join("watch/big");
    std::fs::create_dir_all(&big).unwrap();
    for i in 0..20u64 {
        use std::os::unix::fs::FileExt;
        let size = (2u64 << 30) + i;
        let f = std::fs::File::create(big.join(format!("movie-{i:02}.mkv"))).unwrap();
        f.set_len(size).unwrap();
        // The sampled middle differs per file, so each has its own midhash.
        f.write_all_at(format!("movie {i}").as_bytes(), (size - (1 << 20)) / 2)
            .unwrap();
    }
}

/// 64 concurrent mints of the watcher's record shape, `n` in all.
async fn raw_rate(dir: &Path, n: u32) -> f64 {
    let _storaged = Proc::spawn("storaged", dir, &[]);
    wait_socket(&dir.join("run/storaged.sock")).await;
    let store = Arc::new(StoragedClient::new(&dir.join("run/storaged.sock")));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..64u32 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut i = t;
            while i < n {
                let mut digest = [0u8; 32];
                digest[..4].copy_from_slice(&i.to_be_bytes());
                digest[31] = 1;
                let body = MintBody {
                    file_path: FilePath::new(format!("/files/watch/d{:04}/f{i:06}.bin", i / 100))
                        .unwrap(),
                    size_byte: 40 + u64::from(i % 200),
                    mtime_nano: 1_700_000_000_000_000_000 + u64::from(i),
                    cids: vec![Cid::midhash256(&digest)],
                };
                store.mint(&body).await.expect("mint");
                i += 64;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    f64::from(n) / start.elapsed().as_secs_f64()
}

/// Starts storaged and watcherd on `dir` and waits until `expect` events.
async fn scan(dir: &Path, expect: u64) -> (Duration, f64) {
    let _storaged = Proc::spawn("storaged", dir, &[]);
    wait_socket(&dir.join("run/storaged.sock")).await;
    let client = WatcherdClient::new(&dir.join("run/watcherd.sock"));
    let start = Instant::now();
    let watcherd = Proc::spawn("watcherd", dir, &[("DEBOUNCE_MS", DEBOUNCE_MS.to_string())]);
    let mut last_report = Instant::now();
    let mut first = None;
    loop {
        let n = announced(&client).await;
        if n > 0 && first.is_none() {
            first = Some(start.elapsed());
        }
        if n >= expect {
            break;
        }
        if last_report.elapsed() > Duration::from_secs(5) {
            eprintln!(
                "  ... {n} of {expect} after {:.1} s",
                start.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "the scan stalled at {n}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let first = first.unwrap_or_default();
    eprintln!(
        "  first add after {:.2} s (start, watches, walk)",
        first.as_secs_f64()
    );
    (start.elapsed(), watcherd.peak_rss_mib())
}

async fn latency(dir: &Path) -> Vec<Duration> {
    let files = dir.join("files");
    std::fs::create_dir_all(files.join("watch")).unwrap();
    let _storaged = Proc::spawn("storaged", dir, &[]);
    wait_socket(&dir.join("run/storaged.sock")).await;
    let store = StoragedClient::new(&dir.join("run/storaged.sock"));
    let _watcherd = Proc::spawn(
        "watcherd",
        dir,
        &[("DEBOUNCE_MS", LATENCY_DEBOUNCE_MS.to_string())],
    );
    wait_socket(&dir.join("run/watcherd.sock")).await;
    tokio::time::sleep(Duration::from_millis(500)).await; // watches set
    let tail = store.tail(StreamName::Files, None).await.unwrap();
    let received = tokio::spawn(async move {
        let mut at: HashMap<String, Instant> = HashMap::new();
        let mut tail = Box::pin(tail);
        while at.len() < 200 {
            match tokio::time::timeout(Duration::from_secs(30), tail.next()).await {
                Ok(Some(Ok(e))) => {
                    at.insert(e.fields["path"].clone(), Instant::now());
                }
                other => panic!("the tail ended: {other:?}"),
            }
        }
        at
    });
    let mut written = HashMap::new();
    for i in 0..200u32 {
        let rel = format!("watch/late-{i:03}.bin");
        std::fs::write(files.join(&rel), small(1_000_000 + i)).unwrap();
        written.insert(rel, Instant::now());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let at = received.await.unwrap();
    let debounce = Duration::from_millis(LATENCY_DEBOUNCE_MS);
    let mut out: Vec<Duration> = written
        .iter()
        .map(|(p, t)| at[p].duration_since(*t).saturating_sub(debounce))
        .collect();
    out.sort();
    out
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let n: u32 = std::env::var("WATCH_BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let tmp =
        tempfile::tempdir_in(std::env::var("WATCH_BENCH_DIR").unwrap_or("/tmp".into())).unwrap();

    let raw_dir = tmp.path().join("raw");
    let raw = raw_rate(&raw_dir, n).await;

    let scan_dir = tmp.path().join("scan");
    let t = Instant::now();
    make_tree(&scan_dir.join("files"), n);
    eprintln!(
        "  made {n} small + 20 sparse 2 GiB files in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // Let every file be older than the debounce: a start-up scan of files
    // that are already quiet announces them at once.
    tokio::time::sleep(Duration::from_millis(DEBOUNCE_MS + 100)).await;
    let expect = u64::from(n) + 20;
    let (took, rss) = scan(&scan_dir, expect).await;
    let rate = expect as f64 / took.as_secs_f64();

    let lat = latency(&tmp.path().join("latency")).await;
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];

    println!("watcherd initial scan, {n} small files in 1000 folders + 20 sparse 2 GiB files");
    println!(
        "  storaged raw mint rate (same record shape, 64 concurrent):   {raw:>9.0} records/s   (reference)"
    );
    println!(
        "  watcherd scan to the last add:                               {rate:>9.0} files/s     {:.0}% of raw (target >= 50%)",
        100.0 * rate / raw
    );
    println!(
        "  time to the last add:                                        {:>9.2} s           (target < 20 s)",
        took.as_secs_f64()
    );
    println!(
        "  watcherd peak RSS (VmHWM) during the scan:                   {rss:>9.1} MiB         (target < 50 MB)"
    );
    println!(
        "event latency after a {LATENCY_DEBOUNCE_MS} ms debounce, 200 files 20 ms apart: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (target p99 < 100 ms)",
        ms(pct(0.5)),
        ms(pct(0.99)),
        ms(*lat.last().unwrap())
    );
}
