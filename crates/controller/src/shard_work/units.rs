//! Units of ownership: a cluster owned whole, or slices of a split cluster
//! (`cluster#slice-N-of-K`, `fleetshard_core::placement::slices`), each owned by one
//! replica. An app of a cluster owned in slices is worked on only under its own slice:
//! the one its identity hashes to among the cluster's `K` (the count in the owned slices'
//! ids; a replica owns slices of one count at a time, since the coordination layer starts
//! a slice of a new count only after its own stop of the old ones ended). The in-flight
//! count, the CPU counter and the stop's wait are per unit, so each slice hands over as a
//! cluster does: never two replicas on one app.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use fleetshard_core::placement::slices::{UnitId, slice_of_identity, slice_unit_id};

use super::ShardWork;
use super::index::AppIndex;
use super::owned::Owned;
use crate::AppKey;

/// The slice count of each cluster this replica owns slices of.
#[derive(Debug, Default)]
pub(super) struct Slices(HashMap<Arc<str>, u32>);

impl Slices {
    /// `unit` was started: a slice records its cluster's count.
    pub(super) fn started(&mut self, unit: &str) {
        if let UnitId {
            cluster,
            slice: Some((_, k)),
        } = UnitId::parse(unit)
        {
            self.0.insert(Arc::from(cluster), k);
        }
    }

    /// `unit` was stopped: its cluster's count is forgotten once no slice of it is owned.
    pub(super) fn stopped(&mut self, unit: &str, owned: &Owned) {
        let unit = UnitId::parse(unit);
        if unit.slice.is_none() {
            return;
        }
        let cluster = unit.cluster;
        if !owned.iter().any(|u| UnitId::parse(u).cluster == cluster) {
            self.0.remove(cluster);
        }
    }

    /// The unit `app` of `cluster` is worked on under here: the cluster itself, or the
    /// slice its identity hashes to.
    pub(super) fn unit_of(&self, app: &AppKey, cluster: &Arc<str>) -> Arc<str> {
        match self.0.get(cluster) {
            None => cluster.clone(),
            Some(&k) => {
                let n = slice_of_identity(app.as_str(), k);
                Arc::from(slice_unit_id(cluster, n, k))
            }
        }
    }
}

impl ShardWork {
    /// The unit `app` is worked on under here now: its cluster, or the slice of it that
    /// holds the app when this replica owns the cluster in slices. `None` for an app
    /// that resolves to no cluster and has no anchor, or is unknown.
    #[cfg(test)]
    pub(super) fn unit_of(&self, app: &AppKey) -> Option<String> {
        let s = self.lock();
        let cluster = s.apps.cluster_of(app)?;
        Some(s.slices.unit_of(app, cluster).to_string())
    }
}

/// The apps of `unit` in `apps`: all of a whole cluster's, or those its slice holds.
pub(super) fn apps_of_unit<'a>(apps: &'a AppIndex, unit: &str) -> Cow<'a, [AppKey]> {
    let id = UnitId::parse(unit);
    let all = apps.apps_of(id.cluster);
    match id.slice {
        None => Cow::Borrowed(all),
        Some((n, k)) => Cow::Owned(
            all.iter()
                .filter(|a| slice_of_identity(a.as_str(), k) == n)
                .cloned()
                .collect(),
        ),
    }
}
