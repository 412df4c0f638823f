//! The repair a rescan asks for: storaged hands each record whose
//! `filePath` names no live file to a live duplicate of it
//! (`POST /files/repair`, a page of records a call).
//!
//! It runs once the watcher has settled (nothing pending, gone, walked or
//! being committed), so the `seen:` rows it judges by hold what the rescan
//! found; until then it waits, and `/status` shows it `due`. A tree with
//! steady activity (a downloader writing) never settles, so the wait is
//! bounded: [`BOUND_QUIETS`] × `DEBOUNCE_MS` after it was asked for, the
//! repair runs as soon as nothing pending or gone is due. Whatever the
//! rescan found was due by then (a file at most `DEBOUNCE_MS` after the
//! walk took it in, a vanished one as long after it was missed), so what is
//! still pending is what changed since (what the events saw, which the
//! repair need not wait for); the batch being committed is waited for
//! first. The repair is idempotent and each page is judged in storaged's
//! transaction, so a page that runs while files still come and go hands
//! over nothing that is not stale at that moment.
//!
//! One page a turn of the engine's loop, so events are taken between
//! pages. Asked again during a pass, another pass follows it. Running it
//! twice changes nothing the first did not.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use metacore::api::storaged::RepairBody;
use metacore::rid::Rid;
use metacore::socket::client::ClientError;

use super::Engine;

/// How long the repair waits after storaged did not take a page.
const RETRY: Duration = Duration::from_secs(1);

/// A due repair waits this many `DEBOUNCE_MS` at most for the watcher to
/// settle: one for what the rescan found to be due, one to spare.
pub(super) const BOUND_QUIETS: u32 = 2;

/// Where the repair stands.
#[derive(Debug)]
pub(super) struct Repair {
    /// When a rescan asked for the repair that has not run to its end
    /// (the first rescan, when several did): `None` when none is due.
    asked: Option<Instant>,
    /// Asked again during the pass under way: another follows it, asked
    /// then.
    again: Option<Instant>,
    /// The pass under way goes on after this record.
    cursor: Option<Rid>,
    /// Not before then (storaged did not take the last page).
    not_before: Instant,
}

impl Default for Repair {
    fn default() -> Self {
        Self {
            asked: None,
            again: None,
            cursor: None,
            not_before: Instant::now(),
        }
    }
}

/// What the repair's timing depends on, as the engine is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Watching {
    /// Nothing pending, gone, walked or being committed: what the walks
    /// found is in the store.
    pub(super) settled: bool,
    /// A pending file or a vanished one is due now: what a rescan found
    /// may still be among them.
    pub(super) backlog: bool,
}

impl Repair {
    /// A rescan's findings are taken in at `now`.
    fn ask(&mut self, now: Instant) {
        if self.cursor.is_some() {
            self.again.get_or_insert(now);
        } else {
            self.asked.get_or_insert(now);
        }
    }

    fn is_due(&self) -> bool {
        self.asked.is_some()
    }

    /// When the next page of a due repair may run: once the watcher has
    /// settled, or `bound` after the repair was asked for once nothing is
    /// due (see the module's words); never before `not_before`. `None`:
    /// none is due, or the backlog must be taken in first.
    pub(super) fn next_run(&self, now: Watching, bound: Duration) -> Option<Instant> {
        let asked = self.asked?;
        if now.settled {
            return Some(self.not_before);
        }
        if now.backlog {
            return None;
        }
        Some(self.not_before.max(asked + bound))
    }

    /// A pass ran to its end: the one asked for meanwhile is due next.
    fn passed(&mut self) {
        self.cursor = None;
        self.asked = self.again.take();
    }
}

impl Engine {
    /// A rescan's findings are taken in: a repair is due once they are
    /// committed.
    pub(super) fn request_repair(&mut self) {
        self.repair.ask(Instant::now());
        self.links.stats.repair_due.store(true, Ordering::Relaxed);
    }

    /// How the watcher stands, for the repair (only counted when one is
    /// due: it looks at every pending path).
    fn watching(&self, now: Instant) -> Watching {
        let settled = self.knows.debounce.is_empty()
            && self.knows.gone.since.is_empty()
            && self.batch.inflight.is_none()
            && self.walks.under_way.is_empty()
            && self.batch.dirty.is_empty();
        let due = |t: Option<Instant>| t.is_some_and(|t| t <= now);
        Watching {
            settled,
            backlog: !settled
                && (due(self.knows.debounce.next_due())
                    || due(self.knows.gone.next_due(self.settings.quiet))),
        }
    }

    /// How long a due repair waits for the watcher to settle.
    fn repair_bound(&self) -> Duration {
        self.settings.quiet * BOUND_QUIETS
    }

