//! One schema rescan at a time, on a real store: the writer held by a
//! write the test releases, so the first rescan is certainly queued (its
//! turn taken) when the second is asked for.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use metacore::checked::CheckedFields;
use metacore::error::ErrorCode;
use metacore::record::Target;
use metacore::rid::Rid;

use crate::error::StoreError;
use crate::store::Options;
use crate::store::Store;

/// Polls `fut` once: far enough for a rescan to take its turn and queue
/// its write (nothing before its first real wait blocks).
async fn poll_once<F: Future>(mut fut: Pin<&mut F>) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await
}

/// Holds the writer inside a write until the returned sender is used (or
/// dropped); returns once the writer is in it.
async fn hold_writer(
    store: &Arc<Store>,
) -> (std::sync::mpsc::Sender<()>, tokio::task::JoinHandle<()>) {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (inside, entered) = tokio::sync::oneshot::channel::<()>();
    let s = store.clone();
    let blocker = tokio::spawn(async move {
        s.writer
            .write(move |_tx| {
                let _ = inside.send(());
                let _ = held.recv();
                Ok(())
            })
            .await
            .unwrap();
    });
    entered.await.unwrap();
    (release, blocker)
}

fn is_conflict(r: &Result<metacore::api::storaged::SchemaRescanned, StoreError>) -> bool {
    matches!(r, Err(StoreError::Rejected(e)) if e.code == ErrorCode::Conflict
        && e.message.contains("rescan is under way"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rescan_asked_for_while_one_is_under_way_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&Options::for_path(dir.path().join("r.db"))).unwrap());
    let fields = metacore::record::fields_of(&[("title", "x"), ("year", "1999")]);
    store
        .replace(
            Target::Rid(Rid::mint()),
            CheckedFields::check(fields).unwrap(),
        )
        .await
        .unwrap();

    let (release, blocker) = hold_writer(&store).await;
    let mut first = std::pin::pin!(store.rescan_schema());
    assert!(
        poll_once(first.as_mut()).await.is_pending(),
        "queued behind the held write"
    );
    let second = store.rescan_schema().await;
    assert!(is_conflict(&second), "{second:?}");
    release.send(()).unwrap();
    blocker.await.unwrap();
    assert_eq!(first.await.unwrap().values, 2, "the first runs and counts");
    assert_eq!(
        store.rescan_schema().await.unwrap().values,
        2,
        "then another may"
    );

    // A caller that stops waiting leaves the turn with its queued write.
    let (release, blocker) = hold_writer(&store).await;
    {
        let mut gone = std::pin::pin!(store.rescan_schema());
        assert!(poll_once(gone.as_mut()).await.is_pending());
    }
    let meanwhile = store.rescan_schema().await;
    assert!(is_conflict(&meanwhile), "{meanwhile:?}");
    release.send(()).unwrap();
    blocker.await.unwrap();
    // Queued after the abandoned rescan: once it is acknowledged, that one
    // has committed and given its turn back.
    store.writer.write(|_tx| Ok(())).await.unwrap();
    assert_eq!(store.rescan_schema().await.unwrap().values, 2);
    store.close().await;
}
