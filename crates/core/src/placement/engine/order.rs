//! Ordered views that keep shedding and filling at O(log n) per move: the movable clusters
//! of a shard in the order shedding takes them ([`MemberIndex`]), a donor's candidates in
//! the order filling takes them ([`Skiplist`]), and the exact integer
//! thresholds of the floating-point bound checks ([`largest`]), so that "the first cluster
//! in this order that fits" is a range query instead of a scan.

use std::collections::BTreeSet;

use super::state::State;

/// A movable cluster in a shard's order: (zone class, weight, rank of its id, index). The
/// class is the cluster's zone index when zones are in use (whether a cluster fits
/// somewhere depends on its weight and its zone only), else 0; within a class the order
/// is weight, then id — the order in which shedding considers a shard's clusters.
pub(super) type Member = (usize, u64, u32, usize);

/// The movable clusters of some shards (those shedding works on), kept in [`Member`]
/// order while clusters move: [`State::moved`] updates it on every assignment.
#[derive(Debug, Clone, Default)]
pub(super) struct MemberIndex {
    /// Per shard, when indexed.
    sets: Vec<Option<BTreeSet<Member>>>,
    /// Each movable cluster's rank in id order (ids of managed clusters are distinct).
    rank: Vec<u32>,
}

impl MemberIndex {
    /// Indexes the movable clusters of `shards` (of `n` in all): one sort by id for the
    /// ranks, one sort per indexed shard. O(N log N).
    pub fn build(st: &State, shards: &[usize], n: usize) -> Self {
        let mut by_id: Vec<usize> = (0..st.ids.len()).filter(|&i| st.movable(i)).collect();
        by_id.sort_unstable_by(|&a, &b| st.ids[a].cmp(&st.ids[b]));
        let mut rank = vec![u32::MAX; st.ids.len()];
        for (r, &i) in by_id.iter().enumerate() {
            rank[i] = r as u32;
        }
        let mut index = MemberIndex {
            sets: vec![None; n],
            rank,
        };
        let mut wanted = vec![false; n];
        for &s in shards {
            wanted[s] = true;
        }
        let mut members: Vec<Vec<Member>> = vec![Vec::new(); n];
        for &i in &by_id {
            if let Some(s) = st.shard_of[i]
                && wanted[s as usize]
                && let Some(m) = index.member(st, i)
            {
                members[s as usize].push(m);
            }
        }
        for &s in shards {
            let mut m = std::mem::take(&mut members[s]);
            m.sort_unstable();
            index.sets[s] = Some(m.into_iter().collect());
        }
        index
    }

    /// Cluster `i` as a member, if it is movable.
    pub fn member(&self, st: &State, i: usize) -> Option<Member> {
        let rank = *self.rank.get(i)?;
        if rank == u32::MAX || !st.movable(i) {
            return None;
        }
        let class = st.layout.as_ref().map_or(0, |l| l.cluster_zone[i]);
        Some((class, st.w[i], rank, i))
    }

    /// `m` moved from shard `from` to shard `to`.
    pub fn moved(&mut self, m: Member, from: Option<u32>, to: Option<u32>) {
        if let Some(set) = from.and_then(|f| self.sets[f as usize].as_mut()) {
            set.remove(&m);
        }
        if let Some(set) = to.and_then(|t| self.sets[t as usize].as_mut()) {
            set.insert(m);
        }
    }

    /// Stops keeping shard `s` (it is done with).
    pub fn forget(&mut self, s: usize) {
        self.sets[s] = None;
    }

    fn set(&self, s: usize) -> &BTreeSet<Member> {
        self.sets[s]
            .as_ref()
            .expect("only indexed shards are asked about")
    }

    /// The zone classes present on shard `s`, each with its lightest member.
    pub fn classes(&self, s: usize) -> impl Iterator<Item = Member> + '_ {
        let set = self.set(s);
        let mut next = set.first().copied();
        std::iter::from_fn(move || {
            let m = next?;
            next = set.range((m.0 + 1, 0, 0, 0)..).next().copied();
            Some(m)
        })
    }

    /// The first member of class `class` on shard `s` weighing at least `w`.
    pub fn first_from(&self, s: usize, class: usize, w: u64) -> Option<Member> {
        self.set(s)
            .range((class, w, 0, 0)..)
            .next()
            .filter(|m| m.0 == class)
            .copied()
    }

    /// The last member of class `class` on shard `s` weighing at most `w`.
    pub fn last_up_to(&self, s: usize, class: usize, w: u64) -> Option<Member> {
        self.set(s)
            .range((class, 0, 0, 0)..=(class, w, u32::MAX, usize::MAX))
            .next_back()
            .copied()
    }

    /// The movable clusters on shard `s`, lightest first, ties by id.
    pub fn by_weight(&self, s: usize) -> Vec<usize> {
        let mut m: Vec<(u64, u32, usize)> = self.set(s).iter().map(|m| (m.1, m.2, m.3)).collect();
        m.sort_unstable();
        m.into_iter().map(|m| m.2).collect()
    }
}

/// One donor's fill candidates in the order filling takes them (any `Ord` items; filling
/// uses weight, then preference), with removals: a sorted `Vec` and skip links to the
/// next and the previous item still present (path-halved, so amortised near O(1)). Built
/// with one sort; no node allocation per item, as an ordered set would need.
#[derive(Debug, Clone, Default)]
pub(super) struct Skiplist<T> {
    items: Vec<T>,
    /// `fwd[k]` leads to the first present item at index ≥ k (`items.len()`: none).
    fwd: Vec<usize>,
    /// `back[p]` leads to the last present item at index < p, as its index + 1 (0: none).
    back: Vec<usize>,
    present: usize,
}

