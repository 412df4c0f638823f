//! PROPFIND answers with every `getetag` quoted, as RFC 4918 §15.6 has
//! it (`"<tag>"`, the value of the `ETag` header); dav-server writes the
//! tag bare.

use axum::body::Body;

/// The multistatus body with every `getetag` quoted, as RFC 4918 §15.6
/// has it (`"<tag>"`, the value of the `ETag` header); dav-server writes
/// the tag bare. Streamed: a chunk is held back only from a `<` whose tag
/// is not complete yet, or from a `getetag` whose end has not come.
pub(super) fn quote_etags(body: Body) -> Body {
    use futures_util::StreamExt;
    let chunks = futures_util::stream::unfold(
        (body.into_data_stream(), Vec::<u8>::new(), false),
        |(mut inner, mut held, done)| async move {
            if done {
                return None;
            }
            match inner.next().await {
                Some(Ok(chunk)) => {
                    held.extend_from_slice(&chunk);
                    let cut = complete_up_to(&held);
                    let out = with_quoted_etags(&held[..cut]);
                    held.drain(..cut);
                    Some((Ok(bytes::Bytes::from(out)), (inner, held, false)))
                }
                Some(Err(e)) => Some((Err(e), (inner, held, true))),
                None => {
                    let out = with_quoted_etags(&held);
                    Some((Ok(bytes::Bytes::from(out)), (inner, Vec::new(), true)))
                }
            }
        },
    );
    Body::from_stream(chunks)
}

const ETAG_OPEN: &[u8] = b"<D:getetag>";
const ETAG_CLOSE: &[u8] = b"</D:getetag>";

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

/// How much of `buf` can be rewritten now.
fn complete_up_to(buf: &[u8]) -> usize {
    if let Some(open) = rfind(buf, ETAG_OPEN)
        && find(&buf[open..], ETAG_CLOSE).is_none()
    {
        return open;
    }
    match buf.iter().rposition(|&b| b == b'<') {
        Some(lt) if !buf[lt..].contains(&b'>') => lt,
        _ => buf.len(),
    }
}

fn with_quoted_etags(buf: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(buf.len() + 64);
    let mut rest = buf;
    while let Some(open) = find(rest, ETAG_OPEN) {
        let value_at = open + ETAG_OPEN.len();
        let Some(len) = find(&rest[value_at..], ETAG_CLOSE) else {
            break;
        };
        out.extend_from_slice(&rest[..value_at]);
        let value = &rest[value_at..value_at + len];
        if value.first() == Some(&b'"') || value.starts_with(b"W/") {
            out.extend_from_slice(value);
        } else {
            out.push(b'"');
            out.extend_from_slice(value);
            out.push(b'"');
        }
        rest = &rest[value_at + len..];
    }
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_are_quoted_whatever_the_chunks() {
        let xml: &[u8] = b"<D:response><D:getetag>1-2-3</D:getetag><x/><D:getetag>\"q\"</D:getetag></D:response>";
        let want: &[u8] = b"<D:response><D:getetag>\"1-2-3\"</D:getetag><x/><D:getetag>\"q\"</D:getetag></D:response>";
        assert_eq!(with_quoted_etags(xml), want);
        // Every split into two chunks gives the same output.
        for at in 0..=xml.len() {
            let mut held = xml[..at].to_vec();
            let cut = complete_up_to(&held);
            let mut out = with_quoted_etags(&held[..cut]);
            held.drain(..cut);
            held.extend_from_slice(&xml[at..]);
            let cut = complete_up_to(&held);
            out.extend(with_quoted_etags(&held[..cut]));
            out.extend(with_quoted_etags(&held[cut..]));
            assert_eq!(out, want, "split at {at}");
        }
    }
}
