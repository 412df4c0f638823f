//! apid: meta-core's public HTTP API. It serves the endpoint catalogue of
//! the contract on `META_CORE_HTTP_HOST:META_CORE_HTTP_PORT` and reaches
//! the store only through storaged's socket, so it holds no data of its
//! own: while storaged is away it answers 503 `storage_unavailable` with
//! `Retry-After`, and it works again as soon as storaged is back.
//!
//! `run` is what the binary calls: bind the public port and apid's own
//! socket (`/health`, `/status` for the supervisor), serve until shutdown.
//!
//! Imports go one way, from the top of this map down: the handlers take
//! the services in `state` (or a part of it, by `FromRef`); the services
//! and the helpers below them import no handler.
//!
//! ```text
//! serve          the accept loop: one router, HTTP/1.1, per-client connections, the drain
//! routes         the public router, one module per surface, and apid's socket router
//! events         the SSE streams: handlers over the hubs service (events/hubs.rs)
//! dav            WebDAV at /webdav: the checks, then dav-server over FILES_PATH
//! cors           CORS on every answer, preflights, cross-site non-JSON POSTs refused
//! http           the admin token on admin routes, body limits, query choices
//! state          AppState: config, the clients, and the services every handler shares
//! sweep          the /api/stats background sweep (file totals, UDL users)
//! registry       the service registry: meta-core's file, listings, the cleaner
//! metrics        apid's request metrics and the /metrics registry
//! send_file      a file's bytes over HTTP (ranges, validators, content type)
//! confine        every path kept inside FILES_PATH and out of meta-core's own folders
//! file_path      a record's filePath: the field, on disk, as shown
//! nested         the nested view of a record, and its inverse
//! conn           what a request knows of its connection: its client, per-client budgets
//! body_progress  a request body must keep coming
//! paths          the public paths the layers treat apart (/webdav, the import)
//! methods        every request method some route answers
//! sys            the one unsafe call: a socket's unacknowledged bytes
//! ```

pub(crate) mod body_progress;
pub(crate) mod confine;
pub(crate) mod conn;
pub(crate) mod cors;
pub(crate) mod dav;
pub mod events;
pub(crate) mod file_path;
pub(crate) mod http;
pub(crate) mod methods;
pub(crate) mod metrics;
pub mod nested;
pub(crate) mod paths;
pub(crate) mod registry;
pub mod routes;
pub(crate) mod send_file;
pub(crate) mod serve;
pub(crate) mod state;
pub(crate) mod sweep;
pub(crate) mod sys;
pub use metacore::urls;

use std::sync::Arc;

use metacore::Config;
use metacore::layout::Daemon;
use metacore::shutdown::Shutdown;

use crate::state::AppState;

/// Why apid stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot listen on {addr}")]
    Listen {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot serve the socket")]
    Bind(#[source] metacore::socket::server::BindError),
    #[error("the HTTP server failed")]
    Serve(#[source] std::io::Error),
    #[error("the admin routes cannot be guarded")]
    AdminToken(#[source] metacore::admin::TokenError),
}

/// Serves the public API and apid's socket until `shutdown` fires.
pub async fn run(config: Config, shutdown: Shutdown) -> Result<(), RunError> {
    let layout = config.layout();
    let (admin, source) = metacore::admin::resolve(&config).map_err(RunError::AdminToken)?;
    match admin {
        metacore::admin::AdminAccess::Open => tracing::warn!("{source}"),
        metacore::admin::AdminAccess::Token(_) => tracing::info!("{source}"),
    }
    let mut listeners = Vec::new();
    for port in std::iter::once(config.http_port).chain(config.http_extra_ports.iter().copied()) {
        let addr = format!("{}:{port}", config.http_host);
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .map_err(|source| RunError::Listen { addr, source })?;
        listeners.push(listener);
    }
    let addr = format!("{}:{}", config.http_host, config.http_port);
    let extra_ports = config.http_extra_ports.clone();
    let socket = layout.socket(Daemon::Apid);
    let unix = metacore::socket::server::bind(&socket)
        .await
        .map_err(RunError::Bind)?;
    let state = Arc::new(AppState::new(config, admin, shutdown.clone()));
    state.events.spawn();
    let registry = tokio::spawn(state.registry.clone().run(shutdown.clone()));
    match state.store.handshake().await {
        Ok(h) => tracing::info!(storaged = %h.version, "storaged answers"),
        Err(e) => tracing::warn!("storaged does not answer yet ({e}); answering 503 until it does"),
    }
    tracing::info!(%addr, also = ?extra_ports, socket = %socket.display(), "apid ready");
    metacore::daemon::notify_ready();
    let internal = metacore::socket::server::serve(
        unix,
        &socket,
        routes::internal(state.clone()),
        shutdown.clone(),
    );
    let limits = serve::Limits::of(&state.config);
    let public = serve::serve(
        serve::Listeners::new(listeners),
        routes::public(state),
        limits,
        shutdown.clone(),
    );
    let ((), internal) = tokio::join!(public, internal);
    // The registry file goes before the process does.
    let _ = registry.await;
    internal.map_err(RunError::Serve)
}
