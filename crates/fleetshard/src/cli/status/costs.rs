//! The measured costs in `status`: each cluster's figure as the replicas published it
//! (`fleetshard_replica::costs`, merged the one way the distributor merges them), each
//! shard's total, and the top-level `costs` object `plan --costs` reads.

use fleetshard_coord::store::Store;
use fleetshard_replica::costs::{costs_prefix, merge};

use super::fenced::Report;

/// Reads the costs records beside `root` and adds their figures to `report`. An
/// unreadable record is a warning; the others still count.
pub(super) async fn add_costs(
    report: &mut Report,
    store: &dyn Store,
    root: &str,
) -> anyhow::Result<()> {
    let listing = store.list(&costs_prefix(root)).await?;
    let (merged, bad) = merge(
        listing
            .entries
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_slice())),
    );
    report.warnings.extend(bad.iter().map(ToString::to_string));
    for row in &mut report.clusters {
        if let Some(c) = merged.get(&row.id) {
            row.cost = Some(c.cost);
            row.cost_measured_secs = Some(c.measured_seconds);
            report.costs.insert(row.id.clone(), c.cost);
        }
    }
    for shard in &mut report.shards {
        let costs: Vec<f64> = report
            .clusters
            .iter()
            .filter(|c| c.shard == shard.shard)
            .filter_map(|c| c.cost)
            .collect();
        shard.cost = (!costs.is_empty()).then(|| costs.iter().sum());
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
    for s in &r.shards {
        let measured = r
            .clusters
            .iter()
            .filter(|c| c.shard == s.shard && c.cost.is_some())
            .count();
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
    costliest.sort_by(|a, b| {
        b.cost
            .partial_cmp(&a.cost)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
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
