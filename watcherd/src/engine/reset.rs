//! A reset: what was seen under some folders forgotten, `file:events`
//! started over, the folders walked again.

use std::path::PathBuf;

use metacore::api::storaged::ResetBody;
use metacore::checked::RelPath;
use metacore::error::ApiError;
use tokio::sync::oneshot;

use super::Engine;

impl Engine {
    pub(super) async fn reset(
        &mut self,
        dirs: Vec<PathBuf>,
        watcher_id: String,
        reply: oneshot::Sender<Result<usize, ApiError>>,
    ) {
        // FILES_PATH itself is "" (everything); a folder outside it (a
        // hand-edited watchers.json) is refused, never taken for it.
        let mut rels = Vec::with_capacity(dirs.len());
        for d in &dirs {
            match self.rel(d) {
                Some(r) => rels.push(r),
                None if *d == self.settings.files => rels.push(String::new()),
                None => {
                    let _ = reply.send(Err(ApiError::bad_request(
                        "the watcher's folder is not under FILES_PATH",
                    )));
                    return;
                }
            }
        }
        let body = ResetBody {
            dirs: rels.clone(),
            watcher_id,
        };
        // What is being committed lands before the reset, not after it.
        if !self.finish_inflight().await {
            return;
        }
        if let Err(e) = self.links.store.reset_files(&body).await {
            let _ = reply.send(Err(e.into()));
            return;
        }
        self.links.stats.events.count("reset");
        self.forget_under(&rels);
        // Walk each again; the reply sums what they found.
        let mut waits = Vec::new();
        for d in dirs {
            let (tx, rx) = oneshot::channel();
            self.walk(d, false, false, Some(tx));
            waits.push(rx);
        }
        tokio::spawn(async move {
            let mut total = 0;
            for w in waits {
                match w.await {
                    Ok(Ok(n)) => total += n,
                    Ok(Err(e)) => {
                        let _ = reply.send(Err(e));
                        return;
                    }
                    Err(_) => {}
                }
            }
            let _ = reply.send(Ok(total));
        });
    }

    /// Forgets what is known or gone under `rels` ("" is everything).
    fn forget_under(&mut self, rels: &[String]) {
        // What vanished under the reset folders is forgotten with them; a
        // delete pending elsewhere still comes.
        let gone: Vec<String> = self
            .knows
            .gone
            .since
            .keys()
            .filter(|p| {
                rels.iter()
                    .any(|r| r.is_empty() || RelPath::new(p.as_str()).is_ok_and(|p| p.is_under(r)))
            })
            .cloned()
            .collect();
        for p in gone {
            self.knows.gone.remove(&p);
        }
        self.shown.stale = true;
        self.knows.known.retain(|p, _| {
            !rels.iter().any(|r| {
                r.is_empty()
                    || p.strip_prefix(r.as_str())
                        .is_some_and(|x| x.starts_with('/'))
            })
        });
    }
}
