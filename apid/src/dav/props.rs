//! WebDAV dead properties (those a client sets with `PROPPATCH`), kept in
//! one extended attribute of the file or folder they belong to.
//!
//! An extended attribute travels with its file: a rename made by anyone
//! keeps it, a delete takes it away, and nothing beside the shared volume
//! needs keeping in step. A PROPPATCH is applied whole or not at all: the
//! set is read, changed and written back in one `fsetxattr`. What a
//! volume can hold is its own limit (ext4 keeps about 4 KiB of attributes
//! per file); past it, or on a filesystem without user attributes, every
//! property of the request fails with 507 or 403 and nothing changes.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use dav_server::fs::DavProp;
use http::StatusCode;
use serde::{Deserialize, Serialize};

/// The attribute holding a resource's dead properties.
const XATTR: &str = "user.meta-core.dav";

/// The most bytes of properties one resource may carry, whatever the
/// filesystem allows.
pub(crate) const MAX_BYTES: usize = 60 * 1024;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Stored {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ns: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prefix: Option<String>,
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    xml: Option<String>,
}

impl Stored {
    fn of(p: &DavProp) -> Self {
        Self {
            ns: p.namespace.clone(),
            prefix: p.prefix.clone(),
            name: p.name.clone(),
            xml: p
                .xml
                .as_ref()
                .map(|x| String::from_utf8_lossy(x).into_owned()),
        }
    }

    fn prop(&self, with_content: bool) -> DavProp {
        DavProp {
            name: self.name.clone(),
            prefix: self.prefix.clone(),
            namespace: self.ns.clone(),
            xml: if with_content {
                self.xml.as_ref().map(|x| x.clone().into_bytes())
            } else {
                None
            },
        }
    }

    fn same(&self, p: &DavProp) -> bool {
        self.name == p.name && self.ns == p.namespace
    }
}

/// The properties stored on `fd` (none when the attribute is absent, the
/// filesystem has no user attributes, or the attribute is not ours).
fn load(fd: impl AsFd) -> io::Result<Vec<Stored>> {
    let mut buf = vec![0u8; MAX_BYTES];
    match rustix::fs::fgetxattr(fd, XATTR, &mut buf[..]) {
        Ok(n) => Ok(serde_json::from_slice(&buf[..n]).unwrap_or_default()),
        Err(e) if e == rustix::io::Errno::NODATA || e == rustix::io::Errno::NOTSUP => {
            Ok(Vec::new())
        }
        Err(e) => Err(e.into()),
    }
}

/// The properties stored on the file at `path` (a symlink is not
/// followed: the caller has resolved it), and their size in bytes.
pub(crate) fn load_path(path: &std::path::Path) -> io::Result<(Vec<Stored>, usize)> {
    let absent =
        |e: rustix::io::Errno| e == rustix::io::Errno::NODATA || e == rustix::io::Errno::NOTSUP;
    let size = match rustix::fs::lgetxattr_query(path, XATTR) {
        Ok(n) => n,
        Err(e) if absent(e) => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e.into()),
    };
    let mut buf = vec![0u8; size.min(MAX_BYTES)];
    match rustix::fs::lgetxattr(path, XATTR, &mut buf[..]) {
        Ok(n) => Ok((serde_json::from_slice(&buf[..n]).unwrap_or_default(), n)),
        Err(e) if absent(e) => Ok((Vec::new(), 0)),
        Err(e) => Err(e.into()),
    }
}

/// `stored` as dav-server takes them.
pub(crate) fn to_props(stored: &[Stored], with_content: bool) -> Vec<DavProp> {
    stored.iter().map(|s| s.prop(with_content)).collect()
}

fn store(fd: impl AsFd, props: &[Stored]) -> io::Result<()> {
    if props.is_empty() {
        return match rustix::fs::fremovexattr(fd, XATTR) {
            Err(e) if e == rustix::io::Errno::NODATA || e == rustix::io::Errno::NOTSUP => Ok(()),
            r => r.map_err(Into::into),
        };
    }
    let bytes = serde_json::to_vec(props).map_err(io::Error::other)?;
    if bytes.len() > MAX_BYTES {
        return Err(io::Error::from_raw_os_error(libc::ENOSPC));
    }
    rustix::fs::fsetxattr(fd, XATTR, &bytes, rustix::fs::XattrFlags::empty())?;
    Ok(())
}

/// Every dead property of the resource open at `fd`.
pub(crate) fn list(fd: &OwnedFd, with_content: bool) -> io::Result<Vec<DavProp>> {
    Ok(load(fd)?.iter().map(|s| s.prop(with_content)).collect())
}

/// The XML of one property, `None` if the resource has no such property.
pub(crate) fn get(fd: &OwnedFd, want: &DavProp) -> io::Result<Option<Vec<u8>>> {
    Ok(load(fd)?
        .into_iter()
        .find(|s| s.same(want))
        .and_then(|s| s.xml.map(String::into_bytes)))
}

