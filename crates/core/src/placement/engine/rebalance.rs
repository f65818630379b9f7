//! Steps 4 and 5 of the balanced placement: shed load from shards above their bound, fill
//! shards below their floor, each with the fewest moves.
//!
//! Both repeatedly take "the first cluster, in a fixed order, that fits": shedding goes
//! through a shard's clusters by weight, then id (up from the lightest that covers the
//! excess alone, then down from the heaviest below it); filling through the candidates by
//! weight, then preference. Whether a cluster fits depends only on its weight (and, with
//! zones, its zone), and monotonically: a lighter one fits wherever a heavier one does. So
//! the first that fits is found with range queries on ordered views kept current as
//! clusters move (`order.rs`: sets for shedding, sorted vectors with skip links for
//! filling), instead of re-sorting the shard for every move: O(log n) per move,
//! plus O(shards) for the thresholds and the destination, and O(N log N) to build the sets
//! — O(N log N) for a whole rebalance where it used to be O(moves × N log N). The result
//! is exactly the scan's: the tests compare both on random fleets (`reference.rs`).

use std::cmp::Reverse;

use super::BalancedPlacer;
use super::order::{MemberIndex, Skiplist, below, largest};
use super::state::State;
use crate::placement::rendezvous::score;

/// A cluster that could fill a shard: (weight, preference for the shard reversed, index),
/// in the order filling considers them.
type Candidate = (u64, Reverse<u64>, usize);

impl BalancedPlacer {
    pub(super) fn rebalance(&mut self) {
        #[cfg(test)]
        if self.reference {
            self.rebalance_reference();
            self.settle_small_fleet();
            return;
        }
        self.shed();
        self.fill();
        self.settle_small_fleet();
    }

    /// Brings every shard above its bound back under it, moving the fewest, smallest
    /// clusters: the smallest one that fixes the excess alone, else the largest below it.
    /// When no single move helps (lumpy clusters, or a zone that must stay local), one
    /// swap with a lighter cluster of another shard, if that brings both within bound.
    fn shed(&mut self) {
        let n = self.shards.len();
        let over = |st: &State, s: usize| st.load[s] as f64 - st.hi[s];
        let mut overloaded: Vec<usize> = (0..n).filter(|&s| over(&self.state, s) > 0.0).collect();
        if overloaded.is_empty() {
            return;
        }
        overloaded.sort_by(|&a, &b| {
            over(&self.state, b)
                .total_cmp(&over(&self.state, a))
                .then(a.cmp(&b))
        });
        self.state.members = Some(MemberIndex::build(&self.state, &overloaded, n));
        for &s in &overloaded {
            while over(&self.state, s) > 0.0 {
                let Some(index) = &self.state.members else {
                    break;
                };
                // A cluster heavier than the bound can only be isolated: when nothing else
                // is movable, there is nothing to do (and nothing to search for).
                let hi = self.state.hi[s];
                let lightest = index.classes(s).map(|m| m.1).min();
                if lightest.is_none_or(|w| w as f64 > hi) {
                    break;
                }
                let excess = over(&self.state, s);
                if let Some((i, d)) = self.single_move(s, excess) {
                    self.assign(i, Some(d));
                    continue;
                }
                let members = index.by_weight(s);
                if let Some((a, b, d)) = self.find_swap(s, &members) {
                    self.assign(a, Some(d));
                    self.assign(b, Some(s as u32));
                } else {
                    break;
                }
            }
            // Nothing comes back to a shard once shed (every move keeps its target within
            // bound), so its order is no longer needed.
            if let Some(index) = &mut self.state.members {
                index.forget(s);
            }
        }
        self.state.members = None;
    }

