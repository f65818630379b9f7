//! The fenced protocol's report: what the store says, with every lease judged the way a
//! replica judges it — by watching its version change on this process's clock
//! (`LeaseObserver`: a record unchanged for the lease duration is expired, its holder
//! gone) — and an owner named only where it acts.

use std::collections::{BTreeMap, BTreeSet};

use fleetshard_coord::fenced::{
    FencedSnapshot, InventoryRecord, RoleLease, ShardSeen, incarnation_text, role_lease,
};
use fleetshard_coord::store::Listing;
use serde::Serialize;

mod cluster_row;
pub(super) use cluster_row::{ClusterRow, ClusterState, SliceOf};

/// How a lease record was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Lease {
    /// Renewed while watched: its holder is alive.
    Live,
    /// Unchanged for at least the lease duration: its holder stopped (dead, paused, cut
    /// off). It acts on nothing.
    Expired,
    /// Given up by its holder.
    Released,
    /// Unchanged for at least a renew period (a live holder renews every 1.25 s) but not
    /// yet for the lease duration: its holder missed a renewal and may be dead. Nobody is
    /// shown acting on its clusters.
    NotRenewed,
    /// Not watched long enough to tell (`--observe` shorter than a renew period).
    NotJudged,
}

/// How long the leases were watched, as far as judging them goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WatchSpan {
    /// At least the lease duration: an unchanged record is expired.
    Lease,
    /// At least a renew period: an unchanged record missed a renewal.
    RenewPeriod,
    /// Shorter: an unchanged record is not judged.
    Short,
}

/// What the watch saw: the first listing, and for each lease key whether its version moved
/// since, and for how long the last listing's versions were watched.
pub(super) struct Watched<'a> {
    /// The last listing (what the report shows).
    pub now: &'a Listing,
    /// The first (the same as `now` for a single read).
    pub first: &'a Listing,
    /// How long the watch lasted.
    pub span: WatchSpan,
    /// Records the watch showed renewed before its window ended (`renewals.rs`: changed,
    /// or proven by the store's order); empty when it ran the whole window.
    pub renewed: &'a BTreeSet<String>,
}

impl Watched<'_> {
    fn judge(&self, key: &str, released: bool) -> Lease {
        let version = |l: &Listing| l.entries.iter().find(|e| e.key == key).map(|e| e.version);
        if released {
            Lease::Released
        } else if version(self.now) != version(self.first) || self.renewed.contains(key) {
            Lease::Live
        } else {
            match self.span {
                WatchSpan::Lease => Lease::Expired,
                WatchSpan::RenewPeriod => Lease::NotRenewed,
                WatchSpan::Short => Lease::NotJudged,
            }
        }
    }
}

/// One shard in the report.
#[derive(Debug, Serialize)]
pub(super) struct ShardRow {
    pub shard: u32,
    pub holder: Option<String>,
    /// [`incarnation_text`]: 16 hex digits, a string in JSON.
    pub incarnation: Option<String>,
    pub acked: Option<u64>,
    pub released: bool,
    /// The holder's zone, when it gave one.
    pub zone: Option<String>,
    /// The holder's advertised capacity (`--capacity`, by default its CPUs; `None`: an
    /// older release advertised none).
    pub capacity: Option<u32>,
    /// The lease as judged (`None`: vacant, no record).
    pub lease: Option<Lease>,
    /// The measured cost of its clusters (`None`: none measured yet; `status/costs.rs`).
    pub cost: Option<f64>,
}

/// A replica without a shard, from its presence record.
#[derive(Debug, Serialize)]
pub(super) struct SpareRow {
    pub identity: String,
    pub incarnation: String,
    pub lease: Lease,
}

/// A replica's published inventory (`fleetshard/inventory/<identity>`).
#[derive(Debug, Serialize)]
pub(super) struct ReplicaRow {
    pub identity: String,
    pub incarnation: String,
    /// Whether a live lease record (shard, presence, distributor) of this incarnation was
    /// seen: records of replicas that are gone are listed, never compared.
    pub live: bool,
    /// 16 hex digits: equal digests, equal clusters (id, server, pinned shard, zone).
    pub digest: String,
    pub clusters: u64,
    /// Problems its inventory has (duplicate ids or servers, ...): its log names them.
    pub problems: u64,
    /// Its digest differs from the one most live replicas publish.
    pub disagrees: bool,
}

