//! Exponential backoff as a pure function of the attempt: the caller keeps the count and
//! the clock.

use std::time::Duration;

/// `base × factor^failures`, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The delay after the first failure.
    pub base: Duration,
    /// How much each further failure multiplies it by (≥ 1).
    pub factor: f64,
    /// The longest delay.
    pub max: Duration,
}

impl Backoff {
    /// Doubling from `base` up to `max`.
    pub fn doubling(base: Duration, max: Duration) -> Self {
        Backoff {
            base,
            factor: 2.0,
            max,
        }
    }

    /// The delay after `failures` earlier failures (0: `base`). Saturates at `max`, never
    /// overflows.
    pub fn delay(&self, failures: u32) -> Duration {
        let secs = self.base.as_secs_f64() * self.factor.powi(failures.min(i32::MAX as u32) as i32);
        if secs.is_finite() && secs < self.max.as_secs_f64() {
            Duration::from_secs_f64(secs)
        } else {
            self.max
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_by_the_factor_and_stops_at_the_cap() {
        let b = Backoff::doubling(Duration::from_millis(100), Duration::from_secs(1));
        let delays: Vec<u128> = (0..6).map(|n| b.delay(n).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(1));
        let slow = Backoff {
            base: Duration::from_millis(1),
            factor: 1.5,
            max: Duration::from_secs(1),
        };
        assert_eq!(slow.delay(2), Duration::from_secs_f64(0.001 * 1.5 * 1.5));
    }
}
