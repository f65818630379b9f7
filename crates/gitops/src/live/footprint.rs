//! What a started cluster's caches cost in memory, and how many watch events it sent:
//! the cache and watch parts of the cluster's usage (issue 30,
//! [`fleetshard_controller::ClusterUsage`]).
//!
//! The bytes are an estimate of the heap the cached objects hold, made when an object
//! enters a cache and again when it leaves (each cache keeps the running sum, adjusted on
//! every update and delete), never by walking a whole cache: each object's kept text and
//! what is kept beside it (`compact.rs`), its entry in the cache's map by key, and one
//! more copy of its key in the index by app per instance name it is tracked under. Not
//! counted: the index's own maps of names, the allocator's own overhead per allocation,
//! and a re-list's objects until the list completes. `benches/cache_bytes.rs` compares it
//! with the heap actually allocated.

use std::mem::size_of;

use serde_json::{Map, Value};

use super::cache::ObjKey;
use super::compact::Compact;
use super::{ClusterConn, ClusterConnections, lock};

/// An entry of a cache's map by key (two `String`s and the kept object) with its control
/// byte.
const ENTRY: u64 = (2 * size_of::<String>() + size_of::<Compact>() + 1) as u64;

/// A key's slot in the index by app's set (two `String`s and the control byte).
const INDEXED: u64 = (2 * size_of::<String>() + 1) as u64;

/// The estimated heap of one cached object under `key` (see the module documentation).
pub(crate) fn entry_bytes(key: &ObjKey, value: &Compact) -> u64 {
    // The keys' lengths, not capacities: a lookup's key may differ from the one kept.
    let key_bytes = len(key.0.len()) + len(key.1.len());
    let indexed = len(value.apps().count()) * (INDEXED + key_bytes);
    ENTRY + key_bytes + value.heap_bytes() + indexed
}

fn len(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

const VALUE: u64 = size_of::<Value>() as u64;
const STRING: u64 = size_of::<String>() as u64;
/// A leaf node of a JSON object's `BTreeMap<String, Value>`: eleven keys and values, the
/// parent pointer, the index in the parent and the length (rounded up to 8).
const LEAF: u64 = 11 * (STRING + VALUE) + 16;
/// An internal node: a leaf and twelve edges.
const INTERNAL: u64 = LEAF + 12 * 8;

/// The heap a parsed `value`'s own allocations take (not the value itself): what an
/// object kept parsed (`compact.rs`, the resource tree's kinds) costs.
pub(crate) fn value_heap(value: &Value) -> u64 {
    match value {
        Value::String(s) => len(s.capacity()),
        Value::Array(items) => {
            len(items.capacity()) * VALUE + items.iter().map(value_heap).sum::<u64>()
        }
        Value::Object(map) => {
            map_nodes(map)
                + map
                    .iter()
                    .map(|(k, v)| len(k.capacity()) + value_heap(v))
                    .sum::<u64>()
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
    }
}

/// The B-tree nodes of a map of `n` entries: none when empty, one leaf up to its eleven
/// slots, then (filled one at a time, split in halves) about eight entries a leaf and an
/// internal node per eight leaves.
fn map_nodes(map: &Map<String, Value>) -> u64 {
    let n = len(map.len());
    match n {
        0 => 0,
        1..=11 => LEAF,
        _ => {
            let leaves = n.div_ceil(8);
            leaves * LEAF + leaves.div_ceil(8) * INTERNAL
        }
    }
}

/// One started cluster's caches and watches, now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheUsage {
    /// Objects cached ([`ClusterConn::cached_objects`]).
    pub objects: u64,
    /// The estimated heap they take (see the module documentation).
    pub bytes: u64,
    /// Watch events received since this replica connected to the cluster (every kind's,
    /// as Argo CD's `argocd_cluster_events_total` counts them).
    pub watch_events: u64,
}

impl ClusterConn {
    /// The estimated heap of this cluster's cached objects (every watched kind, and the
    /// watches for orphaned resources).
    pub fn cached_bytes(&self) -> u64 {
        let caches: Vec<_> = lock(&self.caches).values().cloned().collect();
        let orphans = self.orphan_caches();
        caches.iter().chain(&orphans).map(|c| c.bytes()).sum()
    }

    /// This cluster's caches and watch events now.
    pub fn cache_usage(&self) -> CacheUsage {
        CacheUsage {
            objects: len(self.cached_objects()),
            bytes: self.cached_bytes(),
            watch_events: self.observed.events_total(),
        }
    }
}

impl ClusterConnections {
    /// Each started cluster's caches and watch events, sorted by id.
    pub fn cache_usage(&self) -> Vec<(String, CacheUsage)> {
        self.each_started(ClusterConn::cache_usage)
    }
}