/// A drop of clusters the distributor holds back.
#[derive(Debug, Serialize)]
pub(super) struct HeldBackRow {
    pub distributor: String,
    pub previous: u64,
    pub dropped: u64,
    pub grace_secs: u64,
}

/// The whole report (the `--output json` document).
#[derive(Debug, Serialize)]
pub(super) struct Report {
    pub store: String,
    /// The store revision the read reflects (it grows by one per write).
    pub revision: u64,
    pub generation: Option<u64>,
    /// The committed generation's shard count.
    pub shard_count: Option<u32>,
    /// The count stored by `fleetshard scale`, if any.
    pub desired_shards: Option<u32>,
    pub distributor: Option<DistributorRow>,
    pub shards: Vec<ShardRow>,
    pub clusters: Vec<ClusterRow>,
    pub unowned: Vec<String>,
    /// Replicas holding no shard (their presence records, not released).
    pub spares: Vec<SpareRow>,
    /// Every replica's published inventory.
    pub replicas: Vec<ReplicaRow>,
    /// Live replicas publish different inventories.
    pub inventory_disagreement: bool,
    /// The distributor holds back a drop of clusters (its drop guard).
    pub held_back: Option<HeldBackRow>,
    /// How long leases were watched, in seconds (a lease unchanged for the lease duration
    /// is expired).
    pub observed_secs: f64,
    pub warnings: Vec<String>,
    /// Records no replica can read (`fleetshard store repair` rebuilds them).
    pub corrupt_records: Vec<CorruptRow>,
    /// Every measured cluster's cost by id: `plan --costs`'s file (`status/costs.rs`).
    pub costs: BTreeMap<String, f64>,
}

/// An unreadable record: its key and what is wrong.
#[derive(Debug, Serialize)]
pub(super) struct CorruptRow {
    pub key: String,
    pub reason: String,
}

#[derive(Debug, Serialize)]
pub(super) struct DistributorRow {
    pub holder: String,
    pub incarnation: String,
    pub released: bool,
    /// The shard whose record carries the role (its lease is the role's), or `null`: the
    /// role's own record, renewed (while a replica of an older release is live).
    pub shard: Option<u32>,
    pub lease: Lease,
}

/// Names and servers by cluster id, from the fleet given.
pub(super) type Names = BTreeMap<String, (String, String)>;

