//! The leader gate: an exclusive `flock` on `locks/kv-leader.lock`, held for
//! the supervisor's whole life, and `locks/kv-leader.info` with the API URL.
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
use tokio::sync::oneshot;

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
