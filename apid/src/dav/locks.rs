//! WebDAV locks: dav-server's in-memory lock table, with the two things
//! it leaves out. A lock ends when its timeout passes (the table alone
//! keeps a lock until it is released, so a client that died holding one
//! would block the file until apid restarts), and the number of live
//! locks is bounded. Locks live in apid's memory and end with it.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use dav_server::davpath::DavPath;
use dav_server::ls::{DavLock, DavLockSystem, LsFuture};
use dav_server::memls::MemLs;
use futures_util::FutureExt;
use xmltree::Element;

/// The longest a lock is granted for; a client asking more (or
/// `Infinite`) gets this, and refreshes within it.
pub(crate) const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// Live locks at most; past it a LOCK is answered 423 until some end.
pub(crate) const MAX_LOCKS: usize = 10_000;
/// Locks on one resource at most (shared ones can pile up): then 423.
pub(crate) const MAX_LOCKS_PER_PATH: usize = 16;
/// The largest `<owner>` kept with a lock (it is handed back in every
/// `lockdiscovery`); a larger one is dropped, the lock granted without it.
pub(crate) const MAX_OWNER_BYTES: usize = 1024;

#[derive(Debug, Default)]
struct Live {
    /// Token → (path, when it ends).
    by_token: HashMap<String, (DavPath, SystemTime)>,
    /// (when it ends, token), soonest first.
    by_end: BTreeSet<(SystemTime, String)>,
}

#[derive(Debug, Clone)]
pub(crate) struct Locks {
    table: Box<MemLs>,
    live: Arc<Mutex<Live>>,
}

impl Default for Locks {
    fn default() -> Self {
        Self {
            table: MemLs::new(),
            live: Arc::default(),
        }
    }
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

impl Locks {
    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Releases every lock whose time has passed.
    async fn expire(&self) {
        let now = SystemTime::now();
        let ended: Vec<(String, DavPath)> = {
            let mut live = self.live();
            let mut ended = Vec::new();
            while let Some((end, _)) = live.by_end.first() {
                if *end > now {
                    break;
                }
                let Some((_, token)) = live.by_end.pop_first() else {
                    break;
                };
                if let Some((path, _)) = live.by_token.remove(&token) {
                    ended.push((token, path));
                }
            }
            ended
        };
        for (token, path) in ended {
            let _ = self.table.unlock(&path, &token).await;
        }
    }

    fn track(&self, lock: &DavLock) {
        let end = SystemTime::now() + bounded(lock.timeout);
        let mut live = self.live();
        if let Some((_, old)) = live
            .by_token
            .insert(lock.token.clone(), (lock.path.clone(), end))
        {
            live.by_end.remove(&(old, lock.token.clone()));
        }
        live.by_end.insert((end, lock.token.clone()));
    }

