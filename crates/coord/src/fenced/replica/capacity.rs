//! Capacity-aware placement's inputs: each shard's capacity and zone, from its holder's
//! advertisement (`--capacity`, by default its CPUs, and `--zone`, in its shard record) or
//! from what the operator fixed for that shard (a fleet file's `shards:`), with the
//! safeguards of Kubernetes Topology Aware Hints applied to replicas:
//! - **Insufficient data falls back to equal shares.** When a shard with a live holder has
//!   no advertised capacity (its holder runs an older release), every shard without a fixed
//!   capacity counts as 1, as Topology Aware Hints give no hints while a node lacks its
//!   allocatable CPU: mixing "unknown" with real figures would guess.
//! - **Sane range.** A capacity is clamped to `1..=`[`MAX_CAPACITY`] (a record written by
//!   hand or by a newer release may say 0 or 10⁹).
//! - **Neither nothing nor everything.** No shard counts for less than
//!   1/[`MAX_CAPACITY_RATIO`] of the largest: a small pod beside large ones still gets a
//!   share (and is not left holding a lease and no clusters), and one huge advertisement
//!   cannot pull the whole fleet onto one pod. Zones weigh by the sum of their shards'
//!   capacities, so the same bound holds for them shard by shard.
//!
//! The engine then gives each shard load in proportion to its capacity, each zone in
//! proportion to its shards' total, within its tolerance (`fleetshard_core::placement`).

use fleetshard_core::ShardSpec;

/// The largest capacity a shard counts with: more is clamped to it.
pub const MAX_CAPACITY: u32 = 1024;

/// How many times larger than the smallest a shard's capacity may count: smaller ones are
/// raised to the largest over this.
pub const MAX_CAPACITY_RATIO: u32 = 16;

/// What the distributor knows of one shard.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Advertised {
    /// The zone in the (last) holder's record.
    pub zone: Option<String>,
    /// The capacity in the (last) holder's record (`None`: not advertised).
    pub capacity: Option<u32>,
    /// The shard has a live holder (not vacant): its capacity decides whether data suffice.
    pub held: bool,
}

/// The specs the distributor places with, one per shard: `fixed[n]` (the fleet file's
/// entry for shard n) wins over shard n's advertisement — its capacity always, its zone when
/// it names one — so that `plan` on the same fleet file previews what `run` places.
pub(super) fn shard_specs(advertised: &[Advertised], fixed: &[ShardSpec]) -> Vec<ShardSpec> {
    let complete = advertised
        .iter()
        .enumerate()
        .all(|(n, a)| !a.held || a.capacity.is_some() || fixed.get(n).is_some());
    let mut specs: Vec<ShardSpec> = advertised
        .iter()
        .enumerate()
        .map(|(n, a)| match fixed.get(n) {
            Some(f) => ShardSpec {
                zone: f.zone.clone().or_else(|| a.zone.clone()),
                capacity: f.capacity,
            },
            None => ShardSpec {
                zone: a.zone.clone(),
                capacity: if complete { a.capacity.unwrap_or(1) } else { 1 },
            },
        })
        .collect();
    for s in &mut specs {
        s.capacity = s.capacity.clamp(1, MAX_CAPACITY);
    }
    let floor = specs
        .iter()
        .zip(advertised)
        .filter(|(_, a)| a.held)
        .map(|(s, _)| s.capacity)
        .max()
        .map_or(1, |max| max.div_ceil(MAX_CAPACITY_RATIO));
    for s in &mut specs {
        s.capacity = s.capacity.max(floor);
    }
    specs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(capacity: Option<u32>) -> Advertised {
        Advertised {
            zone: None,
            capacity,
            held: true,
        }
    }

    fn capacities(specs: &[ShardSpec]) -> Vec<u32> {
        specs.iter().map(|s| s.capacity).collect()
    }

    #[test]
    fn holders_capacities_are_used_as_advertised() {
        let specs = shard_specs(&[held(Some(1)), held(Some(4)), held(Some(2))], &[]);
        assert_eq!(capacities(&specs), [1, 4, 2]);
    }

    #[test]
    fn a_holder_without_a_capacity_means_equal_shares() {
        let specs = shard_specs(&[held(Some(8)), held(None), held(Some(2))], &[]);
        assert_eq!(capacities(&specs), [1, 1, 1]);
        // A vacant shard's missing capacity does not matter: it gets nothing anyway.
        let vacant = Advertised::default();
        let specs = shard_specs(&[held(Some(8)), vacant, held(Some(2))], &[]);
        assert_eq!(capacities(&specs), [8, 1, 2]);
    }

    #[test]
    fn capacities_are_clamped_and_none_is_starved() {
        let specs = shard_specs(&[held(Some(0)), held(Some(u32::MAX))], &[]);
        assert_eq!(
            capacities(&specs),
            [MAX_CAPACITY / MAX_CAPACITY_RATIO, MAX_CAPACITY]
        );
        let specs = shard_specs(&[held(Some(1)), held(Some(64)), held(Some(3))], &[]);
        assert_eq!(capacities(&specs), [4, 64, 4]);
    }

    #[test]
    fn the_fleet_files_shards_win_over_advertisements() {
        let zoned = Advertised {
            zone: Some("b".into()),
            ..held(Some(8))
        };
        let fixed = [ShardSpec {
            zone: Some("a".into()),
            capacity: 2,
        }];
        let specs = shard_specs(&[zoned.clone(), held(Some(3))], &fixed);
        assert_eq!(capacities(&specs), [2, 3]);
        assert_eq!(specs[0].zone.as_deref(), Some("a"));
        let unzoned = [ShardSpec {
            zone: None,
            capacity: 2,
        }];
        assert_eq!(
            shard_specs(&[zoned], &unzoned)[0].zone.as_deref(),
            Some("b")
        );
        // A fixed capacity makes up for a holder that advertises none.
        let specs = shard_specs(&[held(None), held(Some(3))], &unzoned);
        assert_eq!(capacities(&specs), [2, 3]);
    }
}
