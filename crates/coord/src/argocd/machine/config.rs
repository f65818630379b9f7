//! How one replica is set up: its identity, pin, heartbeat timing and algorithm.

use std::time::Duration;

use fleetshard_core::argo::ArgoAlgorithm;

use crate::argocd::{MAPPING_KEY, MAX_IDENTITY_LEN};

/// What one replica is and how it times its heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgoConfig {
    /// Written as `ControllerName`: unique among live replicas, ideally stable across
    /// restarts (W29).
    pub identity: String,
    /// `ARGOCD_CONTROLLER_SHARD` (`None` for Argo's −1).
    pub pin: Option<i64>,
    /// The heartbeat period H (`Settings::heartbeat`).
    pub heartbeat: Duration,
    /// How long an entry must be seen unchanged before it may be taken (`Settings::
    /// stale_after`, 3H).
    pub stale_after: Duration,
    /// Argo CD's distribution algorithm for the clusters of a shard.
    pub algorithm: ArgoAlgorithm,
    /// The store key of the mapping ([`MAPPING_KEY`]).
    pub key: String,
    /// Longest graceful release before the runner gives up (2 s).
    pub release_timeout: Duration,
    /// Seed of the conflict-backoff jitter (different per replica, e.g. random).
    pub jitter_seed: u64,
}

impl ArgoConfig {
    /// A configuration with Argo CD's defaults: H = 10 s, stale after 3H, legacy, the
    /// standard key, unpinned.
    pub fn new(identity: impl Into<String>) -> Self {
        ArgoConfig {
            identity: identity.into(),
            pin: None,
            heartbeat: Duration::from_secs(10),
            stale_after: Duration::from_secs(30),
            algorithm: ArgoAlgorithm::Legacy,
            key: MAPPING_KEY.to_owned(),
            release_timeout: Duration::from_secs(2),
            jitter_seed: 1,
        }
    }

    /// How long a holder acts after sending its last confirmed heartbeat: `S − H`.
    pub fn validity(&self) -> Duration {
        self.stale_after.saturating_sub(self.heartbeat)
    }

    /// How long a cluster gained without a known stop of its previous owner waits: `S`.
    pub fn start_delay(&self) -> Duration {
        self.stale_after
    }

    /// The largest clock-rate error ρ (a fraction of real time, on every replica) under
    /// which a holder always stops before an observer takes its entry over:
    /// `V × (1 + ρ) < S × (1 − ρ)`, so `ρ < (S − V)/(S + V)`; 20 % for `S = 3H`.
    pub fn drift_tolerance(&self) -> f64 {
        let (s, v) = (
            self.stale_after.as_secs_f64(),
            self.validity().as_secs_f64(),
        );
        (s - v) / (s + v)
    }

    /// Checks the identity (1 to [`MAX_IDENTITY_LEN`] bytes) and the timing (`H > 0`,
    /// `S > 2H`, so that a holder renews inside its validity).
    pub fn validate(&self) -> Result<(), ArgoConfigError> {
        if self.identity.is_empty() || self.identity.len() > MAX_IDENTITY_LEN {
            return Err(ArgoConfigError::Identity(self.identity.len()));
        }
        if self.heartbeat.is_zero() || self.stale_after <= self.heartbeat * 2 {
            return Err(ArgoConfigError::Timing {
                heartbeat: self.heartbeat,
                stale_after: self.stale_after,
            });
        }
        Ok(())
    }
}

/// Why a configuration cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgoConfigError {
    /// The identity is empty (that means "free" in the map) or too long.
    #[error("the controller identity must be 1 to {MAX_IDENTITY_LEN} bytes long, not {0}")]
    Identity(usize),
    /// The holder could not renew inside its validity (`S − H` must exceed `H`).
    #[error(
        "heartbeat {heartbeat:?} with stale-after {stale_after:?}: stale-after must exceed two heartbeats"
    )]
    Timing {
        /// H.
        heartbeat: Duration,
        /// S.
        stale_after: Duration,
    },
}
