//! The addresses meta-core advertises (`/urls`, `/leader`, `/health` and
//! `kv-leader.info`): `BASE_URL` when set; otherwise the bind host when it
//! is a specific address, and the host's own IP when bound to `0.0.0.0`
//! (CONTRACT decision 14). `redisUrl` stays present and empty.

use std::net::{IpAddr, Ipv4Addr, UdpSocket};

use crate::Config;
use serde::Serialize;

/// The `/urls` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Urls {
    pub hostname: String,
    pub base_url: String,
    pub api_url: String,
    pub redis_url: String,
    pub webdav_url: String,
    pub webdav_url_internal: String,
}

/// `leader.LeaderLockInfo` of the original: the URLs, a timestamp in Unix
/// milliseconds refreshed on every call, and the pid.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderInfo {
    #[serde(flatten)]
    pub urls: Urls,
    pub timestamp: u64,
    pub pid: u32,
}

impl Urls {
    pub fn from_config(cfg: &Config) -> Self {
        let hostname = hostname();
        let ip = advertised_ip(&cfg.http_host);
        let host = match ip {
            IpAddr::V6(v6) => format!("[{v6}]"),
            IpAddr::V4(v4) => v4.to_string(),
        };
        let api_url = format!("http://{host}:{}", cfg.http_port);
        let base_url = match &cfg.base_url {
            Some(b) => b.trim_end_matches('/').to_owned(),
            None => format!("http://{host}:{}", cfg.api_port),
        };
        Self {
            webdav_url: format!("{base_url}/webdav"),
            webdav_url_internal: format!("http://{hostname}:{}/webdav", cfg.http_port),
            hostname,
            base_url,
            api_url,
            redis_url: String::new(),
        }
    }
}

/// The machine's name, as the kernel has it.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// The bind host when it is a specific address, else the address of the
/// interface the default route leaves by (a UDP "connect" sends nothing),
/// else loopback.
pub fn advertised_ip(bind_host: &str) -> IpAddr {
    if bind_host == "localhost" {
        return IpAddr::V4(Ipv4Addr::LOCALHOST);
    }
    match bind_host.parse::<IpAddr>() {
        Ok(ip) if !ip.is_unspecified() => ip,
        _ => outbound_ip().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)),
    }
}

fn outbound_ip() -> Option<IpAddr> {
    let s = UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?; // TEST-NET-1: routed like any outside address, never contacted
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then_some(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(vars: &[(&str, &str)]) -> Config {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())).unwrap()
    }

    #[test]
    fn a_specific_bind_host_is_advertised() {
        let u = Urls::from_config(&cfg(&[
            ("META_CORE_HTTP_HOST", "127.0.0.1"),
            ("META_CORE_HTTP_PORT", "9123"),
        ]));
        assert_eq!(u.api_url, "http://127.0.0.1:9123");
        assert_eq!(u.redis_url, "");
        assert!(u.webdav_url.ends_with("/webdav"), "{}", u.webdav_url);
    }

    #[test]
    fn base_url_wins_for_the_base_and_webdav() {
        let u = Urls::from_config(&cfg(&[
            ("BASE_URL", "https://meta.example/"),
            ("META_CORE_HTTP_HOST", "127.0.0.1"),
        ]));
        assert_eq!(u.base_url, "https://meta.example");
        assert_eq!(u.webdav_url, "https://meta.example/webdav");
    }

    #[test]
    fn the_unspecified_address_is_never_advertised() {
        assert!(!advertised_ip("0.0.0.0").is_unspecified());
        assert_eq!(advertised_ip("localhost"), IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
}
