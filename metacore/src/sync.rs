//! The one lock policy: a lock whose holder panicked is taken as it is.
//!
//! Every lock in meta-core guards state its holders change in one step (a
//! map entry, a status struct, a handle taken), so a panic while it was
//! held leaves nothing half-written, and the panic itself is contained and
//! logged where it happened (a write's savepoint, a task). Refusing the
//! lock after that would turn one contained failure into a crash of the
//! daemon on its next use.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// `lock` without a poisoned case ([`self`]).
pub trait Locked<T: ?Sized> {
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `read` and `write` without a poisoned case ([`self`]).
pub trait Shared<T: ?Sized> {
    fn reading(&self) -> RwLockReadGuard<'_, T>;
    fn writing(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> Shared<T> for RwLock<T> {
    fn reading(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn writing(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_whose_holder_panicked_is_taken_as_it_was_left() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let held = m.clone();
        let _ = std::thread::spawn(move || {
            let mut g = held.lock().unwrap();
            *g = 2;
            panic!("a holder panics");
        })
        .join();
        assert!(m.is_poisoned());
        assert_eq!(*m.locked(), 2);
        let rw = RwLock::new(3);
        *rw.writing() += 1;
        assert_eq!(*rw.reading(), 4);
    }
}
