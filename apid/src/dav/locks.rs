//! WebDAV locks: dav-server's in-memory lock table, with what it leaves
//! out. A lock ends when its timeout passes (the table alone keeps a lock
//! until it is released, so a client that died holding one would block
//! the file until apid restarts); it is granted for the `Timeout` the
//! client asked, an hour at most (dav-server alone caps an exclusive lock
//! at 10 minutes whatever it answers); and the number of live locks is
//! bounded, in all, per resource and per client: a LOCK takes its place
//! in each count before it asks the table, so LOCKs side by side cannot
//! pass a bound together. Locks live in apid's memory and end with it.
//!
//! [`Locks`] is the table apid keeps; each request works through a
//! [`RequestLocks`], which knows its client and the timeout it asked and
//! says afterwards whether its LOCK was refused for the client's cap.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use dav_server::davpath::DavPath;
use dav_server::ls::{DavLock, DavLockSystem, LsFuture};
use dav_server::memls::MemLs;
use futures_util::FutureExt;
use xmltree::Element;

use crate::conn::Client;
use counts::{Full, Live};
use metacore::sync::Locked;

#[path = "lock_counts.rs"]
mod counts;

/// The longest a lock is granted for; a client asking more (or
/// `Infinite`, or nothing) gets this, and refreshes within it.
pub(crate) const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// Live locks at most; past it a LOCK is answered 423 until some end.
pub(crate) const MAX_LOCKS: usize = 10_000;
/// Locks on one resource (its path) at most (shared ones can pile up):
/// then 423.
pub(crate) const MAX_LOCKS_PER_PATH: usize = 16;
/// Live locks one client (an IPv4 address, an IPv6 /64) holds at most;
/// past it its LOCK is a 429 `too_many_requests` (with `Retry-After`)
/// until some of its locks end.
/// A desktop client holds one per open document; 64 leaves room for many
/// and keeps one client from taking the whole table.
pub(crate) const MAX_LOCKS_PER_CLIENT: usize = 64;
/// The largest `<owner>` kept with a lock (it is handed back in every
/// `lockdiscovery`); a larger one is dropped, the lock granted without it.
pub(crate) const MAX_OWNER_BYTES: usize = 1024;

/// A place taken in [`Live`] for one LOCK, given back when dropped unless
/// the lock was granted: a LOCK the table refuses, or whose request goes
/// away while it waits, leaves the counts as they were.
struct Reservation<'a> {
    locks: &'a Locks,
    client: Option<Client>,
    path: DavPath,
    granted: bool,
}

impl Reservation<'_> {
    fn grant(mut self, lock: &DavLock) {
        let end = SystemTime::now() + bounded(lock.timeout);
        self.locks.live().grant(lock, self.client, end);
        self.granted = true;
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.granted {
            self.locks.live().unreserve(self.client, &self.path);
        }
    }
}

/// The lock table apid keeps for its life.
#[derive(Debug, Clone)]
pub(crate) struct Locks {
    /// dav-server's table (a `MemLs`; a test puts a slower one in). Its
    /// calls may await, so nothing here assumes it answers at once.
    table: Box<dyn DavLockSystem>,
    /// The live locks' ends and owners, beside dav-server's table (which
    /// has its own lock): taken briefly, never across an await.
    live: Arc<Mutex<Live>>,
}

impl Default for Locks {
    fn default() -> Self {
        Self::with_table(MemLs::new())
    }
}

/// Why a request's LOCK was refused, when apid answers it itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The client holds [`MAX_LOCKS_PER_CLIENT`] locks.
    ClientFull,
}

/// The lock table as one request uses it.
#[derive(Debug, Clone)]
pub(crate) struct RequestLocks {
    locks: Locks,
    client: Option<Client>,
    /// The `Timeout` the request asked (`Some(None)`: `Infinite`, or
    /// none); `None`: take what dav-server passes.
    asked: Option<Option<Duration>>,
    /// Set by a LOCK refused for the client's cap; read by the caller.
    refused: Arc<Mutex<Option<Refusal>>>,
}

/// What a refused LOCK is answered with (dav-server makes it a 423).
fn refusal(path: DavPath, principal: Option<String>, owner: Option<Element>) -> DavLock {
    DavLock {
        token: String::new(),
        path,
        principal,
        owner,
        timeout_at: None,
        timeout: None,
        shared: false,
        deep: false,
    }
}

fn bounded(timeout: Option<Duration>) -> Duration {
    timeout.map_or(MAX_TIMEOUT, |t| t.min(MAX_TIMEOUT))
}

/// The `Timeout` header's first choice (RFC 4918 §10.7): `None` for
/// `Infinite`, for none, or for one that cannot be read.
pub(crate) fn asked_timeout(h: &http::HeaderMap) -> Option<Duration> {
    let v = h.get("timeout")?.to_str().ok()?;
    let first = v.split(',').next()?.trim();
    let secs = first
        .get(..7)
        .filter(|p| p.eq_ignore_ascii_case("second-"))
        .and_then(|_| first[7..].parse::<u64>().ok())?;
    Some(Duration::from_secs(secs))
}

impl Locks {
    /// Locks kept in `table`.
    pub(crate) fn with_table(table: Box<dyn DavLockSystem>) -> Self {
        Self {
            table,
            live: Arc::default(),
        }
    }

    /// The table for one request from `client`, which asked `asked`
    /// ([`asked_timeout`]).
    pub(crate) fn for_request(
        &self,
        client: Option<Client>,
        asked: Option<Duration>,
    ) -> RequestLocks {
        RequestLocks {
            locks: self.clone(),
            client,
            asked: Some(asked),
            refused: Arc::default(),
        }
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.locked()
    }

