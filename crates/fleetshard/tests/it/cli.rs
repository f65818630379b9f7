//! The `fleetshard` binary end to end: the `plan --output json` contract, Argo CD
//! compatibility on a real-looking export, bad input, `fleet generate` round trips, SVG.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fleetshard_core::App;
use fleetshard_core::argo::{
    ArgoAlgorithm, ArgoClusterList, ArgoControllerAssignment, IN_CLUSTER_SERVER,
};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example(rel: &str) -> String {
    repo().join("examples").join(rel).display().to_string()
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

/// The binary with a clean environment: no variable of ours or Argo CD's leaks in from
/// the machine running the tests.
pub(crate) fn fleetshard() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fleetshard"));
    for (key, _) in std::env::vars() {
        if key.starts_with("FLEETSHARD_") || key.starts_with("ARGOCD_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("the binary runs")
}

pub(crate) fn ok_json(cmd: &mut Command) -> Value {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

pub(crate) fn fails(cmd: &mut Command) -> String {
    let out = run(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "expected failure, got success");
    assert_ne!(
        out.status.code(),
        None,
        "killed by a signal (panic?): {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

fn argo_plan(alg: &str, replicas: &str) -> Command {
    let mut cmd = fleetshard();
    cmd.args(["plan", "--clusters", &example("argocd/clusters.yaml")])
        .args(["--apps", &example("argocd/apps.yaml")])
        .args([
            "--algorithm",
            alg,
            "--replicas",
            replicas,
            "--output",
            "json",
        ]);
    cmd
}

#[test]
fn json_contract_on_the_native_example() {
    let v = ok_json(fleetshard().args([
        "plan",
        "--fleet",
        &example("fleet.yaml"),
        "--algorithm",
        "balanced",
        "--replicas",
        "6",
        "--output",
        "json",
    ]));
    assert_eq!(v["algorithm"], "balanced");
    assert_eq!(v["replicas"], 6);
    let clusters = v["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 12);
    for c in clusters {
        assert!(c["id"].is_string() && c["server"].is_string(), "{c}");
        assert!(c["shard"].is_i64() || c["shard"].is_null(), "{c}");
        assert!(c["name"].is_string() && c["apps"].is_u64() && c["load"].is_u64());
        assert!(c["pinned"].is_boolean() && c.get("zone").is_some());
    }
    let skipped: Vec<&Value> = clusters
        .iter()
        .filter(|c| c["skip_reconcile"] == true)
        .collect();
    assert_eq!(skipped.len(), 1);
    assert!(
        skipped[0]["shard"].is_null(),
        "an unmanaged cluster has no shard"
    );
    let ci = clusters
        .iter()
        .find(|c| c["name"] == "ci-runners-eu1b")
        .unwrap();
    assert_eq!(
        (ci["pinned"].clone(), ci["shard"].clone()),
        (Value::Bool(true), 3.into())
    );
    let timings = &v["timings"];
    assert!(timings["load_ms"].as_f64().unwrap() > 0.0);
    assert!(timings["distribute_ms"].as_f64().unwrap() >= 0.0);
    let b = &v["balance"];
    assert!(b["max"].is_u64() && b["min"].is_u64());
    assert!(b["mean"].is_f64() && b["max_over_mean"].is_f64());
    let shards = v["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 6);
    assert_eq!(
        shards[0]["zone"], "eu-west-1a",
        "zones come from the shards: section"
    );
    assert_eq!(shards[0]["capacity"], 2);
    assert!(v["zones"]["zones"].as_array().unwrap().len() == 3);
    assert!(v["zones"]["cross_zone"]["fraction"].is_f64());
    assert!(v["warnings"].is_array());
    assert!(v.get("plans").is_none());
}

/// A cluster's load is the base (flag, environment, default 5) plus its apps; a weight
/// replaces both.
#[test]
fn cluster_base_load_from_flag_env_and_default() {
    let loads = |extra: &[&str], env: Option<&str>| -> Vec<(u64, u64, bool)> {
        let mut cmd = fleetshard();
        cmd.args([
            "plan",
            "--fleet",
            &example("fleet.yaml"),
            "--output",
            "json",
        ])
        .args(extra);
        if let Some(v) = env {
            cmd.env("FLEETSHARD_CLUSTER_BASE_LOAD", v);
        }
        let v = ok_json(&mut cmd);
        v["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let weighted = c["name"] == "prod-ledger-eu1";
                (
                    c["apps"].as_u64().unwrap(),
                    c["load"].as_u64().unwrap(),
                    weighted,
                )
            })
            .collect()
    };
    for (extra, env, base) in [
        (&[][..], None, 5),
        (&["--cluster-base-load", "0"][..], None, 0),
        (&[][..], Some("2"), 2),
    ] {
        for (apps, load, weighted) in loads(extra, env) {
            let want = if weighted { 60 } else { apps + base };
            assert_eq!(load, want, "base {base}: apps {apps}");
        }
    }
}

#[test]
fn replicas_default_to_the_fleet_files_shards() {
    let v = ok_json(fleetshard().args([
        "plan",
        "--fleet",
        &example("fleet.yaml"),
        "--output",
        "json",
    ]));
    assert_eq!(v["replicas"], 6);
}

#[test]
fn argo_export_gives_the_controllers_shards() {
    let clusters = fleetshard_manifest::load_clusters(Path::new(&example("argocd/clusters.yaml")))
        .unwrap()
        .value;
    let apps = fleetshard_manifest::load_apps(Path::new(&example("argocd/apps.yaml")))
        .unwrap()
        .value;
    for alg in ArgoAlgorithm::ALL {
        for replicas in [0u32, 1, 2, 3, 5] {
            let v = ok_json(&mut argo_plan(alg.name(), &replicas.to_string()));
            let expected = ArgoControllerAssignment::compute(alg, replicas, &clusters, &apps);
            let got: Vec<i64> = v["clusters"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["shard"].as_i64().expect("an integer shard"))
                .collect();
            assert_eq!(got, expected.shards(), "{} × {replicas}", alg.name());
            let ids: Vec<&str> = v["clusters"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["id"].as_str().unwrap())
                .collect();
            let want: Vec<&str> = clusters.iter().map(|c| c.id.as_str()).collect();
            assert_eq!(
                ids, want,
                "ids are the Secrets' metadata.uid, in input order"
            );
        }
    }
}

/// Argo CD's cluster list always carries the built-in in-cluster entry when no Secret names
/// `https://kubernetes.default.svc` (argo-compat §1); `plan` on an export must too, or
/// round-robin shifts every cluster and consistent hashing loses the in-cluster apps' load.
#[test]
fn an_export_without_an_in_cluster_secret_gets_argo_cds_built_in_entry() {
    let dir = tempfile::tempdir().unwrap();
    let argo = dir.path().join("argo");
    let out = run(fleetshard()
        .args(["fleet", "generate", "--clusters", "40", "--seed", "5"])
        .args(["--format", "argocd", "--out"])
        .arg(&argo));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let clusters_path = argo.join("clusters.yaml");
    let secrets = fleetshard_manifest::load_clusters(&clusters_path)
        .unwrap()
        .value;
    assert!(
        secrets.iter().all(|c| c.server != IN_CLUSTER_SERVER),
        "the generated export has no in-cluster Secret"
    );
    // Apps on the in-cluster destination, as every getting-started install has.
    let mut apps = fleetshard_manifest::load_apps(&argo.join("apps.yaml"))
        .unwrap()
        .value;
    for i in 0..7 {
        apps.push(App::to_server(
            "argocd",
            &format!("local-{i}"),
            IN_CLUSTER_SERVER,
        ));
    }
    let apps_path = dir.path().join("apps.yaml");
    let specs = Default::default();
    std::fs::write(
        &apps_path,
        fleetshard_manifest::to_application_list_yaml(&apps, &specs),
    )
    .unwrap();
    let argo_list = ArgoClusterList::from_secrets(secrets.clone(), true);
    assert!(argo_list.built_in);

    for alg in ArgoAlgorithm::ALL {
        for replicas in [2u32, 3] {
            let v = ok_json(
                fleetshard()
                    .args(["plan", "--clusters"])
                    .arg(&clusters_path)
                    .arg("--apps")
                    .arg(&apps_path)
                    .args([
                        "-a",
                        alg.name(),
                        "-r",
                        &replicas.to_string(),
                        "--output",
                        "json",
                    ]),
            );
            let rows = v["clusters"].as_array().unwrap();
            assert_eq!(rows.len(), secrets.len() + 1, "{} × {replicas}", alg.name());
            let entry = rows
                .iter()
                .find(|c| c["server"] == IN_CLUSTER_SERVER)
                .expect("the in-cluster entry is listed like any cluster");
            assert_eq!(entry["id"], "");
            assert_eq!(entry["name"], "in-cluster");
            assert_eq!(entry["apps"], 7);
            let expected =
                ArgoControllerAssignment::compute(alg, replicas, &argo_list.clusters, &apps);
            let got: Vec<i64> = rows.iter().map(|c| c["shard"].as_i64().unwrap()).collect();
            assert_eq!(got, expected.shards(), "{} × {replicas}", alg.name());
            if alg == ArgoAlgorithm::RoundRobin {
                // Id "" sorts first: rank 0.
                assert_eq!(entry["shard"], 0);
            }
        }
    }

    // Disabled, as argocd-cm's cluster.inClusterEnabled: "false" does: no entry.
    let v = ok_json(
        fleetshard()
            .args(["plan", "--clusters"])
            .arg(&clusters_path)
            .args(["-a", "round-robin", "-r", "2", "--output", "json"])
            .arg("--in-cluster-enabled=false"),
    );
    assert_eq!(v["clusters"].as_array().unwrap().len(), secrets.len());
}

/// A Secret whose `config` Argo CD cannot read is not in its cluster list: `plan` skips it
/// with a warning naming it, instead of failing the whole run.
#[test]
fn a_secret_with_an_unreadable_config_is_skipped_as_argo_cd_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clusters.yaml");
    std::fs::write(
        &path,
        r#"apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Secret
  metadata:
    name: good
    namespace: argocd
    uid: u-good
    labels: {argocd.argoproj.io/secret-type: cluster}
  stringData: {server: "https://good.example", config: '{"bearerToken":"t"}'}
- apiVersion: v1
  kind: Secret
  metadata:
    name: broken
    namespace: argocd
    uid: u-broken
    labels: {argocd.argoproj.io/secret-type: cluster}
  stringData: {server: "https://broken.example", config: 'not json'}
"#,
    )
    .unwrap();
    let out = run(fleetshard()
        .args(["plan", "--clusters"])
        .arg(&path)
        .args(["-a", "legacy", "-r", "2", "--output", "json"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let servers: Vec<&str> = v["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["server"].as_str().unwrap())
        .collect();
    assert_eq!(servers, ["https://good.example", IN_CLUSTER_SERVER]);
    let warnings = v["warnings"].to_string();
    assert!(
        warnings.contains("broken") && warnings.contains("skipped"),
        "{warnings}"
    );
}

#[test]
fn several_algorithms_and_a_replica_range() {
    let v = ok_json(&mut argo_plan("all", "2..4"));
    let plans = v["plans"].as_array().unwrap();
    assert_eq!(plans.len(), 12);
    assert_eq!(
        (v["algorithm"].clone(), v["replicas"].clone()),
        ("balanced".into(), 2.into())
    );
    assert_eq!(plans[0]["clusters"], v["clusters"]);
    assert!(plans[0].get("movement").is_none());
    for (i, p) in plans.iter().enumerate() {
        assert_eq!(p["replicas"], 2 + (i % 3) as u64);
        if i % 3 > 0 {
            assert_eq!(p["movement"]["from"]["kind"], "sweep");
            assert_eq!(p["movement"]["from"]["replicas"], 1 + (i % 3) as u64);
        }
    }
    let algs: Vec<&str> = plans
        .iter()
        .step_by(3)
        .map(|p| p["algorithm"].as_str().unwrap())
        .collect();
    assert_eq!(
        algs,
        ["balanced", "consistent-hashing", "round-robin", "legacy"]
    );
}

#[test]
fn movement_against_a_previous_plan_file() {
    let dir = tempfile::tempdir().unwrap();
    let before = dir.path().join("before.json");
    let out = run(fleetshard().args([
        "plan",
        "--fleet",
        &example("fleet.yaml"),
        "-r",
        "6",
        "--output",
        "json",
    ]));
    assert!(out.status.success());
    std::fs::write(&before, &out.stdout).unwrap();
    let v = ok_json(
        fleetshard()
            .args([
                "plan",
                "--fleet",
                &example("fleet.yaml"),
                "-r",
                "6",
                "--output",
                "json",
            ])
            .arg("--previous")
            .arg(&before),
    );
    assert_eq!(v["movement"]["from"]["kind"], "previous");
    assert_eq!(v["movement"]["clusters_moved"], 0, "same input, same plan");
    let v = ok_json(
        fleetshard()
            .args([
                "plan",
                "--fleet",
                &example("fleet.yaml"),
                "-r",
                "7",
                "--output",
                "json",
            ])
            .arg("--previous")
            .arg(&before),
    );
    let m = &v["movement"];
    assert_eq!(m["from"]["replicas"], 6);
    assert!(m["load_fraction"].as_f64().unwrap() < 0.5, "{m}");
}

#[test]
fn missing_file_is_named() {
    let err = fails(fleetshard().args([
        "plan",
        "--clusters",
        "/nonexistent/clusters.yaml",
        "-r",
        "3",
    ]));
    assert!(err.contains("/nonexistent/clusters.yaml"), "{err}");
}

#[test]
fn bad_base64_names_file_object_and_field() {
    let path = fixture("bad-base64-clusters.yaml");
    let err = fails(fleetshard().args(["plan", "--clusters", &path, "-r", "3"]));
    assert!(err.contains("bad-base64-clusters.yaml"), "{err}");
    assert!(err.contains("data.server"), "{err}");
    assert!(err.contains("cluster-broken"), "{err}");
}

#[test]
fn garbage_input_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("garbage.yaml");
    std::fs::write(&path, "{{{ not: [yaml\n\u{0}\u{1}").unwrap();
    let err = fails(
        fleetshard()
            .args(["plan", "--fleet"])
            .arg(&path)
            .args(["-r", "2"]),
    );
    assert!(err.contains("garbage.yaml"), "{err}");
}

#[test]
fn negative_replicas_are_refused_from_flag_and_env() {
    // A bad value is a command line not understood (exit 2), as clap's own refusals:
    // `run --shards foo` and `plan --replicas abc` alike.
    let mut shards_foo = fleetshard();
    shards_foo.args(["run", "--store", "memory://", "--shards", "foo"]);
    for mut cmd in [argo_plan("legacy", "abc"), shards_foo] {
        let out = run(&mut cmd);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let err = fails(&mut argo_plan("legacy", "-2"));
    assert!(
        err.contains("negative") && err.contains("--replicas"),
        "{err}"
    );
    let mut cmd = fleetshard();
    cmd.args([
        "plan",
        "--clusters",
        &example("argocd/clusters.yaml"),
        "-a",
        "legacy",
    ])
    .env("ARGOCD_CONTROLLER_REPLICAS", "-1");
    let err = fails(&mut cmd);
    assert!(
        err.contains("ARGOCD_CONTROLLER_REPLICAS") && err.contains("negative"),
        "{err}"
    );
}

#[test]
fn unknown_algorithm_lists_the_valid_ones() {
    let err = fails(&mut argo_plan("fair-share", "3"));
    for name in [
        "fair-share",
        "balanced",
        "consistent-hashing",
        "round-robin",
        "legacy",
    ] {
        assert!(err.contains(name), "{err}");
    }
}

#[test]
fn argo_variables_are_honoured_with_argos_fallback() {
    let mut cmd = fleetshard();
    cmd.args([
        "plan",
        "--clusters",
        &example("argocd/clusters.yaml"),
        "--output",
        "json",
    ])
    .env("ARGOCD_CONTROLLER_REPLICAS", "4")
    .env("ARGOCD_CONTROLLER_SHARDING_ALGORITHM", "round-robin");
    let v = ok_json(&mut cmd);
    assert_eq!(
        (v["algorithm"].clone(), v["replicas"].clone()),
        ("round-robin".into(), 4.into())
    );

    // An unknown name from Argo CD's variable: legacy, with a warning (Argo CD's rule).
    cmd.env("ARGOCD_CONTROLLER_SHARDING_ALGORITHM", "hash-ring");
    let v = ok_json(&mut cmd);
    assert_eq!(v["algorithm"], "legacy");
    let warned = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["source"] == "cli" && w["message"].as_str().unwrap().contains("hash-ring"));
    assert!(warned, "{}", v["warnings"]);

    // Our own variables work too, and the flag wins over the variable.
    let mut cmd = fleetshard();
    cmd.args(["plan", "-r", "2", "-a", "legacy"])
        .env("FLEETSHARD_CLUSTERS", example("argocd/clusters.yaml"))
        .env("FLEETSHARD_OUTPUT", "json")
        .env("ARGOCD_CONTROLLER_SHARDING_ALGORITHM", "round-robin");
    assert_eq!(ok_json(&mut cmd)["algorithm"], "legacy");
}

#[test]
fn zero_replicas_is_accepted() {
    let v = ok_json(&mut argo_plan("legacy", "0"));
    assert_eq!(v["replicas"], 0);
    assert_eq!(v["shards"].as_array().unwrap().len(), 0);
}

#[test]
fn generated_fleets_round_trip_through_plan() {
    let dir = tempfile::tempdir().unwrap();
    let native = dir.path().join("fleet.yaml");
    let argo = dir.path().join("argo");
    let gen_args = [
        "fleet",
        "generate",
        "--clusters",
        "60",
        "--seed",
        "11",
        "--zones",
        "z-1a,z-1b",
    ];
    let out = run(fleetshard().args(gen_args).arg("-o").arg(&native));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(fleetshard()
        .args(gen_args)
        .args(["--format", "argocd", "--out"])
        .arg(&argo));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let from_native = ok_json(
        fleetshard()
            .args([
                "plan",
                "-a",
                "legacy,balanced",
                "-r",
                "4",
                "--output",
                "json",
                "--fleet",
            ])
            .arg(&native),
    );
    let from_argo = ok_json(
        fleetshard()
            .args([
                "plan",
                "-a",
                "legacy,balanced",
                "-r",
                "4",
                "--output",
                "json",
                "--clusters",
            ])
            .arg(argo.join("clusters.yaml"))
            .arg("--apps")
            .arg(argo.join("apps.yaml"))
            // A native fleet has no built-in in-cluster entry; Argo CD's list would.
            .arg("--in-cluster-enabled=false"),
    );
    assert_eq!(from_native["fleet"]["apps"], 600);
    for key in ["id", "server", "apps", "zone", "shard"] {
        let pick = |v: &Value| -> Vec<Value> {
            v["plans"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|p| {
                    p["clusters"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|c| c[key].clone())
                })
                .collect()
        };
        assert_eq!(pick(&from_native), pick(&from_argo), "{key}");
    }

    // Same seed, same file.
    let again = dir.path().join("again.yaml");
    assert!(
        run(fleetshard().args(gen_args).arg("-o").arg(&again))
            .status
            .success()
    );
    assert_eq!(
        std::fs::read(&native).unwrap(),
        std::fs::read(&again).unwrap()
    );
}

/// `--format argocd-json` writes the same export as JSON, as `kubectl … -o json` prints it:
/// `plan` reads both into the same fleet.
#[test]
fn generate_writes_the_argocd_export_as_json_too() {
    let dir = tempfile::tempdir().unwrap();
    for format in ["argocd", "argocd-json"] {
        let out = run(fleetshard()
            .args(["fleet", "generate", "--clusters", "30", "--seed", "3"])
            .args(["--format", format, "--out"])
            .arg(dir.path()));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = std::fs::read_to_string(dir.path().join("apps.json")).unwrap();
    let list: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(list["kind"], "List");
    assert!(text.starts_with("{\n  \""), "indented as kubectl prints it");
    let plan = |ext: &str| {
        let path = |f: &str| dir.path().join(format!("{f}.{ext}"));
        let mut cmd = fleetshard();
        cmd.args(["plan", "-r", "3", "--output", "json", "--clusters"])
            .arg(path("clusters"))
            .arg("--apps")
            .arg(path("apps"));
        let mut v = ok_json(&mut cmd);
        v["timings"] = Value::Null;
        v
    };
    let yaml = plan("yaml");
    assert_eq!(yaml["fleet"]["apps"].as_u64().map(|n| n > 0), Some(true));
    assert_eq!(plan("json"), yaml);
    let err = fails(fleetshard().args([
        "fleet",
        "generate",
        "--clusters",
        "3",
        "--format",
        "argocd-json",
    ]));
    assert!(
        err.contains("clusters.json") && err.contains("--out"),
        "{err}"
    );
}

#[test]
fn generate_refuses_argocd_without_a_directory() {
    let err =
        fails(fleetshard().args(["fleet", "generate", "--clusters", "3", "--format", "argocd"]));
    assert!(err.contains("--out"), "{err}");
}

#[test]
fn svg_is_well_formed_with_one_bar_per_shard() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("plan.svg");
    let out = run(fleetshard()
        .args([
            "plan",
            "--fleet",
            &example("fleet.yaml"),
            "-a",
            "balanced,legacy",
            "-r",
            "3..5",
            "--svg",
        ])
        .arg(&svg));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let panels: Vec<_> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("panel"))
        .collect();
    assert_eq!(panels.len(), 6);
    for panel in panels {
        let replicas: usize = panel.attribute("data-replicas").unwrap().parse().unwrap();
        let bars = panel
            .descendants()
            .filter(|n| n.attribute("class") == Some("bar"))
            .count();
        assert_eq!(bars, replicas);
    }
}

#[test]
fn table_output_is_the_default() {
    let out = run(fleetshard().args(["plan", "--fleet", &example("fleet.yaml")]));
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("fleet: 12 clusters"), "{text}");
    assert!(text.contains("balanced × 6 replicas"), "{text}");
}

#[test]
fn scale_stores_the_desired_count_and_status_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("fs.db").display());
    // A store is made by a replica, not by `scale` (store_identity.rs has the cases).
    drop(fleetshard_store_sqlite::SqliteStore::open(dir.path().join("fs.db")).unwrap());
    let out = run(fleetshard().args(["scale", "5", "--store", &url]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = ok_json(fleetshard().args(["status", "--store", &url, "--output", "json"]));
    assert_eq!(status["desired_shards"], 5);
    assert!(status["revision"].as_u64().unwrap() >= 1);
    assert_eq!(status["shard_count"], Value::Null, "nothing committed yet");
    // Out of range and garbage are refused, naming the value; the stored count stays.
    assert!(fails(fleetshard().args(["scale", "0", "--store", &url])).contains("0 shards"));
    assert!(fails(fleetshard().args(["scale", "many", "--store", &url])).contains("\"many\""));
    let status = ok_json(fleetshard().args(["status", "--store", &url, "--output", "json"]));
    assert_eq!(status["desired_shards"], 5);
}

#[test]
fn run_refuses_a_bad_shards_value() {
    let err = fails(fleetshard().args([
        "run",
        "--store",
        "memory://",
        "--fleet",
        &example("examples/fleet.yaml"),
        "--shards",
        "auto:5-2",
    ]));
    assert!(err.contains("min 5 is above max 2"), "{err}");
}

#[test]
fn run_refuses_split_clusters_under_argo_cds_protocol() {
    let mut cmd = fleetshard();
    cmd.args([
        "run",
        "--store",
        "memory://",
        "--fleet",
        &example("fleet.yaml"),
        "--protocol",
        "argocd",
        "--split-clusters",
    ]);
    let out = run(&mut cmd);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--split-clusters") && err.contains("whole clusters"),
        "{err}"
    );
}

/// Writes a new record `key` = `value` into the SQLite store at `db`.
fn put_record(db: &std::path::Path, key: &str, value: Vec<u8>) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            use fleetshard_coord::store::{Precondition, Store as _};
            let store = fleetshard_store_sqlite::SqliteStore::open(db).unwrap();
            store.put(key, value, Precondition::Absent).await.unwrap();
        });
}

/// `plan --from-store` starts from the assignment the replicas committed, exactly as
/// `--previous` starts from a plan: the same fleet and count move nothing, and another
/// count gives the same shards as planning from that plan's JSON.
#[test]
fn plan_from_store_starts_from_the_committed_assignment() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = example("fleet.yaml");
    let plan = |extra: &[&str]| {
        let mut cmd = fleetshard();
        cmd.args([
            "plan",
            "--fleet",
            &fleet,
            "--algorithm",
            "balanced",
            "--output",
            "json",
        ]);
        ok_json(cmd.args(extra))
    };
    // Each cluster's shard (`None`: not placed, e.g. skip-reconcile).
    let shards = |v: &Value| -> Vec<(String, Option<i64>)> {
        v["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["id"].as_str().unwrap().to_owned(), c["shard"].as_i64()))
            .collect()
    };
    // Three replicas' placement, committed to a store as the distributor would.
    let three = plan(&["-r", "3"]);
    let previous = dir.path().join("three.json");
    std::fs::write(&previous, three.to_string()).unwrap();
    let db = dir.path().join("fs.db");
    let doc = fleetshard_coord::fenced::AssignmentDoc {
        generation: 7,
        shards: 3,
        clusters: shards(&three)
            .into_iter()
            .filter_map(|(id, s)| Some((id, u32::try_from(s?).ok()?)))
            .collect(),
        homes: Default::default(),
    };
    let key = fleetshard_coord::fenced::assignment_key("fleetshard/");
    put_record(&db, &key, fleetshard_coord::fenced::encode(&doc));
    let url = format!("sqlite://{}", db.display());
    let again = plan(&["-r", "3", "--from-store", &url]);
    assert_eq!(shards(&again), shards(&three), "nothing moves");
    let four_from_store = plan(&["-r", "4", "--from-store", &url]);
    let four_from_plan = plan(&["-r", "4", "--previous", previous.to_str().unwrap()]);
    assert_eq!(shards(&four_from_store), shards(&four_from_plan));

    // The replicas' published costs place the plan, as they place the distributor's: the
    // same plan as with those figures in a --costs file, loads in costs, not in apps.
    let measured: Vec<(String, f64)> = shards(&three)
        .into_iter()
        .filter(|(_, s)| s.is_some())
        .zip(
            [400.0, 30.0, 70.0, 250.0, 10.0, 90.0, 5.0, 160.0]
                .into_iter()
                .cycle(),
        )
        .map(|((id, _), cost)| (id, cost))
        .collect();
    let record = fleetshard_replica::costs::CostRecord {
        holder: "replica-0".into(),
        incarnation: "1".into(),
        clusters: measured
            .iter()
            .map(|(id, cost)| {
                let c = fleetshard_replica::costs::ClusterCost {
                    cost: *cost,
                    measured_seconds: 600,
                    ..Default::default()
                };
                (id.clone(), c)
            })
            .collect(),
    };
    let key = fleetshard_replica::costs::costs_key("fleetshard/", "replica-0");
    put_record(&db, &key, serde_json::to_vec(&record).unwrap());
    let costs_file = dir.path().join("costs.json");
    let by_id: serde_json::Map<String, Value> = measured
        .iter()
        .map(|(id, cost)| (id.clone(), Value::from(*cost)))
        .collect();
    std::fs::write(&costs_file, Value::Object(by_id).to_string()).unwrap();
    let loads = |v: &Value| -> Vec<f64> {
        v["shards"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["load"].as_f64().unwrap())
            .collect()
    };
    let by_store = plan(&["-r", "3", "--from-store", &url]);
    let by_file = plan(&[
        "-r",
        "3",
        "--from-store",
        &url,
        "--costs",
        costs_file.to_str().unwrap(),
    ]);
    assert_eq!(
        loads(&by_store),
        loads(&by_file),
        "placed by the measured costs"
    );
    assert_eq!(shards(&by_store), shards(&by_file));
    let total: f64 = measured.iter().map(|(_, c)| c).sum();
    assert_eq!(
        loads(&by_store).iter().sum::<f64>(),
        total,
        "loads are costs"
    );
    assert_ne!(loads(&again).iter().sum::<f64>(), total);
    // No assignment committed: an error naming the store and the root.
    let empty_db = dir.path().join("empty.db");
    drop(fleetshard_store_sqlite::SqliteStore::open(&empty_db).unwrap());
    let empty = format!("sqlite://{}", empty_db.display());
    let err =
        fails(fleetshard().args(["plan", "--fleet", &fleet, "-r", "3", "--from-store", &empty]));
    assert!(
        err.contains("no assignment") && err.contains("fleetshard/"),
        "{err}"
    );
}
