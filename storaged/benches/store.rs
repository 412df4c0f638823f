//! storaged's benchmark (not a test): 16 concurrent writers of 40-field
//! records, through the socket of the real binary and in-process, with
//! 169,000 records already stored; read latency; database size and the
//! daemon's peak RSS. Each figure is printed beside its reference: the
//! original's 835 records/s, and a bare simulation of the same row pattern
//! measured in this run.
//!
//! `cargo bench -p storaged --bench store` (env `BENCH_RECORDS` overrides
//! the 169,000 preload, `BENCH_WRITES` the 20,000 measured writes).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use metacore::api::storaged::StoragedClient;
use metacore::cid::{Cid, code};
use metacore::record::{Fields, Target};
use metacore::rid::Rid;
use storaged::{Options, Store};

const WRITERS: usize = 16;
const ORIGINAL_RECORDS_PER_SEC: f64 = 835.0;

/// A small deterministic generator (xorshift64*), so runs are comparable.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn digest(&mut self) -> [u8; 32] {
        let mut d = [0u8; 32];
        for chunk in d.chunks_mut(8) {
            chunk.copy_from_slice(&self.next().to_le_bytes());
        }
        d
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

/// A realistic 40-field media record and the midhash CID that addresses it.
fn record(g: &mut Gen, n: u64) -> (Cid, Fields) {
    let midhash = Cid::midhash256(&g.digest());
    let sha = Cid::from_digest(code::RAW, code::SHA2_256, &g.digest());
    let title = format!(
        "{} {} {}",
        g.pick(&["The", "A", "Return of", "Beyond"]),
        g.pick(&["Night", "River", "Empire", "Signal", "Garden"]),
        n
    );
    let year = 1950 + g.next() % 75;
    let name = format!("{}.{year}.1080p.BluRay.x264.mkv", title.replace(' ', "."));
    let mut f = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        f.insert(k.to_owned(), v);
    };
    put("filePath", format!("/files/watch/movies/{name}"));
    put("fileName", name.clone());
    put("sizeByte", (1_000_000_000 + g.next() % 30_000_000_000).to_string());
    put("mtimeNano", (1_700_000_000_000_000_000 + g.next() % 100_000_000_000_000_000).to_string());
    put("title", title.clone());
    put("originalTitle", title.clone());
    put(&format!("titles/eng/{title}"), "true".into());
    put("year", year.to_string());
    put("fileType", "video".into());
    put("mimeType", "video/x-matroska".into());
    put("contentKind", "movie".into());
    put("domain", "screen".into());
    put("workForm", "standalone".into());
    put("tmdbid", (g.next() % 1_000_000).to_string());
    put("imdbid", format!("tt{:07}", g.next() % 10_000_000));
    put(&format!("genres/{}", g.pick(&["Action", "Drama", "Comedy", "Thriller"])), "true".into());
    put(&format!("genres/{}", g.pick(&["Sci-Fi", "Romance", "Horror", "Family"])), "true".into());
    put(
        "description/eng",
        format!(
            "{title}: a story told over {} minutes, with twists, a chase and a quiet ending that stays with you long after the credits roll.",
            80 + g.next() % 100
        ),
    );
    put("fileinfo/duration", format!("{}.{}", 4800 + g.next() % 4000, g.next() % 10));
    put("fileinfo/formatName", "matroska,webm".into());
    put("fileinfo/streamdetails/video/0/codec", g.pick(&["h264", "hevc", "av1"]).into());
    put("fileinfo/streamdetails/video/0/width", "1920".into());
    put("fileinfo/streamdetails/video/0/height", "1080".into());
    put("fileinfo/streamdetails/video/0/aspect", "1.78".into());
    put("fileinfo/streamdetails/video/0/bitrate", (4_000_000 + g.next() % 8_000_000).to_string());
    put("fileinfo/streamdetails/audio/0/codec", g.pick(&["aac", "ac3", "dts"]).into());
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
    put("poster", Cid::from_digest(code::RAW, code::SHA2_256, &g.digest()).to_string());
    put(&format!("cids/{midhash}"), "true".into());
    put(&format!("cids/{sha}"), "true".into());
    assert_eq!(f.len(), 40, "a benchmark record has 40 fields");
    (midhash, f)
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Writes `per_writer` records from each of 16 tasks with `write`, returns
/// records/s and the CIDs written.
async fn drive<F, Fut>(total: u64, seed: u64, write: F) -> (f64, Vec<Cid>)
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

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn fmt_lat(mut v: Vec<Duration>) -> String {
    v.sort();
    format!(
        "p50 {:>7.1} µs  p99 {:>7.1} µs",
        percentile(&v, 0.5).as_secs_f64() * 1e6,
        percentile(&v, 0.99).as_secs_f64() * 1e6
    )
}

