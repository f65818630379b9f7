//! A sync operation survives a `kill -9` of its replica between waves, on both protocols.
//!
//! A chart-like app — a PreSync migration Job, a ConfigMap in wave 0, a Deployment in
//! wave 1, a Service in wave 2 and a PostSync Job with only `generateName` — is synced by
//! replica processes over a fake control plane and a real Git repository. Once wave 1 is
//! applied and waits for the Deployment to be healthy, the replica running the operation
//! is killed with SIGKILL. Another replica takes the cluster over and continues from the
//! `operationState` the dead one recorded: wave 2 is not applied before the Deployment is
//! healthy, the migration hook is neither deleted nor created again (its default policy,
//! `BeforeHookCreation`, would delete and recreate it if the operation restarted), the
//! PostSync hook is created once, and the operation ends `Succeeded`. The cluster's write
//! log shows no two replicas writing at one instant.
//!
//! Under Argo CD's heartbeat protocol a replica holds one shard, so a third replica is a
//! spare that claims the dead replica's shard once its heartbeat is stale.

use serde_json::{Value, json};

use crate::run_gitops::{APPS, SETTLE, application, cluster_id, replica, world};
use crate::support::{signal, unix_ms, wait_for};
use crate::write_overlap::{audit_events, identity_of};
use fleetshard_testsupport::kube_api::{FakeApiServer, Verb, WriteRecord, overlaps};

const CHART: &[(&str, &str)] = &[
    (
        "waves/migrate.yaml",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations:\n    argocd.argoproj.io/hook: PreSync\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: main\n        image: busybox\n",
    ),
    (
        "waves/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  annotations:\n    argocd.argoproj.io/sync-wave: \"0\"\ndata:\n  a: b\n",
    ),
    (
        "waves/web.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  annotations:\n    argocd.argoproj.io/sync-wave: \"1\"\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: main\n        image: nginx\n",
    ),
    (
        "waves/svc.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  annotations:\n    argocd.argoproj.io/sync-wave: \"2\"\nspec:\n  ports:\n  - port: 80\n",
    ),
    (
        "waves/smoke.yaml",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: smoke-\n  annotations:\n    argocd.argoproj.io/hook: PostSync\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: main\n        image: busybox\n",
    ),
];

#[test]
fn a_sync_killed_between_waves_is_finished_by_the_next_owner_under_the_fenced_protocol() {
    killed_between_waves(&[]);
}

#[test]
fn a_sync_killed_between_waves_is_finished_by_the_next_owner_under_argo_cds_protocol() {
    killed_between_waves(&["--protocol", "argocd", "--heartbeat-ms", "200"]);
}

