//! `deploy/`: the Kustomize overlays render (with the subset resolver in
//! `deploy_manifests/kustomize.rs`, and with `kubectl kustomize` too where it exists), and
//! what they describe works with the binary as built:
//! - every flag and `FLEETSHARD_*`/`ARGOCD_*` variable the container gets is one `fleetshard
//!   run` reads, and `$(VAR)` references only variables defined before them;
//! - labels and selectors, the Service, PDB, RBAC wiring and the image agree; the shard
//!   count is the Deployment's own spec.replicas, read through a Role restricted to it, and
//!   a rolling update surges one pod and stops none before its replacement is ready;
//! - the security settings are present; probes point at the served port and paths;
//! - the root file system is read-only and every path the replica writes is a writable
//!   volume;
//! - the strongest check: `fleetshard run` is started with the Deployment's exact args and
//!   env (downward API and volumes resolved as the kubelet would) against the fake API
//!   server, which refuses (403) every request the overlay's Roles do not allow, as
//!   Kubernetes' RBAC authorizer would. The replica must become ready, reconcile an
//!   Argo CD Application end to end (cluster Secret → a second fake API server as the
//!   destination, manifests from a local Git repository, auto-sync, status written on the
//!   Application), survive its watches ending, and release on SIGTERM with no request
//!   refused; and every rule must be used by the run or listed below with the reason it
//!   was not.

mod argo;
mod helm;
mod kustomize;
mod rbac;
mod replica;
mod rollout;

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use fleetshard_coord::argocd::{ENV_DYNAMIC, ENV_HEARTBEAT_TIME, ENV_REPLICAS, ENV_SHARD};
use fleetshard_replica::deployment::ARGOCD_CONTROLLER_NAME_ENV;
use fleetshard_testsupport::kube_api::{RequestInfo, Verb};
use kustomize::{id, render};
use rbac::{allows, granted};
use serde_json::Value;

const OVERLAYS: &[&str] = &["fenced", "argocd"];
/// The pod name the downward API gives a replica: a Deployment's, random.
const POD_NAME: &str = "fleetshard-6d4cf56db6-x7k2p";

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn rendered(overlay: &str) -> Vec<Value> {
    render(&deploy_dir().join("overlays").join(overlay))
        .unwrap_or_else(|e| panic!("overlay {overlay}: {e}"))
}

fn one<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "expected one {kind}/{name}");
    found[0]
}

fn workload(objects: &[Value]) -> &Value {
    one(objects, "Deployment", "fleetshard")
}

fn container(objects: &[Value]) -> &Value {
    &workload(objects)["spec"]["template"]["spec"]["containers"][0]
}

/// Every `k: v` of `sub` is in `labels`.
fn selects(sub: &Value, labels: &Value) -> bool {
    sub.as_object()
        .is_some_and(|m| !m.is_empty() && m.iter().all(|(k, v)| labels[k] == *v))
}

