//! `plan --costs FILE --split-clusters`: the contract command of issue 30 on a small fleet
//! with one huge cluster, and the costs file's bad input.

use std::path::Path;

use serde_json::Value;

use super::cli::{fails, fleetshard, ok_json};

/// Seven clusters of 5 apps and `hub` of 300; hub measured at 1,000, the others at
/// 20 + 10·i; cluster `c6` has no measured cost.
fn write_inputs(dir: &Path) -> (String, String, f64) {
    let mut fleet = String::from("clusters:\n");
    fleet.push_str("  - {name: hub, id: hub, server: https://hub.example, apps: 300}\n");
    let mut costs = vec![r#""hub": 1000"#.to_owned()];
    let mut total = 1000.0;
    for i in 0..7 {
        fleet.push_str(&format!(
            "  - {{name: c{i}, id: c{i}, server: https://c{i}.example, apps: 5}}\n"
        ));
        if i != 6 {
            costs.push(format!(r#""c{i}": {}"#, 20 + 10 * i));
            total += f64::from(20 + 10 * i);
        }
    }
    // c6 costs its estimate (5 base + 5 apps) × the median measured/estimate ratio.
    let mut ratios: Vec<f64> = (0..6).map(|i| f64::from(20 + 10 * i) / 10.0).collect();
    ratios.push(1000.0 / 305.0);
    ratios.sort_by(f64::total_cmp);
    total += 10.0 * ratios[3];
    let fleet_path = dir.join("fleet.yaml");
    let costs_path = dir.join("costs.json");
    std::fs::write(&fleet_path, fleet).unwrap();
    std::fs::write(&costs_path, format!("{{{}}}", costs.join(", "))).unwrap();
    (
        fleet_path.display().to_string(),
        costs_path.display().to_string(),
        total,
    )
}

#[test]
fn costs_and_split_clusters_contract() {
    let dir = tempfile::tempdir().unwrap();
    let (fleet, costs, total) = write_inputs(dir.path());
    let v: Value = ok_json(fleetshard().args([
        "plan",
        "--fleet",
        &fleet,
        "--costs",
        &costs,
        "--split-clusters",
        "--algorithm",
        "balanced",
        "--replicas",
        "3",
        "--output",
        "json",
    ]));
    let shards = v["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 3);
    let sum: f64 = shards.iter().map(|s| s["load"].as_f64().unwrap()).sum();
    assert!(
        (sum - total).abs() < 1e-6,
        "shards[].load sums to {sum}, total cost {total}"
    );
    let hub = &v["clusters"][0];
    assert_eq!(hub["id"], "hub");
    assert_eq!(hub["load"].as_f64(), Some(1000.0));
    let slices = hub["slices"].as_array().expect("the huge cluster is split");
    // Share = total / 3 ≈ 393: 1,000 needs 3 slices, one per replica.
    assert_eq!(slices.len(), 3, "{hub}");
    let mut on: Vec<i64> = slices
        .iter()
        .map(|s| s["shard"].as_i64().unwrap())
        .collect();
    on.sort_unstable();
    assert_eq!(on, vec![0, 1, 2]);
    let slice_sum: f64 = slices.iter().map(|s| s["load"].as_f64().unwrap()).sum();
    assert!((slice_sum - 1000.0).abs() < 1e-6);
    assert_eq!(
        slices
            .iter()
            .map(|s| s["apps"].as_u64().unwrap())
            .sum::<u64>(),
        300
    );
    for c in &v["clusters"].as_array().unwrap()[1..] {
        assert!(c.get("slices").is_none(), "{c}");
    }
    let max_over_mean = v["balance"]["max_over_mean"].as_f64().unwrap();
    assert!(max_over_mean <= 1.10, "{max_over_mean}");
}

#[test]
fn bad_costs_name_the_file_and_key_and_unknown_ids_warn() {
    let dir = tempfile::tempdir().unwrap();
    let (fleet, _, _) = write_inputs(dir.path());
    let plan = |costs: &str| {
        let path = dir.path().join("bad.json");
        std::fs::write(&path, costs).unwrap();
        let mut cmd = fleetshard();
        cmd.args([
            "plan", "--fleet", &fleet, "-r", "3", "--output", "json", "--costs",
        ])
        .arg(&path);
        cmd
    };
    let err = fails(&mut plan(r#"{"hub": -1}"#));
    assert!(err.contains("bad.json") && err.contains("\"hub\""), "{err}");
    let err = fails(&mut plan("[1]"));
    assert!(
        err.contains("bad.json") && err.contains("not a JSON object"),
        "{err}"
    );
    let err = fails(&mut plan(r#"{"hub": "x"}"#));
    assert!(
        err.contains("bad.json") && err.contains("not a number"),
        "{err}"
    );
    let missing = dir.path().join("missing.json");
    let err = fails(
        fleetshard()
            .args(["plan", "--fleet", &fleet, "-r", "3", "--costs"])
            .arg(&missing),
    );
    assert!(err.contains("missing.json"), "{err}");
    let v = ok_json(&mut plan(r#"{"hub": 10, "elsewhere": 4}"#));
    let warned = v["warnings"].as_array().unwrap().iter().any(|w| {
        w["source"] == "costs" && w["message"].as_str().unwrap().contains("\"elsewhere\"")
    });
    assert!(warned, "{}", v["warnings"]);
}
