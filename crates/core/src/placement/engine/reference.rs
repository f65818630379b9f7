//! Tests only: shedding and filling as they were written first, re-sorting a shard's
//! clusters for every move (O(moves × N log N)). `rebalance.rs` must give exactly the same
//! placement, which the equivalence tests check against this.

use super::BalancedPlacer;
use super::state::State;
use crate::placement::rendezvous::score;

impl BalancedPlacer {
    pub(super) fn rebalance_reference(&mut self) {
        self.shed_reference();
        self.fill_reference();
    }

    fn movable_reference(&self, i: usize) -> bool {
        self.state.managed[i] && self.state.pin[i].is_none() && self.state.w[i] > 0
    }

    /// Brings every shard above its bound back under it, moving the fewest, smallest
    /// clusters: the smallest one that fixes the excess alone, else the largest below it.
    /// When no single move helps (lumpy clusters, or a zone that must stay local), one
    /// swap with a lighter cluster of another shard, if that brings both within bound.
    fn shed_reference(&mut self) {
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
        for s in overloaded {
            while over(&self.state, s) > 0.0 {
                let members = self.members_by_weight_reference(s);
                // A cluster heavier than the bound can only be isolated: when nothing else
                // is movable, there is nothing to do (and nothing to search for).
                let hi = self.state.hi[s];
                if members.iter().all(|&i| self.state.w[i] as f64 > hi) {
                    break;
                }
                let excess = over(&self.state, s);
                let st = &self.state;
                let split = members.partition_point(|&i| (st.w[i] as f64) < excess);
                let order = (split..members.len()).chain((0..split).rev());
                let single = order.into_iter().find_map(|k| {
                    self.choose(members[k], Some(s as u32), true)
                        .map(|d| (members[k], d))
                });
                if let Some((i, d)) = single {
                    self.assign(i, Some(d));
                } else if let Some((a, b, d)) = self.find_swap_reference(s, &members) {
                    self.assign(a, Some(d));
                    self.assign(b, Some(s as u32));
                } else {
                    break;
                }
            }
        }
    }

    /// The movable clusters on shard `s`, lightest first (ties by id).
    fn members_by_weight_reference(&self, s: usize) -> Vec<usize> {
        let st = &self.state;
        let mut members: Vec<usize> = (0..st.ids.len())
            .filter(|&i| st.shard_of[i] == Some(s as u32) && self.movable_reference(i))
            .collect();
        self.sort_by_weight_reference(&mut members);
        members
    }

    fn sort_by_weight_reference(&self, members: &mut [usize]) {
        let st = &self.state;
        members.sort_by(|&a, &b| {
            st.w[a]
                .cmp(&st.w[b])
                .then_with(|| st.ids[a].cmp(&st.ids[b]))
        });
    }

    /// A swap that brings overloaded shard `s` within its bound: `a` (of `members`, the
    /// movable clusters on `s`) goes to shard `d`, and the lighter `b` comes back from `d`,
    /// with `d` staying within its bound. Of all such swaps, the one moving the least load
    /// (first by shard, then weight, on ties). Only tried when no single move works.
    fn find_swap_reference(&self, s: usize, members: &[usize]) -> Option<(usize, usize, u32)> {
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
                && self.movable_reference(i)
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
            self.sort_by_weight_reference(theirs);
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
    fn fill_reference(&mut self) {
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
            let su = s as u32;
            let st = &self.state;
            if st.load[s] as f64 >= st.lo[s] {
                continue;
            }
            let salt = self.salts[s];
            // (weight, preference for s, index): ties in weight go to the cluster that
            // prefers s most.
            let mut candidates: Vec<(u64, std::cmp::Reverse<u64>, usize)> = (0..st.ids.len())
                .filter(|&i| self.movable_reference(i))
                .filter_map(|i| {
                    let d = st.shard_of[i]?;
                    let to = self.tier(i, su)?;
                    // Never pull a cluster further from its home zone.
                    (d != su && self.tier(i, d).is_some_and(|from| to <= from))
                        .then(|| (st.w[i], std::cmp::Reverse(score(st.keys[i], salt)), i))
                })
                .collect();
            candidates.sort_unstable();
            for floor_is_target in [true, false] {
                while (self.state.load[s] as f64) < self.state.lo[s] {
                    let st = &self.state;
                    let deficit = st.lo[s] - st.load[s] as f64;
                    let allowed = |&(w, _, i): &(u64, std::cmp::Reverse<u64>, usize)| {
                        let d = st.shard_of[i].map_or(s, |d| d as usize);
                        let floor = if floor_is_target {
                            st.target[d]
                        } else {
                            st.lo[d]
                        };
                        d != s
                            && st.load[d] as f64 - w as f64 >= floor
                            && st.load[s] as f64 + w as f64 <= st.hi[s]
                    };
                    let split = candidates.partition_point(|c| (c.0 as f64) < deficit);
                    // The smallest that covers the deficit, else the heaviest below it; within
                    // one weight, the cluster that prefers this shard most (list order).
                    let pick = (split..candidates.len())
                        .find(|&k| allowed(&candidates[k]))
                        .or_else(|| {
                            let k = (0..split).rev().find(|&k| allowed(&candidates[k]))?;
                            let w = candidates[k].0;
                            let group = candidates[..=k].partition_point(|c| c.0 < w);
                            (group..=k).find(|&j| allowed(&candidates[j]))
                        });
                    let Some(k) = pick else { break };
                    let (_, _, i) = candidates.remove(k);
                    self.assign(i, Some(su));
                }
            }
        }
    }
}
