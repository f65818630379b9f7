//! `fleetshard run` started as the kubelet would start the overlay's container (exact
//! args and env, downward API, volumes), against a fake control plane that enforces the
//! overlay's Roles and a fake destination cluster: the replica must reconcile an Argo CD
//! Application end to end with no request refused, and use every rule it is granted.
//! [`Start::AfterArgoCd`] rehearses docs/deploying.md's switch: it starts where a stopped
//! Argo CD controller left the app, synced, and its entry of the shard map.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fleetshard_testsupport::git::{Git, config_map};
use fleetshard_testsupport::kube_api::{FakeApiServer, FaultAction, RequestInfo, Verb};
use serde_json::Value;

use super::rbac::{allows, granted, verb_name};
use super::{POD_NAME, argo, container, rendered, support, volume, workload};

/// What the controller inside a replica calls on the control plane, whatever the
/// protocol (deploy/base/role.yaml says why each is needed): exactly what the Role
/// `fleetshard` grants, and nothing the store's Role may grant.
const CONTROLLER: &[(&str, &str, &str)] = &[
    ("", "secrets", "list"),
    ("", "secrets", "watch"),
    // Only argocd-ssh-known-hosts-cm, argocd-tls-certs-cm and argocd-cm (resourceNames).
    ("", "configmaps", "list"),
    ("", "configmaps", "watch"),
    ("argoproj.io", "applications", "get"),
    ("argoproj.io", "applications", "list"),
    ("argoproj.io", "applications", "watch"),
    ("argoproj.io", "applications", "patch"),
    ("argoproj.io", "appprojects", "get"),
    ("argoproj.io", "appprojects", "list"),
    ("argoproj.io", "appprojects", "watch"),
    ("argoproj.io", "appprojects", "update"),
    ("", "events", "create"),
    ("", "events", "patch"),
];

/// Rules used only in situations a short run with a small fleet does not reach. For every
/// overlay: an AppProject being deleted has its finalizer removed (a get, then an update at
/// its resourceVersion: controller inventory/project_finalizer.rs); the run deletes none.
/// An event identical to one recorded before bumps its count (a patch: gitops
/// events/writer.rs); one sync records each event once. And the store's own, below.
fn not_exercised(overlay: &str) -> &'static [(&'static str, &'static str, &'static str)] {
    match overlay {
        // coord/src/store/chunked.rs: an assignment over 512 KiB is stored as parts, read
        // back with get and collected with delete two writes later.
        // And the assignment ConfigMap is rewritten (a PUT at its resourceVersion,
        // store-kube ops.rs put_record) by every generation after the first; a lone
        // replica over an unchanging fleet commits only the first (a create).
        // A Lease is deleted only when a presence record has been unchanged for 5 minutes
        // (coord fenced/replica/forget.rs), longer than this run.
        "fenced" => &[
            ("", "events", "patch"),
            ("coordination.k8s.io", "leases", "delete"),
            ("argoproj.io", "appprojects", "get"),
            ("argoproj.io", "appprojects", "update"),
            ("", "configmaps", "get"),
            ("", "configmaps", "delete"),
            ("", "configmaps", "update"),
        ],
        // store-kube list.rs current_revision: a one-item Lease list reads the store's
        // revision when `wait_for_change` runs without the watch cache (cache off, or more
        // scopes than it keeps); with the cache, as here, it is not reached.
        "argocd" => &[
            ("", "events", "patch"),
            ("argoproj.io", "appprojects", "get"),
            ("argoproj.io", "appprojects", "update"),
            ("coordination.k8s.io", "leases", "list"),
        ],
        _ => &[
            ("", "events", "patch"),
            ("argoproj.io", "appprojects", "get"),
            ("argoproj.io", "appprojects", "update"),
        ],
    }
}

/// Polls `cond` until it holds or `secs` pass (support::wait_for).
fn wait_until(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    support::wait_for(what, Duration::from_secs(secs), || {
        cond().then_some(()).ok_or_else(|| "not yet".to_owned())
    });
}

/// `GET path`'s status code, or None when nothing answers.
fn http_status(port: u16, path: &str) -> Option<u16> {
    support::http::get(port, path).map(|(code, _)| code)
}