impl<T: Ord + Copy> Skiplist<T> {
    /// The items, sorted.
    pub fn new(mut items: Vec<T>) -> Self {
        items.sort_unstable();
        let n = items.len();
        Skiplist {
            items,
            fwd: (0..=n).collect(),
            back: (0..=n).collect(),
            present: n,
        }
    }

    /// No item left.
    pub fn is_empty(&self) -> bool {
        self.present == 0
    }

    fn find(links: &mut [usize], mut k: usize) -> usize {
        while links[k] != k {
            let up = links[links[k]];
            links[k] = up;
            k = up;
        }
        k
    }

    /// The first present item at or after the first for which `before` is false (the
    /// items for which it is true come first), with its index.
    pub fn first_from(&mut self, before: impl Fn(&T) -> bool) -> Option<(usize, T)> {
        let from = self.items.partition_point(before);
        let k = Self::find(&mut self.fwd, from);
        self.items.get(k).map(|&t| (k, t))
    }

    /// The last present item before the first for which `upto` is false (the items for
    /// which it is true come first).
    pub fn last_upto(&mut self, upto: impl Fn(&T) -> bool) -> Option<T> {
        let end = self.items.partition_point(upto);
        let p = Self::find(&mut self.back, end);
        p.checked_sub(1).map(|k| self.items[k])
    }

    /// Removes the item at index `k` (as [`Skiplist::first_from`] gave it).
    pub fn remove(&mut self, k: usize) {
        if self.fwd[k] == k {
            self.fwd[k] = k + 1;
            self.back[k + 1] = k;
            self.present -= 1;
        }
    }
}

/// The largest `w` for which `ok(w)` holds, where `ok` holds from 0 up to some point and
/// not beyond (every bound check of the engine is such a predicate in the weight: a sum or
/// difference of floats, rounded monotonically); `None` when not even `ok(0)`. `guess`
/// is a close estimate (the unrounded answer), so this takes a few evaluations; the
/// search that follows makes it exact whatever the rounding.
pub(super) fn largest(ok: impl Fn(u64) -> bool, guess: f64) -> Option<u64> {
    if !ok(0) {
        return None;
    }
    // Far beyond any load (and exactly representable).
    const CAP: u64 = 1 << 62;
    let g = if guess.is_finite() && guess > 0.0 {
        (guess as u64).min(CAP)
    } else {
        0
    };
    // Bracket the answer: ok(lo) and !ok(hi).
    let (mut lo, mut hi);
    if ok(g) {
        lo = g;
        let mut step = 1u64;
        loop {
            let next = lo.saturating_add(step).min(CAP);
            if next == lo {
                return Some(lo);
            }
            if ok(next) {
                lo = next;
                step = step.saturating_mul(2);
            } else {
                hi = next;
                break;
            }
        }
    } else {
        hi = g;
        let mut step = 1u64;
        loop {
            let next = hi.saturating_sub(step);
            if ok(next) {
                lo = next;
                break;
            }
            hi = next;
            step = step.saturating_mul(2);
        }
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

/// The smallest integer weight `w` with `w as f64 >= x`: for `x > 0`, `w as f64 < x`
/// exactly when `w < below(x)`.
pub(super) fn below(x: f64) -> u64 {
    largest(|w| (w as f64) < x, x.ceil() - 1.0).map_or(0, |w| w + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skiplist_finds_what_an_ordered_set_finds() {
        let items: Vec<u32> = (0..200).map(|i| (i * 37) % 101).collect();
        let mut list = Skiplist::new(items.clone());
        let mut set: std::collections::BTreeSet<(u32, usize)> = BTreeSet::new();
        let mut sorted = items.clone();
        sorted.sort_unstable();
        for (k, &v) in sorted.iter().enumerate() {
            set.insert((v, k));
        }
        for step in 0..300u32 {
            let x = (step * 13) % 105;
            let want = set.range((x, 0)..).next().copied();
            let got = list.first_from(|&v| v < x);
            assert_eq!(got.map(|g| (g.1, g.0)), want, "first from {x}");
            let want_last = set.range(..=(x, usize::MAX)).next_back().map(|m| m.0);
            assert_eq!(list.last_upto(|&v| v <= x), want_last, "last up to {x}");
            if let Some((k, v)) = got {
                list.remove(k);
                set.remove(&(v, k));
            }
            assert_eq!(list.is_empty(), set.is_empty());
        }
    }

    #[test]
    fn largest_is_exact() {
        for (hi, load) in [
            (10.5, 3u64),
            (11.0, 4),
            (0.0, 0),
            (1e6 + 0.1, 999_999),
            (7.0, 9),
        ] {
            let ok = |w: u64| load as f64 + w as f64 <= hi;
            let want = (0..2_000_000u64).take_while(|&w| ok(w)).last();
            for guess in [hi - load as f64, 0.0, -5.0, 1e9, f64::NAN] {
                assert_eq!(largest(ok, guess), want, "{hi} {load} {guess}");
            }
        }
        assert_eq!(below(3.0), 3);
        assert_eq!(below(3.2), 4);
        assert_eq!(below(0.5), 1);
        assert_eq!(largest(|_| true, 5.0), Some(1 << 62));
    }
}
