//! Spreading a vacant shard's clusters over the survivors, for the failover's burst.
//!
//! When a shard loses its holder, every cluster it held is taken over at once: the new
//! owners connect, list, render and compare all of those clusters' apps together. That
//! burst follows the apps and clusters moved (their estimates: base plus apps), not the
//! measured steady cost placement balances. Placement puts each vacated cluster on the
//! shard it prefers most among those below target, so a survivor whose own clusters
//! measured cheap (far below its target) takes most of them: in full-size runs one
//! survivor of nine took 400, then 611, of about 1,050 clusters, and finished its takeover
//! seconds after the others.
//!
//! [`spread_vacated`] runs after placement: no survivor keeps more than its share of the
//! vacated work (by target, within its zone when zones are in use) times `1 + tolerance`.
//! Each excess cluster, those that prefer their shard least first, goes to the shard it
//! prefers most among the same zone's shards that stay within that share and within their
//! own bound (by load, as placement counts it). Nothing else moves, so no shard goes above
//! its bound; a survivor below its floor stays there (cost balancing is later placements'
//! work, under their hysteresis). Deterministic: shards in index order, clusters by
//! preference then id.

use super::rendezvous::{score, shard_salt, stable_hash};
use super::{Placement, ZonePlan};
use crate::model::ShardSpec;

/// One unit of a placement for [`spread_vacated`].
#[derive(Debug, Clone, Copy)]
pub struct Unit<'a> {
    /// The unit's id (cluster or slice id): its rendezvous key.
    pub id: &'a str,
    /// Its load, in the placement's units (what the bounds count).
    pub load: u64,
    /// What taking it over costs (its estimate: base plus apps): what the shares count.
    pub work: u64,
    /// Whether it leaves a vacant shard in this placement (and may be moved here).
    pub vacated: bool,
}

/// What [`spread_vacated`] did: how many units it moved, and per shard the vacated work
/// it took, its share (the cap), its load and its bound, after the spread.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spread {
    /// Units moved by the spread.
    pub moved: usize,
    /// Vacated work each shard took.
    pub taken: Vec<u64>,
    /// Each shard's share of the vacated work, times `1 + tolerance`.
    pub cap: Vec<f64>,
    /// Each shard's load.
    pub load: Vec<u64>,
    /// Each shard's bound.
    pub bound: Vec<f64>,
}

impl std::fmt::Display for Spread {
    /// `shard: taken/share load/bound` for each shard that took vacated work.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} moved by the spread;", self.moved)?;
        for (s, taken) in self.taken.iter().enumerate().filter(|(_, t)| **t > 0) {
            let load = self.load[s] as f64 / self.bound[s].max(1.0);
            write!(f, " {s}: {taken}/{:.0} ({load:.2} of bound)", self.cap[s])?;
        }
        Ok(())
    }
}

/// Moves vacated units off survivors that took more than their share of the vacated work
/// (see the module docs); `units` and `placement.shards` are in the same order, `specs`
/// are the shards. Returns what it did (`None`: nothing was vacated).
pub fn spread_vacated(
    placement: &mut Placement,
    units: &[Unit<'_>],
    specs: &[ShardSpec],
    tolerance: f64,
) -> Option<Spread> {
    let n = placement.targets.len();
    let mut load = vec![0u64; n];
    let mut taken = vec![0u64; n];
    for (u, s) in units.iter().zip(&placement.shards) {
        if let Some(s) = s.map(|s| s as usize).filter(|&s| s < n) {
            load[s] += u.load;
            if u.vacated {
                taken[s] += u.work;
            }
        }
    }
    if taken.iter().all(|&t| t == 0) {
        return None;
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
        // (preference for this shard, id, index, rendezvous key): least preferred first.
        let mut mine: Vec<(u64, &str, usize, u64)> = units
            .iter()
            .enumerate()
            .filter(|(i, u)| u.vacated && placement.shards[*i] == Some(s as u32))
            .map(|(i, u)| {
                let key = stable_hash(u.id);
                (score(key, salt), u.id, i, key)
            })
            .collect();
        mine.sort_unstable();
        for (_, _, i, key) in mine {
            if taken[s] as f64 <= cap[s] {
                break;
            }
            let (work, l) = (units[i].work, units[i].load);
            let to = (0..n)
                .filter(|&d| d != s && targets[d] > 0.0 && group(d) == group(s))
                .filter(|&d| (taken[d] + work) as f64 <= cap[d] && (load[d] + l) as f64 <= hi[d])
                .max_by_key(|&d| score(key, shard_salt(d as u32)));
            if let Some(d) = to {
                placement.shards[i] = Some(d as u32);
                (taken[s], load[s]) = (taken[s] - work, load[s] - l);
                (taken[d], load[d]) = (taken[d] + work, load[d] + l);
                moves += 1;
            }
        }
    }
    Some(Spread {
        moved: moves,
        taken,
        cap,
        load,
        bound: hi,
    })
}

#[cfg(test)]
mod tests;
