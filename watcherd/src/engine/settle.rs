//! Settling: a round of due files hashed, paired into renames, sent to
//! storaged while the round before commits, and what storaged committed
//! made known.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use metacore::api::storaged::{
    MAX_OBSERVATIONS, Observation, ObserveBody, ObserveOutcome, StoragedClient,
};
use metacore::backoff::Backoff;
use metacore::checked::{FilePath, RelPath};
use metacore::shutdown::Shutdown;
use metacore::socket::client::ClientError;

use super::pairing::{Hashed, pair};
use super::{Engine, Looked, ROUND, Sent, Stats, known_of};
use crate::debounce::{Seen, Settle};
use crate::scan;

impl Engine {
    /// Settles one round of what is due: hash, pair renames, and send,
    /// while the round before is still being committed (hashing this one
    /// overlaps storaged's work on that one). One round a turn of the
    /// loop, so events are taken between rounds of a long backlog.
    pub(super) async fn settle_round(&mut self) {
        let now = Instant::now();
        // The second look is the hashing thread's fstat of the open
        // file: no stat here, on the engine's task.
        let due = self.knows.debounce.due(now, ROUND);
        // A backlog of due files may hold the new paths of files that
        // vanished: they pair into renames before the old paths can
        // become deletes.
        let backlog = due.len() == ROUND;
        let looked = self.hash(due).await;
        let hashed = self.settled(looked, now);
        let mut gone_due = if backlog {
            Vec::new()
        } else {
            self.knows.gone.due(now, self.settings.quiet)
        };
        gone_due.truncate(ROUND);
        if hashed.is_empty() && gone_due.is_empty() {
            return;
        }
        let known = &self.knows.known;
        let mut observations = pair(hashed, |rel| known.contains_key(rel), &mut self.knows.gone);
        self.deletes(gone_due, &mut observations);
        if observations.is_empty() {
            return;
        }
        if !self.finish_inflight().await {
            return;
        }
        self.send(observations);
    }

    /// The looked-at files that settled and differ from what is known.
    fn settled(&mut self, looked: Vec<Looked>, now: Instant) -> Vec<Hashed> {
        let mut hashed = Vec::with_capacity(looked.len());
        for (rel, now_seen, digest) in looked {
            if let Settle::Settled(seen) = self.knows.debounce.settle(&rel, now_seen, now) {
                let unchanged = self.knows.known.get(&rel).is_some_and(|k| k.seen == seen);
                if let (false, Some(digest)) = (unchanged, digest) {
                    hashed.push((rel, seen, digest));
                }
            }
        }
        hashed
    }

    /// The gone paths that waited long enough and no rename took: a
    /// delete each, unless the path is back.
    fn deletes(&mut self, gone_due: Vec<String>, observations: &mut Vec<Observation>) {
        for rel in gone_due {
            if !self.knows.gone.remove(&rel) {
                continue; // taken by a rename just now
            }
            let abs = self.settings.files.join(&rel);
            if abs.exists() {
                self.on_present(&abs);
            } else if let Ok(path) = RelPath::new(rel) {
                observations.push(Observation::Gone { path });
            }
        }
    }

    /// Sends a batch to storaged off the engine's task; it is the batch in
    /// flight until it is applied.
    fn send(&mut self, observations: Vec<Observation>) {
        let sender = Sender {
            store: self.links.store.clone(),
            root: self.root.clone(),
            stats: self.links.stats.clone(),
            shutdown: self.links.shutdown.clone(),
        };
        self.batch.paths = observations
            .iter()
            .flat_map(|o| match o {
                Observation::Moved { from, path, .. } => {
                    vec![from.to_string(), path.to_string()]
                }
                other => vec![other.path().to_string()],
            })
            .collect();
        self.batch.inflight = Some(tokio::spawn(sender.send(observations)));
    }

    /// Waits for the batch being committed, if any, and makes what it
    /// committed known. False on shutdown.
    pub(super) async fn finish_inflight(&mut self) -> bool {
        match self.batch.inflight.take() {
            None => true,
            Some(h) => match h.await {
                Ok(Some(sent)) => {
                    self.apply(sent);
                    true
                }
                _ => false,
            },
        }
    }

