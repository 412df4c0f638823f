//! Where a PUT or PATCH writes in its file, read from its headers as
//! dav-server reads them, and whether that may be written: a ranged
//! write starts at most at the file's current end (a start past it would
//! make a sparse file of any size, which a FUSE mount under `corn/` then
//! uploads whole), and what a write adds to the filesystem fits in its
//! free space. Pure; the caller brings the file's size and the free
//! space.

use http::HeaderMap;

/// Where a write lands, as its headers say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Span {
    /// A whole new body (written to a temporary file beside the old one),
    /// of the declared length when there is one.
    Whole { declared: Option<u64> },
    /// `len` bytes in place from `start` (`Content-Range`, or PATCH's
    /// `X-Update-Range: bytes=b-e` and `bytes=b-`).
    At { start: u64, len: u64 },
    /// PATCH's `X-Update-Range: bytes=-n`: `len` bytes from `n` before
    /// the end.
    FromEnd { back: u64, len: u64 },
    /// PATCH's `X-Update-Range: append`: `len` bytes after the end.
    Append { len: u64 },
}

/// Why a write is refused before anything is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// It starts past the end of the file (of `size` bytes): 416.
    PastEnd { size: u64 },
    /// It needs `need` bytes of a filesystem that has `free`: 507.
    NoRoom { need: u64, free: u64 },
}

fn number(s: &str) -> Option<u64> {
    s.trim().parse().ok()
}

/// The declared length: `Content-Length`, else `X-Expected-Entity-Length`
/// (macOS Finder's, over a chunked body).
pub(super) fn declared(h: &HeaderMap) -> Option<u64> {
    let get = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).and_then(number);
    get("content-length").or_else(|| get("x-expected-entity-length"))
}

/// `Content-Range: bytes <b>-<e>/<len or *>` as (b, e); `None` when
/// absent or of another form (dav-server then writes the whole body, or
/// refuses the request itself).
fn content_range(h: &HeaderMap) -> Option<(u64, u64)> {
    let v = h.get(http::header::CONTENT_RANGE)?.to_str().ok()?;
    let spec = v.strip_prefix("bytes ")?;
    let (range, _) = spec.split_once('/')?;
    let (b, e) = range.split_once('-')?;
    let (b, e) = (number(b)?, number(e)?);
    (b <= e).then_some((b, e))
}

/// The span of a PUT or PATCH; `None` when dav-server will refuse the
/// headers itself (a PATCH without its range or length, a bad range).
pub(super) fn of(method: &str, h: &HeaderMap) -> Option<Span> {
    let declared = declared(h);
    let mut span = Span::Whole { declared };
    if method == "PATCH" {
        let len = declared?;
        let r = h.get("x-update-range")?.to_str().ok()?;
        span = if r == "append" {
            Span::Append { len }
        } else {
            match r.strip_prefix("bytes=")?.split_once('-')? {
                (b, "") => Span::At {
                    start: number(b)?,
                    len,
                },
                ("", n) => Span::FromEnd {
                    back: number(n)?,
                    len,
                },
                (b, _) => Span::At {
                    start: number(b)?,
                    len,
                },
            }
        };
    }
    if let Some((b, e)) = content_range(h) {
        span = Span::At {
            start: b,
            len: e - b + 1,
        };
    }
    Some(span)
}

impl Span {
    /// Whether the span may be written into a file of `size` bytes (0
    /// when there is none yet) on a filesystem with `free` bytes.
    pub(super) fn judge(self, size: u64, free: u64) -> Result<(), Refused> {
        let need = match self {
            Span::Whole { declared } => declared.unwrap_or(0),
            Span::At { start, len } => {
                if start > size {
                    return Err(Refused::PastEnd { size });
                }
                start.saturating_add(len).saturating_sub(size)
            }
            Span::FromEnd { back, len } => {
                let start = size.checked_sub(back).ok_or(Refused::PastEnd { size })?;
                start.saturating_add(len).saturating_sub(size)
            }
            Span::Append { len } => len,
        };
        if need > free {
            return Err(Refused::NoRoom { need, free });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.insert(*k, v.parse().unwrap());
        }
        m
    }

    #[test]
    fn spans_are_read_as_dav_server_reads_them() {
        assert_eq!(
            of("PUT", &h(&[("content-length", "4")])),
            Some(Span::Whole { declared: Some(4) })
        );
        assert_eq!(
            of("PUT", &h(&[("x-expected-entity-length", "9")])),
            Some(Span::Whole { declared: Some(9) })
        );
        let tib = "bytes 1099511627776-1099511627779/*";
        assert_eq!(
            of(
                "PUT",
                &h(&[("content-range", tib), ("content-length", "4")])
            ),
            Some(Span::At {
                start: 1 << 40,
                len: 4
            })
        );
        // A Content-Range of another form leaves a whole PUT.
        assert_eq!(
            of("PUT", &h(&[("content-range", "bytes */10")])),
            Some(Span::Whole { declared: None })
        );
        let patch = |r: &'static str| {
            of(
                "PATCH",
                &h(&[("content-length", "3"), ("x-update-range", r)]),
            )
        };
        assert_eq!(patch("bytes=5-7"), Some(Span::At { start: 5, len: 3 }));
        assert_eq!(patch("bytes=5-"), Some(Span::At { start: 5, len: 3 }));
        assert_eq!(patch("bytes=-2"), Some(Span::FromEnd { back: 2, len: 3 }));
        assert_eq!(patch("append"), Some(Span::Append { len: 3 }));
        assert_eq!(patch("lines=1-2"), None);
        assert_eq!(of("PATCH", &h(&[("x-update-range", "append")])), None);
    }

    #[test]
    fn a_write_starts_at_most_at_the_end_and_fits_the_free_space() {
        let at = |start, len| Span::At { start, len };
        assert_eq!(at(10, 4).judge(10, 100), Ok(()));
        assert_eq!(at(0, 4).judge(0, 100), Ok(()));
        assert_eq!(at(11, 4).judge(10, 100), Err(Refused::PastEnd { size: 10 }));
        assert_eq!(
            at(1 << 40, 4).judge(0, u64::MAX),
            Err(Refused::PastEnd { size: 0 })
        );
        // In place: only what passes the end needs room.
        assert_eq!(at(0, 10).judge(10, 0), Ok(()));
        assert_eq!(
            at(5, 10).judge(10, 4),
            Err(Refused::NoRoom { need: 5, free: 4 })
        );
        assert_eq!(
            Span::FromEnd { back: 11, len: 1 }.judge(10, 9),
            Err(Refused::PastEnd { size: 10 })
        );
        assert_eq!(Span::FromEnd { back: 2, len: 2 }.judge(10, 0), Ok(()));
        assert_eq!(
            Span::Append { len: 5 }.judge(10, 4),
            Err(Refused::NoRoom { need: 5, free: 4 })
        );
        // A whole body needs its length, beside the old file.
        let whole = |n| Span::Whole { declared: n };
        assert_eq!(whole(Some(5)).judge(100, 5), Ok(()));
        assert_eq!(
            whole(Some(6)).judge(100, 5),
            Err(Refused::NoRoom { need: 6, free: 5 })
        );
        assert_eq!(whole(None).judge(100, 0), Ok(()));
    }
}
