//! What a handler knows of the connection its request came on, put in
//! every public request's extensions by the accept loop
//! ([`crate::serve`]): which client it is, for the budgets apid keeps per
//! client (connections, event streams, WebDAV locks).

use std::net::{IpAddr, Ipv6Addr};

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

    /// The address (or /64 network) the budgets are kept for.
    pub(crate) fn addr(self) -> IpAddr {
        self.0
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_addresses_and_ipv6_networks() {
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(Client::of(v4).addr(), v4);
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(Client::of(mapped), Client::of(v4));
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(Client::of(a), Client::of(b));
        assert_ne!(Client::of(a), Client::of(other));
        assert_eq!(Client::of(a).to_string(), "2001:db8:1:2::/64");
    }
}
