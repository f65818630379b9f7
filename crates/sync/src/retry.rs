//! Retries of a failed operation (`syncPolicy.retry`, `operation.retry`), as Argo CD's
//! controller paces them: after the n-th failure (from 0) the next attempt waits
//! `duration × factorⁿ`, at most `maxDuration` (defaults 5 s, ×2, 3 m). An automated sync
//! retries 5 times unless the app sets its own strategy; a `limit` below 0 retries without
//! end, 0 never.

use std::time::Duration;

use fleetshard_util::duration::parse_go_duration;

/// Argo CD's default first wait.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(5);
/// Argo CD's default factor.
pub const DEFAULT_FACTOR: i64 = 2;
/// Argo CD's default longest wait.
pub const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(180);
/// The retries of an automated sync when the app sets no strategy.
pub const AUTOMATED_LIMIT: i64 = 5;

/// `retry`: how many times, and how far apart.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RetryStrategy {
    /// `limit`: retries after the first attempt (below 0: no end).
    pub limit: i64,
    /// `backoff.duration` as written (seconds, or a Go duration).
    pub duration: Option<String>,
    /// `backoff.factor`.
    pub factor: Option<i64>,
    /// `backoff.maxDuration` as written.
    pub max_duration: Option<String>,
    /// `refresh`: retry with the latest revision instead of the one first resolved.
    pub refresh: bool,
}

/// Why a strategy cannot be followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unable to parse {value:?} as a duration ({why})")]
pub struct RetryError {
    /// The value written.
    pub value: String,
    /// What is wrong with it.
    pub why: String,
}

/// A duration as Argo CD reads a backoff's: a bare integer is seconds, anything else a Go
/// duration.
fn duration(value: &str) -> Result<Duration, RetryError> {
    parse_go_duration(value).map_err(|why| RetryError {
        value: value.to_owned(),
        why,
    })
}

impl RetryStrategy {
    /// The strategy of an automated sync of an app that sets none: 5 retries.
    pub fn automated() -> Self {
        RetryStrategy {
            limit: AUTOMATED_LIMIT,
            ..RetryStrategy::default()
        }
    }

    /// Whether a failure after `retries` retries is retried again.
    pub fn allows(&self, retries: i64) -> bool {
        self.limit < 0 || retries < self.limit
    }

    /// The wait before the retry that follows `retries` earlier retries.
    pub fn delay(&self, retries: i64) -> Result<Duration, RetryError> {
        let base = match &self.duration {
            Some(d) if !d.is_empty() => duration(d)?,
            _ => DEFAULT_DURATION,
        };
        let max = match &self.max_duration {
            Some(d) if !d.is_empty() => duration(d)?,
            _ => DEFAULT_MAX_DURATION,
        };
        let factor = self.factor.unwrap_or(DEFAULT_FACTOR);
        let grown = base.as_secs_f64()
            * (factor as f64).powi(i32::try_from(retries.max(0)).unwrap_or(i32::MAX));
        let capped = if max > Duration::ZERO {
            grown.min(max.as_secs_f64())
        } else {
            grown
        };
        Ok(Duration::try_from_secs_f64(capped.max(0.0)).unwrap_or(max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_by_the_factor_up_to_the_longest() {
        let s = RetryStrategy::automated();
        let secs: Vec<u64> = (0..7).map(|n| s.delay(n).unwrap().as_secs()).collect();
        assert_eq!(secs, [5, 10, 20, 40, 80, 160, 180]);
        assert!(s.allows(4) && !s.allows(5));
        let custom = RetryStrategy {
            limit: -1,
            duration: Some("2".into()),
            factor: Some(3),
            max_duration: Some("1m".into()),
            refresh: false,
        };
        let secs: Vec<u64> = (0..5).map(|n| custom.delay(n).unwrap().as_secs()).collect();
        assert_eq!(secs, [2, 6, 18, 54, 60]);
        assert!(custom.allows(1_000));
        assert!(!RetryStrategy::default().allows(0), "limit 0: never");
        let bad = RetryStrategy {
            duration: Some("soon".into()),
            ..RetryStrategy::default()
        };
        assert!(bad.delay(0).unwrap_err().to_string().contains("\"soon\""));
    }
}
