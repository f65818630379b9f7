//! The measured costs in `status`: each cluster's figure as the replicas published it
//! (`fleetshard_replica::costs`, merged the one way the distributor merges them), each
//! shard's total, and the top-level `costs` object `plan --costs` reads (by cluster: a
//! split cluster's slices summed).

use fleetshard_coord::store::Store;
use std::collections::BTreeMap;

use fleetshard_replica::costs::{costs_prefix, merge_listing};

use super::fenced::Report;

/// Reads the costs records beside `root` and adds their figures to `report`. An
/// unreadable record is a warning; the others still count.
pub(super) async fn add_costs(
    report: &mut Report,
    store: &dyn Store,
    root: &str,
) -> anyhow::Result<()> {
    let (merged, bad) = merge_listing(&store.list(&costs_prefix(root)).await?);
    report.warnings.extend(bad.iter().map(ToString::to_string));
    // Each shard's sum and measured clusters, in one pass over the clusters.
    let mut by_shard: BTreeMap<u32, f64> = BTreeMap::new();
    for row in &mut report.clusters {
        if let Some(c) = merged.get(&row.id) {
            row.cost = Some(c.cost);
            row.cost_measured_secs = Some(c.measured_seconds);
            // `plan --costs` reads costs by cluster: a split cluster's slices add up.
            let cluster = fleetshard_core::placement::slices::UnitId::parse(&row.id).cluster;
            *report.costs.entry(cluster.to_owned()).or_default() += c.cost;
            *by_shard.entry(row.shard).or_default() += c.cost;
        }
    }
    for shard in &mut report.shards {
        shard.cost = by_shard.get(&shard.shard).copied();
    }
    Ok(())
}

/// The costs section of the table (empty when nothing is measured): each shard's total
/// and the costliest clusters.
pub(super) fn table(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if r.costs.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "\nMEASURED COST (millicore-equivalents: reconcile CPU + cache memory)\nSHARD  HOLDER                CLUSTERS  COST"
    );
    let mut measured: BTreeMap<u32, usize> = BTreeMap::new();
    for c in r.clusters.iter().filter(|c| c.cost.is_some()) {
        *measured.entry(c.shard).or_default() += 1;
    }
    for s in &r.shards {
        let measured = measured.get(&s.shard).copied().unwrap_or(0);
        let _ = writeln!(
            out,
            "{:<6} {:<21} {:<9} {}",
            s.shard,
            s.holder.as_deref().unwrap_or("-"),
            measured,
            s.cost.map_or("-".into(), |c| format!("{c:.1}")),
        );
    }
    let mut costliest: Vec<_> = r.clusters.iter().filter(|c| c.cost.is_some()).collect();
    costliest.sort_by(|a, b| b.cost.unwrap_or(0.0).total_cmp(&a.cost.unwrap_or(0.0)));
    let _ = writeln!(
        out,
        "costliest: {}",
        costliest
            .iter()
            .take(5)
            .map(|c| format!("{} {:.1}", super::shown_id(&c.id), c.cost.unwrap_or(0.0)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    out
}
