//! The public router (one module per surface) and apid's socket router.

pub(crate) mod bootstrap;
pub(crate) mod daemons;
pub(crate) mod discovery;
pub(crate) mod editor;
pub(crate) mod files;
pub(crate) mod kv;
pub(crate) mod listing;
pub(crate) mod meta;
pub(crate) mod metrics;
pub(crate) mod mounts;
pub(crate) mod openapi;
pub(crate) mod relay;
pub(crate) mod search;
pub mod snapshot;
pub(crate) mod stats;
pub(crate) mod ui;
pub(crate) mod watchers;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware::from_fn_with_state;
use axum::routing::{any, get, post, put};
use metacore::socket::body::{no_method, no_route};

use crate::http::{MAX_BODY, MAX_PROPERTY_BODY, admin_only};
use crate::paths::{DAV_PREFIX, SNAPSHOT_IMPORT};
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
        .route("/metrics", get(metrics::public))
        .route("/api/stats", get(stats::api_stats))
        .route("/neighbors", get(discovery::neighbors))
        .route("/api/neighbors", get(discovery::neighbors))
        .route("/api/services", get(discovery::services))
        // Metadata by root or CID.
        .route("/meta", get(meta::list))
        .route(
            "/meta/{hash}",
            get(meta::get)
                .put(meta::put)
                .patch(meta::patch)
                .delete(meta::delete),
        )
        .route("/meta/{hash}/{*key}", property)
        .route(
            "/meta/{hash}/_add/{*key}",
            post(meta::add_to_set).layer(DefaultBodyLimit::max(MAX_PROPERTY_BODY)),
        )
        // CID-addressed.
        .route("/api/meta/{cid}", get(meta::by_cid))
        .route("/data/{hash}", get(meta::head_data).head(meta::head_data))
        .route("/data/{hash}/path", get(meta::data_path))
        .route("/file/{cid}", get(files::bytes))
        .route("/file/cid", post(files::cid_of_path))
        .route("/api/file/{cid}/info", get(files::info))
        // WebDAV over FILES_PATH.
        .route("/webdav", any(crate::dav::serve))
        .route("/webdav/", any(crate::dav::serve))
        .route("/webdav/{*rest}", any(crate::dav::serve))
        // Editor.
        .route("/api/metadata/hash-ids", get(meta::list))
        .route("/api/files/tuples", get(editor::tuples))
        .route("/api/metadata/list", get(editor::list))
        .route("/api/metadata/search", post(search::search))
        .route("/api/schema", get(search::schema))
        .route(
            "/api/metadata/{hash_id}",
            get(meta::get).put(editor::put).delete(editor::delete),
        )
        .route(
            "/api/metadata/{hash_id}/property",
            get(editor::get_property).put(editor::put_property),
        )
        // KV browser (reads).
        .route("/api/kv/info", get(kv::info))
        .route("/api/kv/keys", get(kv::keys))
        .route("/api/kv/tree", get(kv::tree))
        .route("/api/kv/search", get(kv::search))
        .route("/api/kv/find", get(kv::find))
        .route("/api/kv/key/{*key}", get(kv::get_key))
        .route("/api/kv/value", get(kv::get_value))
        .route("/api/openapi.json", get(openapi::document))
        // Event streams (SSE).
        .route("/api/events/meta", get(crate::events::meta))
        .route("/api/events/files", get(crate::events::files))
        // The web console.
        .route("/", get(ui::root))
        .route("/ui", get(ui::bare))
        .route("/ui/", get(ui::index))
        .route("/ui/{file}", get(ui::file))
        .merge(admin(state.clone()))
        .merge(snapshot::routes(state.clone()))
        .fallback(no_route)
        .method_not_allowed_fallback(no_method)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn(buffered_bodies))
        .layer(from_fn_with_state(state.clone(), crate::cors::cors))
        .layer(from_fn_with_state(
            state.requests.clone(),
            crate::metrics::track,
        ))
        .with_state(state)
}

/// The body budget ([`metacore::socket::body::budget`]) for every route
/// that buffers its body; WebDAV uploads and snapshot import stream theirs
/// (to the disk), so they hold none in memory and are bounded on their own.
async fn buffered_bodies(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let path = req.uri().path();
    if path.starts_with(DAV_PREFIX) || path == SNAPSHOT_IMPORT {
        return next.run(req).await;
    }
    metacore::socket::body::budget(req, next).await
}

/// The admin routes, always behind the admin token unless the operator
/// opened them (`metacore::admin`): the writes, the reads of the mounts and
/// watchers, and the console's daemon buttons and log tails. `GET /api/kv/value` is a read and stays open (axum
/// merges the methods of one path across the two routers).
fn admin(state: Arc<AppState>) -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/metadata/batch", post(editor::batch))
        .route("/api/metadata/clear", post(editor::clear))
        .route("/api/schema/rescan", post(search::rescan))
        .route("/api/kv/value", put(kv::put_value).delete(kv::delete_value))
        // The console's buttons and log tails.
        .route("/api/daemons/{daemon}/restart", post(daemons::restart))
        .route("/api/tree/stop", post(daemons::stop_tree))
        .route("/api/logs/{daemon}", get(crate::events::logs))
        .merge(watchers::routes())
        .merge(mounts::routes())
        .route_layer(from_fn_with_state(state, admin_only))
}

/// apid's socket: what the supervisor asks.
pub fn internal(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/health", get(bootstrap::socket_health))
        .route("/status", get(bootstrap::socket_status))
        .route("/metrics", get(metrics::internal))
        .fallback(no_route)
        .method_not_allowed_fallback(no_method)
        .with_state(state)
}
