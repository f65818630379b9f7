//! Moving clusters between replicas safely: apply a committed generation (stop what it
//! took from us, adopt its shard count, give up a shard beyond it), and start what it gave
//! us only once every holder that may still act on a cluster has let it go — the handover
//! barrier (`handoffs.rs`).

use super::handoffs::cluster_of;
use super::seen::View;
use super::{Action, FleetInput, MAX_SHARDS, Replica};
use crate::lease::Mono;

impl Replica {
    /// Applies a newer generation: stop what it took from us. Only then may we acknowledge
    /// it (the renew that follows carries `applied`). A shard at or beyond the generation's
    /// count has nothing assigned; its holder releases it and claims again below the count
    /// (or becomes a spare).
    pub(super) fn apply(&mut self, view: &View, fleet: FleetInput<'_>, out: &mut Vec<Action>) {
        let Some((_, doc)) = &view.assignment else {
            self.count = self.cfg.shards.initial(view.desired, fleet.external_shards);
            return;
        };
        if doc.generation > self.applied {
            let mine = self.shard.as_ref().map(|h| h.shard);
            let lost: Vec<String> = self
                .active
                .iter()
                .filter(|c| mine.is_none() || doc.clusters.get(*c).copied() != mine)
                .cloned()
                .collect();
            for c in lost {
                self.stop(c, out);
            }
            self.applied = doc.generation;
            self.handoffs.applied(doc);
            self.count = doc.shards.clamp(1, MAX_SHARDS);
        }
        if self.shard.as_ref().is_some_and(|h| h.shard >= self.count) {
            self.release_shard(out);
        }
    }

    /// Starts the clusters the applied generation gives us, each once every holder that
    /// may still act on it has let it go (`handoffs.rs`) and our own stop of it has ended.
    /// Holders of shards beyond the count take part until they have let go.
    pub(super) fn start(&mut self, view: &View, now: Mono, out: &mut Vec<Action>) {
        let (Some(me), Some((_, doc))) = (self.shard(now), &view.assignment) else {
            return;
        };
        if doc.generation != self.applied || me >= self.count {
            return;
        }
        if !self.handoffs.base_acknowledged(view, me) {
            return;
        }
        // A cluster whose stop (after a lapse, say) is still running starts at a later step,
        // once [`Replica::on_stopped`] said so: a start before the stop ends would be undone
        // by it. So does a slice while another unit of its cluster is stopping here (a
        // new slice count): its apps were that unit's.
        for (c, _) in doc.clusters.iter().filter(|&(_, &s)| s == me) {
            if self.stopping_family(c) || !self.handoffs.let_go(view, c, me) {
                continue;
            }
            if self.active.insert(c.clone()) {
                out.push(Action::Start(c.clone()));
            }
        }
    }
}

impl Replica {
    /// Whether a unit of `unit`'s cluster (it, or another slice of it) is stopping here:
    /// the cluster's id and its slices' ids (`cluster#slice-…`) are one range of the
    /// sorted set, so this is a lookup, not a scan.
    fn stopping_family(&self, unit: &str) -> bool {
        let cluster = cluster_of(unit);
        if self.stopping_clusters.contains(unit) || self.stopping_clusters.contains(cluster) {
            return true;
        }
        let prefix = format!("{cluster}#slice-");
        self.stopping_clusters
            .range(prefix.clone()..)
            .next()
            .is_some_and(|s| s.starts_with(&prefix) && cluster_of(s) == cluster)
    }
}
