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

/// Why apid does not act on a `Destination`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// Not a `Simple-ref` of RFC 4918 §10.3, neither an absolute URI nor an
    /// absolute path (empty, a relative reference such as `../x` or
    /// `plugin/x`, a network-path reference `//host/x`, or bytes that are
    /// not visible ASCII): the client's mistake, a 400.
    Malformed,
    /// Another server, or a path of this one outside `/webdav/`: a 502,
    /// as RFC 4918 §9.8.5 answers a COPY or MOVE there.
    NotHere,
}

/// The path part of a `Destination` header below `/webdav`, if it names
/// a `/webdav/` path of this server: a path alone, or an absolute URI
/// whose authority is one of [`Ours`] (another one is another server,
/// RFC 4918 §9.8.5).
pub(super) fn destination<'a>(value: &'a str, ours: &Ours) -> Result<&'a str, Refused> {
    let path = match scheme_of(value) {
        Some(scheme) => {
            let rest = &value[scheme.len() + 1..];
            // `urn:...`, `mailto:...`: no authority, no server of ours.
            let rest = rest.strip_prefix("//").ok_or(Refused::NotHere)?;
            let cut = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            if !ours.has(scheme, &rest[..cut]) {
                return Err(Refused::NotHere);
            }
            &rest[cut..]
        }
        None if value.starts_with('/') && !value.starts_with("//") => value,
        None => return Err(Refused::Malformed),
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    let below = path.strip_prefix(DAV_PREFIX).ok_or(Refused::NotHere)?;
    if below.is_empty() || below.starts_with('/') {
        Ok(below)
    } else {
        Err(Refused::NotHere)
    }
}

/// The scheme of an absolute URI (RFC 3986 §3.1: a letter, then letters,
/// digits, `+`, `-` or `.`, up to the first `:`), if `value` starts with
/// one.
fn scheme_of(value: &str) -> Option<&str> {
    let (scheme, _) = value.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
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
        use Refused::NotHere;
        let ours = Ours::new(Some("h:1"), None);
        assert_eq!(
            destination("http://h:1/webdav/plugin/a?x=1", &ours),
            Ok("/plugin/a")
        );
        assert_eq!(destination("/webdav/plugin/a", &ours), Ok("/plugin/a"));
        assert_eq!(destination("http://H:1/webdav", &ours), Ok(""));
        assert_eq!(destination("http://h:1/webdavx/a", &ours), Err(NotHere));
        assert_eq!(destination("http://h:1/other/a", &ours), Err(NotHere));
        assert_eq!(destination("http://h:1", &ours), Err(NotHere));
        // Another host, or another port, is another server.
        let elsewhere = "http://elsewhere/webdav/plugin/a";
        assert_eq!(destination(elsewhere, &ours), Err(NotHere));
        assert_eq!(
            destination("http://h:2/webdav/plugin/a", &ours),
            Err(NotHere)
        );
        assert_eq!(destination("http://h/webdav/plugin/a", &ours), Err(NotHere));
        // Default ports, user parts and BASE_URL's name.
        let ours = Ours::new(Some("h"), Some("https://media.example/base"));
        assert_eq!(destination("http://h:80/webdav/a", &ours), Ok("/a"));
        assert_eq!(destination("http://u@h/webdav/a", &ours), Ok("/a"));
        assert_eq!(
            destination("https://media.example:443/webdav/a", &ours),
            Ok("/a")
        );
        assert_eq!(
            destination("http://media.example/webdav/a", &ours),
            Ok("/a")
        );
        let other = "https://other.example/webdav/a";
        assert_eq!(destination(other, &ours), Err(NotHere));
        // No Host at all: only a path names this server.
        let none = Ours::default();
        assert_eq!(destination("http://h/webdav/a", &none), Err(NotHere));
        assert_eq!(destination("/webdav/a", &none), Ok("/a"));
    }

    #[test]
    fn a_destination_that_is_no_absolute_uri_or_path_is_malformed() {
        use Refused::{Malformed, NotHere};
        let ours = Ours::new(Some("h"), None);
        for bad in [
            "",
            " ",
            "../outside.txt",
            "plugin/a",
            "webdav/plugin/a",
            "//h/webdav/a",
            "1http://h/webdav/a",
        ] {
            assert_eq!(destination(bad, &ours), Err(Malformed), "{bad:?}");
        }
        // Well formed, but not here: another namespace of this server,
        // another scheme, a URI without an authority.
        for elsewhere in [
            "/etc/passwd",
            "/x/../webdav/a",
            "file:///webdav/a",
            "urn:webdav:a",
            "mailto:a@h",
        ] {
            assert_eq!(destination(elsewhere, &ours), Err(NotHere), "{elsewhere:?}");
        }
        // A `://` inside a path does not make it a URI.
        assert_eq!(
            destination("/webdav/plugin/a://b", &ours),
            Ok("/plugin/a://b")
        );
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
