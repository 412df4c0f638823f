//! The public router (one module per surface) and apid's socket router.

pub mod bootstrap;
pub mod listing;
pub mod meta;
pub mod snapshot;
pub mod stats;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use metacore::socket::body::{no_method, no_route};

use crate::http::{MAX_BODY, MAX_PROPERTY_BODY, cors};
use crate::state::AppState;

/// The public API on `META_CORE_HTTP_HOST:META_CORE_HTTP_PORT`.
pub fn public(state: Arc<AppState>) -> Router {
    let property = get(meta::get_property)
        .put(meta::put_property)
        .delete(meta::delete_property)
        .layer(DefaultBodyLimit::max(MAX_PROPERTY_BODY));
    Router::new()
        // Bootstrap and discovery.
        .route("/health", get(bootstrap::health))
        .route("/status", get(bootstrap::status))
        .route("/leader", get(bootstrap::leader))
        .route("/urls", get(bootstrap::urls))
        .route("/api/stats", get(stats::api_stats))
        // Metadata by root or CID.
        .route("/meta", get(meta::list))
        .route("/meta/{hash}", get(meta::get).put(meta::put).patch(meta::patch).delete(meta::delete))
        .route("/meta/{hash}/{*key}", property)
        .route(
            "/meta/{hash}/_add/{*key}",
            post(meta::add_to_set).layer(DefaultBodyLimit::max(MAX_PROPERTY_BODY)),
        )
        // CID-addressed.
        .route("/api/meta/{cid}", get(meta::by_cid))
        .route("/data/{hash}", get(meta::head_data).head(meta::head_data))
        .route("/data/{hash}/path", get(meta::data_path))
        .merge(snapshot::routes(state.clone()))
        .fallback(no_route)
        .method_not_allowed_fallback(no_method)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn(cors))
        .with_state(state)
}

/// apid's socket: what the supervisor asks.
pub fn internal(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/health", get(bootstrap::socket_health))
        .route("/status", get(bootstrap::socket_status))
        .fallback(no_route)
        .method_not_allowed_fallback(no_method)
        .with_state(state)
}