/// Builds the report from what the watch saw.
pub(super) fn build(root: &str, shards: Option<u32>, w: &Watched<'_>, names: &Names) -> Report {
    let snap = FencedSnapshot::decode(root, w.now);
    let mut warnings: Vec<String> = snap.corrupt.iter().map(ToString::to_string).collect();
    let key = |rest: String| format!("{root}{rest}");
    let doc = snap.assignment.as_ref().map(|(_, d)| d);
    let count = shards
        .or(doc.map(|d| d.shards))
        .unwrap_or_else(|| snap.shards.keys().next_back().map_or(0, |n| n + 1));
    let shard_lease: BTreeMap<u32, Lease> = snap
        .shards
        .iter()
        .map(|(&n, (_, r))| (n, w.judge(&key(format!("shards/{n}")), r.released)))
        .collect();
    // Every shard below the count, and records beyond it (holders letting go).
    let numbers: BTreeSet<u32> = (0..count).chain(snap.shards.keys().copied()).collect();
    let shard_rows: Vec<ShardRow> = numbers
        .into_iter()
        .map(|n| {
            let rec = snap.shards.get(&n).map(|(_, r)| r);
            ShardRow {
                shard: n,
                holder: rec.map(|r| r.holder.clone()),
                incarnation: rec.map(|r| incarnation_text(r.incarnation)),
                acked: rec.map(|r| r.acked),
                released: rec.is_some_and(|r| r.released),
                zone: rec.and_then(|r| r.zone.clone()),
                capacity: rec.and_then(|r| r.capacity),
                lease: shard_lease.get(&n).copied(),
                cost: None,
            }
        })
        .collect();
    // The role is judged as the replicas judge it (`fenced/role.rs`): a bound record through
    // its shard's record, a separate one through its own.
    let distributor = snap.distributor.as_ref().map(|(_, d)| {
        let shard_seen = |n: u32| match snap.shards.get(&n) {
            Some((_, r)) => ShardSeen::Record(r),
            None if snap
                .corrupt
                .iter()
                .any(|c| c.key == key(format!("shards/{n}"))) =>
            {
                ShardSeen::Unreadable
            }
            None => ShardSeen::Absent,
        };
        let lease = match role_lease(d, shard_seen) {
            RoleLease::Own => w.judge(&key("distributor".into()), false),
            RoleLease::Shard(n) => w.judge(&key(format!("shards/{n}")), false),
            RoleLease::Free if d.released => Lease::Released,
            // Bound to a shard now released, absent or held by someone else.
            RoleLease::Free => Lease::Expired,
        };
        DistributorRow {
            holder: d.holder.clone(),
            incarnation: incarnation_text(d.incarnation),
            released: d.released,
            shard: d.shard,
            lease,
        }
    });
    let spares: Vec<SpareRow> = snap
        .presence
        .iter()
        .filter(|(_, (_, r))| !r.released)
        .map(|(id, (_, r))| SpareRow {
            identity: r.holder.clone(),
            incarnation: incarnation_text(r.incarnation),
            lease: w.judge(&key(format!("replicas/{id}")), false),
        })
        .collect();
    // Live incarnations: a live shard, presence or distributor record.
    let mut live: BTreeSet<(String, u64)> = BTreeSet::new();
    for (n, (_, r)) in &snap.shards {
        if shard_lease.get(n) == Some(&Lease::Live) {
            live.insert((r.holder.clone(), r.incarnation));
        }
    }
    for (id, (_, r)) in &snap.presence {
        if w.judge(&key(format!("replicas/{id}")), r.released) == Lease::Live {
            live.insert((r.holder.clone(), r.incarnation));
        }
    }
    if let (Some(d), Some((_, r))) = (&distributor, &snap.distributor)
        && d.lease == Lease::Live
    {
        live.insert((r.holder.clone(), r.incarnation));
    }
    let (replicas, inventory_disagreement) = replica_rows(&snap.inventories, &live);
    if inventory_disagreement {
        let differ: Vec<&str> = replicas
            .iter()
            .filter(|r| r.disagrees)
            .map(|r| r.identity.as_str())
            .collect();
        warnings.push(format!(
            "replicas see different inventories: {} differ from the most common one \
             (compare their fleet files or sources)",
            differ.join(", ")
        ));
    }
    for r in replicas.iter().filter(|r| r.live && r.problems > 0) {
        warnings.push(format!(
            "{}: its inventory has {} problem(s) (duplicate ids or servers, unreadable \
             objects): its log names them",
            r.identity, r.problems
        ));
    }
    let held_back = snap
        .distributor
        .as_ref()
        .filter(|_| distributor.as_ref().is_some_and(|d| d.lease == Lease::Live))
        .and_then(|(_, d)| snap.inventories.get(&d.holder).map(|(_, r)| (d, r)))
        .filter(|(d, r)| r.incarnation == d.incarnation)
        .and_then(|(d, r)| {
            r.held_back.map(|h| HeldBackRow {
                distributor: d.holder.clone(),
                previous: h.previous,
                dropped: h.dropped,
                grace_secs: h.grace_secs,
            })
        });
    if let Some(h) = &held_back {
        warnings.push(if h.dropped == h.previous {
            format!(
                "the distributor's inventory has none of the {} committed clusters: they stay \
                 assigned for as long as it lasts (with --allow-empty-fleet, until it has held \
                 for {} s)",
                h.previous, h.grace_secs
            )
        } else {
            format!(
                "the distributor's inventory drops {} of the {} committed clusters: they stay \
                 assigned until that smaller inventory has held for {} s",
                h.dropped, h.previous, h.grace_secs
            )
        });
    }
    // Every live holder acknowledged the generation: the handover is over.
    let generation = doc.map_or(0, |d| d.generation);
    let handed_over = snap
        .shards
        .iter()
        .filter(|(n, _)| shard_lease.get(n) == Some(&Lease::Live))
        .all(|(_, (_, r))| r.acked >= generation);
    let state_of = |s: u32| match (snap.shards.get(&s), shard_lease.get(&s)) {
        (None, _) | (_, Some(Lease::Released) | None) => (ClusterState::Vacant, None),
        (_, Some(Lease::Expired)) => (ClusterState::HolderExpired, None),
        (_, Some(Lease::NotRenewed)) => (ClusterState::NotRenewed, None),
        (_, Some(Lease::NotJudged)) => (ClusterState::NotJudged, None),
        (Some((_, r)), Some(Lease::Live)) if handed_over => {
            (ClusterState::Acting, Some(r.holder.clone()))
        }
        (Some(_), Some(Lease::Live)) => (ClusterState::Handover, None),
    };
    let clusters: Vec<ClusterRow> = doc
        .iter()
        .flat_map(|d| d.clusters.iter())
        .map(|(id, &shard)| {
            let (state, owner) = state_of(shard);
            let unit = fleetshard_core::placement::slices::UnitId::parse(id);
            let named = names.get(unit.cluster);
            ClusterRow {
                id: id.clone(),
                name: named.map(|(n, _)| n.clone()),
                server: named.map(|(_, s)| s.clone()),
                shard,
                owner,
                state,
                home: doc
                    .and_then(|d| d.homes.get(id).copied())
                    .filter(|&h| h != shard),
                cost: None,
                cost_measured_secs: None,
                slice: unit.slice.map(|(slice, of)| SliceOf {
                    cluster: unit.cluster.to_owned(),
                    slice,
                    of,
                }),
            }
        })
        .collect();
    let unowned = clusters
        .iter()
        .filter(|c| c.owner.is_none())
        .map(|c| c.id.clone())
        .collect();
    Report {
        store: String::new(),
        revision: w.now.revision,
        generation: doc.map(|d| d.generation),
        shard_count: doc.map(|d| d.shards),
        desired_shards: snap.desired,
        distributor,
        shards: shard_rows,
        clusters,
        unowned,
        spares,
        replicas,
        inventory_disagreement,
        held_back,
        observed_secs: 0.0,
        warnings,
        corrupt_records: snap
            .corrupt
            .iter()
            .map(|c| CorruptRow {
                key: c.key.clone(),
                reason: c.reason.clone(),
            })
            .collect(),
        costs: BTreeMap::new(),
    }
}

