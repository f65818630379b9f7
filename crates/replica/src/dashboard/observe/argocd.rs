//! The dashboard's picture under Argo CD's heartbeat protocol (`--protocol argocd`): a pure
//! step machine fed successive reads of the shard map (Argo CD's ConfigMap
//! `argocd-app-controller-shard-cm`, entries `ShardNumber`/`ControllerName`/
//! `HeartbeatTime`) with the time of each, passed in.
//!
//! - **Liveness is judged by observed change, never by `HeartbeatTime`.** Argo CD's rule
//!   is that an entry whose heartbeat is older than the heartbeat timeout (3H) may be
//!   taken; fleetshard's replicas apply it without trusting anyone's wall clock (G6, W13):
//!   an entry whose exact content (controller and heartbeat) this observer has seen
//!   unchanged for `stale_after` (3H) on the clock passed in is `expired` — the moment a
//!   live replica may take it. A content that changed while watched is `live`; one not
//!   watched for 3H yet, `unknown`; a free entry whose holder was seen, `released`. The
//!   written heartbeat is only a token that changes.
//! - **Clusters** are placed as the replicas place them: Argo CD's controller-level
//!   distribution ([`ArgoControllerAssignment`], the configured algorithm) of the clusters
//!   known when this replica started, among the replica count in use; while the map has
//!   another length, a cluster the two counts give different shards is acted on by nobody
//!   (as the machine does), nor is a `skip-reconcile` cluster. A cluster the inventory
//!   gained since the start is shown without a shard: the replicas place it after a
//!   restart.
//! - **Timeline**: claims, releases, expiries (`expired`), and a `failover` when an entry
//!   passes to another controller after its content stayed unchanged for half of 3H or
//!   more (a live holder changes it every H), else a `handover`; the same events and
//!   wording as fenced mode's, from the same code. "Unchanged" is measured up to the read
//!   that saw the new holder, so with a heartbeat shorter than about twice the read
//!   interval (a replica's dashboard reads every second; only the tests'
//!   `--heartbeat-ms` go below Argo CD's 10 s) a release and a claim that both fall
//!   between two reads are shown as a failover.
//!
//! The map has no presence records, no distributor and no generation: a snapshot has no
//! spares, no distributor, generation 0 and no zones.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fleetshard_coord::argocd::{ShardEntry, WallTime, decode};
use fleetshard_coord::store::Entry as StoreEntry;
use fleetshard_core::argo::{ArgoAlgorithm, ArgoControllerAssignment, ArgoPrepared, ArgoShard};
use fleetshard_core::{App, Cluster};
use tokio::time::Instant;

use super::{AppStatuses, Clusters, Lease, Observer, ShardView, Snapshot};
use super::{acting, cluster_views, not_renewed, shard_load};

/// How many replica counts' assignments are kept (counts rarely change).
const ASSIGNMENTS_KEPT: usize = 4;

/// The step machine for Argo CD's shard map.
#[derive(Debug)]
pub struct ArgoObserver {
    /// Judges contents by version (a counter per shard, moved when its content changes)
    /// with `stale_after` as the lease, and keeps the timeline.
    inner: Observer,
    stale_after: Duration,
    algorithm: ArgoAlgorithm,
    /// The clusters the replicas place (those known at start), in the inventory's order.
    fleet: Vec<Cluster>,
    /// Their ids.
    fleet_ids: BTreeSet<String>,
    prepared: ArgoPrepared,
    /// Replica count → each fleet cluster's shard.
    assignments: BTreeMap<u32, Vec<ArgoShard>>,
    /// Shard → its entry's last content (controller, heartbeat) and its counter.
    contents: BTreeMap<u32, ((String, WallTime), u64)>,
    /// Shard → the last controller seen holding it.
    last_holder: BTreeMap<u32, String>,
}

impl ArgoObserver {
    /// An observer started at `now` that judges an entry unchanged for `stale_after` (3H)
    /// stale and one unchanged for `at_risk_after` (H, the read interval and a margin) not
    /// renewed, and places `fleet` (the clusters known when the replicas started; `apps`
    /// weigh them for consistent hashing) with `algorithm`.
    pub fn new(
        stale_after: Duration,
        at_risk_after: Duration,
        algorithm: ArgoAlgorithm,
        fleet: Vec<Cluster>,
        apps: &[App],
        now: Instant,
    ) -> ArgoObserver {
        ArgoObserver {
            inner: Observer::new(stale_after, at_risk_after, now),
            stale_after,
            algorithm,
            fleet_ids: fleet.iter().map(|c| c.id.clone()).collect(),
            fleet,
            prepared: ArgoPrepared::new(apps),
            assignments: BTreeMap::new(),
            contents: BTreeMap::new(),
            last_holder: BTreeMap::new(),
        }
    }

