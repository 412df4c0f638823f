//! The write workload and measuring helpers the benchmarks share (the
//! store, search, HTTP and SSE): 16 writers of realistic 40-field media
//! records, a deterministic generator, latency percentiles, and process
//! figures from /proc.
#![allow(dead_code)] // each benchmark uses part of it

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use metacore::cid::{Cid, code};
use metacore::record::Fields;

pub const WRITERS: usize = 16;

/// A small deterministic generator (xorshift64*), so runs are comparable.
#[derive(Debug)]
pub struct Gen(pub u64);

impl Gen {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn digest(&mut self) -> [u8; 32] {
        let mut d = [0u8; 32];
        for chunk in d.chunks_mut(8) {
            chunk.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        d
    }

    pub fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next_u64() % xs.len() as u64) as usize]
    }
}

/// A realistic 40-field media record and the midhash CID that addresses it.
pub fn record(g: &mut Gen, n: u64) -> (Cid, Fields) {
    let midhash = Cid::midhash256(&g.digest());
    let sha = Cid::from_digest(code::RAW, code::SHA2_256, &g.digest());
    let title = format!(
        "{} {} {}",
        g.pick(&["The", "A", "Return of", "Beyond"]),
        g.pick(&["Night", "River", "Empire", "Signal", "Garden"]),
        n
    );
    let year = 1950 + g.next_u64() % 75;
    let name = format!("{}.{year}.1080p.BluRay.x264.mkv", title.replace(' ', "."));
    let mut f = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        f.insert(k.to_owned(), v);
    };
    put("filePath", format!("/files/watch/movies/{name}"));
    put("fileName", name.clone());
    put(
        "sizeByte",
        (1_000_000_000 + g.next_u64() % 30_000_000_000).to_string(),
    );
    put(
        "mtimeNano",
        (1_700_000_000_000_000_000 + g.next_u64() % 100_000_000_000_000_000).to_string(),
    );
    put("title", title.clone());
    put("originalTitle", title.clone());
    put(&format!("titles/eng/{title}"), "true".into());
    put("year", year.to_string());
    put("fileType", "video".into());
    put("mimeType", "video/x-matroska".into());
    put("contentKind", "movie".into());
    put("domain", "screen".into());
    put("workForm", "standalone".into());
    put("tmdbid", (g.next_u64() % 1_000_000).to_string());
    put("imdbid", format!("tt{:07}", g.next_u64() % 10_000_000));
    put(
        &format!(
            "genres/{}",
            g.pick(&["Action", "Drama", "Comedy", "Thriller"])
        ),
        "true".into(),
    );
    put(
        &format!(
            "genres/{}",
            g.pick(&["Sci-Fi", "Romance", "Horror", "Family"])
        ),
        "true".into(),
    );
    put(
        "description/eng",
        format!(
            "{title}: a story told over {} minutes, with twists, a chase and a quiet ending that stays with you long after the credits roll.",
            80 + g.next_u64() % 100
        ),
    );
    put(
        "fileinfo/duration",
        format!("{}.{}", 4800 + g.next_u64() % 4000, g.next_u64() % 10),
    );
    put("fileinfo/formatName", "matroska,webm".into());
    put(
        "fileinfo/streamdetails/video/0/codec",
        g.pick(&["h264", "hevc", "av1"]).into(),
    );
    put("fileinfo/streamdetails/video/0/width", "1920".into());
    put("fileinfo/streamdetails/video/0/height", "1080".into());
    put("fileinfo/streamdetails/video/0/aspect", "1.78".into());
    put(
        "fileinfo/streamdetails/video/0/bitrate",
        (4_000_000 + g.next_u64() % 8_000_000).to_string(),
    );
    put(
        "fileinfo/streamdetails/audio/0/codec",
        g.pick(&["aac", "ac3", "dts"]).into(),
    );
    put("fileinfo/streamdetails/audio/0/language", "eng".into());
    put("fileinfo/streamdetails/audio/0/channels", "6".into());
    put("fileinfo/streamdetails/audio/1/codec", "aac".into());
    put("fileinfo/streamdetails/audio/1/language", "fra".into());
    put("fileinfo/streamdetails/subtitle/0/language", "eng".into());
    put("languages/eng", "true".into());
    put("languages/fra", "true".into());
    put("audioLanguages/eng", "true".into());
    put("subtitleLanguages/eng", "true".into());
    put("source/gateway:nyaa.si", "true".into());
    put("quality", "1080p".into());
    put(
        "poster",
        Cid::from_digest(code::RAW, code::SHA2_256, &g.digest()).to_string(),
    );
    put(&format!("cids/{midhash}"), "true".into());
    put(&format!("cids/{sha}"), "true".into());
    assert_eq!(f.len(), 40, "a benchmark record has 40 fields");
    (midhash, f)
}

pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Writes `per_writer` records from each of 16 tasks with `write`, returns
/// records/s and the CIDs written.
pub async fn drive<F, Fut>(total: u64, seed: u64, write: F) -> (f64, Vec<Cid>)
where
    F: Fn(Cid, Fields) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let write = Arc::new(write);
    let per = total / WRITERS as u64;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WRITERS as u64 {
        let write = write.clone();
        tasks.push(tokio::spawn(async move {
            let mut g = Gen(seed ^ (w + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut cids = Vec::with_capacity(per as usize);
            for i in 0..per {
                let (cid, fields) = record(&mut g, w * per + i);
                write(cid.clone(), fields).await;
                cids.push(cid);
            }
            cids
        }));
    }
    let mut cids = Vec::new();
    for t in tasks {
        cids.extend(t.await.expect("writer task"));
    }
    (cids.len() as f64 / started.elapsed().as_secs_f64(), cids)
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

pub fn fmt_lat(mut v: Vec<Duration>) -> String {
    v.sort();
    format!(
        "p50 {:>7.1} µs  p99 {:>7.1} µs",
        percentile(&v, 0.5).as_secs_f64() * 1e6,
        percentile(&v, 0.99).as_secs_f64() * 1e6
    )
}

/// Peak and current RSS of a process, in MiB, from /proc.
pub fn rss_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// CPU seconds (user + system) used so far by the thread named `name` of
/// process `pid`, from /proc: less sensitive to a busy or slowed machine
/// than wall-clock rates.
pub fn thread_cpu_secs(pid: u32, name: &str) -> f64 {
    let tick = 100.0; // USER_HZ on Linux
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // Fields after the ")" that ends the command name; utime, stime are 14th and 15th.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        return (ticks(11) + ticks(12)) / tick;
    }
    0.0
}
