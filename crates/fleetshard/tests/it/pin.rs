//! `fleetshard pin` against the fake API server: Argo CD's cluster Secrets and
//! Applications in namespace `argocd`, the shards written into the Secrets' `data.shard`.
//! Balance is checked here independently of the planner: each cluster's load is its base
//! (5) plus its apps, summed by the shard Argo CD's controller runs it on.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use fleetshard_testsupport::kube_api::{FakeApiServer, Verb};
use serde_json::{Value, json};

use crate::run_kube::start_fake;
use crate::support::replicas::fleetshard;
use crate::support::{KillOnDrop, signal, wait_for};

const REPLICAS: u32 = 3;
const BASE_LOAD: u64 = 5;
const WAIT: Duration = Duration::from_secs(60);

/// Cluster `i` has `apps_of(i)` Applications.
fn apps_of(i: usize) -> usize {
    i % 4
}

fn server_of(i: usize) -> String {
    format!("https://c{i}.example")
}

fn cluster_secret(i: usize, shard: Option<&str>, manual: bool) -> Value {
    let mut data = json!({
        "name": STANDARD.encode(format!("c{i}")),
        "server": STANDARD.encode(server_of(i)),
    });
    if let Some(s) = shard {
        data["shard"] = json!(STANDARD.encode(s));
    }
    let mut secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        // A fixed uid: the uid is the cluster's id, and so what balanced placement hashes.
        // The fake would draw a random one, and with it a different plan in every run.
        "metadata": {"name": format!("cluster-c{i}"), "namespace": "argocd",
                     "uid": format!("00000000-0000-4000-8000-{i:012}"),
                     "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
        "data": data,
    });
    if manual {
        secret["metadata"]["annotations"] = json!({"fleetshard.io/pin": "manual"});
    }
    secret
}

fn application(cluster: usize, n: usize) -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": format!("app-{cluster}-{n}"), "namespace": "argocd"},
        "spec": {
            "project": "default",
            "source": {"repoURL": "https://git.example/repo.git", "path": "app", "targetRevision": "HEAD"},
            "destination": {"server": server_of(cluster), "namespace": "default"},
        },
    })
}

