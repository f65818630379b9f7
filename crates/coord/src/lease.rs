//! Lease timing without trusting any clock but one's own (G6).
//!
//! A lease is a store record its holder rewrites every [`LeaseTiming::renew_every`]. Nobody
//! compares timestamps written by another machine:
//! - an **observer** judges someone else's lease by how long *it* has seen the record's
//!   version unchanged, on its own monotonic clock ([`LeaseObserver`]);
//! - the **holder** counts its lease valid until [`LeaseTiming::renew_deadline`] after the
//!   *start* of its last renew that the store confirmed ([`HeldLease`]).
//!
//! Why that is safe: an observer first sees a renewed version no earlier than the renew was
//! sent, so it waits at least `duration` from then before calling the lease expired, while
//! the holder stops `renew_deadline` after sending. As long as `renew_deadline × (1 + ρ) <
//! duration × (1 − ρ)` for the clock-rate error ρ of both machines, the holder stops first.
//! With the defaults (3 s and 4 s) that tolerates ρ up to 14 %; real clocks drift by
//! parts per million. A holder that is paused (SIGSTOP, a long GC, a frozen VM) finds its
//! deadline passed when it wakes and stops before doing anything else.

use std::collections::HashMap;
use std::time::Duration;

/// A reading of this process's monotonic clock: time since an arbitrary origin. Only ever
/// compared with readings of the same process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Mono(pub Duration);

impl Mono {
    /// `self + d`.
    pub fn after(self, d: Duration) -> Mono {
        Mono(self.0.saturating_add(d))
    }

    /// Time elapsed from `earlier` to `self` (zero if `earlier` is later).
    pub fn since(self, earlier: Mono) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

/// The three durations of a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTiming {
    /// How long an observer waits, from when it saw the record change, before it may take
    /// the lease over.
    pub duration: Duration,
    /// How often the holder rewrites the record.
    pub renew_every: Duration,
    /// How long after sending its last confirmed renew the holder keeps acting.
    pub renew_deadline: Duration,
}

impl Default for LeaseTiming {
    /// 4 s / 1.25 s / 3 s: 0.8 writes per second per holder, so a fleet of N replicas
    /// (one of them also renewing the distributor lease) writes at most one record per
    /// second per replica from N = 4 on; two renews inside every deadline, so one lost
    /// reply or slow round trip never makes a healthy holder stop; a crashed holder's
    /// clusters have a new owner in about 4 s (G2: ≤ 5 s, measured in
    /// `docs/reliability.md`); 14 % clock-rate tolerance.
    fn default() -> Self {
        LeaseTiming {
            duration: Duration::from_secs(4),
            renew_every: Duration::from_millis(1250),
            renew_deadline: Duration::from_secs(3),
        }
    }
}

/// Lease durations that cannot be safe.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    /// The holder would renew less often than its deadline allows: one slow renew and it
    /// stops working although nothing failed.
    #[error(
        "lease renew interval {renew_every:?} must be shorter than the renew deadline {renew_deadline:?}"
    )]
    RenewSlowerThanDeadline {
        /// The interval.
        renew_every: Duration,
        /// The deadline.
        renew_deadline: Duration,
    },
    /// The holder could still be acting when observers take over.
    #[error(
        "lease renew deadline {renew_deadline:?} must be shorter than the lease duration {duration:?}"
    )]
    DeadlineNotBeforeExpiry {
        /// The deadline.
        renew_deadline: Duration,
        /// The duration.
        duration: Duration,
    },
}

impl LeaseTiming {
    /// Checks the ordering `0 < renew_every < renew_deadline < duration`.
    pub fn validate(&self) -> Result<(), TimingError> {
        if self.renew_every.is_zero() || self.renew_every >= self.renew_deadline {
            return Err(TimingError::RenewSlowerThanDeadline {
                renew_every: self.renew_every,
                renew_deadline: self.renew_deadline,
            });
        }
        if self.renew_deadline >= self.duration {
            return Err(TimingError::DeadlineNotBeforeExpiry {
                renew_deadline: self.renew_deadline,
                duration: self.duration,
            });
        }
        Ok(())
    }

    /// The largest clock-rate error ρ (as a fraction) under which the holder always stops
    /// before any observer takes over: `renew_deadline × (1 + ρ) < duration × (1 − ρ)`.
    pub fn drift_tolerance(&self) -> f64 {
        let (d, r) = (
            self.duration.as_secs_f64(),
            self.renew_deadline.as_secs_f64(),
        );
        (d - r) / (d + r)
    }
}

