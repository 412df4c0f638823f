//! The leader gate: an exclusive `flock` on `locks/kv-leader.lock`, held for
//! the supervisor's whole life, and `locks/kv-leader.info` with the API URL.
//!
//! The info file is what the mesh's clients watch to find the leader, and
//! they take any rewrite of it for a leader change. So it is written once
//! the leader's public API answers ([`announce`]: after apid's first
//! readiness, a `GET /health` on the public port), never before; left as
//! it is when it already names this leader (a restart of the same leader);
//! not touched when the leader's own daemons restart; removed on an orderly
//! stop ([`remove_info`]).
//!
//! A standby waits in a blocking `flock` on a thread of its own, so it takes
//! over the moment the lock frees; every `ELECTION_RETRY_SECS` it reads
//! `kv-leader.info` again and logs when the leader has changed. The lock's descriptor is inherited by
//! every daemon: the kernel frees the lock only when the last process of
//! the tree has exited, so a standby can never start a second writer while
//! a process of the old tree still runs.
//!
//! The lock is std's `File::lock` (`flock(2)` on Linux): the `fs4` crate the
//! design names does the same, and std now has it.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;
use std::time::Duration;

use rustix::io::{FdFlags, fcntl_setfd};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{oneshot, watch};

/// The held lock. Dropping it does not release it while a daemon still
/// holds the inherited descriptor.
#[derive(Debug)]
pub(crate) struct LeaderLock {
    _file: File,
}

/// Takes the lock, waiting as long as another holds it. Returns `None` if
/// `give_up` resolves first (a stop while standby).
pub(crate) async fn acquire(
    lock_path: &Path,
    info_path: &Path,
    retry: Duration,
    give_up: impl std::future::Future<Output = ()>,
) -> io::Result<Option<LeaderLock>> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock_path)?;
    let file = match file.try_lock() {
        Ok(()) => file,
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut leader = read_info(info_path);
            tracing::info!(
                leader = leader.as_deref().unwrap_or("unknown"),
                "standby: another meta-core holds {}; taking over as soon as it is released",
                lock_path.display()
            );
            // The blocking lock's outcome, from its thread to this task.
            let (tx, mut rx) = oneshot::channel();
            // A plain thread, not the blocking pool: the runtime would wait
            // for it at exit, and a standby may be asked to stop while it waits.
            std::thread::Builder::new()
                .name("leader-wait".into())
                .spawn(move || {
                    let _ = tx.send(file.lock().map(|()| file));
                })?;
            tokio::pin!(give_up);
            loop {
                tokio::select! {
                    got = &mut rx => break got.map_err(|_| io::Error::other("the lock waiter died"))??,
                    () = &mut give_up => return Ok(None),
                    () = tokio::time::sleep(retry) => {
                        let now = read_info(info_path);
                        if now != leader {
                            tracing::info!(leader = now.as_deref().unwrap_or("unknown"), "standby: the leader changed");
                            leader = now;
                        } else {
                            tracing::debug!(leader = leader.as_deref().unwrap_or("unknown"), "still standby");
                        }
                    }
                }
            }
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(e),
    };
    // Inherited by every child from now on (see the module comment).
    fcntl_setfd(&file, FdFlags::empty())?;
    Ok(Some(LeaderLock { _file: file }))
}

/// Between two probes of the public API while it does not answer yet.
const PROBE_EVERY: Duration = Duration::from_millis(50);
/// The most one probe may take: connect, ask, read the status line.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Where the public API is reached from this host to see that it answers.
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    host: String,
    port: u16,
}

impl std::fmt::Display for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.host.contains(':') {
            true => write!(f, "[{}]:{}", self.host, self.port),
            false => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

impl Probe {
    /// The bind address, with a wildcard turned into loopback.
    pub(crate) fn of(config: &metacore::Config) -> Self {
        let host = match config.http_host.trim_matches(['[', ']']) {
            "0.0.0.0" | "" => "127.0.0.1".to_owned(),
            "::" => "::1".to_owned(),
            h => h.to_owned(),
        };
        Self {
            host,
            port: config.http_port,
        }
    }