/// Peak and current RSS of a process, in MiB, from /proc.
fn rss_mib(pid: u32) -> (f64, f64) {
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

fn db_mib(db: &Path) -> f64 {
    let size = |p: PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    (size(db.to_owned()) + size(PathBuf::from(wal))) as f64 / (1024.0 * 1024.0)
}

struct Daemon {
    child: Child,
    client: StoragedClient,
}

async fn start_daemon(dir: &Path) -> Daemon {
    let run = dir.join("run");
    let child = Command::new(env!("CARGO_BIN_EXE_storaged"))
        .env("META_CORE_PATH", dir.join("meta-core"))
        .env("META_CORE_RUN_DIR", &run)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn storaged");
    let client = StoragedClient::new(&run.join("storaged.sock"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while client.health().await.is_err() {
        assert!(Instant::now() < deadline, "storaged did not become ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Daemon { child, client }
}

/// The peer: the same rows written by a bare loop on one connection (kv
/// rows + one event row per field, aliases, root index, a savepoint per
/// record, 16 records per transaction), without any of storaged's checks.
fn bare_simulation(db: &Path, total: u64) -> f64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    conn.execute_batch("CREATE TABLE IF NOT EXISTS kv(k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID").unwrap();
    let mut g = Gen(7);
    let mut seq = 0u64;
    let started = Instant::now();
    for batch in 0..total / 16 {
        conn.execute_batch("BEGIN").unwrap();
        for i in 0..16 {
            let (cid, fields) = record(&mut g, batch * 16 + i);
            let rid = Rid::mint();
            conn.execute_batch("SAVEPOINT w").unwrap();
            let mut put = conn
                .prepare_cached("INSERT INTO kv(k,v) VALUES(?1,?2) ON CONFLICT(k) DO UPDATE SET v=excluded.v WHERE kv.v IS NOT excluded.v")
                .unwrap();
            put.execute([format!("cid:{cid}"), rid.to_string()]).unwrap();
            for (f, v) in &fields {
                let key = format!("file:{rid}/{f}");
                put.execute([&key, v]).unwrap();
                seq += 1;
                let ev = format!("{{\"type\":\"set\",\"key\":\"{key}\",\"ts\":\"1\"}}");
                put.execute([format!("ev:meta:events/{:013}-{seq:010}", 1), ev]).unwrap();
            }
            put.execute([format!("idx:roots/{rid}"), String::new()]).unwrap();
            conn.execute_batch("RELEASE w").unwrap();
        }
        conn.execute_batch("COMMIT").unwrap();
    }
    (total / 16 * 16) as f64 / started.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches` / `cargo bench -- --list` probes.
    }
    let preload = env_u64("BENCH_RECORDS", 169_000);
    let measured = env_u64("BENCH_WRITES", 20_000);
    let dir = tempfile::tempdir().expect("temp dir");
    println!("storaged benchmark: {WRITERS} writers, 40-field records, preload {preload}, measured {measured}");
    println!("machine: {} cores", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));

    // Peer: the bare row pattern, on its own database, same run.
    let bare = tokio::task::spawn_blocking({
        let db = dir.path().join("bare.db");
        move || bare_simulation(&db, 20_000)
    })
    .await
    .unwrap();

    // 1. Load through the socket of the real binary.
    let daemon = start_daemon(dir.path()).await;
    let pid = daemon.child.id();
    let client = daemon.client.clone();
    let errors = Arc::new(AtomicU64::new(0));
    let e = errors.clone();
    let (load_rate, _) = drive(preload, 1, move |cid, fields| {
        let c = client.clone();
        let e = e.clone();
        async move {
            if c.merge(cid.as_str(), fields).await.is_err() {
                e.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await;
    let db = dir.path().join("meta-core/db/meta-core.db");
    let (peak_after_load, _) = rss_mib(pid);
    let db_after_load = db_mib(&db);

    // 2. Socket writes with the preload stored.
    let client = daemon.client.clone();
    let e = errors.clone();
    let (socket_rate, cids) = drive(measured, 2, move |cid, fields| {
        let c = client.clone();
        let e = e.clone();
        async move {
            if c.merge(cid.as_str(), fields).await.is_err() {
                e.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await;

    // 3. Socket reads: by CID (alias lookup + record) and whole record by RID.
    let mut by_cid = Vec::new();
    let mut by_rid = Vec::new();
    let mut rids = Vec::new();
    for cid in cids.iter().step_by(4).take(5000) {
        let t = Instant::now();
        let doc = daemon.client.document(cid.as_str()).await.expect("document by CID");
        by_cid.push(t.elapsed());
        rids.push(doc.rid);
    }
    for rid in &rids {
        let t = Instant::now();
        daemon.client.get_record(&rid.to_string()).await.expect("record by RID");
        by_rid.push(t.elapsed());
    }
    let (peak, rss_now) = rss_mib(pid);
    let stats = daemon.client.stats().await.expect("stats");
    let mut child = daemon.child;
    unsafe_free_sigterm(child.id());
    let _ = child.wait();

    // 4. In-process on the same database (now preload + measured records).
    let store = Arc::new(Store::open(&Options::for_path(&db)).expect("open store"));
    let s = store.clone();
    let (inproc_rate, inproc_cids) = drive(measured, 3, move |cid, fields| {
        let s = s.clone();
        async move {
            s.merge(Target::Cid(cid), fields).await.expect("in-process merge");
        }
    })
    .await;
    let mut in_cid = Vec::new();
    let mut in_rid = Vec::new();
    let mut in_rids = Vec::new();
    for cid in inproc_cids.iter().step_by(4).take(5000) {
        let t = Instant::now();
        let rid = store.resolve(Target::Cid(cid.clone())).await.expect("resolve");
        in_cid.push(t.elapsed());
        in_rids.push(rid);
    }
    for rid in &in_rids {
        let t = Instant::now();
        store.get_record(Target::Rid(*rid)).await.expect("record");
        in_rid.push(t.elapsed());
    }
    store.close().await;

    println!();
    println!("{:<58} {:>12}", "writes (16 concurrent writers, 40-field records)", "records/s");
    println!("{:<58} {:>12.0}", "original meta-core (seed figure)", ORIGINAL_RECORDS_PER_SEC);
    println!("{:<58} {:>12.0}", "bare row-pattern simulation (peer, this run)", bare);
    println!("{:<58} {:>12.0}", format!("storaged socket, loading 0 -> {preload}"), load_rate);
    println!("{:<58} {:>12.0}", format!("storaged socket, {preload} stored"), socket_rate);
    println!("{:<58} {:>12.0}", format!("storaged in-process, {} stored", preload + measured), inproc_rate);
    println!("{:<58} {:>12}", "targets", ">= 3000 in-process, >= 2000 socket");
    println!();
    println!("reads (one client, sequential)");
    println!("  socket  document by CID    {}", fmt_lat(by_cid));
    println!("  socket  record by RID      {}", fmt_lat(by_rid));
    println!("  in-proc resolve CID        {}", fmt_lat(in_cid));
    println!("  in-proc record by RID      {}", fmt_lat(in_rid));
    println!("  bare simulation reference  p50 ~10 µs (key), p99 ~200 µs (record)");
    println!();
    println!("storaged after loading {preload} records: peak RSS {peak_after_load:.1} MiB; db {db_after_load:.1} MiB");
    println!(
        "storaged at the end: peak RSS {peak:.1} MiB, RSS {rss_now:.1} MiB; roots {}; keys {}; db {:.1} MiB",
        stats.roots,
        stats.keys,
        stats.db_bytes as f64 / 1048576.0
    );
    println!("original: ~6.6 GB RAM for 169k records in the Redis era");
    let failed = errors.load(Ordering::Relaxed);
    if failed > 0 {
        println!("WARNING: {failed} socket writes failed");
    }
}

/// SIGTERM without `unsafe`: the `kill` command.
fn unsafe_free_sigterm(pid: u32) {
    let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
}
