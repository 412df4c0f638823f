//! Crash recovery (STYLE idea 12): storaged is killed with SIGKILL at a
//! random moment while 16 clients write records, restarted on the same
//! directory, and the store is checked: every acknowledged write is there
//! whole, no record is half written, the alias and root indexes and the
//! root counter agree with the rows. Five kill/restart cycles in one run.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e::Storaged;
use e2e::daemon::test_dir;
use e2e::fixtures::{checked, fields, member, random_midhash, random_rid, target};
use e2e::snapshot::{
    Rows, aliases, assert_sound, dump, record, rids_with_fields, roots, with_prefix,
};
use e2e::wait::{self, DAEMON_DEADLINE};
use metacore::api::storaged::StoragedClient;
use metacore::socket::client::ClientError;
use metacore::{Fields, StreamName};
use rand::Rng;

const WRITERS: usize = 16;
const CYCLES: usize = 5;
/// Fields of every record the writers make (one of them a `cids/` member).
const FIELDS_PER_RECORD: usize = 10;

/// What the writers were told was committed.
type Acked = Arc<Mutex<Vec<(String, Fields)>>>;

fn a_record(writer: usize, i: u64) -> (String, Fields) {
    let cid = random_midhash();
    let f = fields(&[
        ("filePath", &format!("/files/w{writer}/{i}.mkv")),
        ("sizeByte", &(i * 1000 + writer as u64).to_string()),
        ("mtimeNano", "1700000000000000000"),
        ("title", &format!("Film {writer}-{i}")),
        ("year", "2001"),
        ("genres", "drama|crime"),
        ("fileinfo/streamdetails/video/0/codec", "h264"),
        ("fileinfo/streamdetails/audio/0/language", "日本語"),
        ("plot", &"A long plot. ".repeat(8)),
        (&member(&cid), "true"),
    ]);
    assert_eq!(f.len(), FIELDS_PER_RECORD);
    (random_rid().to_string(), f)
}

/// Writes records until the connection fails, noting each acknowledged one.
async fn writer(c: StoragedClient, w: usize, acked: Acked) {
    for i in 0.. {
        let (rid, f) = a_record(w, i);
        match c.merge(&target(&rid), &checked(f.clone())).await {
            Ok(res) => {
                assert!(res.created && res.rid.to_string() == rid, "{res:?}");
                acked.lock().unwrap().push((rid, f));
            }
            // Only the crash may stop a write: a refusal is a bug.
            Err(ClientError::Api(e)) => panic!("writer {w}: write {i} refused: {e}"),
            Err(_) => return,
        }
    }
}

/// Every invariant a crash must not break, on the rows after restart.
fn check_store(rows: &Rows, acked: &[(String, Fields)]) {
    assert_sound(rows);
    for (rid, f) in acked {
        assert_eq!(&record(rows, rid), f, "acknowledged record {rid} is whole");
    }
    for rid in rids_with_fields(rows) {
        let n = record(rows, &rid).len();
        assert_eq!(
            n, FIELDS_PER_RECORD,
            "record {rid} has {n} fields: a half-written record"
        );
    }
    let aliases = aliases(rows);
    for (cid, rid) in &aliases {
        assert!(
            rows.contains_key(&format!("file:{rid}/cids/{cid}")),
            "cid:{cid} -> {rid} without the member"
        );
    }
    // Every CID member was unique, so each must be registered to its root.
    for (k, _) in with_prefix(rows, "file:") {
        if let Some((rid, cid)) = k["file:".len()..].split_once("/cids/") {
            assert_eq!(
                aliases.get(cid).map(String::as_str),
                Some(rid),
                "member {k} without its alias"
            );
        }
    }
    assert_eq!(
        rows.get("idx:count/roots"),
        Some(&roots(rows).len().to_string())
    );
}

/// Every field row of the store was announced by a `set` in `meta:events`
/// committed with it (checked while nothing was trimmed).
async fn check_events(c: &StoragedClient, rows: &Rows) {
    let info = c.stream_info(StreamName::Meta).await.unwrap();
    if info.length >= 100_000 {
        return;
    }
    let announced: BTreeSet<String> = with_prefix(rows, "ev:meta:events/")
        .map(|(k, v)| {
            serde_json::from_str::<serde_json::Value>(v).unwrap_or_else(|e| panic!("{k}: {e}"))
        })
        .filter_map(|e| e["key"].as_str().map(str::to_owned))
        .collect();
    for (k, _) in with_prefix(rows, "file:") {
        assert!(announced.contains(k), "{k} was committed without its event");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_random_moments_loses_no_acknowledged_write_and_leaves_no_half_record() {
    let dir = test_dir();
    let mut s = Storaged::start_in(dir.path()).await;
    let acked: Acked = Arc::default();
    let mut last_meta = None;

    for cycle in 0..CYCLES {
        let before = acked.lock().unwrap().len();
        let tasks: Vec<_> = (0..WRITERS)
            .map(|w| tokio::spawn(writer(s.client().clone(), w, acked.clone())))
            .collect();
        // Let some writes land first, so every cycle kills a busy writer.
        wait::until("the first writes of the cycle", DAEMON_DEADLINE, || {
            std::future::ready((acked.lock().unwrap().len() > before).then_some(()))
        })
        .await;
        let delay = rand::rng().random_range(100..=600);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        s.kill9();
        for t in tasks {
            wait::within("a writer to notice the crash", DAEMON_DEADLINE, t)
                .await
                .unwrap();
        }

        s.restart().await;
        let rows = dump(&s.db_path());
        let acked_now = acked.lock().unwrap().clone();
        check_store(&rows, &acked_now);
        check_events(s.client(), &rows).await;
        let info = s.client().stream_info(StreamName::Meta).await.unwrap();
        assert!(
            info.last > last_meta,
            "cycle {cycle}: the event IDs go on after a crash"
        );
        last_meta = info.last;
        eprintln!(
            "cycle {cycle}: killed after {delay} ms; {} records acknowledged in all, {} in the store",
            acked_now.len(),
            roots(&rows).len()
        );
    }

    // Still a working store: one more write after the last restart.
    let (rid, f) = a_record(99, 0);
    s.client()
        .merge(&target(&rid), &checked(f.clone()))
        .await
        .unwrap();
    assert_eq!(
        s.client().get_record(&target(&rid)).await.unwrap().fields,
        f
    );
}
