//! Measured costs end to end over `fleetshard run` processes: a costs record says one
//! cluster costs a hundred times the others; the distributor gives it a shard of its own,
//! `status --output json` shows each cluster's cost, each shard's sum and the `costs`
//! object, and `plan --costs` reads that object as it is (issue 30's contract).

use std::time::Duration;

use fleetshard_replica::StoreUrl;
use fleetshard_replica::costs::{ClusterCost, CostRecord, costs_key};
use serde_json::Value;

use super::cli::{fleetshard, ok_json};
use crate::support::replicas::{Harness, Setup};
use crate::support::store::StoreUnderTest;
use crate::support::wait_for;

/// Writes a costs record of a replica that is gone: `hot` costs 1,000, the others 10,
/// each measured for 10 minutes.
pub(crate) fn write_costs(path: &std::path::Path, root: &str, hot: &str, others: &[String]) {
    let figure = |cost| ClusterCost {
        cost,
        cpu_millicores: cost,
        measured_seconds: 600,
        ..ClusterCost::default()
    };
    let mut clusters: std::collections::BTreeMap<String, ClusterCost> =
        others.iter().map(|id| (id.clone(), figure(10.0))).collect();
    clusters.insert(hot.to_owned(), figure(1000.0));
    let record = CostRecord {
        holder: "gone".into(),
        incarnation: "1".into(),
        clusters,
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = StoreUrl::Sqlite(path.to_owned()).open().unwrap();
        let key = costs_key(root, "gone");
        let value = serde_json::to_vec(&record).unwrap();
        store
            .store
            .put(&key, value, fleetshard_coord::store::Precondition::Any)
            .await
            .unwrap();
    });
}

/// How many clusters each shard holds, by the status document.
fn per_shard(status: &Value) -> Vec<usize> {
    let mut counts = vec![0; status["shards"].as_array().map_or(0, Vec::len)];
    for c in status["clusters"].as_array().into_iter().flatten() {
        if let Some(n) = c["shard"].as_u64().and_then(|n| counts.get_mut(n as usize)) {
            *n += 1;
        }
    }
    counts.sort_unstable();
    counts
}

#[test]
fn measured_costs_place_the_fleet_and_status_feeds_plan() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fleetshard.db");
    let store = StoreUnderTest::sqlite(dir.path());
    let setup = Setup {
        shards: 2,
        clusters: 4,
        ..Setup::default()
    };
    let mut h = Harness::new(dir, store, setup);
    let (hot, others) = (h.clusters[0].clone(), h.clusters[1..].to_vec());
    write_costs(&db, &h.store.root(), &hot, &others);
    for name in ["r0", "r1"] {
        h.start(name);
    }
    // By estimates (one app each) the fleet would be 2 and 2.
    let status = wait_for(
        "the costly cluster on a shard of its own",
        Duration::from_secs(60),
        || {
            let status = h.status()?;
            if per_shard(&status) == [1, 3] && status["unowned"] == serde_json::json!([]) {
                Ok(status)
            } else {
                Err(format!("per shard {:?}", per_shard(&status)))
            }
        },
    );
    let rows = status["clusters"].as_array().unwrap();
    let hot_row = rows.iter().find(|c| c["id"] == hot.as_str()).unwrap();
    let hot_cost = hot_row["cost"].as_f64().expect("the hot cluster's cost");
    assert!(hot_cost > 500.0, "{hot_row}");
    assert!(
        hot_row["cost_measured_secs"].as_u64().unwrap() >= 600,
        "{hot_row}"
    );
    let hot_shard = hot_row["shard"].as_u64().unwrap();
    let shard_cost = status["shards"][hot_shard as usize]["cost"]
        .as_f64()
        .unwrap();
    assert!(
        (shard_cost - hot_cost).abs() < 1e-9,
        "alone on its shard: {status}"
    );
    let costs = status["costs"].as_object().expect("a costs object");
    assert_eq!(costs.len(), 4, "{costs:?}");
    assert_eq!(costs[&hot].as_f64(), Some(hot_cost));

    // The object is `plan --costs`'s file as it is.
    let costs_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        costs_file.path(),
        serde_json::to_string(&status["costs"]).unwrap(),
    )
    .unwrap();
    let plan = ok_json(fleetshard().args([
        "plan",
        "--fleet",
        &h.fleet.display().to_string(),
        "--costs",
        &costs_file.path().display().to_string(),
        "--algorithm",
        "balanced",
        "--replicas",
        "2",
        "--output",
        "json",
    ]));
    let mut loads: Vec<f64> = plan["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["load"].as_f64().unwrap())
        .collect();
    loads.sort_by(f64::total_cmp);
    assert!(
        (loads[1] - hot_cost).abs() < 1e-6,
        "{loads:?} (hot {hot_cost})"
    );
}
