//! The public listeners' accept loop: one HTTP/1.1 connection per task,
//! served by hyper directly, drained on shutdown. `META_CORE_HTTP_PORT` and
//! each of `META_CORE_HTTP_EXTRA_PORTS` are accepted by the same loop, so
//! they share one router, one connection table and every client's share.
//!
//! `axum::serve` rebuilt the router's route table for every connection and
//! went through hyper-util's protocol detection, about 20 KiB a connection
//! that lived as long as it did: with a thousand SSE followers, most of
//! apid's memory. Here every connection shares one router (an `Arc`
//! clone) and speaks HTTP/1.1 only, the one protocol apid offers.
//!
//! A connection whose peer takes no byte of an answer for
//! `META_CORE_HTTP_WRITE_STALL_MS` is closed ([`WriteStall`]): an SSE
//! follower that stopped reading, a download nobody reads. Its follower
//! slot, descriptor and apid's buffers are freed (the kernel keeps what it
//! had queued until it gives up on the peer), and a follower reconnects
//! with its last ID.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use bytes::Bytes;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use metacore::error::{ApiError, ErrorCode};
use metacore::shutdown::Shutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

use crate::conn::{Client, Conn, PerClient};

/// Pause after an accept error other than a connection that went away
/// before it was accepted (out of descriptors, ...), so a full table is not
/// spun on.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);
/// How long answers still being written get after shutdown before their
/// connections are dropped (the supervisor's stop grace for apid is 3 s).
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// The most hyper buffers of one connection: a request head may be this
/// long, and an answer's body is not polled for more while this much of
/// it waits to be written. hyper's default (about 400 KiB) let a follower
/// that stopped reading hold that much of apid's memory besides the chunk
/// it was sent, 2,000 of them a gigabyte.
const MAX_BUF: usize = 64 * 1024;
/// How long a connection refused for its client's cap gets to read the
/// 429 before it is closed.
const REFUSE_GRACE: Duration = Duration::from_secs(1);
/// Refused connections being answered at once; past it one is closed
/// without an answer, so a client opening connections faster than they
/// are answered holds no more than this many besides its share.
const REFUSALS: usize = 64;
/// Between two warnings that clients were refused for their cap.
const REFUSED_WARN_EVERY: Duration = Duration::from_secs(10);

/// What a client may hold of apid's connections and time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub write_stall: Duration,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub max_connections: usize,
    /// Connections one client may hold at once.
    pub per_client: usize,
}

impl Limits {
    pub(crate) fn of(c: &metacore::Config) -> Self {
        Self {
            write_stall: c.http_write_stall,
            header_timeout: c.http_header_timeout,
            body_timeout: c.http_body_timeout,
            max_connections: c.http_max_connections,
            per_client: c.http_max_connections_per_client,
        }
    }
}

