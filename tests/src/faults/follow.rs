//! SSE followers that behave as the mesh's do: follow a stream, and when
//! the response ends or breaks (apid killed, a new leader), find the
//! leader again and resume with `Last-Event-ID` set to the last ID they
//! received. Each keeps the IDs it was given, in the order given, so the
//! check can hold them to the stream the store committed.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::load::Leader;
use crate::sse::{Follower, Next, Received};

/// A stream ID `<ms>-<seq>` as one ordered number.
/// (The store's row keys write the same ID zero-padded, which parses
/// the same.)
pub fn id_number(id: &str) -> Option<u64> {
    let (ms, seq) = id.split_once('-')?;
    let (ms, seq): (u64, u64) = (ms.parse().ok()?, seq.parse().ok()?);
    (seq < 1 << 20 && ms < 1 << 43).then_some(ms << 20 | seq)
}

/// What one follower was given.
#[derive(Debug, Default, Clone)]
pub struct Followed {
    /// Every event's ID, as [`id_number`], in the order received.
    pub ids: Vec<u64>,
    /// `gap` events (each one says entries were lost to it).
    pub gaps: u64,
    /// Events without an ID, or with one that does not parse.
    pub malformed: Vec<String>,
    /// Times the stream ended or broke and was resumed.
    pub resumes: u64,
    /// For a `files` follower, the paths of its `add` events.
    pub added: Vec<String>,
    /// The `key`s of `meta` events asked to be noticed (see
    /// [`Followers::notice`]) that it received.
    pub noticed: BTreeSet<String>,
}

/// Followers of one stream, each resuming on its own.
#[derive(Debug)]
pub struct Followers {
    logs: Vec<Arc<Mutex<Followed>>>,
    tasks: Vec<JoinHandle<()>>,
    stop: watch::Sender<bool>,
    notice: Arc<Mutex<BTreeSet<String>>>,
}

impl Followers {
    /// `n` followers of `path` (`/api/events/meta` or `/api/events/files`),
    /// each starting after the entry `after` (a `<ms>-<seq>` ID).
    pub fn start(leader: &Leader, path: &'static str, after: &str, n: usize) -> Self {
        let (stop, stopped) = watch::channel(false);
        let notice = Arc::new(Mutex::new(BTreeSet::new()));
        let mut logs = Vec::new();
        let mut tasks = Vec::new();
        for _ in 0..n {
            let log = Arc::new(Mutex::new(Followed::default()));
            tasks.push(tokio::spawn(follow(
                leader.clone(),
                path,
                after.to_owned(),
                log.clone(),
                stopped.clone(),
                notice.clone(),
            )));
            logs.push(log);
        }
        Self {
            logs,
            tasks,
            stop,
            notice,
        }
    }

    /// From now on, each follower notes whether it received a `meta`
    /// event for `key`.
    pub fn notice(&self, key: &str) {
        self.notice.lock().unwrap().insert(key.to_owned());
    }

    /// What each follower has received so far.
    pub fn snapshot(&self) -> Vec<Followed> {
        self.logs
            .iter()
            .map(|l| l.lock().unwrap().clone())
            .collect()
    }

    /// Stops every follower; what each received.
    pub async fn stop(self) -> Vec<Followed> {
        let _ = self.stop.send(true);
        for t in self.tasks {
            t.await.expect("a follower panicked");
        }
        self.logs
            .into_iter()
            .map(|l| std::mem::take(&mut *l.lock().unwrap()))
            .collect()
    }
}

/// Notes one event in `log`; its ID becomes the resume point.
fn note(log: &Mutex<Followed>, e: &Received, notice: &Mutex<BTreeSet<String>>, last: &mut String) {
    let mut log = log.lock().unwrap();
    if e.event == "gap" {
        log.gaps += 1;
        return;
    }
    if e.id == *last {
        // The spec carries the last ID over to an event that set none.
        log.malformed
            .push(format!("{} without an id: {}", e.event, e.data));
        return;
    }
    let Some(n) = id_number(&e.id) else {
        log.malformed.push(format!("id {:?}", e.id));
        return;
    };
    log.ids.push(n);
    last.clone_from(&e.id);
    if e.event == "add"
        && let Some(p) = e.data["path"].as_str()
    {
        log.added.push(p.to_owned());
    }
    if let Some(k) = e.data["key"].as_str()
        && notice.lock().unwrap().contains(k)
    {
        log.noticed.insert(k.to_owned());
    }
}

async fn follow(
    leader: Leader,
    path: &'static str,
    after: String,
    log: Arc<Mutex<Followed>>,
    mut stop: watch::Receiver<bool>,
    notice: Arc<Mutex<BTreeSet<String>>>,
) {
    let mut last = after;
    let mut first = true;
    while !*stop.borrow() {
        let Some(port) = leader.port() else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let opened = Follower::open(port, path, &[("last-event-id", Some(&last))], false).await;
        let mut f = match opened {
            Ok(f) if f.status == 200 => f,
            // apid away, or storaged away at connect (503): again.
            _ => {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        };
        if !first {
            log.lock().unwrap().resumes += 1;
        }
        first = false;
        loop {
            let next = tokio::select! {
                n = f.next(Duration::from_secs(3600)) => n,
                _ = stop.changed() => return,
            };
            match next {
                Next::Event(e) => note(&log, &e, &notice, &mut last),
                Next::End | Next::Broken(_) | Next::Quiet => break,
            }
        }
    }
}
