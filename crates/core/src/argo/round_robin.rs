//! `round-robin`: rank in the id-sorted cluster list modulo replicas (`sharding.go:141-165`).

use rustc_hash::FxHashMap;

use crate::model::Cluster;

/// `id → position in the sorted list`; for equal ids the last sorted position wins
/// (`sharding.go:293-296`), so every duplicate gets the same rank whatever their order.
pub(super) fn ranks<'a>(clusters: &[&'a Cluster]) -> FxHashMap<&'a str, usize> {
    let sorted = super::sorted_by_id(clusters);
    let mut ranks = FxHashMap::with_capacity_and_hasher(sorted.len(), Default::default());
    for (i, pos) in sorted.into_iter().enumerate() {
        ranks.insert(clusters[pos].id.as_str(), i);
    }
    ranks
}
