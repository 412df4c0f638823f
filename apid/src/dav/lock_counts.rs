//! What the lock table's bounds count ([`super::Locks`]): the live
//! locks, their ends, and the places LOCKs under way have taken, per
//! client and per resource. Kept under one mutex, so that a place is
//! taken in every count at once, or in none.

use std::collections::{BTreeSet, HashMap};
use std::time::SystemTime;

use dav_server::davpath::DavPath;
use dav_server::ls::DavLock;

use super::{MAX_LOCKS, MAX_LOCKS_PER_CLIENT, MAX_LOCKS_PER_PATH};
use crate::conn::Client;

/// One live lock, as the bounds count it.
#[derive(Debug)]
pub(super) struct Held {
    pub(super) path: DavPath,
    pub(super) end: SystemTime,
    pub(super) client: Option<Client>,
}

/// Which bound a LOCK is past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Full {
    /// [`MAX_LOCKS`] in all.
    Table,
    /// [`MAX_LOCKS_PER_CLIENT`] of this client.
    Client,
    /// [`MAX_LOCKS_PER_PATH`] on this resource.
    Path,
}

/// The live locks, and the LOCKs under way: a LOCK takes its place in
/// every count before it asks dav-server's table (whose calls may await,
/// so LOCKs run side by side), and gives it back if the table refuses.
#[derive(Debug, Default)]
pub(super) struct Live {
    /// Token → the lock.
    pub(super) by_token: HashMap<String, Held>,
    /// (when it ends, token), soonest first.
    pub(super) by_end: BTreeSet<(SystemTime, String)>,
    /// LOCKs that took their place and wait for the table.
    pub(super) pending: usize,
    /// Live and pending locks per client.
    pub(super) per_client: HashMap<Client, usize>,
    /// Live and pending locks per resource ([`resource`]).
    pub(super) per_path: HashMap<Vec<u8>, usize>,
}

/// The key of a resource in [`Live::per_path`]: its path without a
/// trailing slash (a folder is locked as `/d/` or `/d`).
fn resource(path: &DavPath) -> Vec<u8> {
    let b = path.as_bytes();
    b.strip_suffix(b"/").unwrap_or(b).to_vec()
}

/// One less of `key` in a count; a count of 0 leaves no entry.
fn less<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, key: &K) {
    if let Some(n) = map.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            map.remove(key);
        }
    }
}

impl Live {
    /// Takes a place for a LOCK of `path` by `client` in every count,
    /// unless one is full.
    pub(super) fn reserve(&mut self, client: Option<Client>, path: &DavPath) -> Result<(), Full> {
        if self.by_token.len() + self.pending >= MAX_LOCKS {
            return Err(Full::Table);
        }
        if let Some(c) = client
            && self.per_client.get(&c).copied().unwrap_or(0) >= MAX_LOCKS_PER_CLIENT
        {
            return Err(Full::Client);
        }
        let key = resource(path);
        if self.per_path.get(&key).copied().unwrap_or(0) >= MAX_LOCKS_PER_PATH {
            return Err(Full::Path);
        }
        self.pending += 1;
        if let Some(c) = client {
            *self.per_client.entry(c).or_default() += 1;
        }
        *self.per_path.entry(key).or_default() += 1;
        Ok(())
    }

    /// Gives back a place [`Live::reserve`] took, for a LOCK refused.
    pub(super) fn unreserve(&mut self, client: Option<Client>, path: &DavPath) {
        self.pending = self.pending.saturating_sub(1);
        if let Some(c) = client {
            less(&mut self.per_client, &c);
        }
        less(&mut self.per_path, &resource(path));
    }

    /// Makes a reserved place a live lock.
    pub(super) fn grant(&mut self, lock: &DavLock, client: Option<Client>, end: SystemTime) {
        self.pending = self.pending.saturating_sub(1);
        self.insert(lock, client, end);
    }

    fn insert(&mut self, lock: &DavLock, client: Option<Client>, end: SystemTime) {
        self.by_token.insert(
            lock.token.clone(),
            Held {
                path: lock.path.clone(),
                end,
                client,
            },
        );
        self.by_end.insert((end, lock.token.clone()));
    }

    /// A refreshed lock ends at `end`; it keeps its owner and its places.
    pub(super) fn renew(&mut self, lock: &DavLock, client: Option<Client>, end: SystemTime) {
        match self.by_token.get_mut(&lock.token) {
            Some(held) => {
                self.by_end.remove(&(held.end, lock.token.clone()));
                held.end = end;
                self.by_end.insert((end, lock.token.clone()));
            }
            // Not known here (it cannot be: every lock is granted through
            // this table); counted from now on.
            None => {
                if let Some(c) = client {
                    *self.per_client.entry(c).or_default() += 1;
                }
                *self.per_path.entry(resource(&lock.path)).or_default() += 1;
                self.insert(lock, client, end);
            }
        }
    }

    pub(super) fn remove(&mut self, token: &str) -> Option<Held> {
        let held = self.by_token.remove(token)?;
        self.by_end.remove(&(held.end, token.to_owned()));
        if let Some(c) = held.client {
            less(&mut self.per_client, &c);
        }
        less(&mut self.per_path, &resource(&held.path));
        Some(held)
    }
}
