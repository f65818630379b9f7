//! Step 6, small fleets only: a shard left above its bound although a placement within
//! every bound exists. Shed tries one move or one swap; lumpy clusters on a few shards can
//! need more (six clusters of load 5–8 on three shards: four moves). With at most
//! [`MAX_CLUSTERS`] movable clusters, a depth-first search finds the placement within every
//! bound that moves the fewest clusters from the current one, visiting at most
//! [`MAX_VISITS`] partial placements; if it finds none, nothing changes. Clusters are taken
//! heaviest first, then by rendezvous key and id, and each tries its current shard first,
//! then the others by number: the result does not depend on the input order. A cluster
//! never moves to a shard of a zone it is less at home in.

use super::BalancedPlacer;

/// Movable clusters beyond which the search is not tried (the heuristics' granularity is
/// fine there).
const MAX_CLUSTERS: usize = 12;

/// Partial placements the search may visit.
const MAX_VISITS: usize = 200_000;

/// The search's fixed inputs and its best find.
struct Search<'a> {
    /// Movable clusters, in search order: (index, weight, current shard, allowed shards).
    order: &'a [(usize, u64, u32, Vec<u32>)],
    hi: &'a [f64],
    visits: usize,
    best: Option<(usize, Vec<u32>)>,
}

impl Search<'_> {
    fn go(&mut self, k: usize, load: &mut [u64], chosen: &mut Vec<u32>, moves: usize) {
        if self.visits >= MAX_VISITS || self.best.as_ref().is_some_and(|(m, _)| moves >= *m) {
            return;
        }
        self.visits += 1;
        let Some((_, w, current, allowed)) = self.order.get(k) else {
            self.best = Some((moves, chosen.clone()));
            return;
        };
        for &s in allowed {
            let s_ix = s as usize;
            if (load[s_ix] + w) as f64 > self.hi[s_ix] {
                continue;
            }
            load[s_ix] += w;
            chosen.push(s);
            self.go(k + 1, load, chosen, moves + usize::from(s != *current));
            chosen.pop();
            load[s_ix] -= w;
        }
    }
}

impl BalancedPlacer {
    /// Step 6 (see the module's documentation).
    pub(super) fn settle_small_fleet(&mut self) {
        let st = &self.state;
        let shards = self.shards.len();
        if !(0..shards).any(|s| st.load[s] as f64 > st.hi[s]) {
            return;
        }
        // Movable clusters with their shards.
        let mut movable: Vec<(usize, u32)> = (0..st.ids.len())
            .filter(|&i| st.movable(i))
            .filter_map(|i| st.shard_of[i].map(|s| (i, s)))
            .take(MAX_CLUSTERS + 1)
            .collect();
        if movable.is_empty() || movable.len() > MAX_CLUSTERS {
            return;
        }
        movable.sort_by(|&(a, _), &(b, _)| {
            st.w[b]
                .cmp(&st.w[a])
                .then(st.keys[a].cmp(&st.keys[b]))
                .then_with(|| st.ids[a].cmp(&st.ids[b]))
        });
        let mut load = st.load.clone();
        let mut order = Vec::with_capacity(movable.len());
        for (i, current) in movable {
            load[current as usize] -= st.w[i];
            let home = self.tier(i, current);
            let allowed: Vec<u32> = std::iter::once(current)
                .chain((0..shards as u32).filter(|&s| s != current))
                .filter(|&s| self.usable(s as usize))
                .filter(|&s| self.tier(i, s).is_some_and(|t| home.is_none_or(|h| t <= h)))
                .collect();
            order.push((i, st.w[i], current, allowed));
        }
        let mut search = Search {
            order: &order,
            hi: &st.hi,
            visits: 0,
            best: None,
        };
        search.go(0, &mut load, &mut Vec::with_capacity(order.len()), 0);
        let Some((_, chosen)) = search.best else {
            return;
        };
        let moves: Vec<(usize, u32)> = order
            .iter()
            .zip(chosen)
            .filter(|((_, _, current, _), s)| s != current)
            .map(|((i, ..), s)| (*i, s))
            .collect();
        for (i, s) in moves {
            self.assign(i, Some(s));
        }
    }
}