    /// The second look at each due file and its midhash, on the blocking
    /// pool: open it, `fstat` the open file, and hash it only when the
    /// `stat` is the one it waited on (`None`: gone or unreadable).
    async fn hash(&self, due: Vec<(String, Seen)>) -> Vec<Looked> {
        if due.is_empty() {
            return Vec::new();
        }
        let root = self.settings.files.clone();
        tokio::task::spawn_blocking(move || {
            due.into_iter()
                .map(|(rel, waited)| {
                    let Ok(f) = std::fs::File::open(root.join(&rel)) else {
                        return (rel, None, None);
                    };
                    let now = f
                        .metadata()
                        .ok()
                        .filter(|m| m.is_file())
                        .map(|m| scan::seen_of(&m));
                    let Some(now) = now else {
                        return (rel, None, None);
                    };
                    if now != waited {
                        return (rel, Some(now), None);
                    }
                    match crate::midhash::digest_of_file(&f, now.size) {
                        Ok(d) => (rel, Some(now), Some(d)),
                        Err(e) => {
                            tracing::debug!(path = %rel, "not hashed: {e}");
                            (rel, None, None)
                        }
                    }
                })
                .collect()
        })
        .await
        .unwrap_or_default()
    }

    /// What storaged committed becomes known. A path something happened
    /// to while its observation was on the way is looked at again, now
    /// against what is known.
    pub(super) fn apply(&mut self, sent: Sent) {
        self.apply_outcomes(sent);
        self.publish();
        self.batch.paths.clear();
        for rel in std::mem::take(&mut self.batch.dirty) {
            let abs = self.settings.files.join(&rel);
            match std::fs::symlink_metadata(&abs) {
                Ok(m) if m.is_file() => self.touch(rel, scan::seen_of(&m)),
                _ => self.mark_gone(&rel),
            }
        }
    }

    fn apply_outcomes(&mut self, sent: Sent) {
        self.shown.stale = true;
        let known = &mut self.knows.known;
        for (o, out) in sent {
            if let Some(e) = out.error {
                self.links.stats.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(path = %o.path(), "storaged refused an observation: {e}");
                continue;
            }
            if let Some(kind) = out.event.as_deref() {
                self.links.stats.announced.fetch_add(1, Ordering::Relaxed);
                self.links.stats.events.count(kind);
            }
            match (o, out.rid) {
                (Observation::Present { path, file }, Some(rid)) => {
                    known.insert(path.into(), known_of(&file, rid));
                }
                (Observation::Moved { from, path, file }, Some(rid)) => {
                    known.remove(from.as_str());
                    known.insert(path.into(), known_of(&file, rid));
                }
                (Observation::Gone { path }, _) => {
                    known.remove(path.as_str());
                }
                _ => {}
            }
        }
    }
}

/// Sends a batch to storaged off the engine's task, waiting while storaged
/// is away (the engine goes on taking events meanwhile).
struct Sender {
    store: StoragedClient,
    root: FilePath,
    stats: Arc<Stats>,
    shutdown: Shutdown,
}

impl Sender {
    /// Each observation with what storaged did with it; `None` on shutdown.
    async fn send(self, observations: Vec<Observation>) -> Option<Sent> {
        let mut out = Vec::with_capacity(observations.len());
        for chunk in observations.chunks(MAX_OBSERVATIONS) {
            let body = ObserveBody {
                root: self.root.clone(),
                observations: chunk.to_vec(),
            };
            let mut backoff = Backoff::doubling(Duration::from_millis(50), Duration::from_secs(5));
            let outcomes = loop {
                match self.store.observe(&body).await {
                    Ok(o) => break o.outcomes,
                    // Refused as a whole: sending it again will not help.
                    // Each observation is reported refused; the files are
                    // looked at again by the next walk of their folder.
                    Err(ClientError::Api(e)) if e.code.status().is_client_error() => {
                        tracing::error!("storaged refused a batch of observations: {e}");
                        let refused = ObserveOutcome {
                            error: Some(e.to_string()),
                            ..ObserveOutcome::default()
                        };
                        break vec![refused; body.observations.len()];
                    }
                    Err(e) => {
                        self.stats.store_waits.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!("storaged did not take the observations, retrying: {e}");
                        tokio::select! {
                            () = self.shutdown.wait() => return None,
                            () = tokio::time::sleep(backoff.fail()) => {}
                        }
                    }
                }
            };
            out.extend(body.observations.into_iter().zip(outcomes));
        }
        Some(out)
    }
}