    /// The one cluster shard `s` (above its bound by `excess`) gives away, and where: of its
    /// movable clusters by weight then id, the first that some other shard can take within
    /// its bound (`choose`, strict), going up from the lightest that covers the excess
    /// alone, then down from the heaviest below it.
    fn single_move(&self, s: usize, excess: f64) -> Option<(usize, u32)> {
        let st = &self.state;
        let index = st.members.as_ref()?;
        // Per shard, the heaviest cluster it could take within its bound (`choose`'s test).
        let room: Vec<Option<u64>> = (0..self.shards.len())
            .map(|d| {
                if d == s || !self.usable(d) {
                    return None;
                }
                let (load, hi) = (st.load[d] as f64, st.hi[d]);
                largest(|w| load + w as f64 <= hi, hi - load)
            })
            .collect();
        // The heaviest cluster of zone class `z` that fits somewhere it may go.
        let fits = |z: usize| -> Option<u64> {
            match &st.layout {
                None => room.iter().flatten().max().copied(),
                Some(l) => (0..room.len())
                    .filter(|&d| l.may_host(z, l.shard_zone[d]))
                    .filter_map(|d| room[d])
                    .max(),
            }
        };
        let classes: Vec<(usize, Option<u64>)> =
            index.classes(s).map(|m| (m.0, fits(m.0))).collect();
        // w covers the excess alone exactly when w ≥ `covers` (≥ 1: the excess is positive).
        let covers = below(excess);
        // Going up, only the first of each class can be the one: a heavier one fits
        // nowhere it does not.
        let up = classes
            .iter()
            .filter_map(|&(z, fit)| {
                let m = index.first_from(s, z, covers)?;
                (m.1 <= fit?).then_some(m)
            })
            .min_by_key(|m| (m.1, m.2));
        let pick = up.or_else(|| {
            // Going down, the heaviest of each class that fits.
            let top = covers.checked_sub(1)?;
            classes
                .iter()
                .filter_map(|&(z, fit)| index.last_up_to(s, z, top.min(fit?)))
                .max_by_key(|m| (m.1, m.2))
        })?;
        let d = self.choose(pick.3, Some(s as u32), true);
        debug_assert!(d.is_some(), "a cluster that fits has a destination");
        d.map(|d| (pick.3, d))
    }

