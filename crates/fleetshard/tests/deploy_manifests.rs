//! `deploy/`: the Kustomize overlays render (with the subset resolver in
//! `deploy_manifests/kustomize.rs`, and with `kubectl kustomize` too where it exists), and
//! what they describe works with the binary as built:
//! - every flag and `FLEETSHARD_*`/`ARGOCD_*` variable the container gets is one `fleetshard
//!   run` reads, and `$(VAR)` references only variables defined before them;
//! - labels and selectors, the Service, PDB, RBAC wiring and the image agree;
//! - the security settings are present; probes point at the served port and paths;
//! - the strongest check: `fleetshard run` is started with the StatefulSet's exact args and
//!   env (downward API and the ConfigMap volume resolved as the kubelet would) against the
//!   fake API server, which refuses (403) every request the overlay's Roles do not allow, as
//!   Kubernetes' RBAC authorizer would. The replica must become ready, survive its watches
//!   ending, and release on SIGTERM with no request refused; and every rule must be used by
//!   the run or listed below with the reason it was not.

#[path = "deploy_manifests/kustomize.rs"]
mod kustomize;

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fleetshard_coord::argocd::{ENV_DYNAMIC, ENV_HEARTBEAT_TIME, ENV_REPLICAS, ENV_SHARD};
use fleetshard_testsupport::kube_api::{FakeApiServer, FaultAction, RequestInfo, Verb};
use kustomize::{id, render};
use serde_json::Value;

const OVERLAYS: &[&str] = &["fenced", "argocd"];
/// The pod name the downward API gives the first replica.
const POD_NAME: &str = "fleetshard-0";

/// Rules granted for calls no code makes yet: the controller runtime (issue 4;
/// deploy/base/role.yaml says why each is needed).
const PLANNED: &[(&str, &str, &str)] = &[
    ("", "secrets", "get"),
    ("", "secrets", "list"),
    ("", "secrets", "watch"),
    ("argoproj.io", "applications", "get"),
    ("argoproj.io", "applications", "list"),
    ("argoproj.io", "applications", "watch"),
    ("argoproj.io", "applications", "patch"),
];

/// Rules the store uses only in situations a short run with a small fleet does not reach.
fn not_exercised(overlay: &str) -> &'static [(&'static str, &'static str, &'static str)] {
    match overlay {
        // coord/src/store/chunked.rs: an assignment over 512 KiB is stored as parts, read
        // back with get and collected with delete two writes later.
        // And the assignment ConfigMap is rewritten (a PUT at its resourceVersion,
        // store-kube ops.rs put_record) by every generation after the first; a lone
        // replica over an unchanging fleet commits only the first (a create).
        "fenced" => &[
            ("", "configmaps", "get"),
            ("", "configmaps", "delete"),
            ("", "configmaps", "update"),
        ],
        // store-kube list.rs current_revision: a one-item Lease list reads the store's
        // revision when `wait_for_change` runs without the watch cache (cache off, or more
        // scopes than it keeps); with the cache, as here, it is not reached.
        "argocd" => &[("coordination.k8s.io", "leases", "list")],
        _ => &[],
    }
}

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

fn statefulset(objects: &[Value]) -> &Value {
    one(objects, "StatefulSet", "fleetshard")
}

fn container(objects: &[Value]) -> &Value {
    &statefulset(objects)["spec"]["template"]["spec"]["containers"][0]
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
        assert_eq!(
            kinds,
            [
                "ConfigMap/fleetshard-fleet",
                "PodDisruptionBudget/fleetshard",
                "Role/fleetshard",
                "Role/fleetshard-store",
                "RoleBinding/fleetshard",
                "RoleBinding/fleetshard-store",
                "Service/fleetshard-headless",
                "Service/fleetshard-metrics",
                "ServiceAccount/fleetshard",
                "StatefulSet/fleetshard",
            ],
            "{overlay}"
        );
        for o in &objects {
            assert_eq!(o["metadata"]["namespace"], "argocd", "{overlay}: {}", id(o));
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
        let sts = statefulset(&objects);
        let pod_labels = &sts["spec"]["template"]["metadata"]["labels"];
        let pod = &sts["spec"]["template"]["spec"];
        assert!(
            selects(&sts["spec"]["selector"]["matchLabels"], pod_labels),
            "{overlay}"
        );
        let headless = one(&objects, "Service", "fleetshard-headless");
        assert_eq!(sts["spec"]["serviceName"], "fleetshard-headless");
        assert_eq!(headless["spec"]["clusterIP"], "None");
        for svc in ["fleetshard-headless", "fleetshard-metrics"] {
            let s = one(&objects, "Service", svc);
            assert!(
                selects(&s["spec"]["selector"], pod_labels),
                "{overlay}: {svc}"
            );
            assert_eq!(s["spec"]["ports"][0]["targetPort"], "http", "{svc}");
        }
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
            assert_eq!(rb["subjects"][0]["namespace"], rb["metadata"]["namespace"]);
        }
        let cm = pod["volumes"][0]["configMap"]["name"].as_str().unwrap();
        one(&objects, "ConfigMap", cm);
        assert_eq!(container(&objects)["image"], "fleetshard:dev");
    }
}