/// How one observer sees other replicas' lease records: for each key, the version it last
/// saw and when (on its own clock) it first saw that version.
#[derive(Debug, Clone, Default)]
pub struct LeaseObserver {
    seen: HashMap<String, (u64, Mono)>,
}

/// An observer's verdict on a lease record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Changed within the lease duration: its holder may be acting.
    Live {
        /// How long the current version has been seen unchanged.
        unchanged_for: Duration,
    },
    /// Unchanged for at least the lease duration: its holder has stopped.
    Expired {
        /// How long the current version has been seen unchanged.
        unchanged_for: Duration,
    },
}

impl Verdict {
    /// Whether the holder may be acting.
    pub fn is_live(self) -> bool {
        matches!(self, Verdict::Live { .. })
    }
}

impl LeaseObserver {
    /// An observer that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `key` is at `version` as of `now`, and judges it. A version seen for
    /// the first time starts a new wait: a record this observer has just met counts as live
    /// for a full duration, even if it is in truth long abandoned (an observer that starts
    /// late waits longer; it never takes over early).
    pub fn observe(&mut self, key: &str, version: u64, now: Mono, timing: &LeaseTiming) -> Verdict {
        self.observe_listed(key, version, now, now, timing)
    }

    /// [`LeaseObserver::observe`] for a listing asked for at `asked` and read at
    /// `received`: a new version counts from when it was read (the latest it can have been
    /// written), an unchanged one is judged as of when the listing was asked for (the
    /// earliest the store can have read it). A listing that came back late — its reply
    /// delayed, or this process paused (SIGSTOP) while it was in flight — never makes a
    /// record look older than the store showed it.
    pub fn observe_listed(
        &mut self,
        key: &str,
        version: u64,
        asked: Mono,
        received: Mono,
        timing: &LeaseTiming,
    ) -> Verdict {
        let first_seen = match self.seen.get(key) {
            Some(&(v, since)) if v == version => since,
            _ => {
                self.seen.insert(key.to_owned(), (version, received));
                received
            }
        };
        let unchanged_for = asked.since(first_seen);
        if unchanged_for >= timing.duration {
            Verdict::Expired { unchanged_for }
        } else {
            Verdict::Live { unchanged_for }
        }
    }

    /// Forgets `key` (its record was deleted).
    pub fn forget(&mut self, key: &str) {
        self.seen.remove(key);
    }

    /// Keeps only the keys for which `keep` holds (the others' records were deleted).
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.seen.retain(|k, _| keep(k));
    }
}

/// The holder's own view of a lease it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeldLease {
    valid_until: Option<Mono>,
}

/// A renew in flight: when it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "report the renew's outcome with HeldLease::confirmed"]
pub struct RenewSent(Mono);

impl RenewSent {
    /// When it was sent.
    pub fn at(self) -> Mono {
        self.0
    }
}

impl HeldLease {
    /// Not held.
    pub fn new() -> Self {
        Self::default()
    }

    /// A renew (or the acquiring write) is being sent now.
    pub fn sending(now: Mono) -> RenewSent {
        RenewSent(now)
    }

    /// The store confirmed the write sent at `sent`: the lease is valid until `sent +
    /// renew_deadline` (not from the confirmation: the observers' wait may have started as
    /// early as the send). A confirmation older than the current validity changes nothing.
    pub fn confirmed(&mut self, sent: RenewSent, timing: &LeaseTiming) {
        let until = sent.0.after(timing.renew_deadline);
        if self.valid_until.is_none_or(|v| until > v) {
            self.valid_until = Some(until);
        }
    }

    /// The lease was lost (a conflict: someone else holds it) or released.
    pub fn lost(&mut self) {
        self.valid_until = None;
    }

    /// Whether the holder may act at `now`.
    pub fn is_valid(&self, now: Mono) -> bool {
        self.valid_until.is_some_and(|v| now < v)
    }