    /// A swap that brings overloaded shard `s` within its bound: `a` (of `members`, the
    /// movable clusters on `s`) goes to shard `d`, and the lighter `b` comes back from `d`,
    /// with `d` staying within its bound. Of all such swaps, the one moving the least load
    /// (first by shard, then weight, on ties). Only tried when no single move works.
    fn find_swap(&self, s: usize, members: &[usize]) -> Option<(usize, usize, u32)> {
        let st = &self.state;
        let excess = st.load[s] as f64 - st.hi[s];
        // Hot clusters (above s's bound) cannot be helped by a swap.
        let ours: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&a| st.w[a] as f64 <= st.hi[s])
            .collect();
        if ours.is_empty() {
            return None;
        }
        // Every other shard's movable clusters, bucketed once.
        let mut theirs: Vec<Vec<usize>> = vec![Vec::new(); self.shards.len()];
        for i in 0..st.ids.len() {
            if let Some(d) = st.shard_of[i]
                && d as usize != s
                && st.movable(i)
            {
                theirs[d as usize].push(i);
            }
        }
        let mut best: Option<(u64, usize, usize, u32)> = None;
        for (d, theirs) in theirs.iter_mut().enumerate() {
            let room = st.hi[d] - st.load[d] as f64;
            if d == s || room <= 0.0 || theirs.is_empty() {
                continue;
            }
            theirs.sort_by(|&a, &b| {
                st.w[a]
                    .cmp(&st.w[b])
                    .then_with(|| st.ids[a].cmp(&st.ids[b]))
            });
            for &a in ours.iter().filter(|&&a| self.tier(a, d as u32).is_some()) {
                let wa = st.w[a] as f64;
                // s ends within bound: w_b ≤ w_a − excess; d too: w_b ≥ w_a − room.
                let (lightest, heaviest) = (wa - room, wa - excess);
                let from = theirs.partition_point(|&b| (st.w[b] as f64) < lightest);
                let fits = theirs[from..]
                    .iter()
                    .take_while(|&&b| st.w[b] as f64 <= heaviest)
                    .find(|&&b| self.tier(b, s as u32).is_some());
                if let Some(&b) = fits {
                    let moved = st.w[a] + st.w[b];
                    if best.is_none_or(|(m, ..)| moved < m) {
                        best = Some((moved, a, b, d as u32));
                    }
                }
            }
        }
        best.map(|(_, a, b, d)| (a, b, d))
    }

    /// Brings every shard below its floor up to it with the fewest moves: the smallest
    /// cluster that covers the deficit alone, else the largest below it, taken from shards
    /// above their target (then, if needed, above their floor). Filling only to the floor,
    /// not the target, keeps one added or removed cluster from triggering a cascade.
    fn fill(&mut self) {
        let n = self.shards.len();
        let ratio = |st: &State, s: usize| {
            if st.target[s] > 0.0 {
                st.load[s] as f64 / st.target[s]
            } else {
                1.0
            }
        };
        let mut under: Vec<usize> = (0..n)
            .filter(|&s| (self.state.load[s] as f64) < self.state.lo[s])
            .collect();
        under.sort_by(|&a, &b| {
            ratio(&self.state, a)
                .total_cmp(&ratio(&self.state, b))
                .then(a.cmp(&b))
        });
        for s in under {
            if self.state.load[s] as f64 >= self.state.lo[s] {
                continue;
            }
            let mut donors = self.fill_candidates(s);
            for floor_is_target in [true, false] {
                while (self.state.load[s] as f64) < self.state.lo[s] {
                    let Some((d, k, c)) = self.fill_pick(s, &mut donors, floor_is_target) else {
                        break;
                    };
                    donors[d].remove(k);
                    self.assign(c.2, Some(s as u32));
                }
            }
        }
    }

    /// The clusters that may fill shard `s`, by the shard they are on: movable, allowed on
    /// `s`, and never pulled further from their home zone. Only they move while `s` fills,
    /// so the grouping stays true.
    fn fill_candidates(&self, s: usize) -> Vec<Skiplist<Candidate>> {
        let st = &self.state;
        let (su, salt) = (s as u32, self.salts[s]);
        let mut by_donor: Vec<Vec<Candidate>> = vec![Vec::new(); self.shards.len()];
        for i in (0..st.ids.len()).filter(|&i| st.movable(i)) {
            let (Some(d), Some(to)) = (st.shard_of[i], self.tier(i, su)) else {
                continue;
            };
            // Never pull a cluster further from its home zone.
            if d != su && self.tier(i, d).is_some_and(|from| to <= from) {
                // Ties in weight go to the cluster that prefers s most.
                by_donor[d as usize].push((st.w[i], Reverse(score(st.keys[i], salt)), i));
            }
        }
        by_donor.into_iter().map(Skiplist::new).collect()
    }

    /// The next cluster to fill shard `s` with, its shard and its place there: of every
    /// donor's candidates in one order (weight, preference), the first allowed — its donor
    /// stays at its floor (its target while `floor_is_target`), and `s` within its bound —
    /// that covers the deficit alone; else the heaviest allowed below it, the
    /// most-preferring of that weight.
    fn fill_pick(
        &self,
        s: usize,
        donors: &mut [Skiplist<Candidate>],
        floor_is_target: bool,
    ) -> Option<(usize, usize, Candidate)> {
        let st = &self.state;
        let (load, hi) = (st.load[s] as f64, st.hi[s]);
        let fits_s = largest(|w| load + w as f64 <= hi, hi - load)?;
        // Per donor, the heaviest candidate it may give.
        let caps: Vec<(usize, u64)> = (0..donors.len())
            .filter(|&d| d != s && !donors[d].is_empty())
            .filter_map(|d| {
                let floor = if floor_is_target {
                    st.target[d]
                } else {
                    st.lo[d]
                };
                let load = st.load[d] as f64;
                let cap = largest(|w| load - w as f64 >= floor, load - floor)?;
                Some((d, cap.min(fits_s)))
            })
            .collect();
        let covers = below(st.lo[s] - load);
        let up = caps
            .iter()
            .filter_map(|&(d, cap)| first_of(donors, d, covers).filter(|m| m.2.0 <= cap))
            .min_by_key(|m| m.2);
        if up.is_some() {
            return up;
        }
        let top = covers.checked_sub(1)?;
        let w = caps
            .iter()
            .filter_map(|&(d, cap)| {
                let upto = top.min(cap);
                donors[d].last_upto(|c| c.0 <= upto).map(|c| c.0)
            })
            .max()?;
        caps.iter()
            .filter(|&&(_, cap)| cap >= w)
            .filter_map(|&(d, _)| first_of(donors, d, w).filter(|m| m.2.0 == w))
            .min_by_key(|m| m.2)
    }
}

/// The first candidate of donor `d` weighing at least `w`: (donor, place, candidate).
fn first_of(
    donors: &mut [Skiplist<Candidate>],
    d: usize,
    w: u64,
) -> Option<(usize, usize, Candidate)> {
    donors[d].first_from(|c| c.0 < w).map(|(k, c)| (d, k, c))
}
