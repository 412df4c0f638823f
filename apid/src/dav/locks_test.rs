//! The lock table's bounds and timeouts.

use super::*;

fn p(s: &str) -> DavPath {
    DavPath::new(s).unwrap()
}

fn client(last: u8) -> Option<Client> {
    Some(Client::of(std::net::IpAddr::from([192, 0, 2, last])))
}

/// A request of nobody in particular that takes dav-server's timeout.
fn anyone(ls: &Locks) -> RequestLocks {
    RequestLocks {
        asked: None,
        ..ls.for_request(None, None)
    }
}

#[tokio::test]
async fn a_lock_ends_when_its_time_passes() {
    let ls = Locks::default();
    let r = anyone(&ls);
    let l = r
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
    assert!(r.check(&p("/a"), None, false, false, vec![]).await.is_err());
    assert!(
        r.check(&p("/a"), None, false, false, vec![&l.token])
            .await
            .is_ok()
    );
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert!(r.check(&p("/a"), None, false, false, vec![]).await.is_ok());
    assert!(ls.live().by_token.is_empty());
}

#[tokio::test]
async fn infinite_is_an_hour_and_unlock_forgets() {
    let ls = Locks::default();
    let r = anyone(&ls);
    let l = r
        .lock(&p("/a"), None, None, None, false, false)
        .await
        .unwrap();
    assert_eq!(l.timeout, Some(MAX_TIMEOUT));
    r.unlock(&p("/a"), &l.token).await.unwrap();
    assert!(ls.live().by_token.is_empty() && ls.live().by_end.is_empty());
    let l = r
        .lock(&p("/d/x"), None, None, None, false, false)
        .await
        .unwrap();
    r.delete(&p("/d/")).await.ok();
    assert!(!ls.live().by_token.contains_key(&l.token));
}

#[tokio::test]
async fn the_timeout_asked_is_granted_up_to_an_hour() {
    let ls = Locks::default();
    // dav-server passes 600 s for an exclusive `Infinite`; the request's
    // own wish counts.
    let ten_min = Some(Duration::from_secs(600));
    let r = ls.for_request(client(1), None);
    let l = r
        .lock(&p("/a"), None, None, ten_min, false, false)
        .await
        .unwrap();
    assert_eq!(l.timeout, Some(MAX_TIMEOUT));
    let r = ls.for_request(client(1), Some(Duration::from_secs(120)));
    let l = r
        .lock(&p("/b"), None, None, ten_min, false, false)
        .await
        .unwrap();
    assert_eq!(l.timeout, Some(Duration::from_secs(120)));
    let r = ls.for_request(client(1), Some(Duration::from_secs(86_400)));
    let l = r.refresh(&p("/b"), &l.token, ten_min).await.unwrap();
    assert_eq!(l.timeout, Some(MAX_TIMEOUT));
    assert_eq!(ls.live().per_client.get(&client(1).unwrap()), Some(&2));
}

#[test]
fn timeouts_are_read_from_the_first_choice() {
    let h = |v: &'static str| {
        let mut m = http::HeaderMap::new();
        m.insert("timeout", v.parse().unwrap());
        asked_timeout(&m)
    };
    assert_eq!(h("Second-120"), Some(Duration::from_secs(120)));
    assert_eq!(h("second-5, Infinite"), Some(Duration::from_secs(5)));
    assert_eq!(h("Infinite, Second-4100000000"), None);
    assert_eq!(h("Second-x"), None);
    assert_eq!(asked_timeout(&http::HeaderMap::new()), None);
}

#[tokio::test]
async fn locks_on_one_path_and_owners_are_bounded() {
    let ls = Locks::default();
    let r = anyone(&ls);
    for _ in 0..MAX_LOCKS_PER_PATH {
        r.lock(&p("/a"), None, None, None, true, false)
            .await
            .unwrap();
    }
    assert!(
        r.lock(&p("/a"), None, None, None, true, false)
            .await
            .is_err()
    );
    let mut big = Element::new("owner");
    big.children
        .push(xmltree::XMLNode::Text("x".repeat(MAX_OWNER_BYTES)));
    let l = r
        .lock(&p("/b"), None, Some(&big), None, false, false)
        .await
        .unwrap();
    assert!(l.owner.is_none(), "an owner too large is not kept");
    let small = Element::new("owner");
    let l = r
        .lock(&p("/c"), None, Some(&small), None, false, false)
        .await
        .unwrap();
    assert!(l.owner.is_some());
}