    /// When the holder must stop unless a renew is confirmed before.
    pub fn valid_until(&self) -> Option<Mono> {
        self.valid_until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Mono {
        Mono(Duration::from_millis(ms))
    }

    /// Fixed timing, so these tests do not move with the defaults.
    fn four_one_three() -> LeaseTiming {
        LeaseTiming {
            duration: Duration::from_secs(4),
            renew_every: Duration::from_secs(1),
            renew_deadline: Duration::from_secs(3),
        }
    }

    #[test]
    fn defaults_are_valid_and_tolerate_drift() {
        let t = LeaseTiming::default();
        t.validate().unwrap();
        assert!((t.drift_tolerance() - 1.0 / 7.0).abs() < 1e-9);
        let bad = LeaseTiming {
            renew_deadline: Duration::from_secs(4),
            ..t
        };
        assert!(matches!(
            bad.validate(),
            Err(TimingError::DeadlineNotBeforeExpiry { .. })
        ));
        let bad = LeaseTiming {
            renew_every: Duration::from_secs(3),
            ..t
        };
        assert!(matches!(
            bad.validate(),
            Err(TimingError::RenewSlowerThanDeadline { .. })
        ));
    }

    #[test]
    fn a_listing_that_comes_back_late_is_judged_as_of_when_it_was_asked_for() {
        let t = LeaseTiming::default();
        let mut o = LeaseObserver::new();
        // Version 7 first read at 1 s.
        assert!(o.observe_listed("s/0", 7, at(900), at(1_000), &t).is_live());
        // A listing asked for at 2 s (the holder renewed just after) whose reply arrives
        // at 6 s, after a pause: still live, as of 2 s.
        assert!(
            o.observe_listed("s/0", 7, at(2_000), at(6_000), &t)
                .is_live()
        );
        // Asked for at 5 s: unchanged for 4 s as of then.
        assert!(
            !o.observe_listed("s/0", 7, at(5_000), at(5_010), &t)
                .is_live()
        );
        // A new version counts from when it was read.
        assert!(
            o.observe_listed("s/0", 8, at(5_100), at(9_000), &t)
                .is_live()
        );
        assert!(
            o.observe_listed("s/0", 8, at(12_900), at(12_910), &t)
                .is_live()
        );
        assert!(
            !o.observe_listed("s/0", 8, at(13_000), at(13_010), &t)
                .is_live()
        );
    }

    #[test]
    fn an_observer_waits_a_full_duration_from_what_it_saw() {
        let t = four_one_three();
        let mut o = LeaseObserver::new();
        assert!(o.observe("s/0", 7, at(10_000), &t).is_live());
        assert!(o.observe("s/0", 7, at(13_999), &t).is_live());
        assert_eq!(
            o.observe("s/0", 7, at(14_000), &t),
            Verdict::Expired {
                unchanged_for: Duration::from_secs(4)
            }
        );
        // A new version restarts the wait.
        assert!(o.observe("s/0", 8, at(14_500), &t).is_live());
        assert!(!o.observe("s/0", 8, at(18_500), &t).is_live());
        // A record first met late is still given a full duration.
        assert!(o.observe("s/1", 1, at(18_500), &t).is_live());
    }

    #[test]
    fn a_holder_counts_from_the_send_not_the_confirmation() {
        let t = four_one_three();
        let mut h = HeldLease::new();
        assert!(!h.is_valid(at(0)));
        let sent = HeldLease::sending(at(1_000));
        h.confirmed(sent, &t);
        assert!(h.is_valid(at(3_999)));
        assert!(!h.is_valid(at(4_000)));
        // A late confirmation of an older send does not shorten validity.
        h.confirmed(HeldLease::sending(at(2_000)), &t);
        h.confirmed(HeldLease::sending(at(1_500)), &t);
        assert_eq!(h.valid_until(), Some(at(5_000)));
        h.lost();
        assert!(!h.is_valid(at(2_500)));
    }

    /// The safety argument, executed: for any send time, store latency, observation delay
    /// and clock-rate errors within tolerance, the holder stops before an observer calls
    /// the lease expired (real time).
    #[test]
    fn the_holder_always_stops_first_within_drift_tolerance() {
        let t = LeaseTiming::default();
        let rho = t.drift_tolerance() * 0.99;
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        for _ in 0..100_000 {
            let send = next() * 100.0; // real seconds
            let latency = next() * 2.0; // write applied at send + latency
            let seen_after = next() * 2.0; // observer polls later still
            let holder_rate = 1.0 + (2.0 * next() - 1.0) * rho; // local seconds per real second
            let observer_rate = 1.0 + (2.0 * next() - 1.0) * rho;
            let holder_stops = send + t.renew_deadline.as_secs_f64() / holder_rate;
            let observer_sees = send + latency + seen_after;
            let observer_expires = observer_sees + t.duration.as_secs_f64() / observer_rate;
            assert!(
                holder_stops < observer_expires,
                "send {send} latency {latency} rates {holder_rate} {observer_rate}"
            );
        }
    }
}
