//! How long `add_rate_limited` waits: the larger of a per-item exponential backoff and an
//! overall token bucket, as client-go's `MaxOfRateLimiter` combining Argo CD's per-item
//! limiter with a `BucketRateLimiter`.
//!
//! Time is `tokio::time::Instant`, passed in, so tests control it.

use fleetshard_util::backoff::Backoff;
use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

use crate::ConfigError;

/// Retry timing of one work queue.
///
/// Argo CD's application controller defaults (`GetDefaultAppRateLimiterConfig` and the
/// `--wq-*` flags): base delay 1 ms, backoff factor 1.5, max delay 1 s, failure cool-down
/// 0 (which *disables* per-item backoff: every retry waits the base delay), token bucket of
/// 500 with unlimited qps (the bucket is disabled; releases before 2.9 used 50 qps). See
/// [`RateLimiterConfig::argo_cd`]. fleetshard's [`Default`] keeps those numbers but turns
/// per-item backoff on (`cooldown: None`: the count resets only on `forget`), because a
/// "retry later" that retries every millisecond is a busy loop against a sick cluster.
/// Delays are slept with tokio's timer, whose resolution is 1 ms: 1.5 ms waits 2 ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimiterConfig {
    /// First retry delay of an item (1 ms).
    pub base_delay: Duration,
    /// Each further retry waits this many times longer (1.5); at least 1.
    pub factor: f64,
    /// Upper bound of the per-item delay (1 s).
    pub max_delay: Duration,
    /// Argo CD's auto reset: a retry this long (or longer) after the item's previous retry
    /// starts the backoff again. `Some(ZERO)` is Argo CD's default (no backoff at all);
    /// `None` never resets on its own (client-go's behaviour; `forget` resets).
    pub cooldown: Option<Duration>,
    /// Overall retries per second across all items; `None`: unlimited (Argo CD's default).
    pub bucket_qps: Option<f64>,
    /// Token bucket size: retries allowed in one burst (500).
    pub bucket_size: u32,
}

impl Default for RateLimiterConfig {
    fn default() -> Self {
        let argo = RateLimiterConfig::argo_cd();
        RateLimiterConfig {
            cooldown: None,
            ..argo
        }
    }
}

impl RateLimiterConfig {
    /// Exactly Argo CD's defaults (see the type's documentation).
    pub fn argo_cd() -> Self {
        RateLimiterConfig {
            base_delay: Duration::from_millis(1),
            factor: 1.5,
            max_delay: Duration::from_secs(1),
            cooldown: Some(Duration::ZERO),
            bucket_qps: None,
            bucket_size: 500,
        }
    }

    /// Checks the numbers, naming the first bad field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field: &'static str, reason: &'static str| {
            Err(ConfigError::RateLimiter { field, reason })
        };
        if !(self.factor.is_finite() && self.factor >= 1.0) {
            return bad("factor", "must be a finite number ≥ 1");
        }
        if self.max_delay < self.base_delay {
            return bad("max_delay", "must be at least base_delay");
        }
        if let Some(q) = self.bucket_qps
            && !(q.is_finite() && q > 0.0)
        {
            return bad(
                "bucket_qps",
                "must be a finite number > 0 (None: unlimited)",
            );
        }
        if self.bucket_size == 0 {
            return bad("bucket_size", "must be at least 1");
        }
        Ok(())
    }
}

/// Failures of one item: how many in a row, and when the last one was.
#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
}

/// Golang's `rate.Limiter` reservation semantics: tokens refill at `qps` up to `size`;
/// taking one may drive the count negative, and the caller then waits until it would be
/// back at zero — so reservations queue up behind each other instead of failing.
#[derive(Debug, Clone)]
struct TokenBucket {
    qps: f64,
    size: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    fn reserve(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.size);
        self.at = now.max(self.at);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

/// Per-item backoff plus the overall bucket.
#[derive(Debug)]
pub(crate) struct RateLimiter<K> {
    cfg: RateLimiterConfig,
    failures: HashMap<K, Failures>,
    bucket: Option<TokenBucket>,
}

impl<K: Clone + Eq + Hash> RateLimiter<K> {
    /// A limiter whose bucket starts full at `now`. `cfg` must be valid.
    pub(crate) fn new(cfg: RateLimiterConfig, now: Instant) -> Self {
        let bucket = cfg.bucket_qps.map(|qps| TokenBucket {
            qps,
            size: f64::from(cfg.bucket_size),
            tokens: f64::from(cfg.bucket_size),
            at: now,
        });
        RateLimiter {
            cfg,
            failures: HashMap::new(),
            bucket,
        }
    }

    /// How long to wait before retrying `item` now, counting this retry.
    pub(crate) fn when(&mut self, item: &K, now: Instant) -> Duration {
        let cfg = self.cfg;
        let f = self.failures.entry(item.clone()).or_insert(Failures {
            count: 0,
            last: now,
        });
        if let Some(cool) = cfg.cooldown
            && f.count > 0
            && now.saturating_duration_since(f.last) >= cool
        {
            f.count = 0;
        }
        let exp = f.count;
        f.count = f.count.saturating_add(1);
        f.last = now;
        let own = if cfg.cooldown == Some(Duration::ZERO) {
            // Argo CD's default: every retry is a "first" one.
            cfg.base_delay
        } else {
            Backoff {
                base: cfg.base_delay,
                factor: cfg.factor,
                max: cfg.max_delay,
            }
            .delay(exp)
        };
        let overall = self
            .bucket
            .as_mut()
            .map_or(Duration::ZERO, |b| b.reserve(now));
        own.max(overall)
    }

