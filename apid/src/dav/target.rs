//! What a WebDAV request names: its path and a COPY's or MOVE's
//! `Destination`, decoded and checked, and what a method needs of a path
//! to be let through.

use std::path::{Path, PathBuf};

use http::Method;
use metacore::error::ApiError;

use super::area::{Area, area};
use crate::paths::DAV_PREFIX;

/// A path below `/webdav`, decoded and checked: relative to `FILES_PATH`,
/// with no `..`, no empty or `.` segment, no encoded `/`, no NUL.
pub(super) fn checked(raw: &str) -> Result<PathBuf, ApiError> {
    let bad = |why: &str| ApiError::bad_request(format!("the WebDAV path {why}"));
    let mut rel = PathBuf::new();
    for seg in raw.split('/') {
        let bytes: Vec<u8> = percent_encoding::percent_decode_str(seg).collect();
        match &bytes[..] {
            b"" | b"." => {}
            b".." => return Err(bad("has a `..` segment")),
            s if s.contains(&b'/') => return Err(bad("has an encoded `/` in a segment")),
            s if s.contains(&0) => return Err(bad("has a NUL byte")),
            s => rel.push(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(s)),
        }
    }
    Ok(rel)
}

/// The names this server answers to, for a `Destination`'s authority:
/// the request's `Host` and the authority of `BASE_URL` (a proxy in front
/// that rewrites `Host` still leaves the external name in `Destination`).
#[derive(Debug, Default)]
pub(super) struct Ours {
    names: Vec<String>,
}

impl Ours {
    /// From the request's `Host` header and `BASE_URL`.
    pub(super) fn new(host: Option<&str>, base_url: Option<&str>) -> Self {
        let mut names = Vec::new();
        if let Some(h) = host {
            names.push(normal("http", h));
        }
        if let Some((scheme, rest)) = base_url.and_then(|b| b.split_once("://")) {
            let auth = rest.split(['/', '?', '#']).next().unwrap_or("");
            names.push(normal(scheme, auth));
        }
        Self { names }
    }

    fn has(&self, scheme: &str, authority: &str) -> bool {
        let a = normal(scheme, authority);
        self.names.contains(&a)
    }
}

/// An authority as compared: no user part, lower case, no default port.
fn normal(scheme: &str, authority: &str) -> String {
    let host = authority
        .rsplit('@')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let default = match scheme.to_ascii_lowercase().as_str() {
        "https" => ":443",
        _ => ":80",
    };
    host.strip_suffix(default)
        .map(str::to_owned)
        .unwrap_or(host)
}

/// The path part of a `Destination` header below `/webdav`, if it names
/// a `/webdav/` path of this server: a path alone, or an absolute URI
/// whose authority is one of [`Ours`] (another one is another server,
/// RFC 4918 §9.8.5).
pub(super) fn destination<'a>(value: &'a str, ours: &Ours) -> Option<&'a str> {
    let path = match value.split_once("://") {
        Some((scheme, rest)) => {
            let cut = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            if !ours.has(scheme, &rest[..cut]) {
                return None;
            }
            &rest[cut..]
        }
        None => value,
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    let below = path.strip_prefix(DAV_PREFIX)?;
    (below.is_empty() || below.starts_with('/')).then_some(below)
}

/// What a method needs of the request path to be allowed.
pub(super) fn needs(method: &Method) -> Option<Area> {
    match method.as_str() {
        "PUT" | "PATCH" | "DELETE" | "MOVE" => Some(Area::Writable),
        "MKCOL" | "PROPPATCH" | "LOCK" => Some(Area::WritableRoot),
        _ => None,
    }
}

/// Whether a path of `rel`'s area meets `need`.
pub(super) fn allowed(need: Area, rel: &Path) -> bool {
    matches!(
        (need, area(rel)),
        (_, Area::Writable) | (Area::WritableRoot, Area::WritableRoot)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_in_any_encoding_is_refused() {
        for bad in [
            "/plugin/../etc/passwd",
            "/plugin/%2e%2e/x",
            "/plugin/%2E%2E/x",
            "/plugin/a%2fb",
            "/plugin/a%2Fb",
            "/plugin/a%00b",
            "/..",
        ] {
            assert!(checked(bad).is_err(), "{bad}");
        }
        assert_eq!(
            checked("/plugin/a%20b/./c").unwrap(),
            Path::new("plugin/a b/c")
        );
        assert_eq!(checked("").unwrap(), Path::new(""));
        assert_eq!(checked("/").unwrap(), Path::new(""));
    }

    #[test]
    fn destinations_are_read_below_the_prefix_of_this_server() {
        let ours = Ours::new(Some("h:1"), None);
        assert_eq!(
            destination("http://h:1/webdav/plugin/a?x=1", &ours),
            Some("/plugin/a")
        );
        assert_eq!(destination("/webdav/plugin/a", &ours), Some("/plugin/a"));
        assert_eq!(destination("http://H:1/webdav", &ours), Some(""));
        assert_eq!(destination("http://h:1/webdavx/a", &ours), None);
        assert_eq!(destination("http://h:1/other/a", &ours), None);
        // Another host, or another port, is another server.
        assert_eq!(destination("http://elsewhere/webdav/plugin/a", &ours), None);
        assert_eq!(destination("http://h:2/webdav/plugin/a", &ours), None);
        assert_eq!(destination("http://h/webdav/plugin/a", &ours), None);
        // Default ports, user parts and BASE_URL's name.
        let ours = Ours::new(Some("h"), Some("https://media.example/base"));
        assert_eq!(destination("http://h:80/webdav/a", &ours), Some("/a"));
        assert_eq!(destination("http://u@h/webdav/a", &ours), Some("/a"));
        assert_eq!(
            destination("https://media.example:443/webdav/a", &ours),
            Some("/a")
        );
        assert_eq!(
            destination("http://media.example/webdav/a", &ours),
            Some("/a")
        );
        assert_eq!(destination("https://other.example/webdav/a", &ours), None);
        // No Host at all: only a path names this server.
        let none = Ours::default();
        assert_eq!(destination("http://h/webdav/a", &none), None);
        assert_eq!(destination("/webdav/a", &none), Some("/a"));
    }

    #[test]
    fn writes_need_the_writable_folders() {
        let w = |m: &str, p: &str| {
            allowed(
                needs(&Method::from_bytes(m.as_bytes()).unwrap()).unwrap(),
                Path::new(p),
            )
        };
        assert!(w("PUT", "plugin/a"));
        assert!(!w("PUT", "plugin"));
        assert!(!w("PUT", "watch/a"));
        assert!(w("MKCOL", "plugin"));
        assert!(!w("MKCOL", "watch"));
        assert!(!w("DELETE", "corn"));
        // A mount's folder is the root of its area: not removed, not
        // written over; what is in it is.
        assert!(!w("DELETE", "corn/x"));
        assert!(!w("PUT", "corn/x"));
        assert!(w("MKCOL", "corn/x"));
        assert!(w("DELETE", "corn/x/y"));
        assert!(needs(&Method::GET).is_none());
    }
}