    /// One step: the map's store entry at `key` as read at `now` (`None`: absent), the
    /// replica count in use, the clusters the inventory knows and the apps' statuses.
    pub fn step(
        &mut self,
        now: Instant,
        key: &str,
        map: Option<&StoreEntry>,
        replicas: u32,
        clusters: &Clusters,
        statuses: &AppStatuses,
    ) -> Snapshot {
        self.inner.steps += 1;
        let mut warnings = Vec::new();
        let entries = read_map(key, map, &mut warnings);
        let by_number = by_number(key, &entries, &mut warnings);
        let len = u32::try_from(entries.len()).unwrap_or(u32::MAX);
        if len != 0 && len != replicas {
            warnings.push(format!(
                "{key}: the map has {len} entries for {replicas} replicas: clusters the two \
                 counts place on different shards are acted on by nobody until they agree"
            ));
        }

        // Entries: holders and leases, judged by content changes (counters are kept for
        // entries missing from one read, so that one unreadable map moves nothing).
        let mut holders: BTreeMap<u32, (String, Lease)> = BTreeMap::new();
        let mut ages: BTreeMap<u32, (Lease, f64)> = BTreeMap::new();
        let mut stale_replaced: Vec<u32> = Vec::new();
        for (&n, e) in &by_number {
            let content = (e.controller_name.clone(), e.heartbeat_time);
            let record = format!("entries/{n}");
            let version = match self.contents.get_mut(&n) {
                Some((c, v)) if *c == content => *v,
                Some((c, v)) => {
                    // How long the content being replaced stayed unchanged, until now.
                    let unchanged = self
                        .inner
                        .versions
                        .get(&record)
                        .map_or(Duration::ZERO, |s| now.saturating_duration_since(s.1));
                    let taken = !c.0.is_empty() && !content.0.is_empty() && c.0 != content.0;
                    if taken && unchanged >= self.stale_after / 2 {
                        stale_replaced.push(n);
                    }
                    *c = content;
                    *v += 1;
                    *v
                }
                None => {
                    self.contents.insert(n, (content, 0));
                    0
                }
            };
            let (lease, age) = self.inner.judge(&record, version, e.is_free(), now);
            if e.is_free() {
                if let Some(h) = self.last_holder.get(&n) {
                    holders.insert(n, (h.clone(), Lease::Released));
                    ages.insert(n, (lease, age));
                }
            } else {
                holders.insert(n, (e.controller_name.clone(), lease));
                ages.insert(n, (lease, age));
                self.last_holder.insert(n, e.controller_name.clone());
            }
        }

        // Clusters: each one's shard among the count in use, and who acts on it.
        let assigned = self.assigned(replicas);
        let blocked = self.blocked(replicas, len);
        let added = clusters
            .keys()
            .filter(|id| !self.fleet_ids.contains(*id))
            .count();
        if added > 0 {
            warnings.push(format!(
                "{added} cluster(s) added since this replica started: Argo CD's protocol \
                 places them after a restart"
            ));
        }
        let views = cluster_views(clusters, &assigned, statuses, |id, shard| {
            match shard.filter(|_| !blocked.contains(id)) {
                Some(n) if not_renewed(&holders, n) => (None, "not_renewed"),
                Some(n) => acting(&holders, n).map_or((None, "unowned"), |o| (Some(o), "acting")),
                None => (None, "unowned"),
            }
        });

        // Shards: every number below the count and the map's length, and any other entry.
        let numbers: BTreeSet<u32> = (0..replicas.max(len))
            .chain(by_number.keys().copied())
            .collect();
        let shards: Vec<ShardView> = numbers
            .into_iter()
            .map(|n| {
                let (clusters_n, apps) = shard_load(n, &assigned, clusters);
                let held = by_number.get(&n).filter(|e| !e.is_free());
                ShardView {
                    shard: n,
                    holder: held.map(|e| e.controller_name.clone()),
                    zone: None,
                    lease: ages.get(&n).map(|(l, _)| *l),
                    lease_age_secs: ages.get(&n).map_or(0.0, |(_, a)| *a),
                    clusters: clusters_n,
                    apps,
                    load: clusters_n + apps,
                    cost: None,
                }
            })
            .collect();

        // An entry taken from a holder that had stopped changing it: a failover, even when
        // the taker acted before this observer's own 3H had run out.
        if let Some(seen) = self.inner.seen.as_mut() {
            for n in stale_replaced {
                if let Some(prev) = seen.holders.get_mut(&n) {
                    prev.1 = Lease::Expired;
                }
            }
        }
        let none = BTreeSet::new();
        self.inner
            .record_changes(now, &holders, &none, &assigned, 0, replicas, views.unowned);
        let at = self.inner.secs(now);
        self.inner.history.record(at, &shards, views.unowned);

        Snapshot {
            step: self.inner.steps,
            uptime_secs: self.inner.secs(now),
            revision: map.map_or(0, |e| e.version),
            generation: 0,
            shard_count: replicas,
            desired_shards: None,
            distributor: None,
            shards,
            spares: Vec::new(),
            clusters: views.views,
            unowned: views.unowned,
            apps: views.totals,
            app_problems: views.problems,
            timeline: self.inner.timeline.iter().cloned().collect(),
            picture: self.inner.history.picture(),
            warnings,
        }
    }