/// `fleetshard run --help`.
fn run_help() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_fleetshard"))
        .args(["run", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_object_is_yaml_and_every_overlay_renders_the_whole_deployment() {
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        let mut kinds: Vec<String> = objects.iter().map(id).collect();
        kinds.sort();
        let mut expected = vec![
            // Argo CD's repo-server admits its own components only; this policy admits
            // fleetshard's pods on its gRPC port.
            "NetworkPolicy/fleetshard-to-argocd-repo-server",
            // Only the probes' and Prometheus' port reaches fleetshard's pods.
            "NetworkPolicy/fleetshard",
            "PodDisruptionBudget/fleetshard",
            "Role/fleetshard",
            "Role/fleetshard-shard-count",
            "Role/fleetshard-store",
            "RoleBinding/fleetshard",
            "RoleBinding/fleetshard-shard-count",
            "RoleBinding/fleetshard-store",
            "Service/fleetshard-metrics",
            "ServiceAccount/fleetshard",
        ];
        // A Deployment, not a StatefulSet (deploy/base/deployment.yaml says why).
        expected.push("Deployment/fleetshard");
        // The fenced store's records live in a namespace of their own, which the overlay
        // creates; Argo CD's shard ConfigMap is in Argo CD's namespace.
        let store_namespace = match *overlay {
            "fenced" => {
                expected.insert(0, "Namespace/fleetshard-store");
                "fleetshard-store"
            }
            _ => "argocd",
        };
        expected.sort();
        assert_eq!(kinds, expected, "{overlay}");
        let store = env_value(container(&objects), "FLEETSHARD_STORE");
        assert_eq!(
            store
                .as_deref()
                .map(|s| s.replace("$(POD_NAMESPACE)", "argocd")),
            Some(format!("kubernetes://{store_namespace}")),
            "{overlay}"
        );
        for o in &objects {
            let in_store = o["metadata"]["name"] == "fleetshard-store";
            let want = match o["kind"].as_str() {
                Some("Namespace") => Value::Null,
                _ if in_store => Value::from(store_namespace),
                _ => Value::from("argocd"),
            };
            assert_eq!(o["metadata"]["namespace"], want, "{overlay}: {}", id(o));
            // That label marks the store's record objects (store-kube names.rs).
            assert_ne!(
                o["metadata"]["labels"]["app.kubernetes.io/managed-by"],
                "fleetshard",
                "{overlay}: {}",
                id(o)
            );
        }
    }
    // A resolver that accepted anything would make the rest meaningless.
    let e = kustomize::merge(
        &mut serde_json::json!({"spec": {"ports": []}}),
        &serde_json::json!({"spec": {"ports": [{"port": 1}]}}),
        "p",
    )
    .unwrap_err();
    assert!(e.contains("ports"), "{e}");
}

#[test]
fn the_resolver_agrees_with_kubectl_kustomize_where_it_exists() {
    let probe = Command::new("kubectl")
        .args(["version", "--client"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("kubectl not found: the comparison with kubectl kustomize is skipped");
        return;
    }
    for overlay in OVERLAYS {
        let dir = deploy_dir().join("overlays").join(overlay);
        let out = Command::new("kubectl")
            .arg("kustomize")
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &out.stdout).unwrap();
        let mut theirs = kustomize::parse_yaml_file(file.path()).unwrap();
        let mut ours = rendered(overlay);
        theirs.sort_by_key(id);
        ours.sort_by_key(id);
        assert_eq!(ours.len(), theirs.len(), "{overlay}");
        for (a, b) in ours.iter().zip(&theirs) {
            assert_eq!(a, b, "{overlay}: {} differs from kubectl kustomize", id(a));
        }
    }
}

#[test]
fn labels_selectors_services_rbac_wiring_and_image_agree() {
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        let deploy = workload(&objects);
        let pod_labels = &deploy["spec"]["template"]["metadata"]["labels"];
        let pod = &deploy["spec"]["template"]["spec"];
        assert!(
            selects(&deploy["spec"]["selector"]["matchLabels"], pod_labels),
            "{overlay}"
        );
        let s = one(&objects, "Service", "fleetshard-metrics");
        assert!(selects(&s["spec"]["selector"], pod_labels), "{overlay}");
        assert_eq!(s["spec"]["ports"][0]["targetPort"], "http");
        let pdb = one(&objects, "PodDisruptionBudget", "fleetshard");
        assert_eq!(pdb["spec"]["maxUnavailable"], 1);
        assert!(selects(&pdb["spec"]["selector"]["matchLabels"], pod_labels));
        let spread = pod["topologySpreadConstraints"].as_array().unwrap();
        assert!(
            spread
                .iter()
                .any(|t| t["topologyKey"] == "topology.kubernetes.io/zone")
        );
        for t in spread {
            assert!(
                selects(&t["labelSelector"]["matchLabels"], pod_labels),
                "{overlay}"
            );
        }
        assert_eq!(pod["serviceAccountName"], "fleetshard");
        one(&objects, "ServiceAccount", "fleetshard");
        for rb in objects.iter().filter(|o| o["kind"] == "RoleBinding") {
            let role = rb["roleRef"]["name"].as_str().unwrap();
            assert_eq!(rb["roleRef"]["kind"], "Role");
            one(&objects, "Role", role);
            assert_eq!(rb["subjects"][0]["kind"], "ServiceAccount");
            assert_eq!(rb["subjects"][0]["name"], "fleetshard");
            assert_eq!(
                rb["subjects"][0]["namespace"],
                deploy["metadata"]["namespace"]
            );
        }
        for m in container(&objects)["volumeMounts"].as_array().unwrap() {
            volume(pod, m["name"].as_str().unwrap());
        }
        assert_eq!(container(&objects)["image"], "fleetshard:dev");
    }
}

