//! `/health`, `/status` and `/stats`.

use axum::Json;
use metacore::api::storaged::{Stats, StoragedStatus};
use metacore::error::ApiError;
use metacore::socket::Health;

use super::State;
use crate::engine::schema::SCHEMA_VERSION;

pub(super) async fn health() -> Json<Health> {
    Json(Health::ok(metacore::layout::Daemon::Storaged))
}

pub(super) async fn status(st: State) -> Result<Json<StoragedStatus>, ApiError> {
    let store = &st.store;
    Ok(Json(StoragedStatus {
        daemon: "storaged".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        pid: std::process::id(),
        uptime_secs: store.uptime().as_secs(),
        db_path: store.db_path().display().to_string(),
        schema_version: SCHEMA_VERSION.into(),
        readers: store.readers(),
        roots: store.roots().await?,
        db_bytes: store.db_bytes(),
        writer: store.writer_stats(),
    }))
}

pub(super) async fn stats(st: State) -> Result<Json<Stats>, ApiError> {
    Ok(Json(st.store.stats().await?))
}
