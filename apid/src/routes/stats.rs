//! `GET /api/stats`: counts from storaged, plus file totals (one storaged
//! call that reads every root in one transaction) and the UDL users, from a
//! background sweep that runs at most once at a time and is reused for a
//! minute (`files` and `udlUsers` are null until the first sweep ends).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use metacore::api::storaged::{RangeQuery, StoragedClient};
use metacore::error::ApiError;
use serde::Serialize;

use crate::state::{AppState, State};

/// How long a sweep's figures are served before a new sweep starts.
const SWEEP_MAX_AGE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FileTotals {
    pub count: u64,
    pub total_size: u64,
}

#[derive(Debug, Clone, Copy)]
struct Swept {
    files: FileTotals,
    udl_users: u64,
    at: Instant,
    at_ms: u64,
}

#[derive(Debug, Default)]
struct SweepState {
    last: Option<Swept>,
    running: bool,
}

/// The single-flight sweep and its last result.
#[derive(Debug, Default)]
pub struct Sweeper(Mutex<SweepState>);

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
    let (last, sweeping) = start_sweep_if_stale(&st.0);
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

/// Returns the last sweep and whether one is running, starting one when
/// the last is missing or older than [`SWEEP_MAX_AGE`].
fn start_sweep_if_stale(st: &Arc<AppState>) -> (Option<Swept>, bool) {
    let mut s = st.sweeper.0.lock().expect("sweeper lock");
    let stale = s.last.is_none_or(|l| l.at.elapsed() >= SWEEP_MAX_AGE);
    if stale && !s.running {
        s.running = true;
        let st = st.clone();
        tokio::spawn(async move {
            let result = sweep(&st.store).await;
            let mut s = st.sweeper.0.lock().expect("sweeper lock");
            s.running = false;
            match result {
                Ok(swept) => s.last = Some(swept),
                Err(e) => tracing::warn!("stats sweep failed: {e}"),
            }
        });
    }
    (s.last, s.running)
}

async fn sweep(store: &StoragedClient) -> Result<Swept, ApiError> {
    let (totals, udl_users) = tokio::try_join!(
        async { store.totals().await.map_err(ApiError::from) },
        count_udl_users(store)
    )?;
    Ok(Swept {
        files: FileTotals {
            count: totals.files,
            total_size: totals.file_bytes,
        },
        udl_users,
        at: Instant::now(),
        at_ms: metacore::clock::unix_ms(),
    })
}

/// Distinct `<user>` segments of `udl:<user>/...` keys, skipping each
/// user's keys with one range read.
async fn count_udl_users(store: &StoragedClient) -> Result<u64, ApiError> {
    let mut users = 0;
    let mut after: Option<String> = None;
    loop {
        let q = RangeQuery {
            start: Some(after.clone().unwrap_or_else(|| "udl:".into())),
            end: Some("udl;".into()),
            keys_only: true,
            limit: Some(1),
            ..Default::default()
        };
        let page = store.kv_range(&q).await?;
        let Some(row) = page.rows.into_iter().next() else {
            return Ok(users);
        };
        users += 1;
        let user_end = match row.key["udl:".len()..].split_once('/') {
            // Everything of this user sorts before "<user>0" ('0' follows '/').
            Some((user, _)) => format!("udl:{user}0"),
            None => format!("{}\u{0}", row.key),
        };
        after = Some(user_end);
    }
}
