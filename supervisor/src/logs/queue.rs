//! The bounded queues that feed the log writer threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use super::QUEUE_LINES;

/// A queue of at most [`QUEUE_LINES`] items to a writer thread: std's
/// unbounded channel, which allocates as items come and frees them as they
/// go, with a count that refuses what would pass the bound. (std's bounded
/// channel allocates and touches all its slots up front: 140 KiB for the
/// two queues, resident for the supervisor's whole life, for queues that
/// are empty nearly always.)
#[derive(Debug)]
pub(super) struct Queue<T> {
    tx: mpsc::Sender<T>,
    /// Items sent and not yet taken by the writer.
    queued: Arc<AtomicUsize>,
}

impl<T> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
            queued: self.queued.clone(),
        }
    }
}

/// The writer's end of a [`Queue`].
pub(super) struct Dequeue<T> {
    rx: mpsc::Receiver<T>,
    /// The count the senders keep, lowered as items are taken.
    queued: Arc<AtomicUsize>,
}

pub(super) fn queue<T>() -> (Queue<T>, Dequeue<T>) {
    let (tx, rx) = mpsc::channel();
    let queued = Arc::new(AtomicUsize::new(0));
    let dequeue = Dequeue {
        rx,
        queued: queued.clone(),
    };
    (Queue { tx, queued }, dequeue)
}

impl<T> Queue<T> {
    /// Queues `item`, or gives it back when the queue is full or its
    /// writer is gone.
    pub(super) fn try_send(&self, item: T) -> Result<(), T> {
        if self.queued.fetch_add(1, Ordering::AcqRel) >= QUEUE_LINES {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(item);
        }
        self.tx.send(item).map_err(|e| {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            e.0
        })
    }
}

impl<T> Dequeue<T> {
    /// The next item; None once every sender is gone.
    pub(super) fn recv(&self) -> Option<T> {
        let item = self.rx.recv().ok()?;
        self.queued.fetch_sub(1, Ordering::AcqRel);
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_refuses_until_its_writer_takes_some() {
        let (q, rx) = queue::<usize>();
        for i in 0..QUEUE_LINES {
            assert!(q.try_send(i).is_ok());
        }
        assert_eq!(q.clone().try_send(QUEUE_LINES), Err(QUEUE_LINES));
        assert_eq!(rx.recv(), Some(0));
        assert!(q.try_send(QUEUE_LINES).is_ok(), "room again");
        drop(rx);
        assert_eq!(q.try_send(1), Err(1), "no writer");
    }
}
