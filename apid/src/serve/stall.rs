//! The write stall: a connection whose peer takes no byte of what it is
//! owed for `META_CORE_HTTP_WRITE_STALL_MS` is closed ([`WriteStall`]). What
//! the peer took is read off the kernel's unacknowledged send queue; the
//! decision is the pure [`Progress`], tested case by case.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// What the peer has taken of what was written, as the kernel's send
/// queue tells it: the pure half of [`WriteStall`]. "Taken" is the peer's
/// TCP acknowledging bytes; a peer owing nothing is taking all it is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Bytes written and not acknowledged, as last known.
    queued: u32,
    /// When the peer last took a byte, or last owed none.
    at: Instant,
}

impl Progress {
    pub(crate) fn new(now: Instant) -> Self {
        Self { queued: 0, at: now }
    }

    /// The send queue read at `now`: a shorter queue than last known, or
    /// an empty one, is progress. `None` (the kernel did not say) is none.
    pub(crate) fn observe(&mut self, queued: Option<u32>, now: Instant) {
        let Some(q) = queued else { return };
        if q < self.queued || q == 0 {
            self.at = now;
        }
        self.queued = q;
    }

    /// `n` more bytes handed to the kernel.
    pub(crate) fn wrote(&mut self, n: usize) {
        self.queued = self
            .queued
            .saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
    }

    /// The peer owes bytes and has taken none for `limit`: whether a write
    /// is waiting or not (an event stream's keep-alive is the write that
    /// finds a quiet follower gone).
    pub(crate) fn stalled(&self, limit: Duration, now: Instant) -> bool {
        self.queued > 0 && now.saturating_duration_since(self.at) >= limit
    }

    /// When it is stalled unless it takes a byte first: counted from the
    /// last byte the peer took, not from when a write began to wait.
    pub(crate) fn deadline(&self, limit: Duration) -> Instant {
        self.at + limit
    }
}

/// A TCP stream whose writes fail with `TimedOut` once the peer has taken
/// no byte for `limit` while it owed some ([`Progress`]): checked before
/// every write, and by a timer while a write waits (the timer wakes the
/// connection's task, so a peer that reads nothing at all is noticed).
///
/// "Taken" is judged by the kernel's send queue (`SIOCOUTQ`: bytes not
/// yet acknowledged by the peer), not by the socket turning writable: the
/// kernel reports a full socket writable only once a third of its buffer
/// has drained, which for a slow but steady reader (30 KB/s against a 4
/// MiB buffer) takes longer than any sensible limit.
#[derive(Debug)]
pub(crate) struct WriteStall {
    inner: TcpStream,
    limit: Duration,
    progress: Progress,
    /// Armed while a write waits, for [`Progress::deadline`].
    deadline: Option<Pin<Box<Sleep>>>,
}

impl WriteStall {
    pub(crate) fn new(inner: TcpStream, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            progress: Progress::new(Instant::now()),
            deadline: None,
        }
    }

    fn stalled_error(&self) -> io::Error {
        tracing::info!(
            peer = ?self.inner.peer_addr().ok(),
            "closing a connection whose peer took nothing for {:?} \
             (an SSE follower reconnects with its last ID)",
            self.limit
        );
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the peer took nothing for {:?}", self.limit),
        )
    }

    /// Before a write: the queue read, and the write refused if the peer
    /// has been taking nothing.
    fn before_write(&mut self) -> io::Result<()> {
        let now = Instant::now();
        self.progress.observe(crate::sys::unacked(&self.inner), now);
        if self.progress.stalled(self.limit, now) {
            return Err(self.stalled_error());
        }
        Ok(())
    }

    /// After the inner write's `poll`: progress recorded on `Ready`; on
    /// `Pending`, the deadline armed, and when it passes the write fails
    /// unless the peer took bytes meanwhile (then it waits on).
    fn watch(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        if let Poll::Ready(r) = poll {
            self.deadline = None;
            if let Ok(n) = &r {
                self.progress.wrote(*n);
            }
            return Poll::Ready(r);
        }
        loop {
            let at = self.progress.deadline(self.limit);
            let sleep = self
                .deadline
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
            if sleep.deadline() != at {
                sleep.as_mut().reset(at);
            }
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let now = Instant::now();
            self.progress.observe(crate::sys::unacked(&self.inner), now);
            if self.progress.stalled(self.limit, now) {
                self.deadline = None;
                return Poll::Ready(Err(self.stalled_error()));
            }
        }
    }
}

impl AsyncRead for WriteStall {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteStall {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.deadline.is_none() {
            self.before_write()?;
        }
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.deadline.is_none() {
            self.before_write()?;
        }
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // A TCP stream's flush has nothing to wait for.
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(10);

    #[test]
    fn a_peer_that_takes_bytes_is_never_stalled() {
        let t0 = Instant::now();
        let mut p = Progress::new(t0);
        p.wrote(100_000);
        // Taking a little every few seconds, for a minute.
        for i in 1..=20u32 {
            let now = t0 + Duration::from_secs(3 * u64::from(i));
            p.observe(Some(100_000 - i * 10), now);
            assert!(!p.stalled(LIMIT, now), "at {i}");
            p.wrote(10);
        }
    }

    #[test]
    fn the_stall_counts_from_the_last_byte_taken_not_from_the_wait() {
        let t0 = Instant::now();
        let mut p = Progress::new(t0);
        p.wrote(1000);
        p.observe(Some(500), t0 + Duration::from_secs(1));
        // The write that waits comes later: its deadline is still 10 s after
        // the peer last took a byte.
        assert_eq!(p.deadline(LIMIT), t0 + Duration::from_secs(11));
        p.observe(Some(500), t0 + Duration::from_secs(8));
        assert!(!p.stalled(LIMIT, t0 + Duration::from_secs(8)));
        assert!(p.stalled(LIMIT, t0 + Duration::from_secs(11)));
    }

    #[test]
    fn a_quiet_stream_whose_keep_alives_go_unacknowledged_is_stalled() {
        let t0 = Instant::now();
        let mut p = Progress::new(t0);
        // A keep-alive at 0 s and 30 s, acknowledged: fine.
        p.wrote(13);
        p.observe(Some(0), t0 + Duration::from_secs(30));
        assert!(!p.stalled(LIMIT, t0 + Duration::from_secs(30)));
        p.wrote(13);
        // Then the peer is gone: the next keep-alive finds 13 bytes owed for
        // 30 s, though no write ever waited.
        let at = t0 + Duration::from_secs(60);
        p.observe(Some(13), at);
        assert!(p.stalled(LIMIT, at));
    }

    #[test]
    fn owing_nothing_is_never_stalled_and_an_unknown_queue_is_no_progress() {
        let t0 = Instant::now();
        let mut p = Progress::new(t0);
        assert!(!p.stalled(LIMIT, t0 + Duration::from_secs(3600)));
        p.wrote(10);
        p.observe(None, t0 + Duration::from_secs(5));
        assert!(p.stalled(LIMIT, t0 + Duration::from_secs(10)));
    }
}
