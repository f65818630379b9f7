//! `fleetshard run` as the application controller, end to end: two replica processes watch
//! Argo CD's cluster Secrets and Applications in a fake control plane (real HTTP), share
//! two destination clusters (two more fakes), read manifests from a real local Git
//! repository, auto-sync with server-side apply, and write each Application's status.
//! Then one replica leaves (SIGTERM): its cluster moves and a new commit still reaches both
//! clusters; a drifted object is healed; and a bad manifest shows on its app's status. The
//! same controller runs under Argo CD's heartbeat protocol.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::support::replicas::{apps_json, fleetshard, local_replica};
use crate::support::{KillOnDrop, http, signal, wait_for};
use crate::write_overlap::{assert_writes_well_formed, identity_of};
use fleetshard_testsupport::git::{Git, config_map};
use fleetshard_testsupport::kube_api::{FakeApiServer, FaultAction, Verb};
use serde_json::{Value, json};

pub(crate) const APPS: &str = "argoproj.io/v1alpha1";
pub(crate) const SETTLE: Duration = Duration::from_secs(90);

/// The fakes on a runtime of their own, so the test can block on processes.
pub(crate) struct Fakes {
    _rt: tokio::runtime::Runtime,
    pub(crate) control: FakeApiServer,
    pub(crate) clusters: Vec<FakeApiServer>,
}

pub(crate) fn start_fakes(n: usize) -> Fakes {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let control = rt.block_on(FakeApiServer::start()).unwrap();
    // Argo CD's CRDs: every Application and status written is checked against their schema.
    control.install_argocd_crds().unwrap();
    control.create_namespace("argocd").unwrap();
    let clusters = (0..n)
        .map(|_| rt.block_on(FakeApiServer::start()).unwrap())
        .collect();
    Fakes {
        _rt: rt,
        control,
        clusters,
    }
}

pub(crate) fn cluster_secret(name: &str, server: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "argocd",
                     "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
        "stringData": {"name": name, "server": server,
                       "config": r#"{"tlsClientConfig":{"insecure":false}}"#},
    })
}

pub(crate) fn application(name: &str, repo: &str, cluster: &str) -> Value {
    json!({
        "apiVersion": APPS, "kind": "Application",
        "metadata": {"name": name, "namespace": "argocd"},
        "spec": {
            "project": "default",
            "source": {"repoURL": repo, "path": name, "targetRevision": "HEAD"},
            "destination": {"name": cluster, "namespace": "default"},
            "syncPolicy": {"automated": {"prune": true, "selfHeal": true}},
        },
    })
}

pub(crate) fn replica(dir: &Path, kubeconfig: &Path, id: &str, protocol: &[&str]) -> KillOnDrop {
    replica_with(dir, kubeconfig, id, protocol, &[])
}

/// [`replica`] with `extra` arguments.
pub(crate) fn replica_with(
    dir: &Path,
    kubeconfig: &Path,
    id: &str,
    protocol: &[&str],
    extra: &[String],
) -> KillOnDrop {
    KillOnDrop(
        fleetshard()
            .env("KUBECONFIG", kubeconfig)
            .env("FLEETSHARD_LOG", "info")
            .arg("run")
            .args(protocol)
            .args(extra)
            .args([
                "--identity",
                id,
                "--store",
                "kubernetes://argocd",
                "--argocd-namespace",
                "argocd",
                // The test's repositories are local (file://), refused by default on
                // Argo CD's objects, and rendered here: no repo-server runs.
                "--allow-local-repositories=true",
                "--repo-server",
                "none",
                "--shards",
                "2",
                "--resync",
                "1s",
            ])
            .arg("--repo-cache")
            .arg(dir.join(format!("repos-{id}")))
            .arg("--audit-log")
            .arg(dir.join(format!("audit-{id}.jsonl")))
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", http::free_port()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join(format!("{id}.log"))).unwrap())
            .spawn()
            .unwrap(),
    )
}

/// The app's status once its first condition is of type `kind`.
pub(crate) fn with_condition(fakes: &Fakes, app: &str, kind: &str) -> Result<Value, String> {
    let obj = fakes
        .control
        .get(APPS, "Application", "argocd", app)
        .ok_or("no Application")?;
    let status = obj["status"].clone();
    match status["conditions"][0]["type"].as_str() {
        Some(found) if found == kind => Ok(status),
        _ => Err(format!("status {status}")),
    }
}

