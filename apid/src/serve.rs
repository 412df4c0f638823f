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
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use axum::Router;
use bytes::Bytes;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use metacore::error::{ApiError, ErrorCode};
use metacore::shutdown::Shutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tower::ServiceExt;

use crate::conn::{Client, Conn, Held, PerClient};

mod stall;

use stall::WriteStall;

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
    let serving = Serving::new(router, &limits);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let per_client = PerClient::new(limits.per_client);
    let refusal = refusal(limits.per_client);
    // Refusals being written; each holds no connection slot.
    let refusing = Arc::new(Semaphore::new(REFUSALS));
    // Warned once each time the slots run out, not at every connection.
    let mut warned = false;
    let mut refused = Refused::default();
    loop {
        let Some(slot) = free_slot(&slots, &mut warned, limits.max_connections, &shutdown).await
        else {
            break;
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
        serving.spawn(tcp, client, (held, slot));
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_GRACE, serving.graceful.shutdown())
        .await
        .is_err()
    {
        tracing::info!("answers still open {DRAIN_GRACE:?} after the stop; closing them");
    }
}

/// A connection slot: at once when one is free, else (warned once until
/// one frees) when a connection ends. `None` at shutdown.
async fn free_slot(
    slots: &Arc<Semaphore>,
    warned: &mut bool,
    max_connections: usize,
    shutdown: &Shutdown,
) -> Option<OwnedSemaphorePermit> {
    if let Ok(s) = slots.clone().try_acquire_owned() {
        *warned = false;
        return Some(s);
    }
    if !*warned {
        tracing::warn!(
            "{max_connections} connections are open (META_CORE_HTTP_MAX_CONNECTIONS); \
             new ones wait until one ends"
        );
        *warned = true;
    }
    tokio::select! {
        s = slots.clone().acquire_owned() => s.ok(),
        _ = shutdown.wait() => None,
    }
}

/// What every accepted connection is served with: hyper's HTTP/1.1
/// builder, the one router, the drain they all join, the write stall.
struct Serving {
    builder: http1::Builder,
    router: Router,
    graceful: GracefulShutdown,
    write_stall: Duration,
}

impl Serving {
    fn new(router: Router, limits: &Limits) -> Self {
        let mut builder = http1::Builder::new();
        builder
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .max_buf_size(MAX_BUF);
        let body_timeout = limits.body_timeout;
        let router = router.layer(axum::middleware::from_fn(move |req, next| {
            crate::body_progress::limit(req, next, body_timeout)
        }));
        Self {
            builder,
            router,
            graceful: GracefulShutdown::new(),
            write_stall: limits.write_stall,
        }
    }

    /// Serves `tcp` of `client` on a task of its own, which holds its
    /// client's share and the connection's slot until it ends (the share
    /// goes back first).
    fn spawn(&self, tcp: TcpStream, client: Client, hold: (Held, OwnedSemaphorePermit)) {
        let _ = tcp.set_nodelay(true);
        // The kernel too ends a connection whose sent bytes go
        // unacknowledged twice as long (a peer that vanished, or whose
        // window stayed shut), even while apid writes nothing; the write
        // stall, which logs why, comes first where apid writes.
        let stall_ms = u32::try_from(self.write_stall.as_millis() * 2).unwrap_or(u32::MAX);
        if let Err(e) = rustix::net::sockopt::set_tcp_user_timeout(&tcp, stall_ms) {
            tracing::debug!("TCP_USER_TIMEOUT not set: {e}");
        }
        let conn = Conn { client };
        let io = TokioIo::new(WriteStall::new(tcp, self.write_stall));
        let service = TowerToHyperService::new(self.router.clone().map_request(
            move |mut req: http::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(conn);
                req
            },
        ));
        let conn = self
            .graceful
            .watch(self.builder.serve_connection(io, service));
        tokio::spawn(async move {
            let _hold = hold;
            if let Err(e) = conn.await {
                tracing::debug!("connection ended: {e}");
            }
        });
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
