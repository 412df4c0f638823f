//! The writer's group commit, driven directly: savepoint isolation inside a
//! group, acknowledgement after COMMIT, contained panics.

use std::collections::BTreeMap;
use std::sync::Arc;

use metacore::error::ApiError;
use metacore::record::Fields;
use metacore::rid::Rid;
use rusqlite::Connection;
use tokio::sync::watch;

use super::*;
use crate::engine::checkpointer::GapFlag;
use crate::engine::faults::Faults;
use crate::engine::schema;
use crate::streams::{HeadsPublisher, StreamState};

fn open(dir: &tempfile::TempDir) -> (Arc<Writer>, std::path::PathBuf) {
    let (writer, path, _) = open_deriving(dir, None);
    (writer, path)
}

/// A writer whose groups hand what they changed to `derive`; with the
/// room on its volume.
fn open_deriving(
    dir: &tempfile::TempDir,
    derive: Option<Arc<dyn Derive>>,
) -> (Arc<Writer>, std::path::PathBuf, Arc<Space>) {
    let (writer, path, space, _) = open_watched(dir, derive);
    (writer, path, space)
}

/// [`open_deriving`], and the faults of its files.
fn open_watched(
    dir: &tempfile::TempDir,
    derive: Option<Arc<dyn Derive>>,
) -> (Arc<Writer>, std::path::PathBuf, Arc<Space>, Arc<Faults>) {
    let path = dir.path().join("w.db");
    let conn = Connection::open(&path).unwrap();
    schema::prepare_writer(&conn, 8).unwrap();
    let state = StreamState::load(&conn, 1000, 100).unwrap();
    let (tx, _rx) = watch::channel(state.heads());
    let limits = BatchLimits {
        max_writes: 1000,
        max_open: std::time::Duration::from_secs(5),
        ..Default::default()
    };
    let space = Arc::new(Space::new(&path, 0));
    let faults = Arc::new(Faults::new(&path));
    (
        Arc::new(
            Writer::start(
                conn,
                (GapFlag::default(), space.clone(), faults.clone()),
                derive,
                state,
                HeadsPublisher(tx),
                limits,
            )
            .unwrap(),
        ),
        path,
        space,
        faults,
    )
}

fn rows(path: &std::path::Path) -> Vec<(String, String)> {
    let c = Connection::open(path).unwrap();
    let mut s = c.prepare("SELECT k, v FROM kv ORDER BY k").unwrap();
    s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_write_rolls_back_alone_inside_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, path) = open(&dir);
    // Hold the writer busy so the next writes queue up and form one group.
    let gate = Arc::new(std::sync::Barrier::new(2));
    let g = gate.clone();
    let blocker = {
        let w = writer.clone();
        tokio::spawn(async move {
            w.write(move |_tx| {
                g.wait();
                std::thread::sleep(std::time::Duration::from_millis(100));
                Ok(())
            })
            .await
        })
    };
    tokio::task::spawn_blocking(move || gate.wait())
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..20 {
        let w = writer.clone();
        tasks.push(tokio::spawn(async move {
            w.write(move |tx| {
                tx.put_raw(&format!("t:{i:02}"), "x")?;
                if i % 5 == 0 {
                    // Written, then failed: must vanish with its savepoint.
                    return Err(ApiError::schema(format!("write {i} refuses")).into());
                }
                Ok(i)
            })
            .await
        }));
    }
    blocker.await.unwrap().unwrap();
    let mut ok = Vec::new();
    for (i, t) in tasks.into_iter().enumerate() {
        match t.await.unwrap() {
            Ok(v) => ok.push(v),
            Err(e) => {
                assert_eq!(i % 5, 0, "only the refusing writes fail: {e}");
                assert!(e.to_string().contains("refuses"));
            }
        }
    }
    assert_eq!(ok.len(), 16);
    let stats = writer.stats();
    assert!(stats.largest_batch > 1, "writes were grouped: {stats:?}");
    assert_eq!(stats.failed_writes, 4);
    writer.close().await;
    let keys: Vec<String> = rows(&path)
        .into_iter()
        .map(|(k, _)| k)
        .filter(|k| k.starts_with("t:"))
        .collect();
    let want: Vec<String> = (0..20)
        .filter(|i| i % 5 != 0)
        .map(|i| format!("t:{i:02}"))
        .collect();
    assert_eq!(keys, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_write_is_contained() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, path) = open(&dir);
    let w = writer.clone();
    let panicked = tokio::spawn(async move {
        w.write(|tx| -> Result<()> {
            tx.put_raw("p:1", "x")?;
            panic!("boom");
        })
        .await
    });
    let err = panicked.await.unwrap().unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    writer.write(|tx| tx.put_raw("p:2", "y")).await.unwrap();
    writer.close().await;
    let keys: Vec<String> = rows(&path).into_iter().map(|(k, _)| k).collect();
    assert!(keys.contains(&"p:2".to_owned()));
    assert!(
        !keys.contains(&"p:1".to_owned()),
        "the panicking write was rolled back"
    );
}

