//! What RFC 9110 says of a file's answer, before a byte is read: its
//! validators (`ETag`, `Last-Modified`), the preconditions (§13) and the
//! byte ranges a `Range` header asks for.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, Method, header};

/// Most ranges one request may ask for; past it the whole file is sent
/// (as nginx's `max_ranges` does), so a request of a thousand tiny ranges
/// cannot cost a thousand seeks and part headers.
pub(crate) const MAX_RANGES: usize = 16;

/// What is known of the file being sent.
#[derive(Debug, Clone)]
pub(crate) struct Validators {
    pub size: u64,
    pub etag: String,
    /// Whole seconds since the epoch.
    pub modified_secs: u64,
    pub last_modified: String,
}

impl Validators {
    pub(crate) fn of(meta: &std::fs::Metadata) -> Self {
        let mtime = meta.modified().unwrap_or(UNIX_EPOCH);
        let since = mtime.duration_since(UNIX_EPOCH).unwrap_or_default();
        let modified_secs = since.as_secs();
        Self {
            size: meta.len(),
            etag: format!(
                "\"{}\"",
                etag(
                    std::os::unix::fs::MetadataExt::ino(meta),
                    since.as_nanos(),
                    meta.len()
                )
            ),
            modified_secs,
            last_modified: httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(modified_secs)),
        }
    }
}

/// The opaque part of the ETag of a file (inode, mtime in nanoseconds
/// since the epoch, size), unquoted; WebDAV's `getetag` is the same.
pub(crate) fn etag(ino: u64, mtime_ns: u128, size: u64) -> String {
    format!("{ino:x}-{mtime_ns:x}-{size:x}")
}

/// A byte range, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub first: u64,
    pub last: u64,
}

impl Span {
    pub(crate) fn len(self) -> u64 {
        self.last - self.first + 1
    }
}

/// What a `Range` header asks of a file of `size` bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ranges {
    /// No range header, one we do not understand, or more ranges than
    /// [`MAX_RANGES`]: the whole file.
    Whole,
    /// Satisfiable ranges, in the order asked.
    Spans(Vec<Span>),
    /// Well-formed, but none within the file: 416.
    Unsatisfiable,
}

/// Parses `bytes=a-b, c-, -n` against a file of `size` bytes.
pub(crate) fn parse_ranges(header: &str, size: u64) -> Ranges {
    let Some(set) = header.trim().strip_prefix("bytes=") else {
        return Ranges::Whole;
    };
    let mut spans = Vec::new();
    let mut asked = 0;
    for part in set.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        asked += 1;
        if asked > MAX_RANGES {
            return Ranges::Whole;
        }
        let Some((a, b)) = part.split_once('-') else {
            return Ranges::Whole;
        };
        let (a, b) = (a.trim(), b.trim());
        let span = if a.is_empty() {
            // The last `n` bytes.
            let Ok(n) = b.parse::<u64>() else {
                return Ranges::Whole;
            };
            if n == 0 || size == 0 {
                None
            } else {
                Some(Span {
                    first: size.saturating_sub(n),
                    last: size - 1,
                })
            }
        } else {
            let Ok(first) = a.parse::<u64>() else {
                return Ranges::Whole;
            };
            let last = if b.is_empty() {
                u64::MAX
            } else {
                match b.parse::<u64>() {
                    Ok(l) if l >= first => l,
                    _ => return Ranges::Whole,
                }
            };
            (first < size).then(|| Span {
                first,
                last: last.min(size - 1),
            })
        };
        spans.extend(span);
    }
    if asked == 0 {
        Ranges::Whole
    } else if spans.is_empty() {
        Ranges::Unsatisfiable
    } else if spans.len() > 1 && spans.iter().map(|s| s.len()).sum::<u64>() > size {
        // Overlapping ranges that add up to more than the file: the file
        // once, not parts of it many times.
        Ranges::Whole
    } else {
        Ranges::Spans(spans)
    }
}

