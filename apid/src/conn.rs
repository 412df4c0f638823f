//! What a handler knows of the connection its request came on, put in
//! every public request's extensions by the accept loop
//! ([`crate::serve`]): which client it is, for the budgets apid keeps per
//! client (connections, event streams, WebDAV locks).

use metacore::sync::Locked;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

/// One client as the per-client budgets count it: an IPv4 address, or the
/// /64 network of an IPv6 one (a single host is routinely given a whole
/// /64, so counting its addresses one by one would bound nothing). An
/// IPv4 address mapped into IPv6 (`::ffff:a.b.c.d`) is that IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Client(IpAddr);

impl Client {
    pub(crate) fn of(addr: IpAddr) -> Self {
        match addr {
            IpAddr::V4(v4) => Self(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(IpAddr::V4(v4)),
                None => {
                    let s = v6.segments();
                    Self(IpAddr::V6(Ipv6Addr::new(
                        s[0], s[1], s[2], s[3], 0, 0, 0, 0,
                    )))
                }
            },
        }
    }
}

impl std::fmt::Display for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
            v4 => write!(f, "{v4}"),
        }
    }
}

/// The connection's facts, as a request extension.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Conn {
    pub(crate) client: Client,
}

impl Conn {
    /// The connection of `req`; `None` for a request that did not come
    /// through apid's accept loop (a router driven directly in a test).
    pub(crate) fn of<B>(req: &http::Request<B>) -> Option<Conn> {
        req.extensions().get::<Conn>().copied()
    }
}

/// How much of one bounded resource each client holds, at most `cap`
/// each: a client past it is refused while the others are served.
#[derive(Debug)]
pub(crate) struct PerClient {
    cap: usize,
    /// Held counts by client; a client holding nothing has no entry, so
    /// the map is as large as the clients holding something. Locked only
    /// to add or take one.
    held: Mutex<HashMap<Client, usize>>,
}

/// One unit of a [`PerClient`] resource, given back when dropped.
#[derive(Debug)]
pub(crate) struct Held {
    of: Arc<PerClient>,
    client: Client,
}

impl PerClient {
    pub(crate) fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            cap,
            held: Mutex::new(HashMap::new()),
        })
    }

    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// One more for `client`, unless it holds `cap` already.
    pub(crate) fn try_take(self: &Arc<Self>, client: Client) -> Option<Held> {
        let mut held = self.held.locked();
        let n = held.entry(client).or_insert(0);
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(Held {
            of: self.clone(),
            client,
        })
    }

    /// What `client` holds now.
    #[cfg(test)]
    fn holding(&self, client: Client) -> usize {
        let held = self.held.locked();
        held.get(&client).copied().unwrap_or(0)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut held = self.of.held.locked();
        if let Some(n) = held.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_addresses_and_ipv6_networks() {
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(Client::of(v4).0, v4);
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(Client::of(mapped), Client::of(v4));
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(Client::of(a), Client::of(b));
        assert_ne!(Client::of(a), Client::of(other));
        assert_eq!(Client::of(a).to_string(), "2001:db8:1:2::/64");
    }

    #[test]
    fn each_client_holds_at_most_its_cap_and_gives_back_on_drop() {
        let budget = PerClient::new(2);
        let (a, b) = (
            Client::of("192.0.2.1".parse().unwrap()),
            Client::of("192.0.2.2".parse().unwrap()),
        );
        let one = budget.try_take(a).unwrap();
        let two = budget.try_take(a).unwrap();
        assert!(budget.try_take(a).is_none(), "past the cap");
        let other = budget.try_take(b).expect("another client is not held up");
        drop(one);
        let three = budget.try_take(a).expect("a unit given back is free again");
        drop((two, three, other));
        assert_eq!((budget.holding(a), budget.holding(b)), (0, 0));
        assert!(budget.held.lock().unwrap().is_empty(), "no entry is left");
    }
}