#[test]
fn security_context_resources_and_probes() {
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        let pod = &statefulset(&objects)["spec"]["template"]["spec"];
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
    let argo_vars = [ENV_DYNAMIC, ENV_REPLICAS, ENV_HEARTBEAT_TIME, ENV_SHARD];
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

/// One role rule, as the authorizer reads it.
struct Rule {
    groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    names: Vec<String>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map_or_else(Vec::new, |a| {
        a.iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    })
}

/// The rules of every Role bound to the ServiceAccount, with each Role's name.
fn granted(objects: &[Value]) -> Vec<(String, Rule)> {
    let mut out = Vec::new();
    for rb in objects.iter().filter(|o| o["kind"] == "RoleBinding") {
        let role = one(objects, "Role", rb["roleRef"]["name"].as_str().unwrap());
        for r in role["rules"].as_array().unwrap() {
            out.push((
                role["metadata"]["name"].as_str().unwrap().to_owned(),
                Rule {
                    groups: strings(&r["apiGroups"]),
                    resources: strings(&r["resources"]),
                    verbs: strings(&r["verbs"]),
                    names: strings(&r["resourceNames"]),
                },
            ));
        }
    }
    out
}

fn verb_name(v: Verb) -> &'static str {
    match v {
        Verb::Get => "get",
        Verb::List => "list",
        Verb::Watch => "watch",
        Verb::Create => "create",
        Verb::Update => "update",
        Verb::Patch => "patch",
        Verb::Delete => "delete",
        Verb::DeleteCollection => "deletecollection",
        Verb::Discovery => "discovery",
    }
}

/// Kubernetes RBAC for a namespaced request: some rule matches group, resource, verb and,
/// when it lists resourceNames, the request's name (create and plain lists have none).
fn allows(rules: &[(String, Rule)], namespace: &str, r: &RequestInfo) -> bool {
    let Some(verb) = r.verb else { return false };
    if verb == Verb::Discovery {
        return true; // every authenticated user may (system:discovery)
    }
    let resource = match &r.subresource {
        Some(s) => format!("{}/{s}", r.resource),
        None => r.resource.clone(),
    };
    r.namespace.as_deref() == Some(namespace)
        && rules.iter().any(|(_, rule)| {
            rule.groups.contains(&r.group)
                && rule.resources.contains(&resource)
                && rule.verbs.iter().any(|v| v == verb_name(verb))
                && (rule.names.is_empty()
                    || r.name.as_ref().is_some_and(|n| rule.names.contains(n)))
        })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// HTTP status of GET `path`, or None when nothing answers.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split(' ').nth(1)?.parse().ok()
}