/// The entity tags of an `If-Match` / `If-None-Match` value; `None` for
/// `*`.
fn tags(value: &str) -> Option<Vec<&str>> {
    let value = value.trim();
    if value == "*" || value.split(',').any(|t| t.trim() == "*") {
        return None;
    }
    Some(
        value
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect(),
    )
}

fn strong_match(tag: &str, etag: &str) -> bool {
    !tag.starts_with("W/") && tag == etag
}

fn weak_match(tag: &str, etag: &str) -> bool {
    tag.trim_start_matches("W/") == etag.trim_start_matches("W/")
}

pub(super) fn header_str(h: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Every line of a list header (`If-Match`, `If-None-Match`), joined as one
/// comma-separated list, as RFC 9110 §5.3 reads repeated lines.
fn header_list(h: &HeaderMap, name: header::HeaderName) -> Option<String> {
    let lines: Vec<&str> = h
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!lines.is_empty()).then(|| lines.join(","))
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

fn date_secs(value: &str) -> Option<u64> {
    let t = httpdate::parse_http_date(value).ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_secs())
}

/// What the preconditions decide, before any byte is read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// 412 Precondition Failed.
    Failed,
    /// 304 Not Modified.
    NotModified,
    /// Send; honour the `Range` header or not.
    Send { use_range: bool },
}