#[test]
fn security_context_resources_and_probes() {
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        let pod = &workload(&objects)["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        let c = container(&objects);
        let sc = &c["securityContext"];
        assert_eq!(sc["runAsNonRoot"], true, "{overlay}");
        assert_eq!(sc["readOnlyRootFilesystem"], true);
        assert_eq!(sc["allowPrivilegeEscalation"], false);
        assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
        assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
        for kind in ["requests", "limits"] {
            for r in ["cpu", "memory"] {
                assert!(c["resources"][kind][r].is_string(), "{overlay}: {kind}.{r}");
            }
        }
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
        let listen = listen_arg(c);
        assert_eq!(listen, "0.0.0.0:8080", "{overlay}");
        let port: u64 = listen.rsplit(':').next().unwrap().parse().unwrap();
        for probe in ["livenessProbe", "readinessProbe"] {
            let named = &c[probe]["httpGet"]["port"];
            let p = c["ports"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == *named);
            assert_eq!(p.unwrap()["containerPort"], port, "{overlay}: {probe}");
        }
    }
}

/// The pod's volume `name` (panics unless there is exactly one).
fn volume<'a>(pod: &'a Value, name: &str) -> &'a Value {
    let found: Vec<&Value> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "expected one volume {name}");
    found[0]
}

/// The root file system is read-only, so every path the replica writes must be on a
/// writable volume: the repository cache (`--repo-cache`; without it, the system's
/// temporary directory, which is read-only too).
#[test]
fn every_written_path_is_a_writable_volume() {
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        let pod = &workload(&objects)["spec"]["template"]["spec"];
        let c = container(&objects);
        assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
        let cache = env_value(c, "FLEETSHARD_REPO_CACHE")
            .unwrap_or_else(|| panic!("{overlay}: no FLEETSHARD_REPO_CACHE"));
        let mount = mount_holding(c, &cache)
            .unwrap_or_else(|| panic!("{overlay}: {cache} is on no volume"));
        assert_ne!(mount["readOnly"], true, "{overlay}: {cache} is read-only");
        let v = volume(pod, mount["name"].as_str().unwrap());
        assert!(v["emptyDir"].is_object(), "{overlay}: {v}");
    }
}

/// A replica in a deployment serves /healthz, /readyz and /metrics on every interface
/// and nothing else: the dashboard (cluster servers, app names, unauthenticated) is off,
/// and a NetworkPolicy admits the one port. (The run against the fake control plane,
/// `replica.rs`, checks the served routes.)
#[test]
fn the_dashboard_is_off_and_a_policy_admits_only_the_http_port() {
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        let c = container(&objects);
        let args = c["args"].as_array().unwrap();
        assert!(
            !args.iter().any(|a| a == "--dashboard"),
            "{overlay}: the dashboard is on"
        );
        assert_eq!(env_value(c, "FLEETSHARD_DASHBOARD"), None, "{overlay}");
        let policy = one(&objects, "NetworkPolicy", "fleetshard");
        let pod_labels = &workload(&objects)["spec"]["template"]["metadata"]["labels"];
        assert!(
            selects(&policy["spec"]["podSelector"]["matchLabels"], pod_labels),
            "{overlay}: the policy selects fleetshard's pods"
        );
        assert_eq!(
            policy["spec"]["policyTypes"],
            serde_json::json!(["Ingress"])
        );
        let ports: Vec<&Value> = policy["spec"]["ingress"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|rule| rule["ports"].as_array().expect("every rule names ports"))
            .collect();
        let served: Vec<&Value> = c["ports"].as_array().unwrap().iter().collect();
        assert_eq!(served.len(), 1, "{overlay}: one port served");
        assert_eq!(ports.len(), 1, "{overlay}: one port admitted");
        assert_eq!(ports[0]["port"], served[0]["containerPort"], "{overlay}");
        assert_eq!(ports[0]["protocol"], "TCP");
    }
}

