//! The units of ownership this reconciler's replica holds: clusters whole, or slices of
//! them (`cluster#slice-N-of-K`, `fleetshard_core::placement::slices`), told by the
//! controller's starts ([`GitOpsReconciler::cluster_acquired`]) and stops
//! ([`GitOpsReconciler::stop_cluster`]) in the order the controller's work applies them.
//!
//! What follows the unit: the acquisition's clock and phases, the warm-up (of the
//! unit's apps only), `owned_since` (a slice taken over later than its sibling resolves
//! its apps' revisions from data fetched since its own acquisition), and the memos of its
//! apps. What follows the cluster: its connection and caches, dropped when its last unit
//! here stops; and where its watches reach (the whole cluster, or a slice owner's apps'
//! namespaces: `live/reach.rs`).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};

use fleetshard_controller::AppKey;
use fleetshard_core::placement::slices::{UnitId, slice_of_identity, slice_unit_id};

use super::place::Placed;
use crate::live::{ClusterConn, KindInfo};

/// The units held, by cluster.
#[derive(Debug, Default)]
pub(super) struct OwnedUnits(Mutex<HashMap<String, BTreeSet<String>>>);

impl OwnedUnits {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, BTreeSet<String>>> {
        // One map operation per critical section: a poisoned lock is still consistent.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `unit` was started here.
    pub(super) fn started(&self, unit: &str) {
        let cluster = UnitId::parse(unit).cluster.to_owned();
        self.lock()
            .entry(cluster)
            .or_default()
            .insert(unit.to_owned());
    }

    /// `unit` was stopped here; returns whether its cluster has no unit left here (a
    /// unit never started counts as the cluster's last).
    pub(super) fn stopped(&self, unit: &str) -> bool {
        let cluster = UnitId::parse(unit).cluster;
        let mut all = self.lock();
        let Some(units) = all.get_mut(cluster) else {
            return true;
        };
        units.remove(unit);
        let last = units.is_empty();
        if last {
            all.remove(cluster);
        }
        last
    }

    /// Whether this replica writes `cluster`'s info to Argo CD's app-state cache: it holds
    /// the cluster whole, or its slice 0 (one writer per cluster, not one per slice, each
    /// with its own cache's counts), or has not been told of a unit of it.
    pub(super) fn writes_cluster_info(&self, cluster: &str) -> bool {
        self.lock().get(cluster).is_none_or(|units| {
            units
                .iter()
                .any(|u| UnitId::parse(u).slice.is_none_or(|(n, _)| n == 0))
        })
    }

    /// Whether this replica holds `cluster` whole: as a whole unit, or every slice of one
    /// count, or not told of a unit of it (a refresh outside the controller's feed). A
    /// replica holding only some slices watches its apps' namespaces only (`live/reach.rs`).
    pub(super) fn holds_whole(&self, cluster: &str) -> bool {
        self.lock().get(cluster).is_none_or(|units| {
            let mut slices = units.iter().map(|u| UnitId::parse(u).slice);
            slices.clone().any(|s| s.is_none())
                || slices.next().flatten().is_some_and(|(_, k)| {
                    (0..k).all(|n| units.contains(&slice_unit_id(cluster, n, k)))
                })
        })
    }

    /// The unit `app` of `cluster` is held under: the slice its identity hashes to when
    /// the cluster is held in slices here, else the cluster.
    pub(super) fn unit_of(&self, app: &AppKey, cluster: &str) -> String {
        let count = self.lock().get(cluster).and_then(|units| {
            units
                .iter()
                .find_map(|u| UnitId::parse(u).slice.map(|(_, k)| k))
        });
        match count {
            Some(k) => slice_unit_id(cluster, slice_of_identity(app.as_str(), k), k),
            None => cluster.to_owned(),
        }
    }
}

impl super::GitOpsReconciler {
    /// Tells `conn` where this replica's watches of `cluster` reach (`live/reach.rs`):
    /// everywhere while it holds the cluster whole; else, for a slice owner, the
    /// namespaces of the app's `placed` objects of each kind, and its destination
    /// namespace (`dest_ns`) for each of its `kinds`.
    pub(super) fn reach<'p>(
        &self,
        conn: &ClusterConn,
        cluster: &str,
        dest_ns: &str,
        kinds: &[KindInfo],
        placed: impl IntoIterator<Item = &'p Placed>,
    ) {
        conn.set_whole(self.units.holds_whole(cluster));
        for p in placed.into_iter().filter(|p| p.served) {
            conn.need(&p.kind, &p.key.namespace);
        }
        for kind in kinds {
            conn.need(kind, dest_ns);
        }
    }
}

/// Whether `app` of `cluster` belongs to `unit` (a unit of another cluster holds none).
pub(super) fn unit_holds(unit: &str, cluster: &str, app: &AppKey) -> bool {
    let id = UnitId::parse(unit);
    let (namespace, name) = app.parts();
    id.cluster == cluster && id.holds(namespace, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_are_held_by_cluster_and_the_last_one_stopped_says_so() {
        let units = OwnedUnits::default();
        let app = AppKey::new("ns", "a");
        assert_eq!(units.unit_of(&app, "c1"), "c1");
        units.started("c1#slice-0-of-2");
        units.started("c1#slice-1-of-2");
        let unit = units.unit_of(&app, "c1");
        assert!(
            unit.starts_with("c1#slice-") && unit.ends_with("-of-2"),
            "{unit}"
        );
        assert!(unit_holds(&unit, "c1", &app));
        assert!(!unit_holds(&unit, "c2", &app));
        assert!(units.holds_whole("c1"), "both slices held");
        assert!(units.holds_whole("c2"), "nothing told of c2");
        assert!(units.writes_cluster_info("c1"), "slice 0 held");
        assert!(units.writes_cluster_info("c2"), "nothing told of c2");
        assert!(!units.stopped("c1#slice-0-of-2"));
        assert!(
            !units.writes_cluster_info("c1"),
            "slice 1 only: slice 0's owner writes"
        );
        assert!(!units.holds_whole("c1"), "slice 1 of 2 only");
        assert!(units.stopped("c1#slice-1-of-2"));
        assert!(units.stopped("c9"), "never started");
        assert_eq!(units.unit_of(&app, "c1"), "c1");
    }
}
