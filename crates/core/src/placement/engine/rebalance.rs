//! Steps 4 and 5 of the balanced placement: shed load from shards above their bound, fill
//! shards below their floor, each with the fewest moves.

use super::BalancedPlacer;
use super::state::State;
use crate::placement::rendezvous::score;

impl BalancedPlacer {
    pub(super) fn rebalance(&mut self) {
        self.shed();
        self.fill();
    }

    fn movable(&self, i: usize) -> bool {
        self.state.managed[i] && self.state.pin[i].is_none() && self.state.w[i] > 0
    }

    /// Brings every shard above its bound back under it, moving the fewest, smallest
    /// clusters: the smallest one that fixes the excess alone, else the largest below it.
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
        for s in overloaded {
            let st = &self.state;
            let mut members: Vec<usize> = (0..st.ids.len())
                .filter(|&i| st.shard_of[i] == Some(s as u32) && self.movable(i))
                .collect();
            members.sort_by(|&a, &b| {
                st.w[a]
                    .cmp(&st.w[b])
                    .then_with(|| st.ids[a].cmp(&st.ids[b]))
            });
            while over(&self.state, s) > 0.0 {
                let excess = over(&self.state, s);
                let st = &self.state;
                let split = members.partition_point(|&i| (st.w[i] as f64) < excess);
                let order = (split..members.len()).chain((0..split).rev());
                let found = order.into_iter().find_map(|k| {
                    self.choose(members[k], Some(s as u32), true)
                        .map(|d| (k, d))
                });
                let Some((k, d)) = found else { break };
                let i = members.remove(k);
                self.assign(i, Some(d));
            }
        }
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
            let su = s as u32;
            let st = &self.state;
            if st.load[s] as f64 >= st.lo[s] {
                continue;
            }
            let salt = self.salts[s];
            // (weight, preference for s, index): ties in weight go to the cluster that
            // prefers s most.
            let mut candidates: Vec<(u64, std::cmp::Reverse<u64>, usize)> = (0..st.ids.len())
                .filter(|&i| self.movable(i))
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
                    let pick = (split..candidates.len())
                        .chain((0..split).rev())
                        .find(|&k| allowed(&candidates[k]));
                    let Some(k) = pick else { break };
                    let (_, _, i) = candidates.remove(k);
                    self.assign(i, Some(su));
                }
            }
        }
    }
}