/// The replicas' inventories, and whether the live ones disagree: a live replica
/// disagrees when its digest is not the one most live replicas publish (ties: the
/// smallest digest is the reference, so the answer does not depend on order).
fn replica_rows(
    inventories: &BTreeMap<String, (u64, InventoryRecord)>,
    live: &BTreeSet<(String, u64)>,
) -> (Vec<ReplicaRow>, bool) {
    let is_live = |r: &InventoryRecord| live.contains(&(r.holder.clone(), r.incarnation));
    let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, r) in inventories.values().filter(|(_, r)| is_live(r)) {
        *votes.entry(r.digest.as_str()).or_default() += 1;
    }
    let reference = votes
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(d, _)| (*d).to_owned());
    let rows: Vec<ReplicaRow> = inventories
        .values()
        .map(|(_, r)| {
            let live = is_live(r);
            ReplicaRow {
                identity: r.holder.clone(),
                incarnation: incarnation_text(r.incarnation),
                live,
                digest: r.digest.clone(),
                clusters: r.clusters,
                problems: r.problems,
                disagrees: live && reference.as_deref().is_some_and(|d| d != r.digest),
            }
        })
        .collect();
    let any = rows.iter().any(|r| r.disagrees);
    (rows, any)
}

/// The report as aligned text.
pub(super) fn table(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let gen_text = r.generation.map_or("none".into(), |g| g.to_string());
    let _ = writeln!(
        out,
        "store: {} (revision {})  generation: {gen_text}",
        r.store, r.revision
    );
    let count = r.shard_count.map_or("none".into(), |n| n.to_string());
    let desired = r.desired_shards.map_or("not set".into(), |n| n.to_string());
    let _ = writeln!(out, "shards: {count} (desired: {desired})");
    let dist = match &r.distributor {
        Some(d) => format!(
            "{} (incarnation {}{}) {}",
            d.holder,
            d.incarnation,
            d.shard
                .map_or(String::new(), |n| format!(", with shard {n}")),
            lease_text(d.lease)
        ),
        None => "none".into(),
    };
    let _ = writeln!(out, "distributor: {dist}");
    let _ = writeln!(
        out,
        "leases watched for {:.1} s (unchanged for the lease duration: expired)",
        r.observed_secs
    );
    let _ = writeln!(
        out,
        "\nSHARD  HOLDER                INCARNATION       ACKED  LEASE"
    );
    for s in &r.shards {
        let beyond = r.shard_count.is_some_and(|c| s.shard >= c);
        let lease = s.lease.map_or("vacant", lease_text);
        let state = match (s.lease, beyond) {
            (Some(Lease::Live), true) => format!("{lease} (beyond the count: letting go)"),
            (Some(_), true) => format!("{lease} (beyond the count)"),
            _ => lease.to_owned(),
        };
        let _ = writeln!(
            out,
            "{:<6} {:<21} {:<17} {:<6} {state}",
            s.shard,
            s.holder.as_deref().unwrap_or("-"),
            s.incarnation.as_deref().unwrap_or("-"),
            s.acked.map_or("-".into(), |a| a.to_string()),
        );
    }
    if !r.spares.is_empty() {
        let _ = writeln!(out, "\nSPARE                  INCARNATION       LEASE");
        for s in &r.spares {
            let lease = lease_text(s.lease);
            let _ = writeln!(out, "{:<22} {:<17} {lease}", s.identity, s.incarnation);
        }
    }
    if !r.replicas.is_empty() {
        let _ = writeln!(
            out,
            "\nREPLICA                INCARNATION       INVENTORY         CLUSTERS  PROBLEMS"
        );
        for p in &r.replicas {
            let flag = match (p.live, p.disagrees) {
                (false, _) => "  (gone)",
                (true, true) => "  DIFFERS",
                (true, false) => "",
            };
            let _ = writeln!(
                out,
                "{:<22} {:<17} {:<17} {:<9} {}{flag}",
                p.identity, p.incarnation, p.digest, p.clusters, p.problems
            );
        }
    }
    let rows = r.clusters.iter().map(|c| super::ClusterLine {
        id: &c.id,
        name: c.name.as_deref(),
        server: c.server.as_deref(),
        shard: c.shard.to_string(),
        owner: c.owner.as_deref(),
        state: c.state.text(),
        home: c.home,
    });
    super::write_clusters(&mut out, rows, r.unowned.len());
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    if !r.corrupt_records.is_empty() {
        let _ = writeln!(out, "\nCORRUPT RECORD                REASON");
        for c in &r.corrupt_records {
            let _ = writeln!(out, "{:<29} {}", c.key, c.reason);
        }
        let _ = writeln!(
            out,
            "degraded store: replicas act on their last good values and rebuild these \
             (`fleetshard store check`, `fleetshard store repair --dry-run`)"
        );
    }
    out
}

fn lease_text(lease: Lease) -> &'static str {
    match lease {
        Lease::Live => "live",
        Lease::Expired => "EXPIRED (holder gone)",
        Lease::Released => "released",
        Lease::NotRenewed => "NOT RENEWED (holder may be dead)",
        Lease::NotJudged => "not judged",
    }
}

#[cfg(test)]
mod tests;