    /// The address to connect to (a host name resolved, the first address).
    pub(crate) fn socket_addr(&self) -> io::Result<std::net::SocketAddr> {
        use std::net::ToSocketAddrs;
        (self.host.as_str(), self.port)
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::other(format!("{} has no address", self.host)))
    }

    /// One `GET /health`: Ok once any HTTP answer comes back.
    async fn once(&self) -> io::Result<()> {
        let ask = async {
            let mut tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port)).await?;
            tcp.write_all(&crate::http1::request("GET", "/health", "meta-core"))
                .await?;
            let mut head = [0u8; 12];
            tcp.read_exact(&mut head).await?;
            if head.starts_with(b"HTTP/1.") {
                Ok(())
            } else {
                Err(io::Error::other("not an HTTP answer"))
            }
        };
        tokio::time::timeout(PROBE_TIMEOUT, ask)
            .await
            .unwrap_or_else(|_| Err(io::Error::other("no answer in time")))
    }
}

/// Waits for apid's first readiness and for its public API to answer,
/// then writes `url` to the info file unless it already holds it. Ends
/// after that one write; the caller aborts it if the tree stops first.
pub(crate) async fn announce(
    path: std::path::PathBuf,
    url: String,
    probe: Probe,
    mut apid_ready: watch::Receiver<bool>,
) {
    if apid_ready.wait_for(|ready| *ready).await.is_err() {
        return;
    }
    let mut told = false;
    while let Err(e) = probe.once().await {
        if !told {
            tracing::info!(
                "apid is ready but {}:{} does not answer yet ({e}); kv-leader.info waits for it",
                probe.host,
                probe.port
            );
            told = true;
        }
        tokio::time::sleep(PROBE_EVERY).await;
    }
    if read_info(&path).as_deref() == Some(url.as_str()) {
        tracing::info!(%url, "the API answers; kv-leader.info already names this leader");
        return;
    }
    match write_info(&path, &url) {
        Ok(()) => tracing::info!(%url, "the API answers; kv-leader.info names this leader"),
        Err(e) => tracing::error!("cannot write {}: {e}", path.display()),
    }
}

/// Writes `url` as the one line of the info file, atomically, readable by
/// the other services of the mesh (0644 whatever the umask).
pub(crate) fn write_info(path: &Path, url: &str) -> io::Result<()> {
    metacore::files::write_atomic(
        path,
        format!("{url}\n").as_bytes(),
        metacore::files::SHARED_FILE,
    )
}

/// The URL in the info file, if there is one.
pub(crate) fn read_info(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Removes the info file if it still names `url` (a new leader may have
/// written its own already).
pub(crate) fn remove_info(path: &Path, url: &str) {
    if read_info(path).as_deref() == Some(url)
        && let Err(e) = std::fs::remove_file(path)
    {
        tracing::warn!("cannot remove {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_holder_at_a_time_and_the_waiter_takes_over() {
        let dir = tempfile::tempdir().unwrap();
        let (lock, info) = (dir.path().join("l"), dir.path().join("i"));
        let first = acquire(&lock, &info, Duration::from_secs(5), std::future::pending())
            .await
            .unwrap()
            .unwrap();
        // A second holder cannot get it, and gives up when told to.
        let none = acquire(
            &lock,
            &info,
            Duration::from_secs(5),
            tokio::time::sleep(Duration::from_millis(50)),
        )
        .await
        .unwrap();
        assert!(none.is_none());
        let waiter = tokio::spawn({
            let (lock, info) = (lock.clone(), info.clone());
            async move { acquire(&lock, &info, Duration::from_secs(5), std::future::pending()).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the lock is still held");
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("taken over")
            .unwrap();
        assert!(second.unwrap().is_some());
    }

    #[test]
    fn info_is_one_line_and_removed_only_when_ours() {
        let dir = tempfile::tempdir().unwrap();
        let info = dir.path().join("kv-leader.info");
        write_info(&info, "http://10.0.0.1:9000").unwrap();
        assert_eq!(
            std::fs::read_to_string(&info).unwrap(),
            "http://10.0.0.1:9000\n"
        );
        remove_info(&info, "http://10.0.0.2:9000");
        assert!(info.exists(), "another leader's file stays");
        remove_info(&info, "http://10.0.0.1:9000");
        assert!(!info.exists());
    }
}
