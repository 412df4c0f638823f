//! The wait between tries of every restart and retry loop: `first`, then
//! times `factor` after each failure in a row, never more than `max`.

use std::time::Duration;

/// A growing wait, and where a loop stands in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    factor: u32,
    /// Failures in a row so far.
    failures: u32,
}

impl Backoff {
    /// `first`, doubling, at most `max`.
    pub const fn doubling(first: Duration, max: Duration) -> Self {
        Self::new(first, max, 2)
    }

    /// `first`, times `factor` after each failure, at most `max`.
    pub const fn new(first: Duration, max: Duration, factor: u32) -> Self {
        Self {
            first,
            max,
            factor,
            failures: 0,
        }
    }

    /// The wait after `failures` failures in a row: `first` after one (or
    /// none), capped at `max`.
    pub fn after(&self, failures: u32) -> Duration {
        let mut d = self.first;
        for _ in 1..failures {
            d = d.saturating_mul(self.factor);
            if d >= self.max {
                return self.max;
            }
        }
        d.min(self.max)
    }

    /// Counts a failure and says how long to wait before the next try.
    pub fn fail(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        self.after(self.failures)
    }

    /// A try succeeded: the next failure waits `first` again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// Failures in a row so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn it_grows_by_its_factor_up_to_its_cap_and_starts_again_after_a_success() {
        let mut b = Backoff::doubling(20 * MS, 500 * MS);
        let waits: Vec<Duration> = (0..7).map(|_| b.fail()).collect();
        assert_eq!(
            waits,
            [20, 40, 80, 160, 320, 500, 500].map(|n| n * MS).to_vec()
        );
        assert_eq!(b.failures(), 7);
        b.reset();
        assert_eq!(b.fail(), 20 * MS);
        let four = Backoff::new(10 * MS, 10_000 * MS, 4);
        assert_eq!(
            [0, 1, 2, 3, 6, 7, u32::MAX].map(|f| four.after(f)),
            [10, 10, 40, 160, 10_000, 10_000, 10_000].map(|n| n * MS)
        );
    }
}
