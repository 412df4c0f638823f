//! storaged's socket API: the router and its shared state. One file per
//! area (`records`, `kv`, `streams`, `status`, `backup`), each handler a plain
//! function from state and request to response. Wire types are in
//! `metacore::api::storaged`.

mod backup;
mod files;
mod kv;
mod records;
mod search;
mod status;
mod streams;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use metacore::api::storaged::MAX_BODY;
use metacore::shutdown::Shutdown;
use metacore::socket::body::{no_method, no_route};

use crate::store::Store;

/// What every handler gets.
#[derive(Debug)]
pub(crate) struct AppState {
    pub store: Store,
    /// The online backup, one at a time (`POST /backup`).
    pub backups: crate::backup::Backups,
    /// Ends long-lived tails when storaged stops.
    pub shutdown: Shutdown,
}

pub(crate) type State = axum::extract::State<Arc<AppState>>;

/// The router of storaged's socket.
pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/health", get(status::health))
        .route("/status", get(status::status))
        .route("/stats", get(status::stats))
        .route("/metrics", get(status::metrics))
        .route("/backup", post(backup::backup))
        .route("/resolve/{hash}", get(records::resolve))
        .route("/mint", post(records::mint))
        .route("/records", get(records::list))
        .route("/records/fields", get(records::fields_page))
        .route("/records/totals", get(records::totals))
        .route("/records/import", post(records::import))
        .route("/records/wipe", post(records::wipe))
        .route(
            "/records/{hash}",
            get(records::get)
                .put(records::replace)
                .patch(records::merge)
                .delete(records::delete),
        )
        .route("/records/{hash}/document", get(records::document))
        .route(
            "/records/{hash}/fields/{*field}",
            get(records::get_field)
                .put(records::set_field)
                .delete(records::delete_field),
        )
        .route("/records/{hash}/set-add/{*field}", post(records::set_add))
        .route("/records/{hash}/aliases", post(records::add_alias))
        .route("/records/{hash}/duplicates", post(records::add_duplicate))
        .route("/files/observe", post(files::observe))
        .route("/files/seen", get(files::seen))
        .route("/files/reset", post(files::reset))
        .route("/files/repair", post(files::repair))
        .route("/kv/value", get(kv::get).put(kv::put).delete(kv::delete))
        .route("/kv/range", get(kv::range))
        .route("/kv/tree", get(kv::tree))
        .route("/search", post(search::search))
        .route("/schema", get(search::schema))
        .route("/schema/rescan", post(search::rescan_schema))
        .route(
            "/streams/{stream}/entries",
            get(streams::entries).post(streams::append),
        )
        .route("/streams/{stream}/info", get(streams::info))
        .route("/streams/{stream}/bounds", get(streams::bounds))
        .route("/streams/{stream}/tail", get(streams::tail))
        .fallback(no_route)
        .method_not_allowed_fallback(no_method)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn(metacore::socket::body::budget))
        .with_state(state)
}

/// A page size: default `default`, at most `MAX_PAGE`, at least 1.
fn page(limit: Option<u32>, default: u32) -> u32 {
    limit
        .unwrap_or(default)
        .clamp(1, metacore::api::storaged::MAX_PAGE)
}
