//! The dashboard's picture of a fleet: a pure step machine fed successive store listings
//! (with the time of each, passed in) that judges leases as a replica does — a record whose
//! version has not moved for the lease duration is expired — and derives a timeline of
//! claims, handovers, expiries and failovers from the differences between steps.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use fleetshard_coord::fenced::{FencedSnapshot, RoleLease, ShardSeen, role_lease};
use fleetshard_coord::store::Listing;
use fleetshard_core::argo::{IN_CLUSTER_NAME, IN_CLUSTER_SERVER};
use serde::Serialize;
use tokio::time::Instant;

/// How many timeline events are kept (the oldest are dropped).
pub const TIMELINE_LEN: usize = 200;
/// How many apps that are not Synced and Healthy are listed by name.
pub const APP_PROBLEMS_LEN: usize = 100;

/// What the dashboard shows of a cluster besides its ownership: never its credentials.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterInfo {
    /// The cluster's name.
    pub name: String,
    /// Its API server URL.
    pub server: String,
    /// Its zone, when labelled.
    pub zone: Option<String>,
    /// Its applications, as `namespace/name`.
    pub apps: Vec<String>,
}

/// Clusters by id.
pub type Clusters = BTreeMap<String, ClusterInfo>;

/// An application's last recorded status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppStatus {
    /// `Synced`, `OutOfSync` or `Unknown`.
    pub sync: String,
    /// The health status.
    pub health: String,
    /// The first condition's type and message, if any.
    pub condition: Option<String>,
}

/// App statuses by `namespace/name`.
pub type AppStatuses = BTreeMap<String, AppStatus>;

/// How a lease record was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lease {
    /// Renewed while watched.
    Live,
    /// Unchanged for the lease duration: its holder stopped.
    Expired,
    /// Given up by its holder.
    Released,
    /// Unchanged for longer than a live holder takes to renew (a renew period and a
    /// read interval) but not yet for the lease duration: its holder missed a renewal and
    /// may be dead. Nobody is shown acting on its clusters.
    NotRenewed,
    /// Not watched long enough to tell.
    Unknown,
}

/// One shard.
#[derive(Debug, Clone, Serialize)]
pub struct ShardView {
    /// Its number.
    pub shard: u32,
    /// The replica holding it.
    pub holder: Option<String>,
    /// The holder's zone.
    pub zone: Option<String>,
    /// The lease as judged.
    pub lease: Option<Lease>,
    /// Seconds since this observer saw its record change (renewals move it about every
    /// 1.25 s; the observer reads once per interval).
    pub lease_age_secs: f64,
    /// Clusters assigned to it.
    pub clusters: usize,
    /// Apps on those clusters.
    pub apps: usize,
    /// Its load: a base of 1 per cluster plus its apps (the placement's default).
    pub load: usize,
    /// Its clusters' measured cost (`None`: none measured; `views::add_costs`).
    pub cost: Option<f64>,
}

/// One cluster.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterView {
    /// Its id.
    pub id: String,
    /// Its name (empty when the inventory does not know it).
    pub name: String,
    /// Its server.
    pub server: String,
    /// Its zone.
    pub zone: Option<String>,
    /// Its shard in the committed generation.
    pub shard: Option<u32>,
    /// The replica acting on it (its shard's live holder).
    pub owner: Option<String>,
    /// `acting`, `handover` (its holder has not acknowledged the generation yet),
    /// `not_renewed` (its holder missed a renewal: nobody acts on it) or `unowned`.
    pub state: &'static str,
    /// Its apps: how many, and how many are Synced, Healthy, or have a condition.
    pub apps: usize,
    /// Synced apps.
    pub synced: usize,
    /// Healthy apps.
    pub healthy: usize,
    /// Apps with a condition (`ComparisonError`, …).
    pub errors: usize,
    /// Its measured cost (`None`: not measured yet).
    pub cost: Option<f64>,
}

/// An app that is not Synced and Healthy.
#[derive(Debug, Clone, Serialize)]
pub struct AppProblem {
    /// `namespace/name`.
    pub app: String,
    /// Its cluster's name.
    pub cluster: String,
    /// Sync status (`-`: none recorded yet).
    pub sync: String,
    /// Health (`-`: none recorded yet).
    pub health: String,
    /// Its first condition.
    pub condition: Option<String>,
}

/// App totals.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AppTotals {
    /// Every app of a known cluster.
    pub total: usize,
    /// With a recorded status.
    pub recorded: usize,
    /// Synced.
    pub synced: usize,
    /// Healthy.
    pub healthy: usize,
    /// Synced and Healthy.
    pub good: usize,
    /// With a condition.
    pub errors: usize,
}