type Seen = Arc<Mutex<Vec<RequestInfo>>>;

/// Where the run starts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Start {
    /// Nothing synced, no shard map.
    Fresh,
    /// Argo CD's controller synced the app (the ConfigMap on the destination, tracked by
    /// annotation, and the app's status and history as Argo CD writes them), holds shard 0
    /// of its shard map, and has been scaled to 0 (its heartbeat no longer moves).
    AfterArgoCd,
}

/// Argo CD's controllers that held the shard map before the switch (a StatefulSet's pods).
const ARGO_CD_CONTROLLER: &str = "argocd-application-controller";
/// When Argo CD's controller synced the app, and last wrote its heartbeat.
const ARGO_CD_SYNCED_AT: &str = "2026-11-01T10:00:00Z";

/// What Argo CD's controller left after syncing `commit` of `repo`: the app's status (set on
/// the Application), the object on the destination, and the shard map.
fn left_by_argo_cd(
    server: &FakeApiServer,
    dest: &FakeApiServer,
    namespace: &str,
    repo: &str,
    commit: &str,
) {
    let source =
        serde_json::json!({"repoURL": repo, "path": "guestbook", "targetRevision": "HEAD"});
    let mut app = server
        .get(argo::APPS, "Application", namespace, "guestbook")
        .unwrap();
    app["status"] = serde_json::json!({
        "sync": {"status": "Synced", "revision": commit,
                 "comparedTo": {"source": source, "destination": {"name": "dest", "namespace": "default"}}},
        "health": {"status": "Healthy"},
        "reconciledAt": ARGO_CD_SYNCED_AT,
        "sourceType": "Directory",
        "resources": [{"version": "v1", "kind": "ConfigMap", "namespace": "default",
                       "name": "guestbook", "status": "Synced"}],
        "operationState": {
            "operation": {"sync": {"revision": commit}, "initiatedBy": {"automated": true}},
            "phase": "Succeeded",
            "message": "successfully synced (all tasks run)",
            "startedAt": ARGO_CD_SYNCED_AT,
            "finishedAt": ARGO_CD_SYNCED_AT,
            "syncResult": {"revision": commit, "source": source, "resources": [
                {"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "default",
                 "name": "guestbook", "status": "Synced", "message": "configmap/guestbook created",
                 "hookPhase": "Running", "syncPhase": "Sync"}]},
        },
        "history": [{"id": 0, "revision": commit, "source": source,
                     "deployedAt": ARGO_CD_SYNCED_AT, "deployStartedAt": ARGO_CD_SYNCED_AT,
                     "initiatedBy": {"automated": true}}],
    });
    server.insert(app).unwrap();
    let desired = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "guestbook", "namespace": "default",
                     "annotations": {"argocd.argoproj.io/tracking-id": "guestbook:/ConfigMap:default/guestbook"}},
        "data": {"value": "1"}});
    let mut live = desired.clone();
    // Argo CD's default client-side apply: the applied configuration is kept on the object.
    live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
        Value::String(desired.to_string());
    dest.insert(live).unwrap();
    // Argo CD's three controllers (the Deployment's count), all scaled to 0: every entry
    // held, none renewed any more. The replica takes the first once it has seen it stale.
    let map = (0..3)
        .map(|n| {
            format!(
                r#"{{"ShardNumber":{n},"ControllerName":"{ARGO_CD_CONTROLLER}-{n}","HeartbeatTime":"{ARGO_CD_SYNCED_AT}"}}"#
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    let map = format!("[{map}]");
    server
        .insert(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": fleetshard_coord::argocd::CONFIG_MAP_NAME, "namespace": namespace},
            "data": {(fleetshard_coord::argocd::DATA_KEY): map}}))
        .unwrap();
}