/// Serves `router` on `listener` until `shutdown`, then lets the open
/// connections finish their answers for [`DRAIN_GRACE`] (event streams end
/// on shutdown at once).
///
/// A client has [`Limits::header_timeout`] to send a request's headers
/// (counted from the end of the last answer on a kept-alive connection,
/// so an idle connection is closed after it too), and a request body may
/// go [`Limits::body_timeout`] without a byte ([`crate::body_progress`]).
/// An SSE stream is an answer being written, so neither applies to it.
/// At most [`Limits::max_connections`] are served at once; past it apid
/// stops accepting until one ends (the kernel queues the others). One
/// client may hold [`Limits::per_client`] of them; the next it opens is
/// answered 429 and closed, so one client cannot take the table.
pub(crate) async fn serve(listener: Listeners, router: Router, limits: Limits, shutdown: Shutdown) {
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_BUF);
    let router = router.layer(axum::middleware::from_fn(move |req, next| {
        crate::body_progress::limit(req, next, limits.body_timeout)
    }));
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let per_client = PerClient::new(limits.per_client);
    let refusal = refusal(limits.per_client);
    // Refusals being written; each holds no connection slot.
    let refusing = std::sync::Arc::new(tokio::sync::Semaphore::new(REFUSALS));
    // Warned once each time the slots run out, not at every connection.
    let mut warned = false;
    let mut refused = Refused::default();
    loop {
        let slot = match slots.clone().try_acquire_owned() {
            Ok(s) => {
                warned = false;
                s
            }
            Err(_) => {
                if !warned {
                    tracing::warn!(
                        "{} connections are open (META_CORE_HTTP_MAX_CONNECTIONS); \
                         new ones wait until one ends",
                        limits.max_connections
                    );
                    warned = true;
                }
                tokio::select! {
                    s = slots.clone().acquire_owned() => match s {
                        Ok(s) => s,
                        Err(_) => break,
                    },
                    _ = shutdown.wait() => break,
                }
            }
        };
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.wait() => break,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                tracing::warn!("accept failed: {e}; retrying in {ACCEPT_BACKOFF:?}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let client = Client::of(peer.ip());
        let Some(held) = per_client.try_take(client) else {
            refused.note(client, limits.per_client);
            // The slot goes back at once: a client past its share must not
            // hold the table with connections that are being refused.
            drop(slot);
            match refusing.clone().try_acquire_owned() {
                Ok(turn) => {
                    let refusal = refusal.clone();
                    tokio::spawn(async move {
                        let _turn = turn;
                        refuse(tcp, &refusal).await;
                    });
                }
                // Too many being answered: closed unanswered.
                Err(_) => drop(tcp),
            }
            continue;
        };
        let _ = tcp.set_nodelay(true);
        // The kernel too ends a connection whose sent bytes go
        // unacknowledged twice as long (a peer that vanished, or whose
        // window stayed shut), even while apid writes nothing; the write
        // stall, which logs why, comes first where apid writes.
        let stall_ms = u32::try_from(limits.write_stall.as_millis() * 2).unwrap_or(u32::MAX);
        if let Err(e) = rustix::net::sockopt::set_tcp_user_timeout(&tcp, stall_ms) {
            tracing::debug!("TCP_USER_TIMEOUT not set: {e}");
        }
        let conn = Conn { client };
        let io = TokioIo::new(WriteStall::new(tcp, limits.write_stall));
        let service = TowerToHyperService::new(router.clone().map_request(
            move |mut req: http::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(conn);
                req
            },
        ));
        let conn = graceful.watch(builder.serve_connection(io, service));
        tokio::spawn(async move {
            let _slot = slot;
            let _held = held;
            if let Err(e) = conn.await {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::info!("answers still open {DRAIN_GRACE:?} after the stop; closing them");
    }
}

/// The bound public ports, accepted from as one.
#[derive(Debug)]
pub(crate) struct Listeners {
    listeners: Vec<TcpListener>,
    /// The listener asked first at the next accept, so that a busy port
    /// does not keep the others waiting.
    next: std::sync::atomic::AtomicUsize,
}

impl Listeners {
    pub(crate) fn new(listeners: Vec<TcpListener>) -> Self {
        Self {
            listeners,
            next: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The next connection on any of the ports.
    async fn accept(&self) -> io::Result<(TcpStream, std::net::SocketAddr)> {
        std::future::poll_fn(|cx| {
            let n = self.listeners.len();
            let first = self.next.load(std::sync::atomic::Ordering::Relaxed);
            for i in 0..n {
                let at = (first + i) % n;
                if let Poll::Ready(r) = self.listeners[at].poll_accept(cx) {
                    self.next
                        .store((at + 1) % n, std::sync::atomic::Ordering::Relaxed);
                    return Poll::Ready(r);
                }
            }
            Poll::Pending
        })
        .await
    }
}

/// The answer to a connection its client has no room for: a 429 with the
/// error envelope, then the connection is closed.
fn refusal(per_client: usize) -> Bytes {
    let envelope = ApiError::new(
        ErrorCode::TooManyRequests,
        format!(
            "this client has {per_client} connections open, the most one client may hold \
             (META_CORE_HTTP_MAX_CONNECTIONS_PER_CLIENT); close some or retry shortly"
        ),
    )
    .envelope();
    let body = serde_json::to_vec(&envelope).unwrap_or_default();
    let head = format!(
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n\
         retry-after: {}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        metacore::error::RETRY_AFTER_SECS,
        body.len()
    );
    let mut out = head.into_bytes();
    out.extend_from_slice(&body);
    Bytes::from(out)
}

/// Writes `answer` without reading the request, then closes: the write
/// side first, and what the client still sends is read (and dropped) for
/// [`REFUSE_GRACE`], so that it reads the answer rather than a reset.
async fn refuse(mut tcp: TcpStream, answer: &[u8]) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = tokio::time::timeout(REFUSE_GRACE, async {
        tcp.write_all(answer).await?;
        tcp.shutdown().await?;
        let mut sink = [0u8; 4096];
        while tcp.read(&mut sink).await? > 0 {}
        Ok::<_, io::Error>(())
    })
    .await;
}

/// Clients refused for their connection cap, logged at most every
/// [`REFUSED_WARN_EVERY`] rather than at each connection.
#[derive(Debug, Default)]
struct Refused {
    since_warning: u64,
    warned_at: Option<Instant>,
}

impl Refused {
    fn note(&mut self, client: Client, cap: usize) {
        self.since_warning += 1;
        if self
            .warned_at
            .is_some_and(|at| at.elapsed() < REFUSED_WARN_EVERY)
        {
            return;
        }
        tracing::warn!(
            %client,
            refused = self.since_warning,
            "a client holds {cap} connections (META_CORE_HTTP_MAX_CONNECTIONS_PER_CLIENT); \
             its next ones are answered 429"
        );
        self.since_warning = 0;
        self.warned_at = Some(Instant::now());
    }
}

/// An error about one incoming connection, not about the listener.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

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
        self.progress.observe(unacked(&self.inner), now);
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
            self.progress.observe(unacked(&self.inner), now);
            if self.progress.stalled(self.limit, now) {
                self.deadline = None;
                return Poll::Ready(Err(self.stalled_error()));
            }
        }
    }
}

/// Bytes in the socket's send queue not yet acknowledged by the peer
/// (`SIOCOUTQ`); `None` if the kernel does not say.
#[allow(unsafe_code)]
fn unacked(stream: &TcpStream) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let mut queued: libc::c_int = 0;
    // SAFETY: SIOCOUTQ writes one int through the pointer, which points to
    // a live c_int; the descriptor is the stream's own, open for the call.
    // (On Linux SIOCOUTQ is TIOCOUTQ.)
    let r = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
    (r == 0).then(|| queued.max(0) as u32)
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
