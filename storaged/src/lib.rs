//! storaged: the only process that opens meta-core's SQLite file. It keeps
//! the records, the CID reverse index, the counters and the event streams,
//! and serves them on `$META_CORE_RUN_DIR/storaged.sock`.
//!
//! `run` is what the binary calls and what tests call: open the store (lock,
//! schema gate, counters), bind the socket, serve until shutdown, then drain
//! and commit queued writes and checkpoint the WAL.
//!
//! ```text
//! api        the socket's router, one file per area; wire types are metacore's
//! store      Store: the methods the socket calls, opening, closing, figures
//! records    a record's flat fields, the root index, aliases and duplicates
//! kv         raw keys for the KV browser and other services' rows
//! files      what the watcher saw, applied with its event in one transaction
//! bulk       operations over many records inside the writer
//! cid_index  cid:<cid> -> <rid>, in step with each record's cids
//! streams    the event streams as rows, their marks and trims
//! derived    the search index and schema counters each group keeps up to date
//! search     POST /search: the index, tokens and the original's matchers
//! schema     the original's value-type schema and its counters
//! backup     online backup of the live database
//! metrics    GET /metrics of the socket
//! error      StoreError and GroupFailure, and what a client is told
//! engine     SQLite below the domain: lock, writer and groups, readers, space
//! ```

pub(crate) mod api;
pub(crate) mod backup;
pub(crate) mod bulk;
pub(crate) mod cid_index;
pub(crate) mod derived;
pub(crate) mod engine;
pub(crate) mod error;
pub(crate) mod files;
pub(crate) mod kv;
pub(crate) mod metrics;
pub(crate) mod records;
pub(crate) mod schema;
pub(crate) mod search;
pub(crate) mod store;
pub(crate) mod streams;

use std::sync::Arc;

use metacore::Config;
use metacore::layout::Daemon;
use metacore::shutdown::Shutdown;

pub use bulk::{ImportGroup, WIPE_CHUNK};
pub use error::StoreError;
pub use records::PageStart;
pub use store::{Options, Store};
pub use streams::{Heads, head_of};

/// Why storaged stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot open the store")]
    Open(#[source] StoreError),
    #[error("cannot serve the socket")]
    Bind(#[source] metacore::socket::server::BindError),
    #[error("the socket server failed")]
    Serve(#[source] std::io::Error),
    /// A fault of the database's files (`engine::faults`): the next start
    /// recovers from what is on the disk.
    #[error("stopped for a fault of the database's files, to be restarted: {0}")]
    Fault(String),
}

/// Opens the store and serves it until `shutdown` fires.
pub async fn run(config: Config, shutdown: Shutdown) -> Result<(), RunError> {
    let layout = config.layout();
    let opts = Options::from_config(&config);
    let store = tokio::task::spawn_blocking(move || Store::open(&opts))
        .await
        .expect("opening the store does not panic")
        .map_err(RunError::Open)?;
    let socket = layout.socket(Daemon::Storaged);
    let listener = metacore::socket::server::bind(&socket)
        .await
        .map_err(RunError::Bind)?;
    tracing::info!(db = %layout.db.display(), socket = %socket.display(), "storaged ready");
    metacore::daemon::notify_ready();
    // Stop serving on the signal, or when a fault of the files needs a
    // restart (`engine::faults`).
    let (stop, serving) = metacore::shutdown::channel();
    let state = Arc::new(api::AppState {
        store,
        backups: backup::Backups::new(layout.db.clone(), layout.run_dir.clone()),
        shutdown: serving.clone(),
    });
    let watched = state.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = shutdown.wait() => {}
            _ = watched.store.restart_needed() => {}
        }
        stop.fire();
    });
    let checked = state.clone();
    tokio::spawn(async move { checked.store.check_pages().await });
    let served =
        metacore::socket::server::serve(listener, &socket, api::router(state.clone()), serving)
            .await;
    tracing::info!("socket closed; committing queued writes");
    state.store.close().await;
    if let Some(fault) = state.store.fault().filter(|f| f.freezes_files()) {
        return Err(RunError::Fault(fault.reason()));
    }
    served.map_err(RunError::Serve)
}