#[tokio::test]
async fn writes_after_close_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, _) = open(&dir);
    writer.write(|tx| tx.put_raw("a", "1")).await.unwrap();
    writer.close().await;
    let err = writer.write(|tx| tx.put_raw("b", "1")).await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_commit_refuses_every_write_of_its_group_and_applies_none() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, path) = open(&dir);
    writer
        .fail_points()
        .before_commit
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let mut tasks = Vec::new();
    for i in 0..3 {
        let w = writer.clone();
        tasks.push(tokio::spawn(async move {
            w.write(move |tx| tx.put_raw(&format!("f:{i}"), "x")).await
        }));
    }
    for t in tasks {
        let err = t.await.unwrap().unwrap_err();
        assert!(matches!(err, StoreError::Commit(_)), "{err}");
        assert_eq!(
            err.to_api().code,
            metacore::ErrorCode::StorageUnavailable,
            "a client is told to retry"
        );
    }
    assert!(writer.stats().failed_commits >= 1);
    writer
        .fail_points()
        .before_commit
        .store(false, std::sync::atomic::Ordering::Relaxed);
    writer.write(|tx| tx.put_raw("f:after", "y")).await.unwrap();
    writer.close().await;
    let keys: Vec<String> = rows(&path)
        .into_iter()
        .map(|(k, _)| k)
        .filter(|k| k.starts_with("f:"))
        .collect();
    assert_eq!(
        keys,
        vec!["f:after".to_owned()],
        "nothing of the failed groups was applied"
    );
}

/// A derivation that records what each group handed it, and fails when
/// told to.
#[derive(Debug, Default)]
struct Probe {
    applied: std::sync::Mutex<Vec<Vec<(Rid, Fields)>>>,
    stale: std::sync::atomic::AtomicU32,
    /// 0: apply succeeds; 1: fails on its own; 2: finds the volume full.
    fail: std::sync::atomic::AtomicU8,
}

