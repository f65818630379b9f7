//! Argo CD's claim functions exactly as they behave, defects included (argo-compat
//! §5.4–§5.5 in `docs/glossary.md`). A reference, not a protocol: the tests run the §6.5
//! vectors through these and through [`super::get_or_update_shard`] side by side, so every
//! deliberate deviation shows.
//! fleetshard never uses them to decide ownership.
//!
//! Like upstream, these allocate `replicas` entries: pass realistic counts.

use std::time::Duration;

use super::mapping::ShardEntry;
use super::time::WallTime;

/// Where Go would panic with "index out of range" (W18), reported instead of raised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("runtime error: index out of range [{index}] with length {len}")]
pub struct UpstreamPanic {
    /// The index used.
    pub index: i64,
    /// The slice's length.
    pub len: usize,
}

/// `getDefaultShardMappingData(replicas)`: entries `0..replicas`, all free.
pub fn default_shard_mapping_data(replicas: i64) -> Vec<ShardEntry> {
    (0..replicas.max(0)).map(ShardEntry::free).collect()
}

/// What `GetOrUpdateShardFromConfigMap` does when the ConfigMap does not exist
/// (`generateDefaultShardMappingCM`, §5.4 step 3): the default list with `hostname` on
/// `shard`, or on 0 when `shard` is `-1` or `> replicas`. Returns the shard and the list to
/// create.
///
/// The bound check is off by one, so `shard == replicas` (and any `shard < -1`) indexes
/// out of range: Go panics, this returns [`UpstreamPanic`].
pub fn generate_default_shard_mapping(
    replicas: i64,
    hostname: &str,
    shard: i64,
    now: WallTime,
) -> Result<(i64, Vec<ShardEntry>), UpstreamPanic> {
    let mut list = default_shard_mapping_data(replicas);
    let shard = if shard == -1 || shard > replicas {
        0
    } else {
        shard
    };
    let len = list.len();
    let entry = usize::try_from(shard)
        .ok()
        .and_then(|index| list.get_mut(index))
        .ok_or(UpstreamPanic { index: shard, len })?;
    entry.controller_name = hostname.to_owned();
    entry.heartbeat_time = now;
    Ok((shard, list))
}

/// `getOrUpdateShardNumberForController(list, hostname, replicas, shard)` (§5.5), exactly:
///
/// 1. a short list is extended with free entries numbered by position;
/// 2. a long list is **reset** to the default: every owner wiped (W11);
/// 3. a pin `!= -1` and `< replicas` takes the first entry with that number,
///    **unconditionally** (W12); otherwise the first entry with `hostname` is refreshed and
///    its number becomes the shard;
/// 4. if the shard is still `-1`, the first entry that is free or whose heartbeat plus
///    `heartbeat_timeout` is strictly before `now` is claimed (W13: the writer's clock
///    against the reader's).
///
/// Returns the shard (`-1`: nothing claimable, or a pin that matched no entry, returned as
/// is) and the list to write. `now` serves both as the time written and as the clock that
/// judges staleness; upstream reads the real clock for the latter (its tests inject only
/// the former and keep both equal).
pub fn get_or_update_shard_number_for_controller(
    list: &[ShardEntry],
    hostname: &str,
    replicas: i64,
    shard: i64,
    now: WallTime,
    heartbeat_timeout: Duration,
) -> (i64, Vec<ShardEntry>) {
    let mut list = list.to_vec();
    let len = i64::try_from(list.len()).unwrap_or(i64::MAX);
    if len < replicas {
        list.extend((len..replicas).map(ShardEntry::free));
    }
    if i64::try_from(list.len()).unwrap_or(i64::MAX) > replicas {
        list = default_shard_mapping_data(replicas);
    }
    let mut shard = shard;
    if shard != -1 && shard < replicas {
        if let Some(entry) = list.iter_mut().find(|e| e.shard_number == shard) {
            entry.controller_name = hostname.to_owned();
            entry.heartbeat_time = now;
        }
    } else if let Some(entry) = list.iter_mut().find(|e| e.controller_name == hostname) {
        shard = entry.shard_number;
        entry.heartbeat_time = now;
    }
    if shard == -1
        && let Some(entry) = list.iter_mut().find(|e| {
            e.controller_name.is_empty() || now > e.heartbeat_time.saturating_add(heartbeat_timeout)
        })
    {
        entry.controller_name = hostname.to_owned();
        entry.heartbeat_time = now;
        shard = entry.shard_number;
    }
    (shard, list)
}
