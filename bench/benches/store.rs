//! storaged's benchmark (not a test): 16 concurrent writers of 40-field
//! records, through the socket of the real binary and in-process, with
//! 169,000 records already stored; read latency; database size and the
//! daemon's peak RSS. Each figure is printed beside its reference: the
//! original's 835 records/s, and a bare simulation of the same row pattern
//! measured in this run.
//!
//! `cargo build --release --bins && cargo bench -p bench --bench store` (env `BENCH_RECORDS` overrides
//! the 169,000 preload, `BENCH_WRITES` the 20,000 measured writes).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use metacore::api::storaged::StoragedClient;
use metacore::checked::CheckedFields;
use metacore::cid::Cid;
use metacore::record::Target;
use metacore::rid::Rid;
use storaged::{Options, Store};

use bench::workload::{Gen, WRITERS, drive, env_u64, fmt_lat, record, rss_mib, thread_cpu_secs};

const ORIGINAL_RECORDS_PER_SEC: f64 = 835.0;

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
    let child = Command::new(bench::daemons::binary("storaged"))
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

/// The peer: the same rows written by a bare loop on one connection, 16
/// records per transaction, one savepoint each: the fields, one
/// `meta:events` row per field, an alias per `cids/` member, the root index
/// and its counter, the stream's mark per transaction, and the retention
/// trim every 10,000 events, without any of storaged's checks, threads or
/// sockets.
fn bare_simulation(db: &Path, total: u64) -> f64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    conn.pragma_update(None, "cache_size", -64 * 1024).unwrap();
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS kv(k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID; \
         INSERT OR IGNORE INTO kv VALUES ('bare:count', '0');",
    )
    .unwrap();
    let ts = metacore::clock::unix_ms();
    let mut g = Gen(7);
    let mut seq = 0u64;
    let mut since_trim = 0u64;
    let started = Instant::now();
    for batch in 0..total / 16 {
        conn.execute_batch("BEGIN").unwrap();
        let mut put = conn
            .prepare_cached(
                "INSERT INTO kv(k,v) VALUES(?1,?2) ON CONFLICT(k) DO UPDATE SET v=excluded.v WHERE kv.v IS NOT excluded.v",
            )
            .unwrap();
        for i in 0..16 {
            let (_, fields) = record(&mut g, batch * 16 + i);
            let rid = Rid::mint();
            conn.execute_batch("SAVEPOINT w").unwrap();
            for (f, v) in &fields {
                let key = format!("file:{rid}/{f}");
                put.execute([&key, v]).unwrap();
                if let Some(cid) = f.strip_prefix("cids/") {
                    put.execute([format!("cid:{cid}"), rid.to_string()])
                        .unwrap();
                }
                seq += 1;
                let ev = format!("{{\"type\":\"set\",\"key\":\"{key}\",\"ts\":\"{ts}\"}}");
                put.execute([format!("ev:bare:events/{ts:013}-{seq:010}"), ev])
                    .unwrap();
            }
            put.execute([format!("idx:roots/{rid}"), String::new()])
                .unwrap();
            conn.execute(
                "UPDATE kv SET v = CAST(CAST(v AS INTEGER) + 1 AS TEXT) WHERE k = 'bare:count'",
                [],
            )
            .unwrap();
            conn.execute_batch("RELEASE w").unwrap();
            since_trim += fields.len() as u64;
        }
        put.execute(["evhwm:bare:events".to_owned(), format!("{ts}-{seq}")])
            .unwrap();
        if since_trim >= 10_000 {
            since_trim = 0;
            let keep: Option<String> = conn
                .query_row(
                    "SELECT k FROM kv WHERE k > 'ev:bare:events/' AND k < 'ev:bare:events0' ORDER BY k DESC LIMIT 1 OFFSET 100000",
                    [],
                    |r| r.get(0),
                )
                .ok();
            if let Some(k) = keep {
                conn.execute(
                    "DELETE FROM kv WHERE k > 'ev:bare:events/' AND k <= ?1",
                    [k],
                )
                .unwrap();
            }
        }
        conn.execute_batch("COMMIT").unwrap();
    }
    (total / 16 * 16) as f64 / started.elapsed().as_secs_f64()
}

