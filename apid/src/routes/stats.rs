//! `GET /api/stats`: counts from storaged, plus the file totals and the
//! UDL users of the background sweep ([`crate::sweep`]; `files` and
//! `udlUsers` are null until the first sweep ends).

use axum::Json;
use metacore::error::ApiError;
use serde::Serialize;

use crate::state::State;
use crate::sweep::FileTotals;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ApiStats {
    pub records: u64,
    pub redis_keys: u64,
    /// Bytes of the database file (the original's Redis memory figure).
    pub redis_memory: u64,
    pub identities: u64,
    pub files: Option<FileTotals>,
    pub udl_users: Option<u64>,
    pub swept_at: u64,
    pub sweeping: bool,
}

pub(super) async fn api_stats(st: State) -> Result<Json<ApiStats>, ApiError> {
    let stats = st.store.stats().await?;
    let (last, sweeping) = st.sweeper.latest();
    Ok(Json(ApiStats {
        records: stats.roots,
        redis_keys: stats.keys,
        redis_memory: stats.db_bytes,
        identities: 0,
        files: last.map(|s| s.files),
        udl_users: last.map(|s| s.udl_users),
        swept_at: last.map(|s| s.at_ms).unwrap_or(0),
        sweeping,
    }))
}
