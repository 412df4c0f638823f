//! Snapshots: `GET /api/snapshot/export` streams every record as a ZIP
//! ([`export`]), `POST /api/snapshot/import` reads one back, replace or
//! merge ([`import`]), `POST /api/snapshot/wipe?scope=metadata` deletes
//! every record ([`wipe`]); [`archive`] holds the format's rules, and
//! [`checked`] how an entry is held to its header (CRC-32, size). The
//! functions under the routes take a [`metacore::api::storaged::StoragedClient`]
//! and no axum type, so they can be driven directly.

mod archive;
mod checked;
mod export;
mod import;
mod wipe;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};

pub use archive::{
    Includes, MAX_RECORD_BYTES, Manifest, PLUGIN_PREFIX, SCHEMA_VERSION, check_manifest, confined,
};
pub use export::{ChannelWriter, ExportOptions, export_roots, export_to};
pub use import::{
    FileReport, ImportOptions, ImportReport, MAX_IMPORT_BYTES, PluginReport, SkippedFile,
    import_file, import_from, spool,
};
pub use wipe::{WipeResult, wipe};

use crate::http::admin_only;
use crate::state::AppState;

/// The snapshot routes; import and wipe are admin routes.
pub fn routes(state: Arc<AppState>) -> Router<Arc<AppState>> {
    let admin = Router::new()
        // The 2 GiB limit is enforced while spooling, not by axum.
        .route(
            "/api/snapshot/import",
            post(import::import).layer(DefaultBodyLimit::disable()),
        )
        .route("/api/snapshot/wipe", post(wipe::wipe_route))
        .route_layer(from_fn_with_state(state, admin_only));
    Router::new()
        .route("/api/snapshot/export", get(export::export))
        .merge(admin)
}
