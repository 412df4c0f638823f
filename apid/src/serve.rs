//! The public listener's accept loop: one HTTP/1.1 connection per task,
//! served by hyper directly, drained on shutdown.
//!
//! `axum::serve` rebuilt the router's route table for every connection and
//! went through hyper-util's protocol detection, about 20 KiB a connection
//! that lived as long as it did: with a thousand SSE followers, most of
//! apid's memory. Here every connection shares one router (an `Arc`
//! clone) and speaks HTTP/1.1 only, the one protocol apid offers.

use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use metacore::shutdown::Shutdown;
use tokio::net::TcpListener;

/// Pause after an accept error (out of descriptors, ...), so a full table
/// is not spun on.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Serves `router` on `listener` until `shutdown`, then waits for the open
/// connections to finish their answers (event streams end on shutdown).
pub(crate) async fn serve(listener: TcpListener, router: Router, shutdown: Shutdown) {
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    // The smallest read buffer hyper allows: requests are small, bodies
    // are streamed, and each connection keeps its buffer while it lives.
    builder.max_buf_size(8192);
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.wait() => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                tracing::warn!("accept failed: {e}; retrying shortly");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let conn = graceful.watch(builder.serve_connection(TokioIo::new(tcp), service));
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
