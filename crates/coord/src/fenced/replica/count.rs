//! Where a fleet's shard count comes from, and its bounds.

/// The most shards a fleet may have; records of higher numbers are ignored.
pub const MAX_SHARDS: u32 = 4096;

/// Where the shard count comes from. Only the elected distributor applies the policy; it
/// commits the count with each generation, and every replica claims among the committed
/// count (before the first commit: [`ShardCount::initial`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardCount {
    /// Exactly this many (`--shards N`).
    Fixed(u32),
    /// The count stored by `fleetshard scale N`, else `default` (`--shards store`).
    Desired {
        /// Used until a count is stored.
        default: u32,
    },
    /// As many shards as live replicas (holders and spares), within `min..=max`
    /// (`--shards auto`). It never drops below the highest held shard, so a replica that
    /// dies in the middle leaves a vacant shard (its clusters displaced) rather than making
    /// every higher replica move.
    Auto {
        /// Fewest shards.
        min: u32,
        /// Most shards.
        max: u32,
    },
    /// Given by the runner with each step
    /// ([`FleetInput::external_shards`](crate::fenced::FleetInput::external_shards): a
    /// Kubernetes Deployment's `spec.replicas`), else `default`.
    External {
        /// Used while the runner has no value.
        default: u32,
    },
}

/// Why a [`ShardCount`] cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardCountError {
    /// A count (or bound) outside `1..=MAX_SHARDS`.
    #[error("shard count {0} is outside 1..={MAX_SHARDS}")]
    OutOfRange(u32),
    /// `auto` with `min > max`.
    #[error("auto shard count: min {min} is above max {max}")]
    Inverted {
        /// Lower bound.
        min: u32,
        /// Upper bound.
        max: u32,
    },
}

impl ShardCount {
    /// Checks the counts are usable.
    pub fn validate(self) -> Result<(), ShardCountError> {
        let check = |n: u32| {
            if (1..=MAX_SHARDS).contains(&n) {
                Ok(())
            } else {
                Err(ShardCountError::OutOfRange(n))
            }
        };
        match self {
            ShardCount::Fixed(n)
            | ShardCount::Desired { default: n }
            | ShardCount::External { default: n } => check(n),
            ShardCount::Auto { min, max } => {
                check(min)?;
                check(max)?;
                if min > max {
                    return Err(ShardCountError::Inverted { min, max });
                }
                Ok(())
            }
        }
    }

    /// The count to claim among before any generation is committed: the fixed count, the
    /// stored desired count or the default, the external value or the default, or `auto`'s
    /// minimum (the distributor grows it as it counts spares).
    pub fn initial(self, desired: Option<u32>, external: Option<u32>) -> u32 {
        let n = match self {
            ShardCount::Fixed(n) => n,
            ShardCount::Desired { default } => desired.unwrap_or(default),
            ShardCount::External { default } => external.unwrap_or(default),
            ShardCount::Auto { min, .. } => min,
        };
        n.clamp(1, MAX_SHARDS)
    }
}