impl Derive for Probe {
    fn fields(&self, conn: &Connection, rid: Rid) -> Result<Fields> {
        let start = format!("file:{rid}/");
        let mut s = conn.prepare("SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2")?;
        let rows = s.query_map([start.as_str(), &format!("file:{rid}0")], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        let mut fields = Fields::new();
        for row in rows {
            let (k, v) = row?;
            fields.insert(k[start.len()..].to_owned(), v);
        }
        Ok(fields)
    }

    fn apply(&self, conn: &Connection, touched: BTreeMap<Rid, Fields>) -> Result<()> {
        conn.execute(
            "INSERT INTO kv(k, v) VALUES ('derived', 'x') ON CONFLICT(k) DO NOTHING",
            [],
        )?;
        self.applied
            .lock()
            .unwrap()
            .push(touched.into_iter().collect());
        match self.fail.load(Ordering::Relaxed) {
            0 => Ok(()),
            1 => Err(StoreError::Corrupt {
                key: "derived".into(),
                detail: "the probe fails".into(),
            }),
            _ => Err(StoreError::DiskFull),
        }
    }

    fn mark_stale(&self, _conn: &Connection) -> Result<()> {
        self.stale.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_hands_each_changed_record_to_the_derivation_once_with_its_fields_before() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let (writer, path, _) = open_deriving(&dir, Some(probe.clone()));
    let rid = Rid::mint();
    let key = |f: &str| format!("file:{rid}/{f}");
    let (k1, k2) = (key("title"), key("year"));
    writer
        .write(move |tx| tx.put_record_key(&k1, "before"))
        .await
        .unwrap();
    // Two writes of one record in one job: its fields before are noted once.
    let (k1, k2b) = (key("title"), k2.clone());
    writer
        .write(move |tx| {
            tx.put_record_key(&k1, "after")?;
            tx.put_record_key(&k2b, "1999")
        })
        .await
        .unwrap();
    // A write outside `file:` changes no record.
    writer.write(|tx| tx.put_raw("plain", "x")).await.unwrap();
    let applied = probe.applied.lock().unwrap().clone();
    let before_second = Fields::from([("title".to_owned(), "before".to_owned())]);
    assert_eq!(
        applied,
        vec![
            vec![(rid, Fields::new())],
            vec![(rid, before_second)],
            vec![],
        ]
    );
    assert_eq!(probe.stale.load(Ordering::Relaxed), 0);

    // The derivation failing on its own: marked stale, the write commits.
    probe.fail.store(1, Ordering::Relaxed);
    let k3 = key("plot");
    writer
        .write(move |tx| tx.put_record_key(&k3, "p"))
        .await
        .unwrap();
    assert_eq!(probe.stale.load(Ordering::Relaxed), 1);
    writer.close().await;
    let rows = rows(&path);
    assert!(rows.contains(&(key("plot"), "p".to_owned())), "{rows:?}");
    assert!(
        rows.contains(&("derived".to_owned(), "x".to_owned())),
        "from the first groups"
    );
    assert!(rows.contains(&(key("year"), "1999".to_owned())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_derivation_that_finds_the_volume_full_refuses_the_group_with_a_507() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let (writer, path, space) = open_deriving(&dir, Some(probe.clone()));
    let rid = Rid::mint();
    let key = format!("file:{rid}/title");
    probe.fail.store(2, Ordering::Relaxed);
    let k = key.clone();
    let err = writer
        .write(move |tx| tx.put_record_key(&k, "x"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::DiskFull), "{err}");
    assert_eq!(err.to_api().code, metacore::ErrorCode::InsufficientStorage);
    assert!(space.is_full(), "the volume counts as full");
    assert_eq!(
        probe.stale.load(Ordering::Relaxed),
        0,
        "space is not the index's fault"
    );
    assert_eq!(writer.stats().failed_commits, 1);

    // The next group that commits says the volume has room again.
    probe.fail.store(0, Ordering::Relaxed);
    let k = key.clone();
    writer
        .write(move |tx| tx.put_record_key(&k, "y"))
        .await
        .unwrap();
    assert!(!space.is_full());
    writer.close().await;
    let rows = rows(&path);
    assert!(rows.contains(&(key, "y".to_owned())), "{rows:?}");
}

#[tokio::test]
async fn a_raised_fault_refuses_every_write_with_its_reason_and_applies_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (w, path, _, faults) = open_watched(&dir, None);
    let put = |k: &'static str| w.write(move |tx| tx.put_raw(k, "1"));
    put("before").await.unwrap();
    faults.raise(crate::engine::faults::Fault::Damaged("a test's".into()));
    let refused = put("after").await.unwrap_err();
    let api = refused.to_api();
    assert_eq!(api.code, metacore::error::ErrorCode::StorageUnavailable);
    assert!(api.message.contains("the database is damaged"), "{api:?}");
    assert!(w.close().await, "the last checkpoint copied the WAL");
    let keys: Vec<String> = rows(&path).into_iter().map(|(k, _)| k).collect();
    assert!(keys.contains(&"before".to_string()), "{keys:?}");
    assert!(!keys.contains(&"after".to_string()), "{keys:?}");
}
