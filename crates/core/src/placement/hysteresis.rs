//! Hysteresis over a proposed placement: starting from where every unit was, apply only
//! the proposed moves that an overloaded shard needs and that pay for themselves.
//!
//! A unit (cluster or slice) keeps its previous shard unless its shard's load exceeds its
//! target by more than the band (`load > (1 + band) × target`) and moving the unit where
//! the proposal puts it lowers the imbalance (the load above target, summed over shards)
//! by more than the move's own cost (`takeover_cost × the unit's load`: the new owner
//! lists the cluster again). Costs that wobble inside the band therefore move nothing; a
//! real shift moves units off the overloaded shards only, the most useful first.

use crate::assignment::Assignment;

/// The hysteresis knobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hysteresis {
    /// A shard may exceed its target by this fraction before anything leaves it (0.10).
    pub band: f64,
    /// What a move costs, as a fraction of the moved unit's load (0.10): a takeover lists
    /// the cluster again, about what it costs to run over a tenth of the smoothing window.
    pub takeover_cost: f64,
}

impl Default for Hysteresis {
    fn default() -> Self {
        Hysteresis {
            band: 0.10,
            takeover_cost: 0.10,
        }
    }
}

/// The units to place, by index: ids (for the previous assignment), loads, the proposed
/// shard, and whether the unit must take the proposed shard (a pin).
#[derive(Debug, Clone, Copy)]
pub struct Proposal<'a> {
    /// Unit ids, as in the previous assignment.
    pub ids: &'a [String],
    /// Unit loads.
    pub loads: &'a [u64],
    /// Where the placement would put each unit (`None`: unmanaged).
    pub shards: &'a [Option<u32>],
    /// Units that take the proposed shard whatever was before (pins).
    pub fixed: &'a [bool],
    /// Each shard's target load.
    pub targets: &'a [f64],
}

/// The shards after hysteresis (same order as the proposal). A unit keeps its previous
/// shard when it had one in range and the proposal manages it; new, unmanaged and fixed
/// units take the proposal; then overloaded shards shed by the proposal's moves.
pub fn hold(previous: &Assignment, proposal: Proposal<'_>, knobs: Hysteresis) -> Vec<Option<u32>> {
    let n_shards = proposal.targets.len();
    let mut out: Vec<Option<u32>> = proposal
        .shards
        .iter()
        .enumerate()
        .map(|(u, &proposed)| {
            let before = previous
                .get(&proposal.ids[u])
                .filter(|&s| (s as usize) < n_shards);
            match (proposed, before) {
                (Some(_), Some(b)) if !proposal.fixed[u] => Some(b),
                _ => proposed,
            }
        })
        .collect();
    let mut load = vec![0.0f64; n_shards];
    for (s, &w) in out.iter().zip(proposal.loads) {
        if let Some(s) = s {
            load[*s as usize] += w as f64;
        }
    }
    // A shard's share of the imbalance: its load above target.
    let above = |s: usize, load: f64| (load - proposal.targets[s]).max(0.0);
    let over = |load: &[f64], s: usize| load[s] - proposal.targets[s] * (1.0 + knobs.band);
    loop {
        // The move off a shard beyond the band that lowers the imbalance the most, net of
        // its own cost; only the two shards a move touches change.
        let mut best: Option<(f64, usize)> = None;
        for s in (0..n_shards).filter(|&s| over(&load, s) > 0.0) {
            for u in (0..out.len()).filter(|&u| out[u] == Some(s as u32)) {
                let Some(d) = proposal.shards[u].map(|d| d as usize).filter(|&d| d != s) else {
                    continue;
                };
                let w = proposal.loads[u] as f64;
                let before = above(s, load[s]) + above(d, load[d]);
                let after = above(s, load[s] - w) + above(d, load[d] + w);
                let gain = before - after - knobs.takeover_cost * w;
                if gain > 0.0 && best.is_none_or(|(g, _)| gain > g) {
                    best = Some((gain, u));
                }
            }
        }
        let Some((_, u)) = best else { break };
        let (s, d) = (out[u].unwrap_or(0), proposal.shards[u].unwrap_or(0));
        let w = proposal.loads[u] as f64;
        load[s as usize] -= w;
        load[d as usize] += w;
        out[u] = Some(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    fn run(previous: &[u32], loads: &[u64], proposed: &[u32], knobs: Hysteresis) -> Vec<u32> {
        let ids = ids(loads.len());
        let prev: Assignment = ids.iter().cloned().zip(previous.iter().copied()).collect();
        let shards: Vec<Option<u32>> = proposed.iter().map(|&s| Some(s)).collect();
        let total: u64 = loads.iter().sum();
        let targets = vec![total as f64 / 2.0; 2];
        let fixed = vec![false; loads.len()];
        let proposal = Proposal {
            ids: &ids,
            loads,
            shards: &shards,
            fixed: &fixed,
            targets: &targets,
        };
        hold(&prev, proposal, knobs).into_iter().flatten().collect()
    }

    #[test]
    fn wobble_inside_the_band_moves_nothing() {
        // Four clusters, two per shard; costs wobble by 8 %: shard 0 is 4 % over target.
        let moved = run(
            &[0, 0, 1, 1],
            &[108, 100, 100, 92],
            &[0, 1, 0, 1],
            Hysteresis::default(),
        );
        assert_eq!(moved, vec![0, 0, 1, 1]);
        // The proposal alone (no hysteresis) would have moved two of them.
        assert_eq!(
            run(
                &[0, 0, 1, 1],
                &[108, 100, 100, 92],
                &[0, 1, 0, 1],
                Hysteresis {
                    band: -1.0,
                    takeover_cost: -1.0,
                }
            ),
            vec![0, 1, 0, 1]
        );
    }

    #[test]
    fn a_real_shift_moves_the_fewest() {
        // Cluster 0 triples: shard 0 is far over. The proposal moves two clusters off it
        // and one onto it; one move is enough (cluster 1 to shard 1).
        let loads = [300, 100, 100, 100, 100, 100];
        let moved = run(
            &[0, 0, 0, 1, 1, 1],
            &loads,
            &[0, 1, 1, 0, 1, 1],
            Hysteresis::default(),
        );
        assert_eq!(moved, vec![0, 1, 0, 1, 1, 1]);
    }

    #[test]
    fn a_move_that_does_not_pay_for_itself_is_not_made() {
        // Shard 0 is 12 % over; moving the 100 unit only swaps which shard is over.
        let moved = run(
            &[0, 0, 1, 1],
            &[112, 100, 88, 100],
            &[0, 1, 1, 1],
            Hysteresis::default(),
        );
        assert_eq!(moved, vec![0, 0, 1, 1]);
    }
}
