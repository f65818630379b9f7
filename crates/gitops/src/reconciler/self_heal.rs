//! Self-heal's back-off, as Argo CD's controller paces it: when the same commit has to be
//! healed again and again (another controller, an HPA or a mutating webhook keeps undoing
//! it), each consecutive heal waits longer — `timeout`, then `timeout × factor`, … up to
//! `cap` — instead of writing as fast as drift is seen. A quiet spell of `cooldown` since the
//! last heal, or a new commit, starts the count again.

use std::time::Duration;

use tokio::time::Instant;

/// How self-heal backs off (Argo CD's controller defaults: 2 s, ×3, at most 300 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelfHealBackoff {
    /// The wait before the second consecutive heal.
    pub timeout: Duration,
    /// What each further consecutive heal multiplies the wait by.
    pub factor: u32,
    /// The longest wait.
    pub cap: Duration,
    /// A heal this long after the previous one counts as the first again.
    pub cooldown: Duration,
}

impl Default for SelfHealBackoff {
    fn default() -> Self {
        SelfHealBackoff {
            timeout: Duration::from_secs(2),
            factor: 3,
            cap: Duration::from_secs(300),
            cooldown: Duration::from_secs(330),
        }
    }
}

impl SelfHealBackoff {
    /// The wait after `earlier` consecutive heals: none before the first, then `timeout`,
    /// `timeout × factor`, … at most `cap`.
    pub fn delay(&self, earlier: u32) -> Duration {
        let Some(n) = earlier.checked_sub(1) else {
            return Duration::ZERO;
        };
        let grown = u64::from(self.factor.max(1))
            .checked_pow(n)
            .and_then(|f| self.timeout.checked_mul(u32::try_from(f).ok()?));
        grown.map_or(self.cap, |d| d.min(self.cap))
    }
}

/// One app's consecutive self-heals.
#[derive(Debug, Clone, Default)]
pub(super) struct SelfHeals {
    commit: String,
    count: u32,
    last: Option<Instant>,
}

impl SelfHeals {
    /// How long to wait before healing `commit` at `now`; `None`: heal now.
    pub(super) fn wait(
        &mut self,
        commit: &str,
        now: Instant,
        policy: &SelfHealBackoff,
    ) -> Option<Duration> {
        let quiet = self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) >= policy.cooldown);
        if self.commit != commit || quiet {
            *self = SelfHeals {
                commit: commit.to_owned(),
                ..SelfHeals::default()
            };
        }
        let due = self.last? + policy.delay(self.count);
        (due > now).then(|| due - now)
    }

    /// Notes a heal of `commit` at `now`.
    pub(super) fn healed(&mut self, commit: &str, now: Instant) {
        if self.commit != commit {
            self.commit = commit.to_owned();
            self.count = 0;
        }
        self.count = self.count.saturating_add(1);
        self.last = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_by_the_factor_up_to_the_cap() {
        let p = SelfHealBackoff::default();
        let secs: Vec<u64> = (0..8).map(|n| p.delay(n).as_secs()).collect();
        assert_eq!(secs, [0, 2, 6, 18, 54, 162, 300, 300]);
        assert_eq!(p.delay(u32::MAX), p.cap);
    }

    #[tokio::test(start_paused = true)]
    async fn consecutive_heals_wait_and_a_quiet_spell_or_new_commit_resets() {
        let p = SelfHealBackoff::default();
        let mut h = SelfHeals::default();
        let t0 = Instant::now();
        assert_eq!(h.wait("c1", t0, &p), None, "the first heal is at once");
        h.healed("c1", t0);
        assert_eq!(h.wait("c1", t0, &p), Some(Duration::from_secs(2)));
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(h.wait("c1", t1, &p), None);
        h.healed("c1", t1);
        assert_eq!(
            h.wait("c1", t1 + Duration::from_secs(1), &p),
            Some(Duration::from_secs(5))
        );
        // A new commit starts again.
        assert_eq!(h.wait("c2", t1, &p), None);
        h.healed("c2", t1);
        h.healed("c2", t1);
        assert_eq!(h.wait("c2", t1, &p), Some(Duration::from_secs(6)));
        // A quiet spell as long as the cooldown starts again too.
        assert_eq!(h.wait("c2", t1 + p.cooldown, &p), None);
    }
}
