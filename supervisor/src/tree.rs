//! The supervised tree: one runner per row of the policy table, started in
//! the table's order (each once those it depends on have been ready),
//! supervised until a stop is asked or a daemon is given up on, then
//! stopped in reverse order, each once the one after it has exited.

use metacore::layout::Daemon;
use metacore::shutdown::Shutdown;
use tokio::sync::{mpsc, oneshot, watch};

use crate::policy::TABLE;
use crate::reason::GiveUp;
use crate::runner::{self, Ctx, Handle, Request};

/// The runners, in the table's order.
#[derive(Debug)]
pub(crate) struct Tree {
    runners: Vec<Handle>,
    /// From the runners: a daemon whose crash loop means "give up"
    /// reached it. Unbounded: at most one message per runner.
    gave_up: mpsc::UnboundedReceiver<GiveUp>,
}

impl Tree {
    /// One idle runner per row of the table.
    pub(crate) fn new(ctx: &Ctx) -> Self {
        let (gave_up_tx, gave_up) = mpsc::unbounded_channel();
        let runners = TABLE
            .iter()
            .map(|policy| runner::spawn(policy, ctx.clone(), gave_up_tx.clone()))
            .collect();
        Self { runners, gave_up }
    }

    /// Each daemon's request queue, for the control socket.
    pub(crate) fn requests(&self) -> Vec<(Daemon, mpsc::Sender<Request>)> {
        self.runners
            .iter()
            .map(|h| (h.daemon, h.requests.clone()))
            .collect()
    }

    /// True once `daemon` has been ready at least once.
    pub(crate) fn ready_once(&self, daemon: Daemon) -> Option<watch::Receiver<bool>> {
        self.runners
            .iter()
            .find(|h| h.daemon == daemon)
            .map(|h| h.ready_once.clone())
    }

    /// Starts the daemons in order, then supervises them until `stopping`
    /// fires (None) or a daemon is given up on (why).
    pub(crate) async fn supervise(&mut self, stopping: &Shutdown) -> Option<GiveUp> {
        for (i, policy) in TABLE.iter().enumerate() {
            for dep in policy.after {
                let Some(h) = self.runners.iter_mut().find(|h| h.daemon == *dep) else {
                    continue;
                };
                tokio::select! {
                    _ = h.ready_once.wait_for(|ready| *ready) => {}
                    () = stopping.wait() => return None,
                    why = self.gave_up.recv() => return why,
                }
            }
            let _ = self.runners[i].requests.send(Request::Start).await;
        }
        tokio::select! {
            () = stopping.wait() => None,
            why = self.gave_up.recv() => why,
        }
    }

    /// Stops the daemons in reverse order, each once the one after it is
    /// gone.
    pub(crate) async fn stop(self) {
        for h in self.runners.iter().rev() {
            let (done, stopped) = oneshot::channel();
            if h.requests.send(Request::Stop(done)).await.is_ok() {
                let _ = stopped.await;
            }
        }
    }
}