#[tokio::test]
async fn one_client_holds_a_bounded_share() {
    let ls = Locks::default();
    let greedy = ls.for_request(client(1), None);
    let mut tokens = Vec::new();
    for i in 0..MAX_LOCKS_PER_CLIENT {
        let l = greedy
            .lock(&p(&format!("/f{i}")), None, None, None, false, false)
            .await
            .unwrap();
        tokens.push(l.token);
    }
    let again = ls.for_request(client(1), None);
    assert!(
        again
            .lock(&p("/more"), None, None, None, false, false)
            .await
            .is_err()
    );
    assert_eq!(again.refused(), Some(Refusal::ClientFull));
    // Another client is not held back.
    let other = ls.for_request(client(2), None);
    assert!(
        other
            .lock(&p("/theirs"), None, None, None, false, false)
            .await
            .is_ok()
    );
    assert_eq!(other.refused(), None);
    // One released, one more may be taken.
    greedy.unlock(&p("/f0"), &tokens[0]).await.unwrap();
    assert!(
        ls.for_request(client(1), None)
            .lock(&p("/more"), None, None, None, false, false)
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn live_locks_are_bounded() {
    let ls = Locks::default();
    let r = anyone(&ls);
    for i in 0..MAX_LOCKS {
        r.lock(&p(&format!("/f{i}")), None, None, None, false, false)
            .await
            .unwrap();
    }
    assert!(
        r.lock(&p("/one-more"), None, None, None, false, false)
            .await
            .is_err()
    );
    assert_eq!(r.refused(), None, "the table is full, not the client");
}

/// dav-server's table behind a yield before each call: a table whose
/// calls await, as the trait allows, so that LOCKs run side by side.
#[derive(Debug, Clone)]
struct Yielding(Box<MemLs>);

impl DavLockSystem for Yielding {
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
            tokio::task::yield_now().await;
            self.0
                .lock(
                    &path,
                    principal.as_deref(),
                    owner.as_ref(),
                    timeout,
                    shared,
                    deep,
                )
                .await
        }
        .boxed()
    }

    fn unlock(&self, path: &DavPath, token: &str) -> LsFuture<'_, Result<(), ()>> {
        let (path, token) = (path.clone(), token.to_owned());
        async move {
            tokio::task::yield_now().await;
            self.0.unlock(&path, &token).await
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
            tokio::task::yield_now().await;
            self.0.refresh(&path, &token, timeout).await
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
            tokio::task::yield_now().await;
            let tokens = tokens.iter().map(String::as_str).collect();
            self.0
                .check(&path, principal.as_deref(), ignore_principal, deep, tokens)
                .await
        }
        .boxed()
    }

    fn discover(&self, path: &DavPath) -> LsFuture<'_, Vec<DavLock>> {
        let path = path.clone();
        async move {
            tokio::task::yield_now().await;
            self.0.discover(&path).await
        }
        .boxed()
    }

    fn delete(&self, path: &DavPath) -> LsFuture<'_, Result<(), ()>> {
        let path = path.clone();
        async move {
            tokio::task::yield_now().await;
            self.0.delete(&path).await
        }
        .boxed()
    }
}

/// 200 LOCKs of one client at once (finding 10: the count was checked,
/// then taken after the table had answered, so LOCKs side by side all
/// passed the check).
#[tokio::test]
async fn locks_side_by_side_stay_within_the_caps() {
    let ls = Locks::with_table(Box::new(Yielding(MemLs::new())));
    let one = |i: usize| {
        let r = ls.for_request(client(1), None);
        async move {
            r.lock(&p(&format!("/f{i}")), None, None, None, false, false)
                .await
                .is_ok()
        }
    };
    let granted = futures_util::future::join_all((0..200).map(one))
        .await
        .into_iter()
        .filter(|ok| *ok)
        .count();
    assert_eq!(granted, MAX_LOCKS_PER_CLIENT);
    assert_eq!(
        ls.live().per_client.get(&client(1).unwrap()),
        Some(&MAX_LOCKS_PER_CLIENT)
    );
    // And shared ones on one path, from many clients at once.
    let shared = |i: u8| {
        let r = ls.for_request(client(10 + i), None);
        async move {
            r.lock(&p("/one"), None, None, None, true, false)
                .await
                .is_ok()
        }
    };
    let granted = futures_util::future::join_all((0..40).map(shared))
        .await
        .into_iter()
        .filter(|ok| *ok)
        .count();
    assert_eq!(granted, MAX_LOCKS_PER_PATH);
}

/// A LOCK the table refuses, or whose request goes away while it waits,
/// gives its place back.
#[tokio::test]
async fn a_lock_not_granted_leaves_the_counts_as_they_were() {
    let ls = Locks::with_table(Box::new(Yielding(MemLs::new())));
    let theirs = ls.for_request(client(1), None);
    theirs
        .lock(&p("/x"), None, None, None, false, false)
        .await
        .unwrap();
    let mine = ls.for_request(client(2), None);
    for _ in 0..MAX_LOCKS_PER_CLIENT + 1 {
        assert!(
            mine.lock(&p("/x"), None, None, None, false, false)
                .await
                .is_err(),
            "locked by another"
        );
    }
    // Dropped while it waits for the table.
    let mut waiting = mine.lock(&p("/y"), None, None, None, false, false);
    assert!(futures_util::poll!(&mut waiting).is_pending());
    assert_eq!(ls.live().pending, 1);
    drop(waiting);
    let live = ls.live();
    assert_eq!(live.pending, 0);
    assert_eq!(live.per_client.get(&client(2).unwrap()), None);
    assert_eq!(live.per_path.get(b"/x".as_slice()), Some(&1));
    assert_eq!(live.per_path.get(b"/y".as_slice()), None);
}