/// RFC 9110 §13.2.2, in its order.
pub(crate) fn decide(method: &Method, h: &HeaderMap, v: &Validators) -> Decision {
    if let Some(im) = header_list(h, header::IF_MATCH) {
        let ok = match tags(&im) {
            None => true,
            Some(list) => list.iter().any(|t| strong_match(t, &v.etag)),
        };
        if !ok {
            return Decision::Failed;
        }
    } else if let Some(since) = header_str(h, header::IF_UNMODIFIED_SINCE).and_then(date_secs)
        && v.modified_secs > since
    {
        return Decision::Failed;
    }
    let read = *method == Method::GET || *method == Method::HEAD;
    if let Some(inm) = header_list(h, header::IF_NONE_MATCH) {
        let matched = match tags(&inm) {
            None => true,
            Some(list) => list.iter().any(|t| weak_match(t, &v.etag)),
        };
        if matched {
            return if read {
                Decision::NotModified
            } else {
                Decision::Failed
            };
        }
    } else if read
        && let Some(since) = header_str(h, header::IF_MODIFIED_SINCE).and_then(date_secs)
        && v.modified_secs <= since
    {
        return Decision::NotModified;
    }
    let use_range = match header_str(h, header::IF_RANGE) {
        None => true,
        Some(ir) if ir.trim_start().starts_with('"') || ir.trim_start().starts_with("W/") => {
            strong_match(ir.trim(), &v.etag)
        }
        // A date: only an exact match of Last-Modified, and only when that
        // is a strong validator (the file was last changed more than a
        // second before now: a second-resolution date of a file changed
        // this second may name two contents).
        Some(ir) => date_secs(ir) == Some(v.modified_secs) && v.modified_secs + 1 < now_secs(),
    };
    Decision::Send { use_range }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn span(first: u64, last: u64) -> Span {
        Span { first, last }
    }

    #[test]
    fn ranges_are_read_as_rfc_9110_says() {
        let size = 100;
        assert_eq!(
            parse_ranges("bytes=0-9", size),
            Ranges::Spans(vec![span(0, 9)])
        );
        assert_eq!(
            parse_ranges("bytes=90-", size),
            Ranges::Spans(vec![span(90, 99)])
        );
        assert_eq!(
            parse_ranges("bytes=-5", size),
            Ranges::Spans(vec![span(95, 99)])
        );
        assert_eq!(
            parse_ranges("bytes=-500", size),
            Ranges::Spans(vec![span(0, 99)])
        );
        assert_eq!(
            parse_ranges("bytes=95-200", size),
            Ranges::Spans(vec![span(95, 99)])
        );
        assert_eq!(
            parse_ranges("bytes=0-1, 5-6 ,200-300", size),
            Ranges::Spans(vec![span(0, 1), span(5, 6)])
        );
        assert_eq!(
            parse_ranges("bytes=0-,0-,0-", size),
            Ranges::Whole,
            "overlapping"
        );
        assert_eq!(parse_ranges("bytes=100-", size), Ranges::Unsatisfiable);
        assert_eq!(parse_ranges("bytes=-0", size), Ranges::Unsatisfiable);
        assert_eq!(parse_ranges("bytes=0-0", 0), Ranges::Unsatisfiable);
        for odd in ["items=0-1", "bytes=5-1", "bytes=a-b", "bytes=1", "bytes="] {
            assert_eq!(parse_ranges(odd, size), Ranges::Whole, "{odd}");
        }
        let many = format!("bytes={}", vec!["0-0"; MAX_RANGES + 1].join(","));
        assert_eq!(parse_ranges(&many, size), Ranges::Whole);
        // Past 4 GiB.
        let big = 5u64 << 30;
        assert_eq!(
            parse_ranges(&format!("bytes={}-", big - 3), big),
            Ranges::Spans(vec![span(big - 3, big - 1)])
        );
    }

    fn v() -> Validators {
        Validators {
            size: 10,
            etag: "\"abc-a\"".into(),
            modified_secs: 1_700_000_000,
            last_modified: httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
        }
    }

    fn with(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, val) in pairs {
            h.insert(k.clone(), HeaderValue::from_str(val).unwrap());
        }
        h
    }

    #[test]
    fn preconditions_decide_in_the_rfcs_order() {
        let v = v();
        let get = Method::GET;
        let send = Decision::Send { use_range: true };
        assert_eq!(decide(&get, &HeaderMap::new(), &v), send);
        assert_eq!(
            decide(&get, &with(&[(header::IF_MATCH, "\"abc-a\"")]), &v),
            send
        );
        assert_eq!(decide(&get, &with(&[(header::IF_MATCH, "*")]), &v), send);
        assert_eq!(
            decide(
                &get,
                &with(&[(header::IF_MATCH, "\"other\", W/\"abc-a\"")]),
                &v
            ),
            Decision::Failed,
            "If-Match compares strongly"
        );
        let earlier = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(1_600_000_000));
        assert_eq!(
            decide(&get, &with(&[(header::IF_UNMODIFIED_SINCE, &earlier)]), &v),
            Decision::Failed
        );
        assert_eq!(
            decide(&get, &with(&[(header::IF_NONE_MATCH, "W/\"abc-a\"")]), &v),
            Decision::NotModified,
            "If-None-Match compares weakly"
        );
        assert_eq!(
            decide(&Method::PUT, &with(&[(header::IF_NONE_MATCH, "*")]), &v),
            Decision::Failed
        );
        assert_eq!(
            decide(
                &get,
                &with(&[(header::IF_MODIFIED_SINCE, &v.last_modified)]),
                &v
            ),
            Decision::NotModified
        );
        assert_eq!(
            decide(&get, &with(&[(header::IF_MODIFIED_SINCE, &earlier)]), &v),
            send
        );
        // If-None-Match wins over If-Modified-Since.
        assert_eq!(
            decide(
                &get,
                &with(&[
                    (header::IF_NONE_MATCH, "\"other\""),
                    (header::IF_MODIFIED_SINCE, &v.last_modified)
                ]),
                &v
            ),
            send
        );
        let no_range = Decision::Send { use_range: false };
        assert_eq!(
            decide(&get, &with(&[(header::IF_RANGE, "\"abc-a\"")]), &v),
            send
        );
        assert_eq!(
            decide(&get, &with(&[(header::IF_RANGE, "\"old\"")]), &v),
            no_range
        );
        assert_eq!(
            decide(&get, &with(&[(header::IF_RANGE, "W/\"abc-a\"")]), &v),
            no_range
        );
        assert_eq!(
            decide(&get, &with(&[(header::IF_RANGE, &v.last_modified)]), &v),
            send
        );
        assert_eq!(
            decide(&get, &with(&[(header::IF_RANGE, &earlier)]), &v),
            no_range
        );
    }
}
