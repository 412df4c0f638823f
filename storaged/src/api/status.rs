//! `/health`, `/status`, `/stats` and `/metrics`.

use axum::Json;
use metacore::api::storaged::{Stats, StoragedStatus};
use metacore::error::ApiError;
use metacore::socket::Health;

use super::State;
use crate::engine::schema::SCHEMA_VERSION;

pub(super) async fn health(st: State) -> Json<Health> {
    let daemon = metacore::layout::Daemon::Storaged;
    if let Some(fault) = st.store.fault() {
        return Json(Health::degraded(daemon, fault.reason()));
    }
    if st.store.volume_full() {
        return Json(Health::degraded(
            daemon,
            "the database's volume is full: writes fail until space is freed",
        ));
    }
    Json(Health::ok(daemon))
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

/// The writer's figures, the files' sizes and the roots as OpenMetrics text
/// ([`crate::metrics`]).
pub(super) async fn metrics(st: State) -> Result<axum::response::Response, ApiError> {
    let store = &st.store;
    let (db_bytes, wal_bytes) = store.file_bytes();
    let figures = crate::metrics::Figures {
        writer: store.writer_stats(),
        commit_seconds: store.commit_seconds(),
        roots: store.roots().await?,
        db_bytes,
        wal_bytes,
        readers: store.readers(),
        disk_full: store.volume_full(),
    };
    Ok(metacore::metrics::answer(crate::metrics::render(figures)))
}