/// A fake with Argo CD's CRDs, `clusters` Secrets (none pinned) and their apps.
struct Fake {
    _rt: tokio::runtime::Runtime,
    server: Arc<FakeApiServer>,
    kubeconfig: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

fn fake(clusters: usize) -> Fake {
    let dir = tempfile::tempdir().unwrap();
    let (rt, server, kubeconfig) = start_fake(dir.path());
    server.create_namespace("argocd").unwrap();
    for i in 0..clusters {
        add_cluster(&server, i, None, false);
    }
    Fake {
        _rt: rt,
        server: Arc::new(server),
        kubeconfig,
        _dir: dir,
    }
}

fn add_cluster(server: &FakeApiServer, i: usize, shard: Option<&str>, manual: bool) {
    server.insert(cluster_secret(i, shard, manual)).unwrap();
    for n in 0..apps_of(i) {
        server.insert(application(i, n)).unwrap();
    }
}

fn pin(kubeconfig: &Path, extra: &[&str]) -> Output {
    let out = fleetshard()
        .env("KUBECONFIG", kubeconfig)
        .args(["pin", "--argocd-namespace", "argocd", "--replicas"])
        .arg(REPLICAS.to_string())
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pin failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

/// Each cluster Secret's `data.shard` (decoded), by Secret name.
fn shards(server: &FakeApiServer) -> BTreeMap<String, Option<String>> {
    server
        .list("v1", "Secret", Some("argocd"))
        .into_iter()
        .map(|s| {
            let shard = s["data"]["shard"]
                .as_str()
                .map(|b| String::from_utf8(STANDARD.decode(b).unwrap()).unwrap());
            (s["metadata"]["name"].as_str().unwrap().to_owned(), shard)
        })
        .collect()
}

fn resource_versions(server: &FakeApiServer) -> BTreeMap<String, String> {
    server
        .list("v1", "Secret", Some("argocd"))
        .into_iter()
        .map(|s| {
            (
                s["metadata"]["name"].as_str().unwrap().to_owned(),
                s["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect()
}

/// Load per shard as Argo CD's controller runs the Secrets (a shard ≥ replicas runs on
/// 0), with its built-in in-cluster entry (no apps) on shard 0, where legacy runs it;
/// panics on a Secret with no usable shard.
fn loads(shards: &BTreeMap<String, Option<String>>) -> Vec<u64> {
    let mut loads = vec![0; REPLICAS as usize];
    loads[0] += BASE_LOAD;
    for (name, shard) in shards {
        let i: usize = name.trim_start_matches("cluster-c").parse().unwrap();
        let s: u32 = shard
            .as_deref()
            .unwrap_or_else(|| panic!("{name} has no shard"))
            .parse()
            .unwrap();
        let s = if s >= REPLICAS { 0 } else { s };
        loads[s as usize] += BASE_LOAD + apps_of(i) as u64;
    }
    loads
}

/// Every shard within (1 + 10 %) of the mean (equal capacities).
fn assert_balanced(loads: &[u64]) {
    let mean = loads.iter().sum::<u64>() as f64 / loads.len() as f64;
    for (s, l) in loads.iter().enumerate() {
        assert!(
            *l as f64 <= 1.10 * mean + 1e-9,
            "shard {s} carries {l}, above 1.1 × the mean {mean:.1}: {loads:?}"
        );
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn dry_run_prints_the_diff_and_writes_nothing() {
    let f = fake(9);
    add_cluster(&f.server, 9, Some("abc"), false);
    add_cluster(&f.server, 10, Some("7"), false);
    let before = shards(&f.server);
    let out = pin(&f.kubeconfig, &["--dry-run"]);
    let text = stdout(&out);
    assert_eq!(shards(&f.server), before);
    assert_eq!(f.server.request_count(Verb::Patch, "secrets"), 0);
    assert_eq!(f.server.write_count(), 0, "{:?}", f.server.request_counts());
    assert!(text.contains("dry run: nothing written"), "{text}");
    // Every cluster, its server and the Secret, old shard -> new shard.
    for i in 0..11 {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("argocd/cluster-c{i} ")))
            .unwrap_or_else(|| panic!("no line for cluster-c{i}:\n{text}"));
        assert!(line.contains(&server_of(i)), "{line}");
        let old = match i {
            9 => "\"abc\" -> ",
            10 => "7 -> ",
            _ => "- -> ",
        };
        assert!(line.contains(old), "{line}");
    }
    // Bad values are named, with the field, and reassigned.
    assert!(
        text.contains("Secret argocd/cluster-c9: data.shard: \"abc\" is not an integer"),
        "{text}"
    );
    assert!(
        text.contains("Secret argocd/cluster-c10: data.shard: 7 is outside 0..3"),
        "{text}"
    );
    // Per-shard load before and after; the in-cluster entry is named as not pinnable.
    assert!(text.contains("SHARD  CLUSTERS"), "{text}");
    assert!(text.contains("cannot be pinned"), "{text}");
}

#[test]
fn a_run_writes_balanced_pins_a_second_moves_nothing_new_clusters_move_few() {
    let f = fake(30);
    let out = pin(&f.kubeconfig, &[]);
    let first = shards(&f.server);
    assert_balanced(&loads(&first));
    assert!(
        stdout(&out).contains("Wrote the shard of 30 Secret(s)"),
        "{}",
        stdout(&out)
    );
    // Writes are merge patches of data.shard only: the other keys stand.
    let c0 = f
        .server
        .get("v1", "Secret", "argocd", "cluster-c0")
        .unwrap();
    assert_eq!(c0["data"]["server"], json!(STANDARD.encode(server_of(0))));

    let patches = f.server.request_count(Verb::Patch, "secrets");
    let out = pin(&f.kubeconfig, &[]);
    assert_eq!(f.server.request_count(Verb::Patch, "secrets"), patches);
    assert_eq!(shards(&f.server), first);
    assert!(stdout(&out).contains("0 to pin"), "{}", stdout(&out));

    for i in 30..33 {
        add_cluster(&f.server, i, None, false);
    }
    pin(&f.kubeconfig, &[]);
    let grown = shards(&f.server);
    assert_balanced(&loads(&grown));
    let moved: Vec<_> = first
        .iter()
        .filter(|(name, shard)| grown[*name] != **shard)
        .collect();
    assert!(moved.len() <= 3, "3 new clusters moved {moved:?}");
    assert!((30..33).all(|i| grown[&format!("cluster-c{i}")].is_some()));
}

#[test]
fn manual_pins_are_left_alone_and_count_toward_their_shard() {
    let f = fake(24);
    for i in 24..28 {
        add_cluster(&f.server, i, Some("0"), true);
    }
    // Pinned by hand out of range: Argo CD runs it on shard 0; left alone all the same.
    add_cluster(&f.server, 28, Some("9"), true);
    let manual_before: BTreeMap<_, _> = resource_versions(&f.server)
        .into_iter()
        .filter(|(n, _)| n.as_str() >= "cluster-c24" && n.len() == "cluster-c24".len())
        .collect();
    assert_eq!(manual_before.len(), 5);
    let out = pin(&f.kubeconfig, &[]);
    let after = resource_versions(&f.server);
    for (name, rv) in &manual_before {
        assert_eq!(&after[name], rv, "{name} was written");
    }
    assert!(
        stdout(&out).contains("Secret argocd/cluster-c28: data.shard: 9 is outside 0..3"),
        "{}",
        stdout(&out)
    );
    assert_balanced(&loads(&shards(&f.server)));
}

#[test]
fn a_concurrent_edit_is_read_again_never_overwritten() {
    let f = fake(12);
    // On the first PATCH of a Secret, someone pins that Secret by hand first: the patch
    // carries the resourceVersion read before, so it must conflict.
    let edited: Arc<std::sync::Mutex<Option<String>>> = Default::default();
    let once = AtomicBool::new(false);
    let weak: Weak<FakeApiServer> = Arc::downgrade(&f.server);
    let seen = edited.clone();
    let fault = f.server.inject(
        None,
        fleetshard_testsupport::kube_api::FaultAction::Delay(Duration::ZERO),
        move |r| {
            if r.is(Verb::Patch, "secrets") && !once.swap(true, Ordering::SeqCst) {
                let name = r.name.clone().unwrap();
                let server = weak.upgrade().unwrap();
                server
                    .modify("v1", "Secret", "argocd", &name, |s| {
                        s["metadata"]["annotations"] = json!({"fleetshard.io/pin": "manual"});
                        s["data"]["shard"] = json!(STANDARD.encode("2"));
                    })
                    .unwrap();
                *seen.lock().unwrap() = Some(name);
            }
            false
        },
    );
    let out = pin(&f.kubeconfig, &[]);
    f.server.remove_fault(fault);
    let name = edited
        .lock()
        .unwrap()
        .clone()
        .expect("a Secret was patched");
    let after = shards(&f.server);
    assert_eq!(after[&name].as_deref(), Some("2"), "{name} was overwritten");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("Secret argocd/{name} changed since it was read")),
        "{stderr}"
    );
    assert!(stdout(&out).contains("pinned by hand"), "{}", stdout(&out));
    assert_balanced(&loads(&after));
}

#[test]
fn watch_pins_a_new_cluster_secret() {
    let f = fake(6);
    let child = fleetshard()
        .env("KUBECONFIG", &f.kubeconfig)
        .args(["pin", "--argocd-namespace", "argocd", "--replicas", "3"])
        .args(["--watch", "--debounce", "50ms"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let pinned = |server: &FakeApiServer, n: usize| {
        let s = shards(server);
        let missing: Vec<_> = s.iter().filter(|(_, v)| v.is_none()).collect();
        if s.len() == n && missing.is_empty() {
            Ok(s)
        } else {
            Err(format!("unpinned: {missing:?}"))
        }
    };
    let first = wait_for("the first pins", WAIT, || pinned(&f.server, 6));
    add_cluster(&f.server, 6, None, false);
    let second = wait_for("the new Secret pinned", WAIT, || pinned(&f.server, 7));
    assert_balanced(&loads(&first));
    assert_balanced(&loads(&second));
    let moved = first.iter().filter(|(n, s)| second[*n] != **s).count();
    assert!(moved <= 1, "{first:?} -> {second:?}");
    signal(child.0.id(), "-TERM");
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn bad_flags_are_refused_by_name() {
    for (args, expect) in [
        (vec!["--replicas", "0"], "--replicas"),
        (
            vec!["--replicas", "3", "--algorithm", "legacy"],
            "--algorithm \"legacy\"",
        ),
        (
            vec!["--replicas", "3", "--argocd-algorithm", "hash"],
            "--argocd-algorithm",
        ),
    ] {
        let out = fleetshard().arg("pin").args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}