/// The app's status once it is Synced to `commit` by a finished operation.
pub(crate) fn synced(fakes: &Fakes, app: &str, commit: &str) -> Result<Value, String> {
    let obj = fakes
        .control
        .get(APPS, "Application", "argocd", app)
        .ok_or("no Application")?;
    let status = &obj["status"];
    let sync = &status["sync"];
    if sync["status"] != "Synced" || sync["revision"] != commit {
        return Err(format!("sync {sync}, conditions {}", status["conditions"]));
    }
    if status["operationState"]["syncResult"]["revision"] != commit {
        return Err(format!("operation {}", status["operationState"]));
    }
    Ok(status.clone())
}

/// The id of cluster `c{index}` (its Secret's uid), as the audit logs name it.
pub(crate) fn cluster_id(fakes: &Fakes, index: usize) -> String {
    let secret = fakes
        .control
        .get("v1", "Secret", "argocd", &format!("c{index}"))
        .expect("the cluster Secret");
    secret["metadata"]["uid"].as_str().unwrap().to_owned()
}

pub(crate) fn config_value(fake: &FakeApiServer, name: &str) -> Option<Value> {
    fake.get("v1", "ConfigMap", "default", name)
        .map(|cm| cm["data"]["value"].clone())
}

/// A control plane with two cluster Secrets and two Applications (app0 → c0, app1 → c1)
/// on a Git repository with one ConfigMap per app; two replicas started with `protocol`;
/// waits until both apps are synced by a finished operation. Returns the first commit.
pub(crate) struct World {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) fakes: Fakes,
    pub(crate) git: Git,
    pub(crate) replicas: Vec<KillOnDrop>,
    pub(crate) first: String,
}

pub(crate) fn world(protocol: &[&str]) -> World {
    world_with(protocol, [&[], &[]])
}

