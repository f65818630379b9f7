//! `fleetshard simulate` serving one slice of a fleet, as `fleetshard up` starts several:
//! its clusters' names and zones go on from `--first`; the namespaces and objects asked
//! are on them before `ready`; with `--ready-deployments` a Deployment created becomes
//! ready; an object for a cluster it does not serve is refused.

use std::time::Duration;

use serde_json::{Value, json};

use crate::simulate::{call, read_sims, simulate, terminate};
use crate::support::replicas::fleetshard;
use crate::support::wait_for;

#[test]
fn a_slice_of_a_fleet_is_seeded_and_its_deployments_become_ready() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sim");
    let objects = dir.path().join("objects.json");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "drifted", "namespace": "demo"},
                    "data": {"value": "changed-by-hand"}});
    std::fs::write(&objects, json!({"sim-6": [cm]}).to_string()).unwrap();
    let objects_arg = objects.to_str().unwrap();
    let mut sim = simulate(
        &[
            "--clusters",
            "2",
            "--first",
            "5",
            "--zones",
            "a,b",
            "--namespaces",
            "demo,other",
            "--objects",
            objects_arg,
            "--ready-deployments",
        ],
        &out,
        &dir.path().join("simulate.log"),
    );
    let sims = read_sims(&out);
    let names: Vec<(&str, Option<&str>)> = sims
        .iter()
        .map(|s| (s.name.as_str(), s.zone.as_deref()))
        .collect();
    assert_eq!(names, [("sim-5", Some("b")), ("sim-6", Some("a"))]);
    let (s5, s6) = (&sims[0], &sims[1]);
    for s in &sims {
        for ns in ["demo", "other"] {
            let path = format!("/api/v1/namespaces/{ns}");
            assert_eq!(call(&s.addr, "GET", &path, Some(&s.token), None).0, 200);
        }
    }
    let path = "/api/v1/namespaces/demo/configmaps/drifted";
    let (code, read) = call(&s6.addr, "GET", path, Some(&s6.token), None);
    assert_eq!(
        (code, &read["data"]["value"]),
        (200, &json!("changed-by-hand"))
    );
    assert_eq!(call(&s5.addr, "GET", path, Some(&s5.token), None).0, 404);

    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "demo"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "x"}]}}}});
    let deployments = "/apis/apps/v1/namespaces/demo/deployments";
    let (code, created) = call(
        &s5.addr,
        "POST",
        deployments,
        Some(&s5.token),
        Some(&deployment),
    );
    assert_eq!(code, 201, "{created}");
    let status = wait_for("the Deployment ready", Duration::from_secs(30), || {
        let (_, d) = call(
            &s5.addr,
            "GET",
            &format!("{deployments}/web"),
            Some(&s5.token),
            None,
        );
        (d["status"]["observedGeneration"] == d["metadata"]["generation"]
            && d["status"]["readyReplicas"] == 2)
            .then(|| d["status"].clone())
            .ok_or_else(|| format!("not yet: {d}"))
    });
    assert_eq!(status["availableReplicas"], 2, "{status}");
    assert!(terminate(&mut sim.0).success());

    // Objects for a cluster another process serves: refused, naming it and the file.
    std::fs::write(&objects, json!({"sim-0": [Value::Null]}).to_string()).unwrap();
    let refused = fleetshard()
        .args([
            "simulate",
            "--clusters",
            "2",
            "--first",
            "5",
            "--objects",
            objects_arg,
        ])
        .arg("--out")
        .arg(dir.path().join("refused"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(refused.stdout.is_empty(), "no `ready`");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("no cluster \"sim-0\" here") && stderr.contains("objects.json"),
        "{stderr}"
    );
}
