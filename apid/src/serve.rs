//! The public listener's accept loop: one HTTP/1.1 connection per task,
//! served by hyper directly, drained on shutdown.
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
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use metacore::shutdown::Shutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

/// Pause after an accept error other than a connection that went away
/// before it was accepted (out of descriptors, ...), so a full table is not
/// spun on.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);
/// How long answers still being written get after shutdown before their
/// connections are dropped (the supervisor's stop grace for apid is 3 s).
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// What a client may hold of apid's connections and time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub write_stall: Duration,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub max_connections: usize,
}

impl Limits {
    pub(crate) fn of(c: &metacore::Config) -> Self {
        Self {
            write_stall: c.http_write_stall,
            header_timeout: c.http_header_timeout,
            body_timeout: c.http_body_timeout,
            max_connections: c.http_max_connections,
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
/// stops accepting until one ends (the kernel queues the others).
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: Shutdown,
) {
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let router = router.layer(axum::middleware::from_fn(move |req, next| {
        crate::body_progress::limit(req, next, limits.body_timeout)
    }));
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    // Warned once each time the slots run out, not at every connection.
    let mut warned = false;
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
        let _ = tcp.set_nodelay(true);
        let io = TokioIo::new(WriteStall::new(tcp, limits.write_stall));
        let conn = crate::conn::Conn {
            client: crate::conn::Client::of(peer.ip()),
        };
        let service = TowerToHyperService::new(router.clone().map_request(
            move |mut req: http::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(conn);
                req
            },
        ));
        let conn = graceful.watch(builder.serve_connection(io, service));
        tokio::spawn(async move {
            let _slot = slot;
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

/// An error about one incoming connection, not about the listener.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// A TCP stream whose writes fail with `TimedOut` once the peer has taken
/// no byte for `limit` while a write waited. The timer wakes the
/// connection's task, so a peer that reads nothing at all is noticed.
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
    /// Armed while a write is pending, with the send queue's length then.
    deadline: Option<(Pin<Box<Sleep>>, Option<u32>)>,
}

impl WriteStall {
    pub(crate) fn new(inner: TcpStream, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            deadline: None,
        }
    }

    /// After the inner write's `poll`: disarms on progress; on `Pending`,
    /// arms the deadline, and when it passes fails unless the peer took
    /// bytes meanwhile (then it waits another `limit`).
    fn watch<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.deadline = None;
            return poll;
        }
        let limit = self.limit;
        loop {
            let queued = unacked(&self.inner);
            let (sleep, at_arm) = self.deadline.get_or_insert_with(|| {
                (
                    Box::pin(tokio::time::sleep_until(Instant::now() + limit)),
                    queued,
                )
            });
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            match (queued, *at_arm) {
                // The queue shrank: the peer reads, slowly. Wait again.
                (Some(now), Some(then)) if now < then => self.deadline = None,
                _ => {
                    tracing::info!(
                        peer = ?self.inner.peer_addr().ok(),
                        "closing a connection whose peer took nothing for {limit:?} \
                         (an SSE follower reconnects with its last ID)"
                    );
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the peer took nothing for {limit:?}"),
                    )));
                }
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
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