/// Polls `cond` every 50 ms until it holds or `secs` pass.
fn wait_until(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..secs * 20 {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out after {secs} s waiting for {what}");
}

type Seen = Arc<Mutex<Vec<RequestInfo>>>;

fn run_overlay_against_rbac(overlay: &str) {
    let objects = rendered(overlay);
    let namespace = statefulset(&objects)["metadata"]["namespace"]
        .as_str()
        .unwrap()
        .to_owned();
    let rules = Arc::new(granted(&objects));
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(FakeApiServer::start()).unwrap();
    server.create_namespace(&namespace).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let seen: Seen = Arc::default();
    let denied: Seen = Arc::default();
    let (s, d, r, ns) = (
        seen.clone(),
        denied.clone(),
        rules.clone(),
        namespace.clone(),
    );
    // The RBAC authorizer: refuses what the Roles do not allow, as the real one would.
    server.inject(
        None,
        FaultAction::Fail {
            code: 403,
            retry_after: None,
        },
        move |info| {
            s.lock().unwrap().push(info.clone());
            let refuse = !allows(&r, &ns, info);
            if refuse {
                d.lock().unwrap().push(info.clone());
            }
            refuse
        },
    );

    // The container as the kubelet starts it: the ConfigMap volume, the downward API,
    // $(VAR) expansion; only the listen port changes (tests run in parallel).
    let c = container(&objects);
    let pod = &statefulset(&objects)["spec"]["template"]["spec"];
    let mut mounts = Vec::new();
    for m in c["volumeMounts"].as_array().unwrap() {
        let vol = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == m["name"])
            .unwrap();
        let cm = one(
            &objects,
            "ConfigMap",
            vol["configMap"]["name"].as_str().unwrap(),
        );
        let local = dir.path().join(m["name"].as_str().unwrap());
        std::fs::create_dir_all(&local).unwrap();
        for (k, v) in cm["data"].as_object().unwrap() {
            std::fs::write(local.join(k), v.as_str().unwrap()).unwrap();
        }
        mounts.push((
            m["mountPath"].as_str().unwrap().to_owned(),
            local.display().to_string(),
        ));
    }
    let mut env: Vec<(String, String)> = Vec::new();
    for e in c["env"].as_array().unwrap() {
        let mut value = match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
            Some("metadata.name") => POD_NAME.to_owned(),
            Some("metadata.namespace") => namespace.clone(),
            Some(other) => panic!("{overlay}: fieldRef {other} not simulated"),
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
    let port = free_port();
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
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("stderr")).unwrap())
        .spawn()
        .unwrap();
    let log = || std::fs::read_to_string(dir.path().join("stderr")).unwrap_or_default();
    let ready = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_until(60, "/healthz", || {
            http_status(port, "/healthz") == Some(200)
        });
        wait_until(60, "/readyz", || http_status(port, "/readyz") == Some(200));
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
        panic!("{overlay}: {e:?}\nlog:\n{}", log());
    }
    assert!(
        status.unwrap().success(),
        "{overlay}: exit {status:?}\n{}",
        log()
    );

    let denied = denied.lock().unwrap();
    assert!(
        denied.is_empty(),
        "{overlay}: refused by RBAC: {denied:#?}\nlog:\n{}",
        log()
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
    for (role, rule) in rules.iter() {
        for g in &rule.groups {
            for r in &rule.resources {
                for v in &rule.verbs {
                    let t = (g.as_str(), r.as_str(), v.as_str());
                    let explained = PLANNED.contains(&t) || not_exercised(overlay).contains(&t);
                    if !used.contains(&(g.clone(), r.clone(), v.clone())) && !explained {
                        unused.push(format!("{role}: {g}/{r} {v}"));
                    }
                    // The controller runtime's Role must not be what the store relies on.
                    if role == "fleetshard" {
                        assert!(PLANNED.contains(&t), "{overlay}: {role} grants {t:?}");
                    }
                }
            }
        }
    }
    assert!(
        unused.is_empty(),
        "{overlay}: granted but never used: {unused:?}; used: {used:?}"
    );
    eprintln!("{overlay}: requests made {used:?}");
}

#[test]
fn fenced_replica_runs_with_exactly_the_rbac_it_is_granted() {
    run_overlay_against_rbac("fenced");
}

#[test]
fn argocd_replica_runs_with_exactly_the_rbac_it_is_granted() {
    run_overlay_against_rbac("argocd");
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
        "argocd",
        &req(Verb::Update, "configmaps", Some(cm), "argocd")
    ));
    assert!(!allows(
        &rules,
        "argocd",
        &req(Verb::Update, "configmaps", Some("argocd-cm"), "argocd")
    ));
    assert!(!allows(
        &rules,
        "argocd",
        &req(Verb::Update, "configmaps", Some(cm), "default")
    ));
    assert!(!allows(
        &rules,
        "argocd",
        &req(Verb::Delete, "configmaps", Some(cm), "argocd")
    ));
    assert!(allows(
        &rules,
        "argocd",
        &req(Verb::Create, "configmaps", None, "argocd")
    ));
}