/// Applies `patch` (`true`: set, `false`: remove) to the resource open at
/// `fd`, all or nothing; every property gets the outcome's status.
pub(crate) fn patch(fd: &OwnedFd, patch: Vec<(bool, DavProp)>) -> Vec<(StatusCode, DavProp)> {
    let outcome = load(fd).and_then(|mut props| {
        for (set, p) in &patch {
            props.retain(|s| !s.same(p));
            if *set {
                props.push(Stored::of(p));
            }
        }
        store(fd, &props)
    });
    let status = match outcome {
        Ok(()) => StatusCode::OK,
        Err(e) => status_of(&e),
    };
    patch
        .into_iter()
        .map(|(_, p)| (status, DavProp { xml: None, ..p }))
        .collect()
}

/// Copies the dead properties of `from` to `to` (a COPY, or a PUT that
/// replaces a file), as far as `to`'s filesystem can hold them.
pub(crate) fn copy(from: impl AsFd, to: impl AsFd) {
    if let Ok(props) = load(from)
        && !props.is_empty()
        && let Err(e) = store(to, &props)
    {
        tracing::debug!("dead properties not copied: {e}");
    }
}

fn status_of(e: &io::Error) -> StatusCode {
    match e.raw_os_error() {
        Some(libc::ENOSPC | libc::E2BIG | libc::EDQUOT) => StatusCode::INSUFFICIENT_STORAGE,
        _ => StatusCode::FORBIDDEN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prop(ns: &str, name: &str, value: &str) -> DavProp {
        DavProp {
            name: name.into(),
            prefix: Some("x".into()),
            namespace: Some(ns.into()),
            xml: Some(format!("<x:{name} xmlns:x=\"{ns}\">{value}</x:{name}>").into_bytes()),
        }
    }

    fn open(path: &std::path::Path) -> OwnedFd {
        std::fs::File::open(path).unwrap().into()
    }

    #[test]
    fn properties_are_set_read_replaced_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a");
        std::fs::write(&f, b"x").unwrap();
        let fd = open(&f);
        let out = patch(
            &fd,
            vec![
                (true, prop("urn:a", "p", "1")),
                (true, prop("urn:b", "p", "2")),
            ],
        );
        assert!(out.iter().all(|(s, _)| *s == StatusCode::OK), "{out:?}");
        assert_eq!(list(&fd, false).unwrap().len(), 2);
        let got = get(&fd, &prop("urn:b", "p", "")).unwrap().unwrap();
        assert!(String::from_utf8(got).unwrap().contains(">2<"));
        patch(&fd, vec![(true, prop("urn:a", "p", "3"))]);
        let got = get(&fd, &prop("urn:a", "p", "")).unwrap().unwrap();
        assert!(String::from_utf8(got).unwrap().contains(">3<"));
        patch(
            &fd,
            vec![
                (false, prop("urn:a", "p", "")),
                (false, prop("urn:b", "p", "")),
            ],
        );
        assert!(list(&fd, true).unwrap().is_empty());
        assert!(get(&fd, &prop("urn:a", "p", "")).unwrap().is_none());
    }

    #[test]
    fn a_patch_too_large_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a");
        std::fs::write(&f, b"x").unwrap();
        let fd = open(&f);
        patch(&fd, vec![(true, prop("urn:a", "keep", "1"))]);
        let big = "v".repeat(MAX_BYTES);
        let out = patch(
            &fd,
            vec![
                (false, prop("urn:a", "keep", "")),
                (true, prop("urn:a", "big", &big)),
            ],
        );
        assert!(
            out.iter()
                .all(|(s, _)| *s == StatusCode::INSUFFICIENT_STORAGE)
        );
        let left = list(&fd, false).unwrap();
        assert_eq!(
            left.len(),
            1,
            "the removal in the failed patch did not happen"
        );
        assert_eq!(left[0].name, "keep");
    }

    #[test]
    fn properties_are_read_by_path_as_by_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a");
        std::fs::write(&f, b"x").unwrap();
        assert_eq!(load_path(&f).unwrap(), (Vec::new(), 0));
        patch(&open(&f), vec![(true, prop("urn:a", "p", "1"))]);
        let (stored, size) = load_path(&f).unwrap();
        assert!(size > 0);
        assert_eq!(to_props(&stored, true).len(), 1);
        assert_eq!(to_props(&stored, true)[0].xml, prop("urn:a", "p", "1").xml);
    }

    #[test]
    fn properties_follow_a_copy() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, b"x").unwrap();
        std::fs::write(&b, b"y").unwrap();
        patch(&open(&a), vec![(true, prop("urn:a", "p", "1"))]);
        copy(open(&a), open(&b));
        assert_eq!(list(&open(&b), false).unwrap().len(), 1);
    }
}