/// [`world`] with `extra` arguments for each replica (r0, r1).
pub(crate) fn world_with(protocol: &[&str], extra: [&[String]; 2]) -> World {
    let dir = tempfile::tempdir().unwrap();
    let fakes = start_fakes(2);
    let kubeconfig = dir.path().join("kubeconfig");
    fakes.control.write_kubeconfig(&kubeconfig).unwrap();
    let git = Git::init(&dir.path().join("repo"));
    git.write("app0/cm.yaml", &config_map("cm0", "1"));
    git.write("app1/cm.yaml", &config_map("cm1", "1"));
    let first = git.commit("first");
    for (i, fake) in fakes.clusters.iter().enumerate() {
        let name = format!("c{i}");
        fakes
            .control
            .insert(cluster_secret(&name, &fake.url()))
            .unwrap();
        fakes
            .control
            .insert(application(&format!("app{i}"), &git.file_url(), &name))
            .unwrap();
    }
    let replicas = vec![
        replica_with(dir.path(), &kubeconfig, "r0", protocol, extra[0]),
        replica_with(dir.path(), &kubeconfig, "r1", protocol, extra[1]),
    ];

    // OutOfSync → auto-sync → Synced, on both clusters, statuses on the Applications.
    for i in 0..2 {
        let status = wait_for(&format!("app{i} synced"), SETTLE, || {
            synced(&fakes, &format!("app{i}"), &first)
        });
        assert_eq!(status["health"]["status"], "Healthy", "{status}");
        assert_eq!(status["operationState"]["phase"], "Succeeded");
        assert!(
            status["reconciledAt"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z')),
            "{status}"
        );
        let cm = fakes.clusters[i]
            .get("v1", "ConfigMap", "default", &format!("cm{i}"))
            .expect("applied");
        let managers: Vec<&str> = cm["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["manager"].as_str())
            .collect();
        assert_eq!(managers, ["fleetshard"], "server-side apply as fleetshard");
        // Only the app's own cluster has its object.
        assert!(config_value(&fakes.clusters[1 - i], &format!("cm{i}")).is_none());
    }
    World {
        dir,
        fakes,
        git,
        replicas,
        first,
    }
}

/// Drift on c0's ConfigMap is healed (selfHeal) by a resync; `value` is what Git says.
fn drift_is_healed(fakes: &Fakes, value: &str) {
    fakes.clusters[0]
        .modify("v1", "ConfigMap", "default", "cm0", |o| {
            o["data"]["value"] = json!("drifted");
        })
        .unwrap();
    wait_for("drift healed", SETTLE, || {
        match config_value(&fakes.clusters[0], "cm0") {
            Some(v) if v == json!(value) => Ok(()),
            other => Err(format!("cm0 value {other:?}")),
        }
    });
}

#[test]
fn two_replicas_reconcile_argo_cd_applications_end_to_end() {
    let World {
        dir,
        fakes,
        git,
        mut replicas,
        first: _,
    } = world(&[]);
    // The replica that applied c0's ConfigMap leaves: the other then writes the second
    // commit, so both replicas have written whichever synced the first (started
    // together, one may sync both apps before the other holds a shard).
    let first_writer = fakes.clusters[0]
        .writes()
        .iter()
        .rev()
        .find(|w| w.verb == Verb::Patch)
        .and_then(|w| identity_of(w).map(str::to_owned))
        .expect("c0's ConfigMap was applied by a replica");
    let leaving = if first_writer == "r0" { 0 } else { 1 };
    let leaver = &mut replicas[leaving];

    // One replica leaves; the other takes its cluster and syncs a new commit to both.
    signal(leaver.0.id(), "-TERM");
    let exit = leaver.0.wait().unwrap();
    assert!(exit.success(), "SIGTERM exits 0: {exit:?}");
    git.write("app0/cm.yaml", &config_map("cm0", "2"));
    git.write("app1/cm.yaml", &config_map("cm1", "2"));
    let second = git.commit("second");
    for i in 0..2 {
        wait_for(&format!("app{i} at the second commit"), SETTLE, || {
            synced(&fakes, &format!("app{i}"), &second)
        });
        assert_eq!(
            config_value(&fakes.clusters[i], &format!("cm{i}")),
            Some(json!("2"))
        );
    }
    // Judged from the clusters' side: every write names its replica, both replicas wrote,
    // and no two replicas' writes ever overlapped on a cluster (`write_overlap`).
    let mut writers = std::collections::BTreeSet::new();
    for (i, cluster) in fakes.clusters.iter().enumerate() {
        assert_writes_well_formed(cluster, &cluster_id(&fakes, i), dir.path());
        let writes = cluster.writes();
        writers.extend(writes.iter().filter_map(identity_of).map(str::to_owned));
    }
    assert_eq!(writers.into_iter().collect::<Vec<_>>(), ["r0", "r1"]);

    drift_is_healed(&fakes, "2");

    // A bad manifest is reported on its app; the other app is untouched.
    git.write(
        "app1/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: [oops\n",
    );
    let third = git.commit("broken");
    let status = wait_for("the error on app1's status", SETTLE, || {
        with_condition(&fakes, "app1", "ComparisonError")
    });
    let message = status["conditions"][0]["message"].as_str().unwrap();
    assert!(message.contains("cm.yaml"), "names the file: {message}");
    assert_eq!(status["sync"]["status"], "Unknown");
    // app0's manifests did not change in the broken commit: it is Synced at it.
    wait_for("app0 compared at the broken commit", SETTLE, || {
        let obj = fakes.control.get(APPS, "Application", "argocd", "app0");
        let sync = obj.map(|o| o["status"]["sync"].clone()).unwrap_or_default();
        if sync["status"] == "Synced" && sync["revision"] == third {
            Ok(())
        } else {
            Err(format!("sync {sync}"))
        }
    });
    assert_eq!(
        config_value(&fakes.clusters[1], "cm1"),
        Some(json!("2")),
        "the last good state stays applied"
    );
    events_come_from_the_owner_only(&fakes, dir.path());
}

/// Argo CD's Events on each Application (its transitions, its automated syncs' starts and
/// ends), every one written by the replica owning the app's cluster then: between events
/// of two replicas about one app, the audit logs show the cluster handed over.
fn events_come_from_the_owner_only(fakes: &Fakes, audit: &Path) {
    for i in 0..2 {
        let app = format!("app{i}");
        let of_app = |w: &fleetshard_testsupport::kube_api::WriteRecord| {
            let created = w
                .object
                .as_ref()
                .and_then(|o| o.pointer("/involvedObject/name"));
            w.path.contains("/namespaces/argocd/events")
                && (created.is_some_and(|n| *n == json!(app))
                    || w.path.contains(&format!("/events/{app}.")))
        };
        let events: Vec<_> = fakes.control.writes().into_iter().filter(of_app).collect();
        let reasons: std::collections::BTreeSet<String> = events
            .iter()
            .filter_map(|w| {
                w.object
                    .as_ref()?
                    .get("reason")?
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        for reason in ["OperationStarted", "OperationCompleted", "ResourceUpdated"] {
            assert!(reasons.contains(reason), "{app}: no {reason}: {reasons:?}");
        }
        let unseparated = crate::write_overlap::writes_without_handover(
            &events,
            &crate::write_overlap::audit_events(audit),
            &cluster_id(fakes, i),
        );
        assert!(
            unseparated.is_empty(),
            "{app}: events of two replicas with no hand-over between them: {unseparated:#?}"
        );
    }
}

/// Argo CD's heartbeat protocol (its ConfigMap in the control plane) runs the same
/// controller: each replica reconciles its shard's cluster and heals drift.
#[test]
fn the_argocd_protocol_runs_the_same_controller() {
    let w = world(&["--protocol", "argocd", "--heartbeat-ms", "200"]);
    let map = w
        .fakes
        .control
        .get(
            "v1",
            "ConfigMap",
            "argocd",
            "argocd-app-controller-shard-cm",
        )
        .expect("Argo CD's shard map");
    assert!(
        map["data"]["shardControllerMapping"]
            .as_str()
            .is_some_and(|m| m.contains("r0") && m.contains("r1")),
        "{map}"
    );
    drift_is_healed(&w.fakes, "1");

    // "Sync" pressed on an app without an automated policy: run once, request cleared.
    w.git.write("manual/cm.yaml", &config_map("cm-manual", "m"));
    let commit = w.git.commit("manual app");
    let mut manual = application("manual", &w.git.file_url(), "c0");
    manual["spec"].as_object_mut().unwrap().remove("syncPolicy");
    manual["operation"] = json!({"initiatedBy": {"username": "admin"}, "sync": {"prune": false}});
    w.fakes.control.insert(manual).unwrap();
    wait_for("the requested sync", SETTLE, || {
        let obj = w
            .fakes
            .control
            .get(APPS, "Application", "argocd", "manual")
            .ok_or("no Application")?;
        let op = &obj["status"]["operationState"];
        if op["phase"] == "Succeeded"
            && op["syncResult"]["revision"] == commit
            && obj.get("operation").is_none()
        {
            Ok(())
        } else {
            Err(format!("{obj}"))
        }
    });
    assert_eq!(
        config_value(&w.fakes.clusters[0], "cm-manual"),
        Some(json!("m"))
    );

    // c1's cluster Secret deleted: under Argo CD's protocol the distribution keeps it
    // until a restart, but its app's destination names no cluster now. As in Argo CD, the
    // app says so (it was Synced); one replica, the anchor's owner, writes it.
    w.fakes
        .control
        .delete("v1", "Secret", "argocd", "c1")
        .unwrap();
    // The app names its cluster (`destination.name`), so Argo CD's by-name words.
    let gone = "there are no clusters with this name: c1";
    wait_for("app1's destination shown as gone", SETTLE, || {
        let status = &w
            .fakes
            .control
            .get(APPS, "Application", "argocd", "app1")
            .ok_or("no Application")?["status"];
        let condition = &status["conditions"][0];
        if status["sync"]["status"] == "Unknown"
            && condition["type"] == "InvalidSpecError"
            && condition["message"] == gone
        {
            Ok(())
        } else {
            Err(format!("{status}"))
        }
    });
    assert_eq!(
        config_value(&w.fakes.clusters[1], "cm1"),
        Some(json!("1")),
        "nothing deleted on the cluster no longer known"
    );
    let _ = (&w.dir, &w.replicas, &w.first);
}

/// Local mode: the fleet is a watched directory of Argo CD manifests, the store is SQLite,
/// and app statuses land in the store, where `fleetshard apps` reads them. Drift is healed
/// on the cluster's change event, not on a resync.
#[test]
fn local_mode_records_statuses_in_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let fakes = start_fakes(1);
    let git = Git::init(&dir.path().join("repo"));
    git.write("app0/cm.yaml", &config_map("cm0", "1"));
    let first = git.commit("first");
    let fleet = dir.path().join("fleet");
    std::fs::create_dir(&fleet).unwrap();
    let mut secret = cluster_secret("c0", &fakes.clusters[0].url());
    secret["metadata"]["uid"] = json!("uid-c0");
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        secret,
        application("app0", &git.file_url(), "c0"),
    ]});
    std::fs::write(fleet.join("argocd.json"), objects.to_string()).unwrap();
    let store = format!("sqlite://{}", dir.path().join("fs.db").display());
    let _replica = KillOnDrop(
        local_replica(dir.path(), &fleet, &store)
            .args(["--resync", "1h"])
            .spawn()
            .unwrap(),
    );
    let record = wait_for("app0's status in the store", SETTLE, || {
        let v = apps_json(&store)?;
        let record = v["apps"][0]["record"].clone();
        let sync = &record["comparison"]["sync"];
        if sync["status"] == "Synced"
            && sync["revision"] == first
            && record["operation"]["phase"] == "Succeeded"
        {
            Ok(record)
        } else {
            Err(format!("{v}"))
        }
    });
    assert_eq!(record["comparison"]["health"]["status"], "Healthy");
    assert_eq!(config_value(&fakes.clusters[0], "cm0"), Some(json!("1")));
    // No resync for an hour: the change event of the app's object queues its refresh,
    // and selfHeal puts it back.
    drift_is_healed(&fakes, "1");
}

