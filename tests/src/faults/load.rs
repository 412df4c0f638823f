//! The write load: writers that `PATCH /meta/{rid}` whole records over
//! HTTP, as the mesh's sorters do, and find the leader the way they do,
//! in `kv-leader.info`, again after every failed call.
//!
//! A write is **acknowledged** when apid answered 200; **uncertain** when
//! the call failed in any other way (the connection broke, 503 while
//! storaged restarted): it may have committed or not, but never in part.
//! Any other answer is **unexpected** and fails the suite.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use tokio::task::JoinHandle;

use crate::apid::Http;
use crate::fixtures::random_rid;

/// Fields of every record a writer makes.
pub const FIELDS_PER_RECORD: usize = 8;

/// The fields of writer `w`'s `i`-th record: derived from `(w, i)` alone,
/// so the check can tell what a whole record holds.
pub fn record_fields(w: usize, i: u64) -> serde_json::Map<String, serde_json::Value> {
    let f = [
        ("filePath", format!("/files/w{w}/{i}.mkv")),
        ("sizeByte", (i * 1000 + w as u64).to_string()),
        ("mtimeNano", "1700000000000000000".to_owned()),
        ("title", format!("Film {w}-{i}")),
        ("year", "2001".to_owned()),
        ("genres", "drama|crime".to_owned()),
        (
            "fileinfo/streamdetails/audio/0/language",
            "日本語".to_owned(),
        ),
        ("plot", "A long plot. ".repeat(6)),
    ];
    debug_assert_eq!(f.len(), FIELDS_PER_RECORD);
    f.into_iter()
        .map(|(k, v)| (k.to_owned(), serde_json::Value::String(v)))
        .collect()
}

/// The leader as a client finds it: the port in `kv-leader.info`.
#[derive(Debug, Clone)]
pub struct Leader {
    info_file: PathBuf,
}

impl Leader {
    pub fn new(info_file: &Path) -> Self {
        Self {
            info_file: info_file.to_owned(),
        }
    }

    /// The port `kv-leader.info` names now (`None` while it is missing,
    /// as between a leader's stop and its successor's start).
    pub fn port(&self) -> Option<u16> {
        let text = std::fs::read_to_string(&self.info_file).ok()?;
        text.trim().rsplit_once(':')?.1.parse().ok()
    }
}

/// What one writer did.
#[derive(Debug, Default)]
pub struct Tally {
    /// `(rid, writer, i)` of every write answered 200.
    pub acked: Vec<(String, usize, u64)>,
    /// The same for every write whose outcome is unknown.
    pub uncertain: Vec<(String, usize, u64)>,
    /// Answers that are neither 200 nor an outage's, with the reason.
    pub unexpected: Vec<String>,
}

/// Writers running until [`Writers::stop`].
#[derive(Debug)]
pub struct Writers {
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicU64>,
    tasks: Vec<JoinHandle<Tally>>,
}

impl Writers {
    pub fn start(leader: &Leader, n: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicU64::new(0));
        let tasks = (0..n)
            .map(|w| tokio::spawn(write(leader.clone(), w, stop.clone(), acked.clone())))
            .collect();
        Self { stop, acked, tasks }
    }

    /// Writes acknowledged so far, by every writer.
    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::SeqCst)
    }

    /// Stops every writer after its write in flight; what each did.
    pub async fn stop(self) -> Vec<Tally> {
        self.stop.store(true, Ordering::SeqCst);
        let mut out = Vec::new();
        for t in self.tasks {
            out.push(t.await.expect("a writer panicked"));
        }
        out
    }
}

/// Whether `status` is what an outage looks like: storaged away (503) or
/// apid's own bounds while it restarts.
fn outage(status: u16) -> bool {
    status == 503
}

async fn write(leader: Leader, w: usize, stop: Arc<AtomicBool>, acked: Arc<AtomicU64>) -> Tally {
    let mut tally = Tally::default();
    let mut client: Option<(u16, Http)> = None;
    let mut i = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let Some(port) = leader.port() else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        if client.as_ref().is_none_or(|(p, _)| *p != port) {
            // Writes wait for storaged while it restarts; a minute is a
            // hang, not a busy machine.
            client = Some((port, Http::new(port).with_deadline(Duration::from_secs(60))));
        }
        let http = &client.as_ref().expect("a client").1;
        let rid = random_rid().to_string();
        let body = serde_json::to_vec(&record_fields(w, i)).expect("a JSON body");
        let answer = http
            .try_send(
                Method::PATCH,
                &format!("/meta/{rid}"),
                Bytes::from(body),
                &[("content-type", "application/json")],
            )
            .await;
        match answer {
            Ok(r) if r.status == 200 => {
                tally.acked.push((rid, w, i));
                acked.fetch_add(1, Ordering::SeqCst);
            }
            Ok(r) if outage(r.status) => {
                tally.uncertain.push((rid, w, i));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok(r) => {
                tally.uncertain.push((rid.clone(), w, i));
                tally.unexpected.push(format!(
                    "writer {w}: PATCH /meta/{rid}: {} {}",
                    r.status,
                    r.text()
                ));
            }
            Err(_) => {
                // apid away (killed, restarting, or a new leader): the
                // client finds the leader again before the next write.
                tally.uncertain.push((rid, w, i));
                client = None;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        i += 1;
    }
    tally
}
