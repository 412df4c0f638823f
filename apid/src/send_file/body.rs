//! A file's bytes as a streaming body: each chunk one positioned read on
//! the blocking pool, the next read while the last chunk is sent.

use axum::body::Body;
use bytes::Bytes;

use super::rules::Span;

/// Bytes read from the file per chunk of the body; a streaming answer
/// holds two (one sent, one read ahead). 256 KiB reads a cached 1 GiB
/// file at nginx's sendfile speed; 64 KiB did at 40% of it
/// (`bench/files.py`).
pub(super) const CHUNK: usize = 256 * 1024;

/// What a body is made of: literal bytes (part headers) and spans of the
/// file, sent in order.
pub(super) enum Piece {
    Text(Bytes),
    Span(Span),
}

/// One positioned read of up to `want` bytes at `at`, on the blocking pool.
fn read_chunk(
    file: &std::sync::Arc<std::fs::File>,
    at: u64,
    want: usize,
) -> tokio::task::JoinHandle<std::io::Result<Vec<u8>>> {
    let file = file.clone();
    tokio::task::spawn_blocking(move || {
        let mut buf = vec![0u8; want];
        let mut got = 0;
        while got < want {
            match std::os::unix::fs::FileExt::read_at(&*file, &mut buf[got..], at + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(got);
        Ok(buf)
    })
}

/// The body of `pieces`, read from `file` one chunk at a time, each chunk
/// one positioned read (`pread`) on the blocking pool. The next chunk of
/// a span is read while the last one is being sent, so the disk and the
/// socket work at once; memory stays at two chunks.
pub(super) fn body_of(file: std::fs::File, pieces: Vec<Piece>) -> Body {
    struct State {
        file: std::sync::Arc<std::fs::File>,
        pieces: std::collections::VecDeque<Piece>,
        /// The span being sent: next offset and bytes left.
        at: u64,
        left: u64,
        /// The read of the chunk at this offset, under way.
        ahead: Option<(u64, tokio::task::JoinHandle<std::io::Result<Vec<u8>>>)>,
    }
    let state = State {
        file: std::sync::Arc::new(file),
        pieces: pieces.into(),
        at: 0,
        left: 0,
        ahead: None,
    };
    let stream = futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if st.left > 0 {
                let read = match st.ahead.take() {
                    Some((at, h)) if at == st.at => h,
                    _ => read_chunk(&st.file, st.at, st.left.min(CHUNK as u64) as usize),
                };
                let read = read.await.unwrap_or_else(|e| Err(std::io::Error::other(e)));
                let out = match read {
                    Ok(buf) if !buf.is_empty() => {
                        st.left -= (buf.len() as u64).min(st.left);
                        st.at += buf.len() as u64;
                        if st.left > 0 {
                            let want = st.left.min(CHUNK as u64) as usize;
                            st.ahead = Some((st.at, read_chunk(&st.file, st.at, want)));
                        }
                        return Some((Ok(Bytes::from(buf)), st));
                    }
                    // The file shrank while it was sent: the body ends
                    // short of its Content-Length and the client retries.
                    Ok(_) => std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
                    Err(e) => e,
                };
                st.pieces.clear();
                st.left = 0;
                return Some((Err(out), st));
            }
            match st.pieces.pop_front()? {
                Piece::Text(b) => return Some((Ok(b), st)),
                Piece::Span(s) => {
                    st.at = s.first;
                    st.left = s.len();
                }
            }
        }
    });
    Body::from_stream(stream)
}
