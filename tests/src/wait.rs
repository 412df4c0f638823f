//! Waiting without fixed sleeps: poll a condition until it holds or a
//! deadline passes, and bound any future by a deadline. A test that times
//! out panics with what it was waiting for.

use std::future::Future;
use std::time::{Duration, Instant};

/// How long a daemon gets to become ready, or to exit once told to.
pub const DAEMON_DEADLINE: Duration = Duration::from_secs(20);

/// How long a single request or stream item gets in a test.
pub const IO_DEADLINE: Duration = Duration::from_secs(10);

/// Polls `check` until it returns `Some`, sleeping a little longer each
/// round (5 ms up to 50 ms). Panics after `deadline` naming `what`.
pub async fn until<T, F, Fut>(what: &str, deadline: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    // A hang guard, not a speed check: the deadline is generous.
    until_or_none(deadline, check)
        .await
        .unwrap_or_else(|| panic!("timed out after {deadline:?} waiting for {what}"))
}

/// Runs `fut` to completion, panicking after `deadline` naming `what`.
pub async fn within<T>(what: &str, deadline: Duration, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(deadline, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {deadline:?} waiting for {what}"),
    }
}

/// Polls `check` as [`until`] does, but answers `None` after `deadline`
/// instead of panicking: for a suite that reports what did not happen.
pub async fn until_or_none<T, F, Fut>(deadline: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        if let Some(v) = check().await {
            return Some(v);
        }
        if start.elapsed() >= deadline {
            return None;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}
