//! Which clusters the held shard means, and bringing the clusters acted on in line with it:
//! stops at once, starts at once on the fast path, otherwise after the start delay.

use std::collections::BTreeSet;

use fleetshard_core::argo::{ArgoControllerAssignment, ArgoShard};

use super::{Action, ArgoReplica, Out};
use crate::lease::Mono;

impl ArgoReplica {
    /// Makes the cached set of owned clusters that of shard `s`: Argo CD's controller-level
    /// shard among the count, and among the map's length too while it differs.
    fn own(&mut self, s: u32) {
        let count = self.count;
        let len = self
            .map
            .as_ref()
            .map_or(0, |m| u32::try_from(m.entries.len()).unwrap_or(u32::MAX));
        let key = (s, count, len);
        if self.owned.as_ref().is_some_and(|(k, _)| *k == key) {
            return;
        }
        let mine = self.shards_for(count).to_vec();
        let other = (len != 0 && len != count).then(|| self.shards_for(len).to_vec());
        let shard = i64::from(s);
        let set: BTreeSet<String> = self
            .clusters
            .iter()
            .enumerate()
            .filter(|(i, c)| {
                !c.skip_reconcile
                    && mine[*i] == shard
                    && other.as_ref().is_none_or(|o| o[*i] == shard)
            })
            .map(|(_, c)| c.id.clone())
            .collect();
        self.owned = Some((key, set));
    }

    fn shards_for(&mut self, count: u32) -> &[ArgoShard] {
        if !self.assignments.contains_key(&count) {
            let a = ArgoControllerAssignment::compute_prepared(
                self.cfg.algorithm,
                count,
                &self.clusters,
                &mut self.prepared,
            );
            self.assignments.insert(count, a.shards().to_vec());
        }
        &self.assignments[&count]
    }

    /// Before anything else an input does: if the validity has ended, stop now (dated at
    /// the lapse), so that a process paused past its deadline stops before it looks at
    /// anything.
    pub(super) fn expire(&mut self, now: Mono, out: &mut Out) {
        let lapsed = self.valid_until.is_some_and(|u| u <= now);
        if lapsed && (!self.acting.is_empty() || !self.pending.is_empty()) {
            self.recompute(now, out);
        }
    }

    /// Brings the clusters acted on in line with what is held now: stops at once, starts at
    /// once on the fast path, otherwise after the start delay.
    pub(super) fn recompute(&mut self, now: Mono, out: &mut Out) {
        let lapsed_at = self.valid_until.filter(|u| *u <= now);
        let holding = match (self.held, self.valid_until) {
            (Some(s), Some(u)) if u > now && self.count > 0 && !self.stopping => Some(s),
            _ => None,
        };
        if let Some(s) = holding {
            self.own(s);
        }
        // Taken out while the sets below change (put back at the end).
        let owned = self.owned.take();
        let empty = BTreeSet::new();
        let desired = match (holding, &owned) {
            (Some(_), Some((_, set))) => set,
            _ => &empty,
        };
        let stops: Vec<String> = self.acting.difference(desired).cloned().collect();
        for c in stops {
            self.acting.remove(&c);
            self.draining.insert(c.clone());
            let shard = self.event_shard();
            out.stops.push(Action::Stop {
                cluster: c,
                shard,
                lapsed_at,
            });
        }
        self.pending.retain(|c, _| desired.contains(c));
        let at = if self.fast_start {
            now
        } else {
            now.after(self.cfg.start_delay())
        };
        for c in desired {
            if !self.acting.contains(c) && !self.pending.contains_key(c) {
                self.pending.insert(c.clone(), at);
            }
        }
        self.owned = owned;
        self.fast_start = false;
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(c, _)| c.clone())
            .collect();
        for c in due {
            self.pending.remove(&c);
            self.acting.insert(c.clone());
            self.stats.handovers += 1;
            if let Some(shard) = self.event_shard() {
                out.starts.push(Action::Start { cluster: c, shard });
            }
        }
    }

    /// The shard an ownership change belongs to: the one held, or the one last held.
    fn event_shard(&mut self) -> Option<u32> {
        if self.held.is_some() {
            self.last_shard = self.held;
        }
        self.held.or(self.last_shard)
    }
}
