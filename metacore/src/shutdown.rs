//! Shutdown as a value: one `Trigger` fires it, any number of cloned
//! `Shutdown` handles observe it (`select!` on [`Shutdown::wait`] in every
//! loop, check [`Shutdown::is_triggered`] at request boundaries).

use tokio::sync::watch;

/// Fires the shutdown. Dropping it fires it too, so a task that owns the
/// trigger and dies never leaves the others waiting forever.
#[derive(Debug)]
pub struct Trigger(watch::Sender<bool>);

/// Observes the shutdown.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Receiver<bool>);

/// A new trigger and its first observer.
pub fn channel() -> (Trigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (Trigger(tx), Shutdown(rx))
}

impl Trigger {
    pub fn fire(&self) {
        let _ = self.0.send(true);
    }

    pub fn subscribe(&self) -> Shutdown {
        Shutdown(self.0.subscribe())
    }
}

impl Drop for Trigger {
    fn drop(&mut self) {
        let _ = self.0.send(true);
    }
}

impl Shutdown {
    /// A shutdown that never fires (for tools and benchmarks).
    pub fn never() -> Self {
        let (tx, rx) = watch::channel(false);
        std::mem::forget(tx);
        Shutdown(rx)
    }

    pub fn is_triggered(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the shutdown has fired.
    pub async fn wait(&self) {
        let mut rx = self.0.clone();
        // An error means the trigger is gone, which also means "stop".
        let _ = rx.wait_for(|v| *v).await;
    }
}

/// Installs the SIGTERM and SIGINT handlers (an error if it cannot); the
/// future resolves on the first of them.
pub fn on_signals() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fire_wakes_every_observer() {
        let (t, s) = channel();
        let s2 = s.clone();
        assert!(!s.is_triggered());
        let h = tokio::spawn(async move { s2.wait().await });
        t.fire();
        h.await.unwrap();
        assert!(s.is_triggered());
    }

    #[tokio::test]
    async fn dropping_the_trigger_fires() {
        let (t, s) = channel();
        drop(t);
        s.wait().await;
    }
}
