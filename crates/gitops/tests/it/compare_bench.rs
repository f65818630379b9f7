//! A measurement, not a test of speed: how long comparing and assessing a large
//! application takes. Run with
//! `cargo test --release -p fleetshard-gitops --test it compare_bench:: -- --ignored --nocapture`.

use fleetshard_gitops::compare::{CompareOptions, SyncStatus, TRACKING_ANNOTATION, compare_app};
use fleetshard_gitops::health::{app_health, assess};
use serde_json::{Value, json};

fn pair(i: usize) -> (Value, Value) {
    let name = format!("svc-{i}");
    let desired = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "prod", "labels": {"app": name}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}}, "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "app", "image": format!("registry.example.com/{name}:1.0.{i}"),
                "ports": [{"containerPort": 8080, "name": "http"}],
                "env": (0..10).map(|e| json!({"name": format!("VAR_{e}"), "value": format!("{e}")})).collect::<Vec<_>>(),
                "resources": {"limits": {"cpu": 1, "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}}}]}}}
    });
    let mut live = desired.clone();
    live["metadata"]["uid"] = json!(format!("uid-{i}"));
    live["metadata"]["resourceVersion"] = json!("1000");
    live["metadata"]["generation"] = json!(1);
    live["metadata"]["annotations"] =
        json!({TRACKING_ANNOTATION: format!("shop:apps/Deployment:prod/{name}")});
    live["spec"]["revisionHistoryLimit"] = json!(10);
    live["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] =
        json!("1000m");
    live["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"] =
        json!("/dev/termination-log");
    live["status"] = json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2});
    (desired, live)
}

#[test]
#[ignore = "measurement; run explicitly"]
#[allow(
    clippy::disallowed_types,
    reason = "a measurement harness times itself; no logic depends on it"
)]
fn measure_compare_and_assess() {
    use std::time::Instant;
    for n in [100, 1000, 5000] {
        let (desired, live): (Vec<Value>, Vec<Value>) = (0..n).map(pair).unzip();
        let opts = CompareOptions::new("shop").with_destination_namespace("prod");
        let runs = 5;
        let start = Instant::now();
        for _ in 0..runs {
            let result = compare_app(&desired, &live, &opts).unwrap();
            assert_eq!(result.status, SyncStatus::Synced);
        }
        let compare = start.elapsed() / runs;
        let start = Instant::now();
        for _ in 0..runs {
            let health: Vec<_> = live.iter().map(|l| assess(Some(l))).collect();
            assert_eq!(
                app_health(&health),
                fleetshard_gitops::health::HealthStatus::Healthy
            );
        }
        let assess_time = start.elapsed() / runs;
        println!(
            "FIGURE compare_app {n} Deployments: {:.2} ms ({:.1} µs/resource); assess: {:.2} ms (mean of {runs})",
            compare.as_secs_f64() * 1e3,
            compare.as_secs_f64() * 1e6 / n as f64,
            assess_time.as_secs_f64() * 1e3
        );
    }
}
