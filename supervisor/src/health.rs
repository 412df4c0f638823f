//! The liveness check of a ready daemon: `GET /health` on its socket every
//! `HEALTH_CHECK_INTERVAL_MS`, each within [`HEALTH_TIMEOUT`], the answer
//! decoded as [`metacore::socket::Health`] and held to its version check.
//! Each result goes to the daemon's runner; deciding what misses mean is
//! the lifecycle's.
//!
//! A daemon that answers in another socket protocol (a binary of another
//! release) fails its checks like one that does not answer: the mismatch
//! is logged in words each time, and after three in a row it is killed and
//! restarted, which makes a crash loop of a tree of mixed versions.

use std::path::PathBuf;
use std::time::Duration;

use metacore::layout::Daemon;
use metacore::socket::Health;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::http1;
use crate::policy::HEALTH_TIMEOUT;
use crate::reason::HealthMiss;

/// The checks of one process; they stop when this is dropped.
#[derive(Debug)]
pub(crate) struct HealthWatch {
    task: JoinHandle<()>,
    /// One result per check, to the runner. A check waits for the runner
    /// to take the one before (capacity 1): results never pile up.
    pub(crate) results: mpsc::Receiver<Result<(), HealthMiss>>,
}

impl Drop for HealthWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Checks `daemon` on `socket` every `interval`, the first one interval
/// after now.
pub(crate) fn watch(daemon: Daemon, socket: PathBuf, interval: Duration) -> HealthWatch {
    let (tx, results) = mpsc::channel(1);
    let task = tokio::spawn(async move {
        loop {
            tokio::time::sleep(interval).await;
            let result = match tokio::time::timeout(HEALTH_TIMEOUT, check(daemon, &socket)).await {
                Ok(result) => result,
                Err(_) => {
                    tracing::debug!("{daemon}: /health took longer than {HEALTH_TIMEOUT:?}");
                    Err(HealthMiss::NoAnswer)
                }
            };
            if tx.send(result).await.is_err() {
                return;
            }
        }
    });
    HealthWatch { task, results }
}

/// One check.
async fn check(daemon: Daemon, socket: &std::path::Path) -> Result<(), HealthMiss> {
    let request = http1::request("GET", "/health", daemon.name());
    let answer = http1::exchange_async(socket, &request).await.map_err(|e| {
        tracing::debug!("{daemon}: /health: {e}");
        HealthMiss::NoAnswer
    })?;
    let (status, body) = http1::parse(&answer).map_err(|e| {
        tracing::debug!("{daemon}: /health: {e}");
        HealthMiss::NoAnswer
    })?;
    judge(daemon, status, &body).inspect_err(|miss| {
        if *miss != HealthMiss::NoAnswer {
            tracing::warn!("{daemon}: /health: {miss}");
        }
    })
}

/// Why `daemon` says it is degraded, if it does (its `/health` answers
/// with another status than `ok`); `None` too when it does not answer in
/// time (the checks deal with that).
pub(crate) async fn degraded(daemon: Daemon, socket: &std::path::Path) -> Option<String> {
    let request = http1::request("GET", "/health", daemon.name());
    let answer = tokio::time::timeout(HEALTH_TIMEOUT, http1::exchange_async(socket, &request))
        .await
        .ok()?
        .ok()?;
    let (_, body) = http1::parse(&answer).ok()?;
    let health: Health = serde_json::from_slice(&body).ok()?;
    (health.status != metacore::socket::HealthStatus::Ok)
        .then(|| health.reason.unwrap_or_else(|| health.status.to_string()))
}

/// What an answer to `GET /health` means.
fn judge(daemon: Daemon, status: u16, body: &[u8]) -> Result<(), HealthMiss> {
    if status != 200 {
        return Err(HealthMiss::NoAnswer);
    }
    // The protocol first: a peer of another release may have changed the
    // rest of the shape, and its version is what the operator needs.
    let Ok(peer) = serde_json::from_slice::<metacore::socket::HealthProtocol>(body) else {
        return Err(HealthMiss::NoAnswer);
    };
    if let Some(why) = peer.mismatch(daemon) {
        return Err(HealthMiss::OtherProtocol(why));
    }
    let health: Health = serde_json::from_slice(body).map_err(|_| HealthMiss::NoAnswer)?;
    if let Some(why) = health.mismatch() {
        return Err(HealthMiss::OtherProtocol(why));
    }
    if health.daemon != daemon {
        return Err(HealthMiss::OtherDaemon(health.daemon));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(h: &Health) -> Vec<u8> {
        serde_json::to_vec(h).unwrap()
    }

    #[test]
    fn an_answer_counts_only_from_the_right_daemon_in_our_protocol() {
        let ok = Health::ok(Daemon::Storaged);
        assert_eq!(judge(Daemon::Storaged, 200, &body(&ok)), Ok(()));
        assert_eq!(
            judge(Daemon::Storaged, 503, &body(&ok)),
            Err(HealthMiss::NoAnswer)
        );
        assert_eq!(
            judge(Daemon::Storaged, 200, b"<html>"),
            Err(HealthMiss::NoAnswer)
        );
        assert_eq!(
            judge(Daemon::Apid, 200, &body(&ok)),
            Err(HealthMiss::OtherDaemon(Daemon::Storaged))
        );
    }

    #[test]
    fn another_protocol_is_named_in_words_even_in_another_shape() {
        let mut other = Health::ok(Daemon::Storaged);
        other.protocol += 1;
        let Err(HealthMiss::OtherProtocol(why)) = judge(Daemon::Storaged, 200, &body(&other))
        else {
            panic!("a mismatch");
        };
        assert!(
            why.contains("storaged") && why.contains("protocol"),
            "{why}"
        );
        // A future release whose /health lost a field we know.
        let future = format!(
            r#"{{"status":"ok","protocol":{},"version":"9.9.9"}}"#,
            metacore::socket::PROTOCOL_VERSION + 1
        );
        let Err(HealthMiss::OtherProtocol(why)) = judge(Daemon::Apid, 200, future.as_bytes())
        else {
            panic!("a mismatch");
        };
        assert!(why.contains("9.9.9"), "{why}");
    }
}