    /// Releases every lock whose time has passed.
    async fn expire(&self) {
        let now = SystemTime::now();
        let ended: Vec<(String, DavPath)> = {
            let mut live = self.live();
            let mut ended = Vec::new();
            while let Some((end, token)) = live.by_end.first().cloned() {
                if end > now {
                    break;
                }
                match live.remove(&token) {
                    Some(held) => ended.push((token, held.path)),
                    None => {
                        live.by_end.pop_first();
                    }
                }
            }
            ended
        };
        for (token, path) in ended {
            let _ = self.table.unlock(&path, &token).await;
        }
    }

    /// A refreshed lock ends a new time from now.
    fn renew(&self, lock: &DavLock, client: Option<Client>) {
        let end = SystemTime::now() + bounded(lock.timeout);
        self.live().renew(lock, client, end);
    }

    /// Takes a place for a LOCK ([`Live::reserve`]).
    fn reserve(&self, client: Option<Client>, path: &DavPath) -> Result<Reservation<'_>, Full> {
        self.live().reserve(client, path)?;
        Ok(Reservation {
            locks: self,
            client,
            path: path.clone(),
            granted: false,
        })
    }

    fn forget(&self, token: &str) {
        self.live().remove(token);
    }
}

impl RequestLocks {
    /// Why this request's LOCK was refused, if apid answers it.
    pub(crate) fn refused(&self) -> Option<Refusal> {
        *self.refused.locked()
    }

    fn timeout(&self, from_handler: Option<Duration>) -> Duration {
        bounded(self.asked.unwrap_or(from_handler))
    }
}

impl DavLockSystem for RequestLocks {
    fn lock(
        &self,
        path: &DavPath,
        principal: Option<&str>,
        owner: Option<&Element>,
        timeout: Option<Duration>,
        shared: bool,
        deep: bool,
    ) -> LsFuture<'_, Result<DavLock, DavLock>> {
        let (path, principal, owner) = (path.clone(), principal.map(str::to_owned), owner.cloned());
        async move {
            let ls = &self.locks;
            ls.expire().await;
            // The place is taken before the table is asked, under the same
            // lock as the counts are read, so LOCKs side by side cannot all
            // pass the bounds.
            let place = match ls.reserve(self.client, &path) {
                Ok(p) => p,
                Err(Full::Table) => {
                    tracing::warn!("webdav: {MAX_LOCKS} locks are held; a LOCK is refused");
                    return Err(refusal(path, principal, owner));
                }
                Err(Full::Client) => {
                    *self.refused.locked() = Some(Refusal::ClientFull);
                    return Err(refusal(path, principal, owner));
                }
                Err(Full::Path) => return Err(refusal(path, principal, owner)),
            };
            let owner = owner.filter(|o| {
                let mut bytes = Vec::new();
                o.write(&mut bytes).is_ok() && bytes.len() <= MAX_OWNER_BYTES
            });
            let t = Some(self.timeout(timeout));
            let lock = ls
                .table
                .lock(&path, principal.as_deref(), owner.as_ref(), t, shared, deep)
                .await?;
            place.grant(&lock);
            Ok(lock)
        }
        .boxed()
    }

    fn unlock(&self, path: &DavPath, token: &str) -> LsFuture<'_, Result<(), ()>> {
        let (path, token) = (path.clone(), token.to_owned());
        async move {
            let ls = &self.locks;
            ls.expire().await;
            ls.table.unlock(&path, &token).await?;
            ls.forget(&token);
            Ok(())
        }
        .boxed()
    }

    fn refresh(
        &self,
        path: &DavPath,
        token: &str,
        timeout: Option<Duration>,
    ) -> LsFuture<'_, Result<DavLock, ()>> {
        let (path, token) = (path.clone(), token.to_owned());
        async move {
            let ls = &self.locks;
            ls.expire().await;
            let t = Some(self.timeout(timeout));
            let lock = ls.table.refresh(&path, &token, t).await?;
            ls.renew(&lock, self.client);
            Ok(lock)
        }
        .boxed()
    }

    fn check(
        &self,
        path: &DavPath,
        principal: Option<&str>,
        ignore_principal: bool,
        deep: bool,
        submitted_tokens: Vec<&str>,
    ) -> LsFuture<'_, Result<(), DavLock>> {
        let (path, principal) = (path.clone(), principal.map(str::to_owned));
        let tokens: Vec<String> = submitted_tokens.into_iter().map(str::to_owned).collect();
        async move {
            let ls = &self.locks;
            ls.expire().await;
            let tokens = tokens.iter().map(String::as_str).collect();
            ls.table
                .check(&path, principal.as_deref(), ignore_principal, deep, tokens)
                .await
        }
        .boxed()
    }

    fn discover(&self, path: &DavPath) -> LsFuture<'_, Vec<DavLock>> {
        let path = path.clone();
        async move {
            self.locks.expire().await;
            self.locks.table.discover(&path).await
        }
        .boxed()
    }

    fn delete(&self, path: &DavPath) -> LsFuture<'_, Result<(), ()>> {
        let path = path.clone();
        async move {
            let ls = &self.locks;
            let gone: Vec<String> = ls
                .table
                .discover(&path)
                .await
                .into_iter()
                .map(|l| l.token)
                .collect();
            let r = ls.table.delete(&path).await;
            // delete removes the locks at and below the path.
            let below: Vec<String> = {
                let live = ls.live();
                let prefix = path.as_bytes();
                live.by_token
                    .iter()
                    .filter(|(_, h)| h.path.as_bytes().starts_with(prefix))
                    .map(|(t, _)| t.clone())
                    .collect()
            };
            for t in gone.iter().chain(&below) {
                ls.forget(t);
            }
            r
        }
        .boxed()
    }
}

#[cfg(test)]
#[path = "locks_test.rs"]
mod tests;