/// One event of the timeline.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// Its number (grows by one per event).
    pub seq: u64,
    /// Seconds since the dashboard started watching.
    pub at_secs: f64,
    /// `claim`, `handover`, `expired`, `failover`, `generation`, `owned`.
    pub kind: &'static str,
    /// What happened, for people.
    pub text: String,
}

/// The whole picture at one step (the JSON the page reads).
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// Steps taken so far.
    pub step: u64,
    /// Seconds since the dashboard started watching.
    pub uptime_secs: f64,
    /// The store revision read.
    pub revision: u64,
    /// The committed generation (0: none).
    pub generation: u64,
    /// Its shard count.
    pub shard_count: u32,
    /// The count `fleetshard scale` stored, if any.
    pub desired_shards: Option<u32>,
    /// The distributor.
    pub distributor: Option<String>,
    /// Every shard below the count, and records beyond it.
    pub shards: Vec<ShardView>,
    /// Replicas without a shard (live presence records).
    pub spares: Vec<String>,
    /// Clusters, unowned first, then by name.
    pub clusters: Vec<ClusterView>,
    /// How many clusters have no owner.
    pub unowned: usize,
    /// App totals.
    pub apps: AppTotals,
    /// Apps not Synced and Healthy, at most [`APP_PROBLEMS_LEN`].
    pub app_problems: Vec<AppProblem>,
    /// Newest last.
    pub timeline: Vec<Event>,
    /// Each shard's holders and cluster counts over the last minutes, gaps included.
    pub picture: Picture,
    /// Records that could not be read.
    pub warnings: Vec<String>,
}

#[derive(Debug, Default)]
struct Seen {
    holders: BTreeMap<u32, (String, Lease)>,
    clusters: BTreeMap<String, u32>,
    generation: u64,
    unowned: usize,
    unowned_since: Option<Instant>,
}

/// A cluster the assignment has and the clusters given do not: Argo CD's built-in
/// in-cluster entry (id `""`), or one the inventory no longer lists.
fn unknown(id: &str) -> ClusterInfo {
    if id.is_empty() {
        ClusterInfo {
            name: IN_CLUSTER_NAME.into(),
            server: IN_CLUSTER_SERVER.into(),
            ..ClusterInfo::default()
        }
    } else {
        ClusterInfo::default()
    }
}

/// The step machine.
#[derive(Debug)]
pub struct Observer {
    lease: Duration,
    at_risk_after: Duration,
    started: Instant,
    /// Lease record key → (version, when first seen at that version, first sight ever).
    versions: HashMap<String, (u64, Instant, bool)>,
    seen: Option<Seen>,
    timeline: VecDeque<Event>,
    next_event: u64,
    steps: u64,
    history: History,
}

impl Observer {
    /// An observer started at `now` that judges a record unchanged for `lease` expired,
    /// and one unchanged for `at_risk_after` (a live holder's renew period plus the
    /// interval between this observer's reads, and a margin) not renewed.
    pub fn new(lease: Duration, at_risk_after: Duration, now: Instant) -> Observer {
        Observer {
            lease,
            at_risk_after,
            started: now,
            versions: HashMap::new(),
            seen: None,
            timeline: VecDeque::new(),
            next_event: 0,
            steps: 0,
            history: History::default(),
        }
    }

    fn judge(&mut self, key: &str, version: u64, released: bool, now: Instant) -> (Lease, f64) {
        let entry = self
            .versions
            .entry(key.to_owned())
            .or_insert((version, now, true));
        if entry.0 != version {
            *entry = (version, now, false);
        }
        let age = now.saturating_duration_since(entry.1);
        let lease = if released {
            Lease::Released
        } else if age >= self.lease {
            Lease::Expired
        } else if age >= self.at_risk_after {
            Lease::NotRenewed
        } else if entry.2 {
            Lease::Unknown
        } else {
            Lease::Live
        };
        (lease, age.as_secs_f64())
    }

    fn event(&mut self, now: Instant, kind: &'static str, text: String) {
        self.timeline.push_back(Event {
            seq: self.next_event,
            at_secs: self.secs(now),
            kind,
            text,
        });
        self.next_event += 1;
        while self.timeline.len() > TIMELINE_LEN {
            self.timeline.pop_front();
        }
    }

    fn secs(&self, now: Instant) -> f64 {
        now.saturating_duration_since(self.started).as_secs_f64()
    }