/// The controller names of Argo CD's shard map, by shard.
fn shard_map_controllers(server: &FakeApiServer, namespace: &str) -> Vec<String> {
    let cm = server
        .get(
            "v1",
            "ConfigMap",
            namespace,
            fleetshard_coord::argocd::CONFIG_MAP_NAME,
        )
        .expect("the shard map");
    let entries: Vec<Value> = serde_json::from_str(
        cm["data"][fleetshard_coord::argocd::DATA_KEY]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    entries
        .iter()
        .map(|e| e["ControllerName"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Deadline for the replica to reconcile the Application: generous, so a slow machine
/// passes and a broken build fails instead of hanging.
const SETTLE: Duration = Duration::from_secs(90);

/// Runs the overlay's container against the RBAC-enforcing fake and checks the run (module
/// docs).
pub fn run_overlay_against_rbac(overlay: &str, start: Start) {
    assert!(
        start == Start::Fresh || overlay == "argocd",
        "{overlay}: {start:?}"
    );
    let objects = rendered(overlay);
    let namespace = workload(&objects)["metadata"]["namespace"]
        .as_str()
        .unwrap()
        .to_owned();
    let rules = Arc::new(granted(&objects));
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(FakeApiServer::start()).unwrap();
    // Argo CD's CRDs: every Application and status written is checked against their schema.
    server.install_argocd_crds().unwrap();
    server.create_namespace(&namespace).unwrap();
    // And the overlay's own namespaces (the fenced store's), as `kubectl apply` creates them.
    for ns in objects.iter().filter(|o| o["kind"] == "Namespace") {
        server
            .create_namespace(ns["metadata"]["name"].as_str().unwrap())
            .unwrap();
    }
    // The Deployment itself, as `kubectl apply` creates it: its spec.replicas is the
    // shard count the replica reads (through the Role fleetshard-shard-count).
    server.insert(workload(&objects).clone()).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    // The destination cluster: reached with the cluster Secret's credentials, so the
    // Roles (the control plane's) do not apply to it.
    let dest = rt.block_on(FakeApiServer::start()).unwrap();
    let dest_writes: Seen = Arc::default();
    let w = dest_writes.clone();
    dest.inject(
        None,
        FaultAction::Fail {
            code: 500,
            retry_after: None,
        },
        move |info| {
            if !matches!(
                info.verb,
                Some(Verb::Get | Verb::List | Verb::Watch | Verb::Discovery) | None
            ) {
                w.lock().unwrap().push(info.clone());
            }
            false
        },
    );
    let seen: Seen = Arc::default();
    let denied: Seen = Arc::default();
    let (s, d, r) = (seen.clone(), denied.clone(), rules.clone());
    // The RBAC authorizer: refuses what the Roles do not allow, as the real one would.
    server.inject(
        None,
        FaultAction::Fail {
            code: 403,
            retry_after: None,
        },
        move |info| {
            s.lock().unwrap().push(info.clone());
            let refuse = !allows(&r, info);
            if refuse {
                d.lock().unwrap().push(info.clone());
            }
            refuse
        },
    );

    // Argo CD's objects: one cluster, one auto-synced app whose manifests are a ConfigMap
    // in a Git repository served over git://, so the replica mirrors it into its cache.
    let git = Git::init(&dir.path().join("git").join("apps"));
    git.write("guestbook/cm.yaml", &config_map("guestbook", "1"));
    let commit = git.commit("first");
    let daemon = argo::GitDaemon::start(&dir.path().join("git"), "apps");
    // The argocd overlay runs 3 replicas; this test starts one, which claims shard 0 of
    // Argo CD's map, and Argo CD's protocol gives a missing replica's clusters to nobody:
    // the cluster is pinned there (Argo CD's `shard` field). The fenced overlay places it
    // (the distributor moves it off the shards nobody holds).
    let pin = (overlay == "argocd").then_some(0);
    server
        .insert(argo::cluster_secret(&namespace, "dest", &dest.url(), pin))
        .unwrap();
    server
        .insert(argo::application(
            &namespace,
            "guestbook",
            &daemon.url("apps"),
            "guestbook",
            "dest",
        ))
        .unwrap();
    if start == Start::AfterArgoCd {
        left_by_argo_cd(&server, &dest, &namespace, &daemon.url("apps"), &commit);
    }

    // The container as the kubelet starts it: volumes, the downward API, $(VAR)
    // expansion; only the listen port changes (tests run in parallel).
    let c = container(&objects);
    let pod = &workload(&objects)["spec"]["template"]["spec"];
    let mut mounts = Vec::new();
    for m in c["volumeMounts"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        let vol = volume(pod, name);
        let local = dir.path().join("volumes").join(name);
        std::fs::create_dir_all(&local).unwrap();
        // A Secret's items as the kubelet writes them (their content is not read here:
        // no repo-server runs).
        if let Some(items) = vol["secret"]["items"].as_array() {
            for item in items {
                let path = local.join(item["path"].as_str().unwrap());
                std::fs::write(path, "-----BEGIN CERTIFICATE-----\n").unwrap();
            }
        } else {
            assert!(
                vol["emptyDir"].is_object(),
                "{overlay}: volume {name}: only emptyDir and Secret items are simulated"
            );
        }
        mounts.push((
            m["mountPath"].as_str().unwrap().to_owned(),
            local.display().to_string(),
        ));
    }
    let mut env: Vec<(String, String)> = Vec::new();
    for e in c["env"].as_array().unwrap() {
        let from = &e["valueFrom"];
        let mut value = match from["fieldRef"]["fieldPath"].as_str() {
            Some("metadata.name") => POD_NAME.to_owned(),
            Some("metadata.namespace") => namespace.clone(),
            Some(other) => panic!("{overlay}: fieldRef {other} not simulated"),
            None if from["resourceFieldRef"].is_object() => {
                resource_field(c, &from["resourceFieldRef"], overlay)
            }
            None => e["value"].as_str().expect("a value").to_owned(),
        };
        for (k, v) in &env {
            value = value.replace(&format!("$({k})"), v);
        }
        for (from, to) in &mounts {
            if let Some(rest) = value.strip_prefix(from.as_str()) {
                value = format!("{to}{rest}");
            }
        }
        env.push((e["name"].as_str().unwrap().to_owned(), value));
    }
    let port = support::http::free_port();
    let mut args: Vec<String> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    let listen = args.iter().position(|a| a == "--listen").unwrap() + 1;
    args[listen] = format!("127.0.0.1:{port}");
    if overlay == "argocd" {
        // Test only: a 200 ms heartbeat instead of Argo CD's 10 s minimum.
        args.extend(["--heartbeat-ms".into(), "200".into()]);
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleetshard"))
        .args(&args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("KUBECONFIG", &kubeconfig)
        // Test only: no Argo CD repo-server runs here; the test's Git repository is
        // rendered by the replica (what is checked is the RBAC the overlay grants).
        .env("FLEETSHARD_REPO_SERVER", "none")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("stderr")).unwrap())
        .spawn()
        .unwrap();
    let env_of = |name: &str| {
        env.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("{overlay}: no {name}"))
    };
    let log = || std::fs::read_to_string(dir.path().join("stderr")).unwrap_or_default();
    let ready = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_until(60, "/healthz", || {
            http_status(port, "/healthz") == Some(200)
        });
        wait_until(60, "/readyz", || http_status(port, "/readyz") == Some(200));
        // Probes and Prometheus are served; the dashboard (cluster servers, app names) is
        // not.
        assert_eq!(http_status(port, "/metrics"), Some(200), "{overlay}");
        for path in ["/dashboard", "/api/dashboard", "/api/dashboard/events"] {
            assert_eq!(http_status(port, path), Some(404), "{overlay}: {path}");
        }
        // The controller: OutOfSync → auto-sync (server-side apply on the destination) →
        // Synced, recorded on the Application with the Role's merge patch.
        let status = support::wait_for("the Application synced", SETTLE, || {
            argo::synced(&server, &namespace, "guestbook", &commit)
        });
        match start {
            Start::Fresh => {
                let cm = support::wait_for("the ConfigMap on the destination", SETTLE, || {
                    argo::applied(&dest, "ConfigMap", "guestbook")
                });
                assert_eq!(cm["data"]["value"], "1", "{cm}");
            }
            Start::AfterArgoCd => {
                // Compared again by its new owner, found synced: no new operation, the
                // history Argo CD wrote kept, nothing written to the destination, and
                // the shard Argo CD's stopped controller held is this pod's.
                let status = support::wait_for("the app compared again", SETTLE, || {
                    let status = argo::synced(&server, &namespace, "guestbook", &commit)?;
                    (status["reconciledAt"] != ARGO_CD_SYNCED_AT)
                        .then_some(status.clone())
                        .ok_or(format!("not compared yet: {status}"))
                });
                let op = &status["operationState"];
                assert_eq!(op["startedAt"], ARGO_CD_SYNCED_AT, "{op}");
                assert_eq!(
                    status["history"].as_array().map(Vec::len),
                    Some(1),
                    "{status}"
                );
                assert_eq!(shard_map_controllers(&server, &namespace)[0], POD_NAME);
            }
        }
        assert!(
            status["reconciledAt"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z')),
            "{status}"
        );
        // Fenced: the shard record advertises the capacity the downward API gave
        // (requests.cpu 100m in tenths of a core: 1).
        if overlay == "fenced" {
            let leases = server.list("coordination.k8s.io/v1", "Lease", None);
            let capacities: Vec<Value> = leases
                .iter()
                .map(|l| &l["metadata"]["annotations"])
                .filter(|a| {
                    a["fleetshard.io/key"]
                        .as_str()
                        .is_some_and(|k| k.contains("shards/"))
                })
                .filter_map(|a| a["fleetshard.io/record"].as_str())
                .filter_map(|r| serde_json::from_str::<Value>(r).ok())
                .filter(|r| r["holder"] == POD_NAME)
                .map(|r| r["capacity"].clone())
                .collect();
            assert!(
                !capacities.is_empty() && capacities.iter().all(|c| c == 1),
                "{overlay}: the holder's shard records' capacities {capacities:?}"
            );
        }
        // The mirror is in the repository cache, on the pod's writable volume.
        let cache = env_of("FLEETSHARD_REPO_CACHE");
        let mirrored = std::fs::read_dir(&cache).map_or(0, |d| d.count());
        assert!(
            mirrored > 0,
            "{overlay}: nothing in the repository cache {cache}"
        );
        // Nothing of the app's was applied to the control plane.
        assert!(
            server
                .get("v1", "ConfigMap", "default", "guestbook")
                .is_none()
        );
        assert!(
            server
                .get("v1", "ConfigMap", &namespace, "guestbook")
                .is_none()
        );
        // Watches end (their timeout, a restarted API server): the store's watch cache
        // watches again from the last revision it saw (store-kube cache/watcher.rs).
        // Watches are closed on every poll, because one may be re-opening at the instant
        // of a single close.
        let count = |verb: Verb, resource: &str| {
            seen.lock()
                .unwrap()
                .iter()
                .filter(|i| i.is(verb, resource))
                .count()
        };
        let watches = count(Verb::Watch, "configmaps");
        wait_until(30, "a new watch after watches ended", || {
            server.close_watches();
            count(Verb::Watch, "configmaps") > watches
        });
    }));
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let mut status = None;
    wait_until(30, "exit after SIGTERM", || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    if let Err(e) = ready {
        let why = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default();
        panic!("{overlay}: {why}\nlog:\n{}", log());
    }
    assert!(
        status.unwrap().success(),
        "{overlay}: exit {status:?}\n{}",
        log()
    );

    if start == Start::AfterArgoCd {
        let writes = dest_writes.lock().unwrap();
        assert!(
            writes.is_empty(),
            "written to the destination: {writes:#?}\n{}",
            log()
        );
        // The way back: the entry it held is free for Argo CD's controller to claim; the
        // other controllers' entries are as they left them.
        let controllers = shard_map_controllers(&server, &namespace);
        assert_eq!(
            controllers,
            [
                "",
                &format!("{ARGO_CD_CONTROLLER}-1"),
                &format!("{ARGO_CD_CONTROLLER}-2")
            ]
        );
    } else {
        assert!(
            !dest_writes.lock().unwrap().is_empty(),
            "{overlay}: nothing applied"
        );
    }
    let denied = denied.lock().unwrap();
    assert!(
        denied.is_empty(),
        "{overlay}: refused by RBAC: {denied:#?}\nlog:\n{}",
        log()
    );
    // Beyond RBAC, what was written in Argo CD's namespace: no Secret, and no ConfigMap but
    // Argo CD's shard map (argocd overlay; the fenced store writes in its own namespace).
    // A create carries its name in the body, so the ConfigMaps there afterwards are checked.
    let shard_map = (overlay == "argocd").then_some(fleetshard_coord::argocd::CONFIG_MAP_NAME);
    let writes: Vec<RequestInfo> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|i| {
            i.namespace.as_deref() == Some(namespace.as_str())
                && (i.resource == "configmaps" || i.resource == "secrets")
                && !matches!(
                    i.verb,
                    Some(Verb::Get | Verb::List | Verb::Watch | Verb::Discovery)
                )
                && !(i.resource == "configmaps"
                    && (i.verb == Some(Verb::Create) || i.name.as_deref() == shard_map))
        })
        .cloned()
        .collect();
    assert!(
        writes.is_empty(),
        "{overlay}: wrote in {namespace}: {writes:#?}"
    );
    let config_maps: Vec<String> = server
        .list("v1", "ConfigMap", Some(&namespace))
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        config_maps,
        Vec::from_iter(shard_map.map(str::to_owned)),
        "{overlay}: ConfigMaps in {namespace}"
    );
    let used: BTreeSet<(String, String, String)> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|i| i.verb.is_some_and(|v| v != Verb::Discovery))
        .map(|i| {
            (
                i.group.clone(),
                i.resource.clone(),
                verb_name(i.verb.unwrap()).to_owned(),
            )
        })
        .collect();
    assert!(!used.is_empty(), "{overlay}: the replica made no request");
    let mut unused = Vec::new();
    let mut controller_role = BTreeSet::new();
    for (role, rule) in rules.iter() {
        for (g, r, v) in rule.triples() {
            let t = (g.as_str(), r.as_str(), v.as_str());
            // Argo CD's controller created the shard map before the switch.
            let created_before = start == Start::AfterArgoCd && t == ("", "configmaps", "create");
            // An app Argo CD synced before: taken over as it is, nothing changes, no event.
            let nothing_to_record = start == Start::AfterArgoCd && t == ("", "events", "create");
            if !used.contains(&(g.clone(), r.clone(), v.clone()))
                && !not_exercised(overlay).contains(&t)
                && !created_before
                && !nothing_to_record
            {
                unused.push(format!("{role}: {g}/{r} {v}"));
            }
            // The controller's Role and the store's are reviewed apart: neither may grant
            // what the other needs.
            // Except ConfigMaps: the store's own and the controller's two repository
            // ConfigMaps (a rule restricted by name) share the resource.
            let shared = t.1 == "configmaps" && role != "fleetshard";
            assert_eq!(
                role == "fleetshard",
                CONTROLLER.contains(&t) && !shared,
                "{overlay}: {role} grants {t:?}"
            );
            if role == "fleetshard" {
                controller_role.insert((g.clone(), r.clone(), v.clone()));
            }
        }
    }
    let expected: BTreeSet<_> = CONTROLLER
        .iter()
        .map(|(g, r, v)| ((*g).to_owned(), (*r).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(controller_role, expected, "{overlay}: the Role fleetshard");
    assert!(
        unused.is_empty(),
        "{overlay}: granted but never used: {unused:?}; used: {used:?}"
    );
    eprintln!("{overlay}: requests made {used:?}");
}

/// A `resourceFieldRef`'s value as the kubelet gives it: the container's CPU request or
/// limit divided by the divisor, rounded up (only CPU is simulated).
fn resource_field(c: &Value, field: &Value, overlay: &str) -> String {
    assert_eq!(field["containerName"], c["name"], "{overlay}: {field}");
    let resource = field["resource"].as_str().unwrap();
    let (kind, "cpu") = resource.split_once('.').unwrap() else {
        panic!("{overlay}: resourceFieldRef {resource} not simulated");
    };
    let millis = |q: &str| -> u64 {
        match q.strip_suffix('m') {
            Some(m) => m.parse().unwrap(),
            None => (q.parse::<f64>().unwrap() * 1000.0).round() as u64,
        }
    };
    let quantity = c["resources"][kind]["cpu"]
        .as_str()
        .unwrap_or_else(|| panic!("{overlay}: no resources.{kind}.cpu"));
    let divisor = field["divisor"].as_str().unwrap_or("1");
    millis(quantity).div_ceil(millis(divisor)).to_string()
}