/// The repo-server's certificate is verified against the CA of Argo CD's Secret
/// `argocd-repo-server-tls`: the variable names a file of a read-only mount of that
/// Secret's `ca.crt`, where Argo CD's controller mounts it; nothing turns verification off.
#[test]
fn the_repo_server_is_verified_against_argo_cds_ca() {
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        let pod = &workload(&objects)["spec"]["template"]["spec"];
        let c = container(&objects);
        let path = env_value(c, "FLEETSHARD_REPO_SERVER_CA_CERT_PATH")
            .unwrap_or_else(|| panic!("{overlay}: no CA"));
        assert_eq!(path, "/app/config/controller/tls/ca.crt", "{overlay}");
        let mount =
            mount_holding(c, &path).unwrap_or_else(|| panic!("{overlay}: {path} is on no volume"));
        assert_eq!(mount["readOnly"], true);
        let secret = &volume(pod, mount["name"].as_str().unwrap())["secret"];
        assert_eq!(secret["secretName"], "argocd-repo-server-tls", "{overlay}");
        assert_eq!(
            secret["items"],
            serde_json::json!([{"key": "ca.crt", "path": "ca.crt"}])
        );
        for off in [
            "FLEETSHARD_REPO_SERVER_INSECURE_SKIP_TLS_VERIFY",
            "FLEETSHARD_REPO_SERVER_PLAINTEXT",
        ] {
            assert_eq!(env_value(c, off), None, "{overlay}: {off}");
        }
        let args = c["args"].as_array().unwrap();
        assert!(
            !args
                .iter()
                .any(|a| a == "--repo-server-insecure-skip-tls-verify"
                    || a == "--repo-server-plaintext"),
            "{overlay}"
        );
    }
}

/// The container's volume mount whose path holds `path`.
fn mount_holding<'a>(c: &'a Value, path: &str) -> Option<&'a Value> {
    c["volumeMounts"].as_array()?.iter().find(|m| {
        m["mountPath"]
            .as_str()
            .is_some_and(|p| Path::new(path).starts_with(p))
    })
}

/// The literal value of the container's variable `name`.
fn env_value(c: &Value, name: &str) -> Option<String> {
    c["env"].as_array()?.iter().find(|e| e["name"] == name)?["value"]
        .as_str()
        .map(str::to_owned)
}

fn listen_arg(c: &Value) -> String {
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let i = args
        .iter()
        .position(|a| *a == "--listen")
        .expect("--listen");
    args[i + 1].to_owned()
}

#[test]
fn every_flag_and_variable_is_one_the_binary_reads() {
    let help = run_help();
    // Argo CD's variables are read by Settings::from_env, not clap, so --help cannot list
    // them; these are the ones it reads.
    let argo_vars = [
        ENV_DYNAMIC,
        ENV_REPLICAS,
        ENV_HEARTBEAT_TIME,
        ENV_SHARD,
        ARGOCD_CONTROLLER_NAME_ENV,
    ];
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        let c = container(&objects);
        let args: Vec<&str> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(args[0], "run", "{overlay}");
        for flag in args.iter().filter(|a| a.starts_with("--")) {
            assert!(
                help.contains(&format!("{flag} ")),
                "{overlay}: run has no {flag}"
            );
        }
        let mut defined = BTreeSet::new();
        for e in c["env"].as_array().unwrap() {
            let name = e["name"].as_str().unwrap();
            if name.starts_with("FLEETSHARD_") {
                assert!(
                    help.contains(&format!("[env: {name}=")),
                    "{overlay}: run does not read {name}"
                );
            } else if name.starts_with("ARGOCD_") {
                assert!(
                    argo_vars.contains(&name) || help.contains(&format!("[env: {name}=")),
                    "{overlay}: run does not read {name}"
                );
            }
            // Kubernetes expands $(VAR) only from variables defined earlier in the list.
            let value = e["value"].as_str().unwrap_or_default();
            for r in value.split("$(").skip(1) {
                let var = r.split(')').next().unwrap();
                assert!(
                    defined.contains(var),
                    "{overlay}: {name} uses $({var}) before it is defined"
                );
            }
            defined.insert(name.to_owned());
        }
    }
}