    /// Retries of `item` since it was last forgotten (or reset by the cool-down).
    pub(crate) fn num_requeues(&self, item: &K) -> u32 {
        self.failures.get(item).map_or(0, |f| f.count)
    }

    /// Resets `item`'s backoff.
    pub(crate) fn forget(&mut self, item: &K) {
        self.failures.remove(item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_grows_by_the_factor_up_to_the_max_and_forget_resets() {
        let mut rl = RateLimiter::new(RateLimiterConfig::default(), Instant::now());
        let now = Instant::now();
        let got: Vec<Duration> = (0..20).map(|_| rl.when(&"a", now)).collect();
        let want: Vec<Duration> = (0..20u32)
            .map(|k| Duration::from_secs_f64(0.001 * 1.5f64.powf(f64::from(k))).min(ms(1000)))
            .collect();
        assert_eq!(got, want);
        assert_eq!(got[0], ms(1));
        assert_eq!(got[19], ms(1000), "capped at max_delay");
        assert_eq!(rl.num_requeues(&"a"), 20);
        // Another item has its own count.
        assert_eq!(rl.when(&"b", now), ms(1));
        rl.forget(&"a");
        assert_eq!(rl.num_requeues(&"a"), 0);
        assert_eq!(rl.when(&"a", now), ms(1));
    }

    #[tokio::test(start_paused = true)]
    async fn argo_defaults_never_back_off_and_a_cooldown_resets() {
        let now = Instant::now();
        let mut argo = RateLimiter::new(RateLimiterConfig::argo_cd(), now);
        for _ in 0..5 {
            assert_eq!(argo.when(&1, now), ms(1));
        }
        let cfg = RateLimiterConfig {
            cooldown: Some(ms(100)),
            ..RateLimiterConfig::default()
        };
        let mut rl = RateLimiter::new(cfg, now);
        assert_eq!(rl.when(&1, now), ms(1));
        assert_eq!(rl.when(&1, now + ms(99)), Duration::from_micros(1500));
        // 100 ms of quiet since the last retry: back to the base delay.
        assert_eq!(rl.when(&1, now + ms(199)), ms(1));
        assert_eq!(rl.num_requeues(&1), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn token_bucket_allows_a_burst_then_spaces_retries_at_qps() {
        let now = Instant::now();
        let cfg = RateLimiterConfig {
            base_delay: Duration::ZERO,
            bucket_qps: Some(10.0),
            bucket_size: 3,
            ..RateLimiterConfig::argo_cd()
        };
        let mut rl = RateLimiter::new(cfg, now);
        let got: Vec<Duration> = (0..6).map(|i| rl.when(&i, now)).collect();
        assert_eq!(&got[..3], &[Duration::ZERO; 3], "the burst");
        // Reservations queue up: 100 ms, 200 ms, 300 ms at 10 qps.
        for (k, d) in got[3..].iter().enumerate() {
            let want = 0.1 * (k + 1) as f64;
            assert!((d.as_secs_f64() - want).abs() < 1e-9, "{k}: {d:?}");
        }
        // One second later the debt (3) is repaid and 7 tokens are back (capped at 3).
        let later = now + Duration::from_secs(1);
        let again: Vec<Duration> = (0..4).map(|i| rl.when(&i, later)).collect();
        assert_eq!(&again[..3], &[Duration::ZERO; 3]);
        assert!(again[3] > Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn the_larger_of_backoff_and_bucket_wins() {
        let now = Instant::now();
        let cfg = RateLimiterConfig {
            bucket_qps: Some(1.0),
            bucket_size: 1,
            ..RateLimiterConfig::default()
        };
        let mut rl = RateLimiter::new(cfg, now);
        assert_eq!(rl.when(&"a", now), ms(1), "bucket full: the backoff");
        assert_eq!(rl.when(&"b", now), ms(1000), "bucket empty: its wait");
    }

    #[test]
    fn invalid_configs_name_the_field() {
        let cfg = RateLimiterConfig {
            bucket_qps: Some(1000.0),
            ..RateLimiterConfig::default()
        };
        assert!(cfg.validate().is_ok());
        let bad = RateLimiterConfig { factor: 0.5, ..cfg };
        assert_eq!(
            bad.validate(),
            Err(ConfigError::RateLimiter {
                field: "factor",
                reason: "must be a finite number ≥ 1"
            })
        );
        let bad = RateLimiterConfig {
            bucket_qps: Some(0.0),
            ..cfg
        };
        assert!(matches!(
            bad.validate(),
            Err(ConfigError::RateLimiter {
                field: "bucket_qps",
                ..
            })
        ));
    }
}