fn killed_between_waves(protocol: &[&str]) {
    let mut w = world(protocol);
    let kubeconfig = w.dir.path().join("kubeconfig");
    w.replicas
        .push(replica(w.dir.path(), &kubeconfig, "r2", protocol));
    for (path, text) in CHART {
        w.git.write(path, text);
    }
    w.git.commit("a chart with hooks and waves");
    w.fakes
        .control
        .insert(application("waves", &w.git.file_url(), "c0"))
        .unwrap();
    let c0 = &w.fakes.clusters[0];

    // The migration runs first; the test acts as the Job controller.
    wait_for("the PreSync hook", SETTLE, || {
        c0.get("batch/v1", "Job", "default", "migrate")
            .ok_or_else(|| format!("operation {}", operation(&w.fakes.control)))
    });
    finish_job(c0, "migrate");
    let migrate_uid = uid(c0, "batch/v1", "Job", "migrate");

    // Wave 1 applied, waiting for the Deployment: kill the replica that runs the sync.
    wait_for("wave 1 waiting for the Deployment", SETTLE, || {
        let op = operation(&w.fakes.control);
        let waiting = op["message"]
            .as_str()
            .is_some_and(|m| m.contains("Deployment"));
        if waiting && c0.get("apps/v1", "Deployment", "default", "web").is_some() {
            Ok(())
        } else {
            Err(format!("operation {op}"))
        }
    });
    let owner = c0
        .writes()
        .iter()
        .rev()
        .find(|w| !w.dry_run && w.path.contains("/deployments"))
        .and_then(|w| identity_of(w).map(str::to_owned))
        .expect("a replica applied the Deployment");
    let index: usize = owner[1..].parse().unwrap();
    let killed = &mut w.replicas[index];
    signal(killed.0.id(), "-KILL");
    killed.0.wait().unwrap();
    let killed_at = unix_ms();

    // Another replica takes the cluster over (its audit log says when) and steps the
    // resumed operation, which waits for the Deployment: once it has recorded a step (the
    // dead replica writes nothing after the kill), wave 2 must still be unapplied.
    let c0_id = cluster_id(&w.fakes, 0);
    let next = wait_for("the next owner of c0", SETTLE, || {
        audit_events(w.dir.path())
            .into_iter()
            .find(|e| e.cluster == c0_id && e.acquire && e.identity != owner && e.ts >= killed_at)
            .map(|e| e.identity)
            .ok_or_else(|| format!("operation {}", operation(&w.fakes.control)))
    });
    wait_for("a step of the resumed operation recorded", SETTLE, || {
        w.fakes
            .control
            .writes()
            .iter()
            .any(|r| {
                r.received_unix_ms >= killed_at
                    && r.may_apply()
                    && r.object
                        .as_ref()
                        .is_some_and(|o| o.pointer("/status/operationState").is_some())
            })
            .then_some(())
            .ok_or_else(|| format!("operation {}", operation(&w.fakes.control)))
    });
    assert!(
        c0.get("v1", "Service", "default", "web").is_none(),
        "wave 2 was applied before wave 1 was healthy: {}",
        operation(&w.fakes.control)
    );
    c0.set_deployment_ready("default", "web", 1).unwrap();

    // The PostSync hook runs once wave 2 is in; the operation ends Succeeded. Every phase
    // and message seen on the way is kept, to say what happened if it does not.
    let mut seen: Vec<String> = Vec::new();
    let op = wait_for("the operation to succeed", SETTLE, || {
        for job in c0.list("batch/v1", "Job", Some("default")) {
            let name = job["metadata"]["name"].as_str().unwrap_or_default();
            if name.starts_with("smoke-") && job["status"]["conditions"].is_null() {
                finish_job(c0, name);
            }
        }
        let op = operation(&w.fakes.control);
        let step = format!("{} #{}: {}", op["phase"], op["retryCount"], op["message"]);
        if seen.last() != Some(&step) {
            seen.push(step);
        }
        if op["phase"] == "Succeeded" {
            Ok(op)
        } else {
            Err(format!(
                "operation {op}; seen since the takeover: {seen:#?}"
            ))
        }
    });
    assert!(c0.get("v1", "Service", "default", "web").is_some());

    let writes = c0.writes();
    let hook_writes = |name: &str| -> Vec<&WriteRecord> {
        writes
            .iter()
            .filter(|w| w.may_apply() && w.path.contains("/jobs"))
            .filter(|w| w.path.ends_with(&format!("/{name}")) || names(w, name))
            .collect()
    };
    let migrate = hook_writes("migrate");
    assert!(
        migrate.iter().all(|w| w.verb != Verb::Delete),
        "the migration hook was deleted and run again: {migrate:?}"
    );
    assert_eq!(
        uid(c0, "batch/v1", "Job", "migrate"),
        migrate_uid,
        "the migration hook was created again"
    );
    // The engine names a `generateName` hook itself (one name per attempt): every
    // non-dry-run write of a `smoke-` Job names the same one.
    let smoke: std::collections::BTreeSet<String> = writes
        .iter()
        .filter(|w| w.may_apply() && w.path.contains("/jobs"))
        .filter_map(|w| {
            let name = w.object.as_ref()?.pointer("/metadata/name")?.as_str()?;
            name.starts_with("smoke-").then(|| name.to_owned())
        })
        .collect();
    assert_eq!(
        smoke.len(),
        1,
        "the PostSync hook ran more than once: {smoke:?}"
    );
    let finisher = writes
        .iter()
        .rev()
        .find(|w| !w.dry_run && w.path.contains("/services"))
        .and_then(identity_of)
        .expect("a replica applied wave 2");
    assert_eq!(finisher, next, "the next owner finished the operation");
    let overlapping = overlaps(&writes, |w| identity_of(w).map(str::to_owned));
    assert!(
        overlapping.is_empty(),
        "two writers at once: {overlapping:?}"
    );
    let resources = op["syncResult"]["resources"].as_array().unwrap();
    for (kind, name) in [
        ("ConfigMap", "settings"),
        ("Deployment", "web"),
        ("Service", "web"),
    ] {
        assert!(
            resources
                .iter()
                .any(|r| r["kind"] == kind && r["name"] == name && r["status"] == "Synced"),
            "{kind}/{name} in the sync result: {op}"
        );
    }
}

/// The `waves` Application's `operationState` (null until one is recorded).
fn operation(control: &FakeApiServer) -> Value {
    control
        .get(APPS, "Application", "argocd", "waves")
        .map(|a| a["status"]["operationState"].clone())
        .unwrap_or_default()
}

fn finish_job(cluster: &FakeApiServer, name: &str) {
    cluster
        .modify("batch/v1", "Job", "default", name, |j| {
            j["status"] = json!({"conditions": [{"type": "Complete", "status": "True"}]});
        })
        .unwrap();
}

fn uid(cluster: &FakeApiServer, api_version: &str, kind: &str, name: &str) -> Value {
    cluster
        .get(api_version, kind, "default", name)
        .expect("the object")["metadata"]["uid"]
        .clone()
}

fn names(w: &WriteRecord, name: &str) -> bool {
    w.object.as_ref().and_then(|o| o.pointer("/metadata/name")) == Some(&json!(name))
}