#[test]
fn fenced_replica_runs_with_exactly_the_rbac_it_is_granted() {
    replica::run_overlay_against_rbac("fenced", replica::Start::Fresh);
}

#[test]
fn argocd_replica_runs_with_exactly_the_rbac_it_is_granted() {
    replica::run_overlay_against_rbac("argocd", replica::Start::Fresh);
}

/// docs/deploying.md's switch, rehearsed: Argo CD's controller synced the app and stopped
/// (its shard map entry goes stale); the replica takes the shard over, finds the app synced
/// and writes nothing to the destination; on SIGTERM it frees the map for Argo CD's
/// controller to come back.
#[test]
fn argocd_replica_takes_over_from_a_stopped_argo_cd_controller_and_hands_back() {
    replica::run_overlay_against_rbac("argocd", replica::Start::AfterArgoCd);
}

#[test]
fn the_authorizer_refuses_what_no_rule_allows() {
    let objects = rendered("argocd");
    let rules = granted(&objects);
    let req = |verb, resource: &str, name: Option<&str>, ns: &str| RequestInfo {
        verb: Some(verb),
        resource: resource.into(),
        name: name.map(Into::into),
        namespace: Some(ns.into()),
        ..RequestInfo::default()
    };
    let cm = "argocd-app-controller-shard-cm";
    assert!(allows(
        &rules,
        &req(Verb::Update, "configmaps", Some(cm), "argocd")
    ));
    assert!(!allows(
        &rules,
        &req(Verb::Update, "configmaps", Some("argocd-cm"), "argocd")
    ));
    assert!(!allows(
        &rules,
        &req(Verb::Update, "configmaps", Some(cm), "default")
    ));
    assert!(!allows(
        &rules,
        &req(Verb::Delete, "configmaps", Some(cm), "argocd")
    ));
    assert!(allows(
        &rules,
        &req(Verb::Create, "configmaps", None, "argocd")
    ));
    // The namespace's own object (its uid: the store's identity), and no other namespace.
    let namespace = |verb, name: Option<&str>| RequestInfo {
        verb: Some(verb),
        resource: "namespaces".into(),
        name: name.map(Into::into),
        ..RequestInfo::default()
    };
    assert!(allows(&rules, &namespace(Verb::Get, Some("argocd"))));
    assert!(!allows(&rules, &namespace(Verb::Get, Some("default"))));
    assert!(!allows(&rules, &namespace(Verb::List, None)));
    assert!(!allows(&rules, &namespace(Verb::Delete, Some("argocd"))));
}

/// The one ConfigMap of Argo CD's namespace a replica may write: Argo CD's own shard map,
/// shared with Argo CD's controller in Argo CD-compatible mode (`coord::argocd`).
const WRITABLE_BY_NAME: &[&str] = &["argocd-app-controller-shard-cm"];

/// Grants to create ConfigMaps or Secrets in Argo CD's namespace, by overlay and Role, with
/// the reason: Kubernetes cannot restrict `create` by name (the name is in the body).
/// Creating cannot overwrite: argocd-cm, argocd-rbac-cm and the cluster Secrets exist in
/// every Argo CD installation, and a create of an existing name is refused (409).
const CREATE_GRANTED: &[(&str, &str, &str, &str)] = &[(
    "argocd",
    "fleetshard-store",
    "configmaps",
    "argocd-app-controller-shard-cm is created by whichever controller writes it first",
)];