    /// Each fleet cluster's shard among `count` (cached).
    fn shards_for(&mut self, count: u32) -> &[ArgoShard] {
        if !self.assignments.contains_key(&count) {
            if self.assignments.len() >= ASSIGNMENTS_KEPT {
                self.assignments.clear();
            }
            let a = ArgoControllerAssignment::compute_prepared(
                self.algorithm,
                count,
                &self.fleet,
                &mut self.prepared,
            );
            self.assignments.insert(count, a.shards().to_vec());
        }
        &self.assignments[&count]
    }

    /// Cluster id → its shard among `count` (clusters with a negative pin have none).
    fn assigned(&mut self, count: u32) -> BTreeMap<String, u32> {
        let shards = self.shards_for(count).to_vec();
        self.fleet
            .iter()
            .zip(shards)
            .filter_map(|(c, s)| Some((c.id.clone(), u32::try_from(s).ok()?)))
            .collect()
    }

    /// The clusters nobody acts on whatever the map says: `skip-reconcile`, and, while
    /// the map's length `len` differs from `count`, those the two place differently.
    fn blocked(&mut self, count: u32, len: u32) -> BTreeSet<String> {
        let mine = self.shards_for(count).to_vec();
        let other = (len != 0 && len != count).then(|| self.shards_for(len).to_vec());
        self.fleet
            .iter()
            .enumerate()
            .filter(|(i, c)| c.skip_reconcile || other.as_ref().is_some_and(|o| o[*i] != mine[*i]))
            .map(|(_, c)| c.id.clone())
            .collect()
    }
}

/// The map's entries (none when absent or unreadable, with a warning naming the key).
fn read_map(key: &str, map: Option<&StoreEntry>, warnings: &mut Vec<String>) -> Vec<ShardEntry> {
    let Some(entry) = map else {
        return Vec::new();
    };
    let decoded = std::str::from_utf8(&entry.value)
        .map_err(|e| format!("not UTF-8: {e}"))
        .and_then(|text| decode(text).map_err(|e| e.to_string()));
    decoded.unwrap_or_else(|why| {
        warnings.push(format!(
            "{key}: cannot decode the shard map ({why}): the replicas hold nothing until it \
             is repaired"
        ));
        Vec::new()
    })
}

/// The entries by shard number: the first of duplicates, none with a negative number
/// (each named in a warning).
fn by_number<'a>(
    key: &str,
    entries: &'a [ShardEntry],
    warnings: &mut Vec<String>,
) -> BTreeMap<u32, &'a ShardEntry> {
    let mut out = BTreeMap::new();
    for e in entries {
        let Ok(n) = u32::try_from(e.shard_number) else {
            warnings.push(format!(
                "{key}: an entry with ShardNumber {} is not shown",
                e.shard_number
            ));
            continue;
        };
        match out.entry(n) {
            Entry::Vacant(v) => {
                v.insert(e);
            }
            Entry::Occupied(_) => warnings.push(format!(
                "{key}: ShardNumber {n} appears more than once; the first entry is shown"
            )),
        }
    }
    out
}

#[cfg(test)]
mod tests;