/// Writes through the socket of a running daemon, counting failures.
async fn socket_writes(
    client: &StoragedClient,
    total: u64,
    seed: u64,
    errors: &Arc<AtomicU64>,
) -> (f64, Vec<Cid>) {
    let client = client.clone();
    let e = errors.clone();
    drive(total, seed, move |cid, fields| {
        let c = client.clone();
        let e = e.clone();
        async move {
            let fields = CheckedFields::check(fields).expect("generated fields are valid");
            if c.merge(&Target::Cid(cid), &fields).await.is_err() {
                e.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await
}

/// Writes in-process.
async fn store_writes(store: &Arc<Store>, total: u64, seed: u64) -> (f64, Vec<Cid>) {
    let s = store.clone();
    drive(total, seed, move |cid, fields| {
        let s = s.clone();
        async move {
            let fields = CheckedFields::check(fields).expect("generated fields are valid");
            s.merge(Target::Cid(cid), fields)
                .await
                .expect("in-process merge");
        }
    })
    .await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches` / `cargo bench -- --list` probes.
    }
    let preload = env_u64("BENCH_RECORDS", 169_000) / WRITERS as u64 * WRITERS as u64;
    let measured = env_u64("BENCH_WRITES", 20_000) / WRITERS as u64 * WRITERS as u64;
    let phases = std::env::var("BENCH_PHASES").unwrap_or_else(|_| "socket,inproc".into());
    let socket = phases.contains("socket");
    let inproc = phases.contains("inproc");
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("meta-core/db/meta-core.db");
    println!(
        "storaged benchmark: {WRITERS} writers, 40-field records, preload {preload}, measured {measured}"
    );
    println!(
        "machine: {} cores",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );

    let mut writes: Vec<(String, f64)> = Vec::new();
    let mut reads: Vec<(String, String)> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let errors = Arc::new(AtomicU64::new(0));

    // Peer on an empty database.
    let bare_empty = tokio::task::spawn_blocking({
        let db = dir.path().join("bare.db");
        move || bare_simulation(&db, 20_000)
    })
    .await
    .unwrap();
    writes.push((
        "bare row-pattern simulation (peer), empty database".into(),
        bare_empty,
    ));

    if socket {
        let daemon = start_daemon(dir.path()).await;
        let pid = daemon.child.id();
        let (rate, _) = socket_writes(&daemon.client, preload, 1, &errors).await;
        writes.push((format!("storaged socket, loading 0 -> {preload}"), rate));
        let (peak, _) = rss_mib(pid);
        notes.push(format!(
            "storaged after loading {preload} records: peak RSS {peak:.1} MiB; db {:.1} MiB",
            db_mib(&db)
        ));
        let cpu0 = thread_cpu_secs(pid, "storaged-writer");
        let (rate, cids) = socket_writes(&daemon.client, measured, 2, &errors).await;
        let cpu = thread_cpu_secs(pid, "storaged-writer") - cpu0;
        writes.push((format!("storaged socket, {preload} stored"), rate));
        notes.push(format!(
            "socket phase: writer thread CPU {:.0} µs/record",
            cpu * 1e6 / measured as f64
        ));
        let (mut by_cid, mut by_rid, mut rids) = (Vec::new(), Vec::new(), Vec::new());
        for cid in cids.iter().step_by(4).take(5000) {
            let t = Instant::now();
            let doc = daemon
                .client
                .document(&Target::Cid(cid.clone()))
                .await
                .expect("document by CID");
            by_cid.push(t.elapsed());
            rids.push(doc.rid);
        }
        for rid in &rids {
            let t = Instant::now();
            daemon
                .client
                .get_record(&Target::Rid(*rid))
                .await
                .expect("record by RID");
            by_rid.push(t.elapsed());
        }
        reads.push(("socket  document by CID".into(), fmt_lat(by_cid)));
        reads.push(("socket  record by RID".into(), fmt_lat(by_rid)));
        let (totals, sweep) = file_totals_both_ways(&daemon.client).await;
        reads.push(("socket  file totals, one call".into(), totals));
        reads.push(("socket  file totals, paged sweep (peer)".into(), sweep));
        let (peak, now) = rss_mib(pid);
        let stats = daemon.client.stats().await.expect("stats");
        notes.push(format!(
            "storaged at the end of the socket phase: peak RSS {peak:.1} MiB, RSS {now:.1} MiB; roots {}; keys {}; db {:.1} MiB",
            stats.roots,
            stats.keys,
            stats.db_bytes as f64 / 1048576.0
        ));
        let mut child = daemon.child;
        sigterm(child.id());
        let _ = child.wait();
    }

    let mut opts = Options::for_path(&db);
    opts.retention = env_u64("BENCH_RETENTION", opts.retention);
    opts.cache_mb = env_u64("BENCH_CACHE_MB", u64::from(opts.cache_mb)) as u32;
    let store = Arc::new(Store::open(&opts).expect("open store"));
    if !socket {
        let (rate, _) = store_writes(&store, preload, 1).await;
        writes.push((format!("storaged in-process, loading 0 -> {preload}"), rate));
    }
    if inproc {
        let stored = store.roots().await.expect("roots");
        let cpu0 = thread_cpu_secs(std::process::id(), "storaged-writer");
        let (rate, cids) = store_writes(&store, measured, 3).await;
        let cpu = thread_cpu_secs(std::process::id(), "storaged-writer") - cpu0;
        writes.push((format!("storaged in-process, {stored} stored"), rate));
        notes.push(format!(
            "in-process phase: writer thread CPU {:.0} µs/record",
            cpu * 1e6 / measured as f64
        ));
        let w = store.writer_stats();
        notes.push(format!(
            "in-process writer: {} writes in {} groups (average {:.1}, largest {})",
            w.writes,
            w.batches,
            w.writes as f64 / w.batches.max(1) as f64,
            w.largest_batch
        ));
        let (mut by_cid, mut by_rid, mut rids) = (Vec::new(), Vec::new(), Vec::new());
        for cid in cids.iter().step_by(4).take(5000) {
            let t = Instant::now();
            rids.push(
                store
                    .resolve(Target::Cid(cid.clone()))
                    .await
                    .expect("resolve"),
            );
            by_cid.push(t.elapsed());
        }
        for rid in &rids {
            let t = Instant::now();
            store.get_record(Target::Rid(*rid)).await.expect("record");
            by_rid.push(t.elapsed());
        }
        reads.push(("in-proc resolve CID".into(), fmt_lat(by_cid)));
        reads.push(("in-proc record by RID".into(), fmt_lat(by_rid)));
    }
    let stored = store.roots().await.expect("roots");
    store.close().await;
    drop(store);

    // Peer on the loaded database: the same rows added beside ours.
    let bare_loaded = tokio::task::spawn_blocking({
        let db = db.clone();
        move || bare_simulation(&db, 20_000)
    })
    .await
    .unwrap();
    writes.push((
        format!("bare row-pattern simulation (peer), {stored} stored"),
        bare_loaded,
    ));

    println!();
    println!(
        "{:<60} {:>10}",
        "writes (16 concurrent writers, 40-field records)", "records/s"
    );
    println!(
        "{:<60} {:>10.0}",
        "original meta-core (seed figure)", ORIGINAL_RECORDS_PER_SEC
    );
    for (label, rate) in &writes {
        println!("{label:<60} {rate:>10.0}");
    }
    println!(
        "{:<60} {:>10}",
        "targets (169,000 stored)", "in-process >= 3000, socket >= 2000"
    );
    println!();
    println!("reads (one client, sequential)");
    for (label, lat) in &reads {
        println!("  {label:<40} {lat}");
    }
    println!(
        "  {:<40} p50 ~10 µs (key), p99 ~200 µs (record)",
        "bare simulation reference"
    );
    println!();
    for n in &notes {
        println!("{n}");
    }
    println!("original: ~6.6 GB RAM for 169k records in the Redis era");
    let failed = errors.load(Ordering::Relaxed);
    if failed > 0 {
        println!("WARNING: {failed} socket writes failed");
    }
}

/// The figures behind `/api/stats`, three times each way: one
/// `GET /records/totals` (one read transaction in storaged), and the sweep
/// apid ran before, pages of 2,000 roots with `filePath` and `sizeByte`
/// through the socket. Both must count the same.
async fn file_totals_both_ways(client: &StoragedClient) -> (String, String) {
    use metacore::api::storaged::{FieldsPageQuery, PageQuery};
    let (mut one, mut paged) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let t = Instant::now();
        let totals = client.totals().await.expect("totals");
        one.push(t.elapsed());
        let t = Instant::now();
        let mut q = FieldsPageQuery {
            names: "filePath,sizeByte".into(),
            page: PageQuery {
                limit: Some(2000),
                ..PageQuery::default()
            },
        };
        let (mut files, mut bytes) = (0u64, 0u64);
        loop {
            let page = client.fields_page(&q).await.expect("fields page");
            for row in page.rows {
                if row.fields.contains_key("filePath") {
                    files += 1;
                    bytes += row
                        .fields
                        .get("sizeByte")
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0);
                }
            }
            match page.next {
                Some(next) => q.page.after = Some(next),
                None => break,
            }
        }
        paged.push(t.elapsed());
        assert_eq!(
            (files, bytes),
            (totals.files, totals.file_bytes),
            "both ways count alike"
        );
    }
    let ms = |d: &[Duration]| {
        let mut v: Vec<f64> = d.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        v.sort_by(f64::total_cmp);
        format!("median {:.0} ms (of {})", v[v.len() / 2], v.len())
    };
    (ms(&one), ms(&paged))
}

/// SIGTERM without `unsafe`: the `kill` command.
fn sigterm(pid: u32) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
}