const WRITE_VERBS: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

/// What the Roles of `objects` let anyone write among the ConfigMaps and Secrets of
/// `namespace` beyond [`WRITABLE_BY_NAME`] and [`CREATE_GRANTED`]: one line per grant.
/// Wildcards (`*` groups, resources or verbs) count as everything; ClusterRoles apply in
/// every namespace.
fn control_plane_writes(overlay: &str, objects: &[Value], namespace: &str) -> Vec<String> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let mut found = Vec::new();
    for role in objects.iter().filter(|o| {
        o["kind"] == "ClusterRole"
            || (o["kind"] == "Role" && o["metadata"]["namespace"] == namespace)
    }) {
        let name = role["metadata"]["name"].as_str().unwrap_or("?");
        for rule in role["rules"].as_array().into_iter().flatten() {
            let groups = strings(&rule["apiGroups"]);
            if !groups.iter().any(|g| g.is_empty() || g == "*") {
                continue;
            }
            let names = strings(&rule["resourceNames"]);
            let verbs = strings(&rule["verbs"]);
            for resource in strings(&rule["resources"]) {
                let targets: &[&str] = match resource.as_str() {
                    "*" => &["configmaps", "secrets"],
                    "configmaps" => &["configmaps"],
                    "secrets" => &["secrets"],
                    _ => &[],
                };
                for target in targets {
                    for verb in WRITE_VERBS {
                        if !verbs.iter().any(|v| v == verb || v == "*") {
                            continue;
                        }
                        let allowed = if *verb == "create" {
                            CREATE_GRANTED
                                .iter()
                                .any(|(o, r, res, _)| (*o, *r, *res) == (overlay, name, *target))
                        } else {
                            !names.is_empty()
                                && names.iter().all(|n| WRITABLE_BY_NAME.contains(&n.as_str()))
                        };
                        if !allowed {
                            found.push(format!(
                                "{} {name}: {verb} {target} (resourceNames {names:?})",
                                role["kind"].as_str().unwrap_or("?")
                            ));
                        }
                    }
                }
            }
        }
    }
    found
}

/// Argo CD's control plane (cluster and repository Secrets, argocd-cm, argocd-rbac-cm) is
/// in the replicas' namespace: no Role there may write a ConfigMap or Secret other than by
/// name, and the names are Argo CD's shard map alone. The fenced store, whose record names
/// derive from keys, writes in a namespace of its own.
#[test]
fn no_role_writes_the_control_planes_config_maps_or_secrets_but_by_name() {
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        let namespace = workload(&objects)["metadata"]["namespace"]
            .as_str()
            .unwrap()
            .to_owned();
        let found = control_plane_writes(overlay, &objects, &namespace);
        assert!(found.is_empty(), "{overlay}: in {namespace}: {found:#?}");
    }
    // A checker that found nothing anywhere would make that meaningless: the fenced
    // store's Role as it was (every ConfigMap of Argo CD's namespace), a wildcard, a
    // ClusterRole, and a rule by name that names Argo CD's RBAC policy.
    let role = |kind: &str, rules: Value| {
        serde_json::json!({"kind": kind, "metadata": {"name": "r", "namespace": "argocd"},
            "rules": rules})
    };
    let objects = [
        role(
            "Role",
            serde_json::json!([{"apiGroups": [""], "resources": ["configmaps"],
                "verbs": ["get", "update", "delete"]}]),
        ),
        role(
            "Role",
            serde_json::json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
        ),
        role(
            "ClusterRole",
            serde_json::json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["patch"]}]),
        ),
        role(
            "Role",
            serde_json::json!([{"apiGroups": [""], "resources": ["configmaps"],
                "resourceNames": ["argocd-app-controller-shard-cm", "argocd-rbac-cm"],
                "verbs": ["update"]}]),
        ),
    ];
    let found = control_plane_writes("argocd", &objects, "argocd");
    assert_eq!(found.len(), 2 + 10 + 1 + 1, "{found:#?}");
    assert!(control_plane_writes("argocd", &objects, "elsewhere").len() == 1);
}
