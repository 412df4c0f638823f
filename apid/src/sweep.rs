//! The background sweep behind `GET /api/stats`: file totals (one
//! storaged call that reads every root in one transaction) and the UDL
//! users, run at most once at a time and reused for a minute, so a busy
//! stats page costs storaged one sweep a minute whatever the callers.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use metacore::api::storaged::{RangeQuery, StoragedClient};
use metacore::error::ApiError;
use metacore::sync::Locked;
use serde::Serialize;

/// How long a sweep's figures are served before a new sweep starts.
const SWEEP_MAX_AGE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FileTotals {
    pub count: u64,
    pub total_size: u64,
}

/// What one sweep found, and when it ended.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Swept {
    pub files: FileTotals,
    pub udl_users: u64,
    at: Instant,
    pub at_ms: u64,
}

#[derive(Debug, Default)]
struct SweepState {
    last: Option<Swept>,
    running: bool,
}

/// The single-flight sweep and its last result.
#[derive(Debug)]
pub(crate) struct Sweeper {
    store: StoragedClient,
    /// The last sweep and whether one runs: shared with the running
    /// sweep's task, which records its result here.
    state: Arc<Mutex<SweepState>>,
}

impl Sweeper {
    pub(crate) fn new(store: StoragedClient) -> Self {
        Self {
            store,
            state: Arc::default(),
        }
    }

    /// Returns the last sweep and whether one is running, starting one
    /// when the last is missing or older than [`SWEEP_MAX_AGE`].
    pub(crate) fn latest(&self) -> (Option<Swept>, bool) {
        let mut s = self.state.locked();
        let stale = s.last.is_none_or(|l| l.at.elapsed() >= SWEEP_MAX_AGE);
        if stale && !s.running {
            s.running = true;
            let (store, state) = (self.store.clone(), self.state.clone());
            tokio::spawn(async move {
                let result = sweep(&store).await;
                let mut s = state.locked();
                s.running = false;
                match result {
                    Ok(swept) => s.last = Some(swept),
                    Err(e) => tracing::warn!("stats sweep failed: {e}"),
                }
            });
        }
        (s.last, s.running)
    }
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