    fn forget(&self, token: &str) {
        let mut live = self.live();
        if let Some((_, end)) = live.by_token.remove(token) {
            live.by_end.remove(&(end, token.to_owned()));
        }
    }
}

impl DavLockSystem for Locks {
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
            self.expire().await;
            if self.live().by_token.len() >= MAX_LOCKS {
                tracing::warn!("webdav: {MAX_LOCKS} locks are held; a LOCK is refused");
                return Err(refusal(path, principal, owner));
            }
            if self.table.discover(&path).await.len() >= MAX_LOCKS_PER_PATH {
                return Err(refusal(path, principal, owner));
            }
            let owner = owner.filter(|o| {
                let mut bytes = Vec::new();
                o.write(&mut bytes).is_ok() && bytes.len() <= MAX_OWNER_BYTES
            });
            let t = Some(bounded(timeout));
            let lock = self
                .table
                .lock(&path, principal.as_deref(), owner.as_ref(), t, shared, deep)
                .await?;
            self.track(&lock);
            Ok(lock)
        }
        .boxed()
    }

    fn unlock(&self, path: &DavPath, token: &str) -> LsFuture<'_, Result<(), ()>> {
        let (path, token) = (path.clone(), token.to_owned());
        async move {
            self.expire().await;
            self.table.unlock(&path, &token).await?;
            self.forget(&token);
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
            self.expire().await;
            let lock = self
                .table
                .refresh(&path, &token, Some(bounded(timeout)))
                .await?;
            self.track(&lock);
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
            self.expire().await;
            let tokens = tokens.iter().map(String::as_str).collect();
            self.table
                .check(&path, principal.as_deref(), ignore_principal, deep, tokens)
                .await
        }
        .boxed()
    }

    fn discover(&self, path: &DavPath) -> LsFuture<'_, Vec<DavLock>> {
        let path = path.clone();
        async move {
            self.expire().await;
            self.table.discover(&path).await
        }
        .boxed()
    }

    fn delete(&self, path: &DavPath) -> LsFuture<'_, Result<(), ()>> {
        let path = path.clone();
        async move {
            let gone: Vec<String> = self
                .table
                .discover(&path)
                .await
                .into_iter()
                .map(|l| l.token)
                .collect();
            let r = self.table.delete(&path).await;
            // delete removes the locks at and below the path.
            let below: Vec<String> = {
                let live = self.live();
                let prefix = path.as_bytes();
                live.by_token
                    .iter()
                    .filter(|(_, (p, _))| p.as_bytes().starts_with(prefix))
                    .map(|(t, _)| t.clone())
                    .collect()
            };
            for t in gone.iter().chain(&below) {
                self.forget(t);
            }
            r
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> DavPath {
        DavPath::new(s).unwrap()
    }

    #[tokio::test]
    async fn a_lock_ends_when_its_time_passes() {
        let ls = Locks::default();
        let l = ls
            .lock(
                &p("/a"),
                None,
                None,
                Some(Duration::from_millis(50)),
                false,
                false,
            )
            .await
            .unwrap();
        assert!(
            ls.check(&p("/a"), None, false, false, vec![])
                .await
                .is_err()
        );
        assert!(
            ls.check(&p("/a"), None, false, false, vec![&l.token])
                .await
                .is_ok()
        );
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert!(ls.check(&p("/a"), None, false, false, vec![]).await.is_ok());
        assert!(ls.live().by_token.is_empty());
    }

    #[tokio::test]
    async fn infinite_is_bounded_and_unlock_forgets() {
        let ls = Locks::default();
        let l = ls
            .lock(&p("/a"), None, None, None, false, false)
            .await
            .unwrap();
        assert_eq!(l.timeout, Some(MAX_TIMEOUT));
        ls.unlock(&p("/a"), &l.token).await.unwrap();
        assert!(ls.live().by_token.is_empty() && ls.live().by_end.is_empty());
        let l = ls
            .lock(&p("/d/x"), None, None, None, false, false)
            .await
            .unwrap();
        ls.delete(&p("/d/")).await.ok();
        assert!(!ls.live().by_token.contains_key(&l.token));
    }

    #[tokio::test]
    async fn locks_on_one_path_and_owners_are_bounded() {
        let ls = Locks::default();
        for _ in 0..MAX_LOCKS_PER_PATH {
            ls.lock(&p("/a"), None, None, None, true, false)
                .await
                .unwrap();
        }
        assert!(
            ls.lock(&p("/a"), None, None, None, true, false)
                .await
                .is_err()
        );
        let mut big = Element::new("owner");
        big.children
            .push(xmltree::XMLNode::Text("x".repeat(MAX_OWNER_BYTES)));
        let l = ls
            .lock(&p("/b"), None, Some(&big), None, false, false)
            .await
            .unwrap();
        assert!(l.owner.is_none(), "an owner too large is not kept");
        let small = Element::new("owner");
        let l = ls
            .lock(&p("/c"), None, Some(&small), None, false, false)
            .await
            .unwrap();
        assert!(l.owner.is_some());
    }

    #[tokio::test]
    async fn live_locks_are_bounded() {
        let ls = Locks::default();
        for i in 0..MAX_LOCKS {
            ls.lock(&p(&format!("/f{i}")), None, None, None, false, false)
                .await
                .unwrap();
        }
        assert!(
            ls.lock(&p("/one-more"), None, None, None, false, false)
                .await
                .is_err()
        );
    }
}