/// The contract of issue 12 in local mode: a Kustomize directory and a Jsonnet app in a
/// `file://` repository render without a repo-server, with `kubectl` on PATH (the
/// replica's own PATH), and their statuses say how (`sourceType`). Both run in the render
/// sandbox (the binary is its own launcher and Jsonnet child); a Jsonnet bomb beside them
/// ends at its memory bound with a condition, and the replica goes on.
#[test]
fn local_mode_renders_kustomize_and_jsonnet_without_a_repo_server() {
    let dir = tempfile::tempdir().unwrap();
    let fakes = start_fakes(1);
    let git = Git::init(&dir.path().join("repo"));
    git.write("kust/cm.yaml", &config_map("kcm", "k"));
    git.write(
        "kust/kustomization.yaml",
        "resources:\n- cm.yaml\nnamePrefix: p-\n",
    );
    git.write(
        "js/main.jsonnet",
        "{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'jscm' }, data: { value: 'j' } }",
    );
    git.write(
        "bomb/main.jsonnet",
        "local s = std.repeat('x', 1000000);\n{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'b' },\n  data: { ['k' + i]: s + i for i in std.range(1, 100000) } }\n",
    );
    git.commit("first");
    let fleet = dir.path().join("fleet");
    std::fs::create_dir(&fleet).unwrap();
    let mut secret = cluster_secret("c0", &fakes.clusters[0].url());
    secret["metadata"]["uid"] = json!("uid-c0");
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        secret,
        application("kust", &git.file_url(), "c0"),
        application("js", &git.file_url(), "c0"),
        application("bomb", &git.file_url(), "c0"),
    ]});
    std::fs::write(fleet.join("argocd.json"), objects.to_string()).unwrap();
    let store = format!("sqlite://{}", dir.path().join("fs.db").display());
    let _replica = KillOnDrop(
        local_replica(dir.path(), &fleet, &store)
            .env("FLEETSHARD_JSONNET_MAX_MEMORY_MIB", "256")
            .spawn()
            .unwrap(),
    );
    let types = wait_for("both apps rendered and synced", SETTLE, || {
        let v = apps_json(&store)?;
        let apps = v["apps"].as_array().cloned().unwrap_or_default();
        let synced: Vec<(String, Value)> = apps
            .iter()
            .filter(|a| a["record"]["comparison"]["sync"]["status"] == "Synced")
            .map(|a| {
                let name = a["app"].as_str().unwrap_or_default().to_owned();
                (name, a["record"]["comparison"]["sourceType"].clone())
            })
            .collect();
        let bomb = apps
            .iter()
            .find(|a| a["app"] == "argocd/bomb")
            .map(Value::to_string)
            .unwrap_or_default();
        let ready = synced.len() == 2
            && bomb.contains("more than 256 MiB of memory")
            && config_value(&fakes.clusters[0], "p-kcm").is_some()
            && config_value(&fakes.clusters[0], "jscm").is_some();
        ready.then_some(synced).ok_or_else(|| format!("{v}"))
    });
    let mut types = types;
    types.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        types,
        [
            ("argocd/js".to_owned(), json!("Directory")),
            ("argocd/kust".to_owned(), json!("Kustomize")),
        ]
    );
    assert_eq!(config_value(&fakes.clusters[0], "p-kcm"), Some(json!("k")));
    assert_eq!(config_value(&fakes.clusters[0], "jscm"), Some(json!("j")));
}