    /// When the next page of a due repair may run.
    pub(super) fn repair_wake(&self) -> Option<Instant> {
        if !self.repair.is_due() {
            return None;
        }
        let now = Instant::now();
        self.repair
            .next_run(self.watching(now), self.repair_bound())
    }

    /// One page of a due repair, when it may run.
    pub(super) async fn repair_step(&mut self) {
        if !self.repair.is_due() {
            return;
        }
        let now = Instant::now();
        let watching = self.watching(now);
        let may = self.repair.next_run(watching, self.repair_bound());
        if may.is_none_or(|t| now < t) {
            return;
        }
        if !watching.settled {
            if self.repair.cursor.is_none() {
                tracing::info!(
                    pending = self.knows.debounce.len(),
                    "the tree has not settled since the rescan: repairing stale filePaths now"
                );
            }
            // The batch under way may hold the last of what the rescan
            // found: it is committed before a page is judged.
            if !self.finish_inflight().await {
                return;
            }
        }
        let body = RepairBody {
            root: self.root.clone(),
            after: self.repair.cursor,
        };
        match self.links.store.repair_files(&body).await {
            Ok(done) => {
                if done.promoted > 0 {
                    tracing::info!(
                        records = done.promoted,
                        "records whose filePath named no live file are on a live duplicate now"
                    );
                }
                self.links
                    .stats
                    .repair_promoted
                    .fetch_add(done.promoted, Ordering::Relaxed);
                match done.next {
                    Some(next) => self.repair.cursor = Some(next),
                    None => {
                        self.repair.passed();
                        self.links
                            .stats
                            .repair_passes
                            .fetch_add(1, Ordering::Relaxed);
                        self.links
                            .stats
                            .repair_due
                            .store(self.repair.is_due(), Ordering::Relaxed);
                    }
                }
            }
            // Refused: asking again will not help (a storaged of another
            // version?). The next rescan asks anew.
            Err(ClientError::Api(e)) if e.code.status().is_client_error() => {
                tracing::error!("storaged refused the repair: {e}");
                self.repair = Repair::default();
                self.links.stats.repair_due.store(false, Ordering::Relaxed);
            }
            Err(e) => {
                self.links.stats.store_waits.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("storaged did not take the repair, trying again: {e}");
                self.repair.not_before = Instant::now() + RETRY;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_secs(60);

    fn at(settled: bool, backlog: bool) -> Watching {
        Watching { settled, backlog }
    }

    fn asked_at(t0: Instant) -> Repair {
        let mut r = Repair {
            not_before: t0,
            ..Repair::default()
        };
        r.ask(t0);
        r
    }

    #[test]
    fn nothing_runs_when_no_rescan_asked() {
        let r = Repair::default();
        assert_eq!(r.next_run(at(true, false), BOUND), None);
    }

    #[test]
    fn a_settled_watcher_repairs_at_once() {
        let t0 = Instant::now();
        let r = asked_at(t0);
        assert_eq!(r.next_run(at(true, false), BOUND), Some(t0));
    }

    #[test]
    fn a_watcher_that_never_settles_repairs_after_the_bound_once_nothing_is_due() {
        let t0 = Instant::now();
        let r = asked_at(t0);
        // A file being written is pending, never due: the bound decides.
        assert_eq!(r.next_run(at(false, false), BOUND), Some(t0 + BOUND));
        // What is due (a backlog of what the rescan found) comes first.
        assert_eq!(r.next_run(at(false, true), BOUND), None);
    }

    #[test]
    fn a_page_storaged_did_not_take_waits_its_retry() {
        let t0 = Instant::now();
        let mut r = asked_at(t0);
        r.not_before = t0 + BOUND + RETRY;
        assert_eq!(r.next_run(at(true, false), BOUND), Some(t0 + BOUND + RETRY));
        assert_eq!(
            r.next_run(at(false, false), BOUND),
            Some(t0 + BOUND + RETRY)
        );
    }

    #[test]
    fn the_first_ask_counts_and_one_during_a_pass_makes_another_pass() {
        let t0 = Instant::now();
        let mut r = asked_at(t0);
        // Asked again before the pass: the same pass, still bounded from
        // the first ask (rescans in a row cannot put it off for ever).
        r.ask(t0 + BOUND / 2);
        assert_eq!(r.next_run(at(false, false), BOUND), Some(t0 + BOUND));
        // Asked during the pass: another follows, bounded from then.
        r.cursor = Some(Rid::mint());
        let later = t0 + BOUND * 2;
        r.ask(later);
        r.passed();
        assert!(r.is_due());
        assert_eq!(r.next_run(at(false, false), BOUND), Some(later + BOUND));
        r.passed();
        assert!(!r.is_due());
        assert_eq!(r.next_run(at(true, false), BOUND), None);
    }
}
