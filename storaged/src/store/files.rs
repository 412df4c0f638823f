//! The watcher's methods of [`Store`]: observations applied on the writer
//! thread (each in its own savepoint, queued together so they share
//! groups), the `seen:` rows read back, a reset, and the repair of
//! records whose `filePath` names no live file.

use metacore::api::storaged::{
    ObserveBody, ObserveOutcome, RepairBody, RepairDone, ResetBody, ResetDone, SeenPage,
};
use metacore::error::ApiError;

use super::Store;
use crate::engine::tx::Tx;
use crate::error::Result;
use crate::files;

impl Store {
    /// One outcome per observation, in order; a refused one carries its
    /// error and leaves the others be.
    pub async fn observe(&self, body: ObserveBody) -> Vec<ObserveOutcome> {
        let root: std::sync::Arc<str> = body.root.as_str().into();
        let ops = body
            .observations
            .into_iter()
            .map(|o| {
                let root = root.clone();
                move |tx: &mut Tx<'_>| files::observe(tx, &root, &o)
            })
            .collect();
        self.writer
            .write_all(ops)
            .await
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|e| ObserveOutcome {
                    error: Some(ApiError::from(e).to_string()),
                    ..ObserveOutcome::default()
                })
            })
            .collect()
    }

    pub async fn seen(&self, after: Option<String>, limit: u32) -> Result<SeenPage> {
        self.readers
            .read(move |c| files::seen_page(c, after.as_deref(), limit))
            .await
    }

    pub async fn reset_files(&self, body: ResetBody) -> Result<ResetDone> {
        self.writer
            .write(move |tx| files::reset(tx, &body.dirs, &body.watcher_id))
            .await
    }

    /// One page of the repair, in one write transaction.
    pub async fn repair_files(&self, body: RepairBody) -> Result<RepairDone> {
        self.writer
            .write(move |tx| files::repair(tx, body.root.as_str(), body.after))
            .await
    }
}