/// Nothing is served before the inventory's first load; what holds it up (here a refused
/// list of the cluster Secrets, retried) is in the replica's log meanwhile.
#[test]
fn what_holds_up_the_first_load_is_logged() {
    let dir = tempfile::tempdir().unwrap();
    let fakes = start_fakes(0);
    fakes.control.inject(
        None,
        FaultAction::Fail {
            code: 403,
            retry_after: None,
        },
        |info| info.is(Verb::List, "secrets"),
    );
    let kubeconfig = dir.path().join("kubeconfig");
    fakes.control.write_kubeconfig(&kubeconfig).unwrap();
    let log = dir.path().join("r0.log");
    let port = http::free_port();
    let store = format!("sqlite://{}", dir.path().join("fs.db").display());
    let _replica = KillOnDrop(
        fleetshard()
            .env("KUBECONFIG", &kubeconfig)
            .args([
                "run",
                "--identity",
                "r0",
                "--store",
                &store,
                "--shards",
                "1",
            ])
            .args([
                "--argocd-namespace",
                "argocd",
                "--allow-local-repositories=true",
            ])
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for("the refused list in the log", SETTLE, || {
        let text = std::fs::read_to_string(&log).map_err(|e| e.to_string())?;
        if text.contains("fleet, not loaded yet") && text.contains("403") {
            Ok(())
        } else {
            Err(text)
        }
    });
    assert_eq!(
        http::get(port, "/healthz"),
        None,
        "served before the first load"
    );
}

/// SIGTERM ends a replica whatever its workers do: here a fetch from a `git://` server
/// that accepts the connection and never answers (a tarpit) holds a blocking thread
/// forever; the app's work ends at the fetch timeout (3 s here), the cluster is handed
/// over, and the replica exits without waiting for that thread (it used to wait forever).
#[test]
fn sigterm_ends_a_replica_whose_fetch_hangs_on_a_tarpit() {
    let dir = tempfile::tempdir().unwrap();
    let fakes = start_fakes(1);
    let tarpit = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tarpit.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = accepted.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in tarpit.incoming().flatten() {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(conn);
        }
    });
    let fleet = dir.path().join("fleet");
    std::fs::create_dir(&fleet).unwrap();
    let mut secret = cluster_secret("c0", &fakes.clusters[0].url());
    secret["metadata"]["uid"] = json!("uid-c0");
    let repo = format!("git://127.0.0.1:{port}/repo.git");
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        secret,
        application("tarpit", &repo, "c0"),
    ]});
    std::fs::write(fleet.join("argocd.json"), objects.to_string()).unwrap();
    let store = format!("sqlite://{}", dir.path().join("fs.db").display());
    let mut replica = KillOnDrop(
        local_replica(dir.path(), &fleet, &store)
            .env("FLEETSHARD_REPO_FETCH_TIMEOUT", "3s")
            .spawn()
            .unwrap(),
    );
    wait_for("the fetch reached the tarpit", SETTLE, || {
        match accepted.load(std::sync::atomic::Ordering::SeqCst) {
            0 => Err("no connection yet".to_owned()),
            _ => Ok(()),
        }
    });
    signal(replica.0.id(), "-TERM");
    // Not a bound on time: the deadline only ends a test whose replica would never exit.
    let status = wait_for("the replica to exit after SIGTERM", SETTLE, || {
        replica
            .0
            .try_wait()
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "still running".to_owned())
    });
    assert!(status.success(), "{status}");
}