    /// One step: the listing of the fleet's `root` read at `now`, the clusters the
    /// inventory knows and the apps' statuses.
    pub fn step(
        &mut self,
        now: Instant,
        root: &str,
        listing: &Listing,
        clusters: &Clusters,
        statuses: &AppStatuses,
    ) -> Snapshot {
        self.steps += 1;
        let snap = FencedSnapshot::decode(root, listing);
        let doc = snap.assignment.as_ref().map(|(_, d)| d);
        let generation = doc.map_or(0, |d| d.generation);
        let count = doc
            .map(|d| d.shards)
            .unwrap_or_else(|| snap.shards.keys().next_back().map_or(0, |n| n + 1));
        let assigned: BTreeMap<String, u32> = doc.map(|d| d.clusters.clone()).unwrap_or_default();

        // Leases.
        let mut holders: BTreeMap<u32, (String, Lease)> = BTreeMap::new();
        let mut shard_age: BTreeMap<u32, f64> = BTreeMap::new();
        for (&n, (version, r)) in &snap.shards {
            let (lease, age) = self.judge(&format!("shards/{n}"), *version, r.released, now);
            holders.insert(n, (r.holder.clone(), lease));
            shard_age.insert(n, age);
        }
        // The role judged as the replicas judge it (`fenced/role.rs`): a bound record
        // through its shard's lease, a separate one through its own.
        let shard_seen = |n: u32| match snap.shards.get(&n) {
            Some((_, r)) => ShardSeen::Record(r),
            None if snap
                .corrupt
                .iter()
                .any(|c| c.key == format!("{root}shards/{n}")) =>
            {
                ShardSeen::Unreadable
            }
            None => ShardSeen::Absent,
        };
        let distributor = snap.distributor.as_ref().and_then(|(v, d)| {
            let lease = match role_lease(d, shard_seen) {
                RoleLease::Own => self.judge("distributor", *v, false, now).0,
                RoleLease::Shard(n) => holders.get(&n).map_or(Lease::Unknown, |(_, l)| *l),
                RoleLease::Free => Lease::Expired,
            };
            matches!(lease, Lease::Live | Lease::Unknown).then(|| d.holder.clone())
        });
        let mut spares = Vec::new();
        for (id, (v, r)) in &snap.presence {
            let (lease, _) = self.judge(&format!("replicas/{id}"), *v, r.released, now);
            let holds = holders
                .values()
                .any(|(h, l)| h == &r.holder && matches!(l, Lease::Live | Lease::Unknown));
            if matches!(lease, Lease::Live | Lease::Unknown) && !holds {
                spares.push(r.holder.clone());
            }
        }

        // Clusters: ownership and apps.
        let acting = |n: u32| acting(&holders, n);
        let ClusterViews {
            views,
            totals,
            problems,
            unowned,
        } = cluster_views(clusters, &assigned, statuses, |_, shard| {
            let owner = shard.and_then(acting);
            let state = match (&owner, shard) {
                (None, Some(n)) if not_renewed(&holders, n) => "not_renewed",
                (None, _) | (_, None) => "unowned",
                (Some(_), Some(n)) => {
                    let acked = snap.shards.get(&n).map_or(0, |(_, r)| r.acked);
                    if acked >= generation {
                        "acting"
                    } else {
                        "handover"
                    }
                }
            };
            (owner, state)
        });

        // Shards.
        let numbers: std::collections::BTreeSet<u32> =
            (0..count).chain(snap.shards.keys().copied()).collect();
        let shards: Vec<ShardView> = numbers
            .into_iter()
            .map(|n| {
                let rec = snap.shards.get(&n).map(|(_, r)| r);
                let (mine, apps) = shard_load(n, &assigned, clusters);
                ShardView {
                    shard: n,
                    holder: rec.map(|r| r.holder.clone()),
                    zone: rec.and_then(|r| r.zone.clone()),
                    lease: holders.get(&n).map(|(_, l)| *l),
                    lease_age_secs: shard_age.get(&n).copied().unwrap_or(0.0),
                    clusters: mine,
                    apps,
                    load: mine + apps,
                    cost: None,
                }
            })
            .collect();

        // A holder not renewed for half a lease is treated as gone when its clusters move
        // (the distributor may act on the expiry before this observer judges it).
        let stale: std::collections::BTreeSet<u32> = shard_age
            .iter()
            .filter(|(_, age)| **age >= self.lease.as_secs_f64() / 2.0)
            .map(|(n, _)| *n)
            .collect();
        self.record_changes(now, &holders, &stale, &assigned, generation, count, unowned);
        self.history.record(self.secs(now), &shards, unowned);

        Snapshot {
            step: self.steps,
            uptime_secs: self.secs(now),
            revision: listing.revision,
            generation,
            shard_count: count,
            desired_shards: snap.desired,
            distributor,
            shards,
            spares,
            clusters: views,
            unowned,
            apps: totals,
            app_problems: problems,
            timeline: self.timeline.iter().cloned().collect(),
            picture: self.history.picture(),
            warnings: snap.corrupt.iter().map(ToString::to_string).collect(),
        }
    }

