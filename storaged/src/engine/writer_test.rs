//! The writer's group commit, driven directly: savepoint isolation inside a
//! group, acknowledgement after COMMIT, contained panics.

use std::sync::Arc;

use metacore::error::ApiError;
use rusqlite::Connection;
use tokio::sync::watch;

use super::*;
use crate::engine::checkpointer::GapFlag;
use crate::engine::schema;
use crate::streams::StreamState;

fn open(dir: &tempfile::TempDir) -> (Arc<Writer>, std::path::PathBuf) {
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
    (
        Arc::new(
            Writer::start(
                conn,
                (GapFlag::default(), Arc::new(Space::new(&path, 0))),
                None,
                state,
                HeadsPublisher(tx),
                limits,
            )
            .unwrap(),
        ),
        path,
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
