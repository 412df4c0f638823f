//! The repair a rescan asks for: storaged hands each record whose
//! `filePath` names no live file to a live duplicate of it
//! (`POST /files/repair`, a page of records a call).
//!
//! It runs once the watcher has settled (nothing pending, gone, walked or
//! being committed), so the `seen:` rows it judges by hold what the rescan
//! found; until then it waits, and `/status` shows it `due`. One page a
//! turn of the engine's loop, so events are taken between pages. Asked
//! again during a pass, another pass follows it. Running it twice changes
//! nothing the first did not.

use super::*;

/// How long the repair waits after storaged did not take a page.
const RETRY: Duration = Duration::from_secs(1);

/// Where the repair stands.
#[derive(Debug)]
pub(super) struct Repair {
    /// A rescan asked for a repair that has not run to its end.
    due: bool,
    /// Asked again during the pass under way: another follows it.
    again: bool,
    /// The pass under way goes on after this record.
    cursor: Option<Rid>,
    /// Not before then (storaged did not take the last page).
    not_before: Instant,
}

impl Default for Repair {
    fn default() -> Self {
        Self {
            due: false,
            again: false,
            cursor: None,
            not_before: Instant::now(),
        }
    }
}

impl Engine {
    /// A rescan's findings are taken in: a repair is due once they are
    /// committed.
    pub(super) fn request_repair(&mut self) {
        if self.repair.cursor.is_some() {
            self.repair.again = true;
        }
        self.repair.due = true;
        self.stats.repair_due.store(true, Ordering::Relaxed);
    }

    /// Nothing pending, gone, walked or being committed: what the walks
    /// found is in the store.
    fn settled(&self) -> bool {
        self.debounce.is_empty()
            && self.gone.since.is_empty()
            && self.inflight.is_none()
            && self.walks.is_empty()
            && self.dirty.is_empty()
    }

    /// When the next page of a due repair may run, if the watcher has
    /// settled.
    pub(super) fn repair_wake(&self) -> Option<Instant> {
        (self.repair.due && self.settled()).then_some(self.repair.not_before)
    }

    /// One page of a due repair, if the watcher has settled.
    pub(super) async fn repair_step(&mut self) {
        if !self.repair.due || !self.settled() || Instant::now() < self.repair.not_before {
            return;
        }
        let body = RepairBody {
            root: self.root.clone(),
            after: self.repair.cursor,
        };
        match self.store.repair_files(&body).await {
            Ok(done) => {
                if done.promoted > 0 {
                    tracing::info!(
                        records = done.promoted,
                        "records whose filePath named no live file are on a live duplicate now"
                    );
                }
                self.stats
                    .repair_promoted
                    .fetch_add(done.promoted, Ordering::Relaxed);
                match done.next {
                    Some(next) => self.repair.cursor = Some(next),
                    None => {
                        self.repair.cursor = None;
                        self.repair.due = std::mem::take(&mut self.repair.again);
                        self.stats.repair_passes.fetch_add(1, Ordering::Relaxed);
                        self.stats
                            .repair_due
                            .store(self.repair.due, Ordering::Relaxed);
                    }
                }
            }
            // Refused: asking again will not help (a storaged of another
            // version?). The next rescan asks anew.
            Err(ClientError::Api(e)) if e.code.status().is_client_error() => {
                tracing::error!("storaged refused the repair: {e}");
                self.repair = Repair::default();
                self.stats.repair_due.store(false, Ordering::Relaxed);
            }
            Err(e) => {
                self.stats.store_waits.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("storaged did not take the repair, trying again: {e}");
                self.repair.not_before = Instant::now() + RETRY;
            }
        }
    }
}
