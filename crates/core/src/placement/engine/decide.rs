//! Steps 2 and 3: who stays where they are, and where the others go.

use super::BalancedPlacer;
use crate::placement::PlacementWarning;
use crate::placement::PreviousPlacement;
use crate::placement::rendezvous::score;

/// No shard found yet in a `choose` slot.
const NONE: u32 = u32::MAX;

impl BalancedPlacer {
    /// Step 2: valid pins; then a displaced cluster whose home shard is held again goes
    /// home; then previous shards that still exist, are held, and are still allowed.
    /// A cluster whose previous shard is vacant remembers it as home. Returns the clusters
    /// left to place.
    pub(super) fn stay(&mut self, previous: Option<&PreviousPlacement>) -> Vec<usize> {
        let replicas = self.shards.len() as u32;
        let mut unplaced = Vec::new();
        for i in 0..self.state.ids.len() {
            if !self.state.managed[i] {
                continue;
            }
            let kept = match self.state.pin[i] {
                Some(p) if self.usable(p as usize) => Some(p),
                // A pin to a vacant shard cannot be obeyed now; coverage comes first.
                Some(p) => {
                    let cluster = self.state.ids[i].clone();
                    self.state
                        .warnings
                        .push(PlacementWarning::PinnedShardVacant { cluster, shard: p });
                    None
                }
                None => {
                    let id = &self.state.ids[i];
                    let was = previous
                        .and_then(|p| p.assignment.get(id))
                        .filter(|&s| s < replicas);
                    let home = previous
                        .and_then(|p| p.homes.get(id))
                        .filter(|&s| s < replicas)
                        .or(was);
                    let allowed = |s: u32| self.usable(s as usize) && self.tier(i, s).is_some();
                    let (home_ok, was_ok) =
                        (home.filter(|&h| allowed(h)), was.filter(|&s| allowed(s)));
                    // While away, remember a home that is only vacant (not gone).
                    let away_from = home.filter(|&h| !self.usable(h as usize));
                    match (home_ok, was_ok) {
                        // Home is held again (or never left): stay or return there.
                        (Some(h), _) => Some(h),
                        // Home still vacant: stay where it was put meanwhile.
                        (None, Some(s)) => {
                            self.state.home[i] = away_from;
                            Some(s)
                        }
                        (None, None) => {
                            self.state.home[i] = away_from;
                            None
                        }
                    }
                }
            };
            match kept {
                Some(s) => self.assign(i, Some(s)),
                None => unplaced.push(i),
            }
        }
        unplaced
    }

    /// Step 3: places clusters without a shard, heaviest first. Ties go by rendezvous key,
    /// then id, so input order does not matter.
    pub(super) fn place_unplaced(&mut self, mut unplaced: Vec<usize>) {
        let st = &self.state;
        unplaced.sort_unstable_by(|&a, &b| {
            st.w[b]
                .cmp(&st.w[a])
                .then(st.keys[a].cmp(&st.keys[b]))
                .then_with(|| st.ids[a].cmp(&st.ids[b]))
        });
        for i in unplaced {
            let s = self.choose(i, None, false);
            self.assign(i, s);
        }
    }

    /// Whether cluster `i` may go to shard `s`: `Some(0)` at home, `Some(1)` elsewhere
    /// (only clusters of a spilling zone, only to a zone that takes spill), `None` not at
    /// all.
    pub(super) fn tier(&self, i: usize, s: u32) -> Option<u8> {
        let Some(layout) = &self.state.layout else {
            return Some(0);
        };
        let (cz, sz) = (layout.cluster_zone[i], layout.shard_zone[s as usize]);
        if cz == sz {
            Some(0)
        } else if layout.may_host(cz, sz) {
            Some(1)
        } else {
            None
        }
    }

    /// The shard cluster `i` should go to: the one it prefers most among those it may use,
    /// in this order: home zone within target, home zone within bound, other zones within
    /// target, other zones within bound. A spilling zone thus fills its own shards to their
    /// bound before anything crosses a zone. `strict` refuses every shard that would exceed
    /// its bound; otherwise the least-full shard of the home zone is the last resort (a
    /// cluster too big for any bound is isolated at home, not pushed onto another zone).
    pub(super) fn choose(&self, i: usize, exclude: Option<u32>, strict: bool) -> Option<u32> {
        let st = &self.state;
        let w = st.w[i] as f64;
        let key = st.keys[i];
        let exclude = exclude.map_or(usize::MAX, |e| e as usize);
        let zones = st.layout.as_ref().map(|l| (l, l.cluster_zone[i]));
        let mut best = [(0u64, NONE); 4];
        let shards = st.load.iter().zip(&st.target).zip(&st.hi).zip(&self.salts);
        for (s, (((&load, &target), &hi), &salt)) in shards.enumerate() {
            let after = load as f64 + w;
            if after > hi || s == exclude || !self.usable(s) {
                continue;
            }
            let away = match zones {
                None => false,
                Some((l, cz)) => {
                    if !l.may_host(cz, l.shard_zone[s]) {
                        continue;
                    }
                    l.shard_zone[s] != cz
                }
            };
            let sc = score(key, salt);
            let slot = &mut best[2 * usize::from(away) + usize::from(after > target)];
            if slot.1 == NONE || sc > slot.0 {
                *slot = (sc, s as u32);
            }
        }
        if let Some(&(_, s)) = best.iter().find(|b| b.1 != NONE) {
            return Some(s);
        }
        if strict {
            None
        } else {
            self.least_full(i, exclude)
        }
    }

    /// The allowed shard that `i` would fill least (relative to its bound), home zone
    /// first; ties by preference.
    fn least_full(&self, i: usize, exclude: usize) -> Option<u32> {
        let st = &self.state;
        let w = st.w[i] as f64;
        let mut best: Option<(u8, f64, u64, u32)> = None;
        for s in 0..self.shards.len() {
            let Some(tier) = self.tier(i, s as u32) else {
                continue;
            };
            if s == exclude || !self.usable(s) {
                continue;
            }
            // A bound can be 0 (every cluster hot, or no load at all): compare loads then.
            let fill = (st.load[s] as f64 + w) / st.hi[s].max(1.0);
            let sc = score(st.keys[i], self.salts[s]);
            let better = best.is_none_or(|(t, f, b, _)| {
                (tier, fill) < (t, f) || (tier == t && fill == f && sc > b)
            });
            if better {
                best = Some((tier, fill, sc, s as u32));
            }
        }
        best.map(|(_, _, _, s)| s)
    }

    pub(super) fn assign(&mut self, i: usize, to: Option<u32>) {
        let st = &mut self.state;
        let from = st.shard_of[i];
        if from == to {
            return;
        }
        if let Some(f) = from {
            st.load[f as usize] -= st.w[i];
        }
        if let Some(t) = to {
            st.load[t as usize] += st.w[i];
        }
        st.shard_of[i] = to;
        if let Some(m) = st.members.as_ref().and_then(|index| index.member(st, i))
            && let Some(index) = &mut st.members
        {
            index.moved(m, from, to);
        }
        if let Some(log) = &mut st.log {
            log.push((i, from, to));
        }
    }
}