    /// Compares this step with the last one and adds the events.
    #[allow(clippy::too_many_arguments)]
    fn record_changes(
        &mut self,
        now: Instant,
        holders: &BTreeMap<u32, (String, Lease)>,
        stale: &std::collections::BTreeSet<u32>,
        assigned: &BTreeMap<String, u32>,
        generation: u64,
        count: u32,
        unowned: usize,
    ) {
        let prev = self.seen.take().unwrap_or_default();
        let mut unowned_since = prev.unowned_since;
        for (&n, (holder, lease)) in holders {
            match prev.holders.get(&n) {
                None => {
                    if *lease != Lease::Released {
                        self.event(now, "claim", format!("{holder} claimed shard {n}"));
                    }
                }
                Some((old, old_lease)) if old != holder => {
                    let (kind, how) = match old_lease {
                        Lease::Expired | Lease::NotRenewed => ("failover", "took over from"),
                        Lease::Released => ("handover", "took over, released by"),
                        _ => ("handover", "replaced"),
                    };
                    self.event(now, kind, format!("{holder} {how} {old} on shard {n}"));
                }
                Some((_, old_lease)) => {
                    if *lease == Lease::Expired && *old_lease != Lease::Expired {
                        let lost = assigned.values().filter(|s| **s == n).count();
                        self.event(
                            now,
                            "expired",
                            format!(
                                "{holder} stopped renewing shard {n}: its lease expired, \
                                 {lost} cluster(s) without an owner"
                            ),
                        );
                    } else if *lease == Lease::NotRenewed
                        && matches!(old_lease, Lease::Live | Lease::Unknown)
                    {
                        let at_risk = assigned.values().filter(|s| **s == n).count();
                        self.event(
                            now,
                            "not_renewed",
                            format!(
                                "{holder} missed a renewal of shard {n}: {at_risk} cluster(s) \
                                 at risk, acted on by nobody until it renews or its lease expires"
                            ),
                        );
                    } else if *lease == Lease::Released && *old_lease != Lease::Released {
                        self.event(now, "handover", format!("{holder} released shard {n}"));
                    } else if *lease == Lease::Live
                        && matches!(old_lease, Lease::Expired | Lease::NotRenewed)
                    {
                        self.event(now, "claim", format!("{holder} renews shard {n} again"));
                    }
                }
            }
        }
        if generation != prev.generation && generation > 0 {
            let moved: Vec<u32> = assigned
                .iter()
                .filter_map(|(id, s)| prev.clusters.get(id).filter(|p| *p != s).copied())
                .collect();
            let added = assigned
                .keys()
                .filter(|id| !prev.clusters.contains_key(*id))
                .count();
            // Clusters moved off a shard whose holder is gone (lease expired or no
            // record): a failover; otherwise a planned handover (scale, a new replica).
            let gone = |n: &u32| {
                holders.get(n).is_none_or(|(_, l)| {
                    *l == Lease::Expired || (*l != Lease::Released && stale.contains(n))
                })
            };
            let rescued: Vec<u32> = moved.iter().copied().filter(gone).collect();
            if rescued.is_empty() {
                self.event(
                    now,
                    "generation",
                    format!(
                        "generation {generation}: {count} shard(s), {} cluster(s) moved, \
                         {added} new",
                        moved.len()
                    ),
                );
            } else {
                let shards: std::collections::BTreeSet<u32> = rescued.iter().copied().collect();
                let from: Vec<String> = shards
                    .iter()
                    .map(|n| match holders.get(n) {
                        Some((h, _)) => format!("shard {n} ({h}, no longer renewed)"),
                        None => format!("shard {n}"),
                    })
                    .collect();
                self.event(
                    now,
                    "failover",
                    format!(
                        "generation {generation}: {} cluster(s) of {} moved to live \
                         replicas ({} moved in all)",
                        rescued.len(),
                        from.join(", "),
                        moved.len()
                    ),
                );
            }
        }
        if unowned > 0 && prev.unowned == 0 {
            unowned_since = Some(now);
        }
        if unowned == 0 && prev.unowned > 0 {
            let after =
                unowned_since.map_or(0.0, |t| now.saturating_duration_since(t).as_secs_f64());
            self.event(
                now,
                "owned",
                format!("every cluster owned again ({after:.1} s without a full set of owners)"),
            );
            unowned_since = None;
        }
        self.seen = Some(Seen {
            holders: holders.clone(),
            clusters: assigned.clone(),
            generation,
            unowned,
            unowned_since,
        });
    }
}

mod argocd;
mod history;
mod views;

pub(crate) use views::add_costs;

pub use argocd::ArgoObserver;
use history::History;
pub use history::Picture;
use views::{ClusterViews, acting, cluster_views, not_renewed, shard_load};

#[cfg(test)]
mod tests;
