//! Spreading a vacant shard's clusters over the survivors, for the failover's burst.
//!
//! When a shard loses its holder, every cluster it held is taken over at once: the new
//! owners connect, list, render and compare all of those clusters' apps together. That
//! burst follows the clusters moved, not the steady cost placement balances. Placement
//! puts each vacated cluster on the shard it prefers most among those below target, so a
//! survivor whose own clusters measured cheap (far below its target) takes most of them: in
//! a full-size run one survivor of nine took 400 of the 1,001 clusters and finished its
//! takeover 7 s after the others.
//!
//! [`spread_vacated`] runs after placement: no survivor keeps more than its share of the
//! vacated load (by target, within its zone when zones are in use) times `1 + tolerance`.
//! Each excess cluster, those that prefer their shard least first, goes to the shard it
//! prefers most among the same zone's shards that stay within that share and within their
//! own bound. Nothing else moves, so no shard goes above its bound; a survivor below its
//! floor stays there (cost balancing is later placements' work, under their hysteresis).
//! Deterministic: shards in index order, clusters by preference then id.

use super::rendezvous::{score, shard_salt, stable_hash};
use super::{Placement, ZonePlan};
use crate::model::ShardSpec;

/// One unit of a placement for [`spread_vacated`].
#[derive(Debug, Clone, Copy)]
pub struct Unit<'a> {
    /// The unit's id (cluster or slice id): its rendezvous key.
    pub id: &'a str,
    /// Its load, in the placement's units.
    pub load: u64,
    /// Whether it leaves a vacant shard in this placement (and may be moved here).
    pub vacated: bool,
}

/// Moves vacated units off survivors that took more than their share of them (see the
/// module docs); `units` and `placement.shards` are in the same order, `specs` are the
/// shards. Returns how many units moved.
pub fn spread_vacated(
    placement: &mut Placement,
    units: &[Unit<'_>],
    specs: &[ShardSpec],
    tolerance: f64,
) -> usize {
    let n = placement.targets.len();
    let mut load = vec![0u64; n];
    let mut taken = vec![0u64; n];
    for (u, s) in units.iter().zip(&placement.shards) {
        if let Some(s) = s.map(|s| s as usize).filter(|&s| s < n) {
            load[s] += u.load;
            if u.vacated {
                taken[s] += u.load;
            }
        }
    }
    if taken.iter().all(|&t| t == 0) {
        return 0;
    }
    let zoned = matches!(placement.zones, ZonePlan::Aware(_));
    let group = |s: usize| {
        if zoned {
            specs.get(s).and_then(|spec| spec.zone.as_deref())
        } else {
            None
        }
    };
    let eps = tolerance.max(0.0);
    let targets = &placement.targets;
    let cap: Vec<f64> = (0..n)
        .map(|s| {
            let peers = (0..n).filter(|&p| group(p) == group(s));
            let (vacated, target): (u64, f64) =
                peers.fold((0, 0.0), |(v, t), p| (v + taken[p], t + targets[p]));
            if target > 0.0 {
                vacated as f64 * targets[s] / target * (1.0 + eps)
            } else {
                f64::INFINITY
            }
        })
        .collect();
    let hi: Vec<f64> = targets.iter().map(|t| t * (1.0 + eps)).collect();
    let mut moves = 0;
    for s in 0..n {
        if taken[s] as f64 <= cap[s] {
            continue;
        }
        let salt = shard_salt(s as u32);
        let mut mine: Vec<(u64, &str, usize)> = units
            .iter()
            .enumerate()
            .filter(|(i, u)| u.vacated && placement.shards[*i] == Some(s as u32))
            .map(|(i, u)| (score(stable_hash(u.id), salt), u.id, i))
            .collect();
        mine.sort_unstable();
        for (_, id, i) in mine {
            if taken[s] as f64 <= cap[s] {
                break;
            }
            let (w, key) = (units[i].load, stable_hash(id));
            let to = (0..n)
                .filter(|&d| d != s && targets[d] > 0.0 && group(d) == group(s))
                .filter(|&d| (taken[d] + w) as f64 <= cap[d] && (load[d] + w) as f64 <= hi[d])
                .max_by_key(|&d| score(key, shard_salt(d as u32)));
            if let Some(d) = to {
                placement.shards[i] = Some(d as u32);
                (taken[s], load[s]) = (taken[s] - w, load[s] - w);
                (taken[d], load[d]) = (taken[d] + w, load[d] + w);
                moves += 1;
            }
        }
    }
    moves
}

#[cfg(test)]
mod tests;
