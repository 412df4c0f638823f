//! One schema rescan at a time (issue 23, N17). A rescan counts every
//! stored value again in one write, holding the writer for its whole run
//! (about ten seconds at 169,000 records); a second one asked for
//! meanwhile would only queue a second full recount behind the first. So
//! it is refused with a 409 `conflict` (retryable) while one is queued or
//! running, whoever asks: apid, or a tool on storaged's socket.

use std::sync::Arc;

use metacore::error::{ApiError, ErrorCode};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Whether a rescan is under way: the one permit is out while it is.
#[derive(Debug)]
pub(crate) struct Rescans {
    /// One permit: the turn of the rescan under way. Taken without waiting
    /// ([`Rescans::begin`]) and given back when the rescan's write has run
    /// or was dropped unrun, not when its caller stops waiting, so a
    /// caller that goes away does not let a second recount in behind it.
    turn: Arc<Semaphore>,
}

/// The turn of one rescan; the next may begin once it is dropped.
#[derive(Debug)]
pub(crate) struct Turn {
    _permit: OwnedSemaphorePermit,
}

impl Rescans {
    pub(crate) fn new() -> Self {
        Self {
            turn: Arc::new(Semaphore::new(1)),
        }
    }

    /// The turn to rescan, or the 409 when another rescan has it.
    pub(crate) fn begin(&self) -> Result<Turn, ApiError> {
        self.turn
            .clone()
            .try_acquire_owned()
            .map(|p| Turn { _permit: p })
            .map_err(|_| {
                ApiError::new(
                    ErrorCode::Conflict,
                    "a schema rescan is under way; retry when it has finished",
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_turn_waits_for_the_first_to_end() {
        let r = Rescans::new();
        let first = r.begin().unwrap();
        let e = r.begin().unwrap_err();
        assert_eq!(e.code, ErrorCode::Conflict);
        assert!(
            e.code.retryable() && e.message.contains("rescan is under way"),
            "{e:?}"
        );
        drop(first);
        assert!(r.begin().is_ok(), "free again once the first ended");
    }
}
