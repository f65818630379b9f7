//! `fleetshard simulate`, black-box: the real binary serves simulated clusters that need
//! the bearer token written in their Secrets, stops cleanly on SIGTERM, and `fleetshard run
//! --fleet-dir` loads those Secrets without a warning, owns the clusters and syncs two
//! Applications (a CRD; a ConfigMap and one of its custom resources) to one of them, where
//! plain HTTP with the token then reads them.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::support::replicas::fleetshard;
use crate::support::{KillOnDrop, http, signal, unix_ms, wait_for};
use fleetshard_testsupport::git::{Git, config_map};
use serde_json::{Value, json};

pub(crate) const SETTLE: Duration = Duration::from_secs(90);

/// A simulated cluster as its Secret in `clusters.yaml` says.
#[derive(Debug)]
pub(crate) struct Sim {
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) zone: Option<String>,
    /// `127.0.0.1:PORT`.
    pub(crate) addr: String,
    pub(crate) token: String,
}

/// Starts `fleetshard simulate` with `args`, its stderr in `log`, and waits (with a
/// deadline) for `ready` on its stdout.
pub(crate) fn simulate(args: &[&str], out: &Path, log: &Path) -> KillOnDrop {
    let mut child = fleetshard()
        .arg("simulate")
        .args(args)
        .arg("--out")
        .arg(out)
        .env("FLEETSHARD_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let child = KillOnDrop(child);
    match rx.recv_timeout(SETTLE) {
        Ok(line) => assert_eq!(line, "ready", "first stdout line"),
        Err(e) => panic!(
            "no `ready` from fleetshard simulate ({e}); stderr: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        ),
    }
    child
}

/// The clusters of `DIR/clusters.yaml`.
pub(crate) fn read_sims(out: &Path) -> Vec<Sim> {
    let text = std::fs::read_to_string(out.join("clusters.yaml")).unwrap();
    let list: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(list["kind"], "List");
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            assert_eq!(s["kind"], "Secret");
            assert_eq!(
                s["metadata"]["labels"]["argocd.argoproj.io/secret-type"],
                "cluster"
            );
            let data = &s["stringData"];
            let config: Value = serde_json::from_str(data["config"].as_str().unwrap()).unwrap();
            let server = data["server"].as_str().unwrap();
            Sim {
                name: data["name"].as_str().unwrap().to_owned(),
                uid: s["metadata"]["uid"].as_str().unwrap().to_owned(),
                zone: s["metadata"]["labels"]["topology.kubernetes.io/zone"]
                    .as_str()
                    .map(str::to_owned),
                addr: server
                    .strip_prefix("http://")
                    .expect("plain HTTP")
                    .to_owned(),
                token: config["bearerToken"].as_str().unwrap().to_owned(),
            }
        })
        .collect()
}

/// One HTTP/1.1 request (`Connection: close`) with an optional bearer token and JSON
/// body; the status code and the body as JSON (Null when empty or not JSON).
pub(crate) fn call(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(t) = token {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    write!(s, "{head}\r\n{body}").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let code = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (code, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Sends SIGTERM and waits (with a deadline) for the process to exit; its exit status.
pub(crate) fn terminate(child: &mut Child) -> std::process::ExitStatus {
    signal(child.id(), "-TERM");
    wait_for("the process to exit", SETTLE, || {
        child
            .try_wait()
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "still running".to_owned())
    })
}

#[test]
fn simulated_clusters_need_their_tokens_and_stop_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out/sim");
    let log = dir.path().join("simulate.log");
    let started = unix_ms();
    let mut sim = simulate(&["--clusters", "3"], &out, &log);
    eprintln!("simulate ready in {} ms", unix_ms() - started);
    let sims = read_sims(&out);
    let names: Vec<&str> = sims.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["sim-0", "sim-1", "sim-2"]);
    assert!(sims.iter().all(|s| s.zone.is_none()));
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(out.join("clusters.yaml"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600, "the tokens' file is private");

    let namespaces = "/api/v1/namespaces";
    for (i, s) in sims.iter().enumerate() {
        assert_eq!(call(&s.addr, "GET", namespaces, None, None).0, 401);
        let other = &sims[(i + 1) % sims.len()].token;
        assert_eq!(call(&s.addr, "GET", namespaces, Some(other), None).0, 401);
        let (code, list) = call(&s.addr, "GET", namespaces, Some(&s.token), None);
        assert_eq!(code, 200, "{list}");
        assert!(
            list["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|ns| ns["metadata"]["name"] == "default")
        );
    }

    // Each cluster is its own: a ConfigMap created on sim-1 is read back there only.
    let (s0, s1) = (&sims[0], &sims[1]);
    let cms = "/api/v1/namespaces/default/configmaps";
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "hello"}, "data": {"greeting": "hi"}});
    assert_eq!(call(&s1.addr, "POST", cms, None, Some(&cm)).0, 401);
    let (code, created) = call(&s1.addr, "POST", cms, Some(&s1.token), Some(&cm));
    assert_eq!(code, 201, "{created}");
    let (code, read) = call(
        &s1.addr,
        "GET",
        &format!("{cms}/hello"),
        Some(&s1.token),
        None,
    );
    assert_eq!((code, &read["data"]), (200, &json!({"greeting": "hi"})));
    assert_eq!(
        read["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let (code, _) = call(
        &s0.addr,
        "GET",
        &format!("{cms}/hello"),
        Some(&s0.token),
        None,
    );
    assert_eq!(code, 404);

    let status = terminate(&mut sim.0);
    assert!(status.success(), "exit status {status}");
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(stderr.contains("SIMULATED"), "banner: {stderr}");
    assert!(stderr.contains("simulated cluster serving"), "{stderr}");
    for s in &sims {
        assert!(!stderr.contains(&s.token), "a token was logged: {stderr}");
    }
    assert!(
        TcpStream::connect(&s0.addr).is_err(),
        "the servers stop with the process"
    );
}

#[test]
fn bad_arguments_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["--clusters", "0"][..],
        &["--clusters", "1001"],
        &["--namespace", "Argo CD"],
        &["--zones", "a,,b"],
    ] {
        let out = fleetshard()
            .arg("simulate")
            .args(args)
            .arg("--out")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(out.stdout.is_empty(), "{args:?}: no `ready`");
    }
    assert!(!dir.path().join("clusters.yaml").exists());
}

const WIDGET_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

const WIDGET: &str = "apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
spec:
  size: 3
";

#[test]
fn run_manages_simulated_clusters() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("fleet");
    let out = fleet.join("sim");
    let mut sim = simulate(
        &["--clusters", "3", "--zones", "zone-a,zone-b"],
        &out,
        &dir.path().join("simulate.log"),
    );
    let sims = read_sims(&out);
    let zones: Vec<Option<&str>> = sims.iter().map(|s| s.zone.as_deref()).collect();
    assert_eq!(zones, [Some("zone-a"), Some("zone-b"), Some("zone-a")]);

    // The CRD in an app of its own: fleetshard's reconciler compares an app with the
    // kinds its cluster serves, so an app whose custom resource comes with its CRD cannot
    // be compared until the CRD is there (Argo CD skips the custom resource meanwhile).
    let git = Git::init(&dir.path().join("repo"));
    git.write("crds/widgets.yaml", WIDGET_CRD);
    git.write("demo/cm.yaml", &config_map("demo", "1"));
    git.write("demo/widget.yaml", WIDGET);
    let commit = git.commit("demo");
    let app = |name: &str| {
        json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": "argocd"},
            "spec": {
                "project": "default",
                "source": {"repoURL": git.file_url(), "path": name, "targetRevision": "HEAD"},
                "destination": {"name": "sim-1", "namespace": "default"},
                "syncPolicy": {"automated": {"prune": true, "selfHeal": true}},
            },
        })
    };
    let apps = json!({"apiVersion": "v1", "kind": "List", "items": [app("crds"), app("demo")]});
    std::fs::write(fleet.join("apps.json"), apps.to_string()).unwrap();

    let store = format!("sqlite://{}", dir.path().join("fs.db").display());
    let log = dir.path().join("r0.log");
    let mut replica = KillOnDrop(
        fleetshard()
            .args([
                "run",
                "--identity",
                "r0",
                "--store",
                &store,
                "--shards",
                "1",
            ])
            .args(["--resync", "2s"])
            .arg("--fleet-dir")
            .arg(&fleet)
            .arg("--repo-cache")
            .arg(dir.path().join("repos"))
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", http::free_port()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );

    // The three clusters, with the Secrets' uids as ids, all owned, and Argo CD's built-in
    // in-cluster entry (id ""): a directory of Argo CD's objects is Argo CD's cluster list.
    wait_for(
        "3 simulated clusters and the in-cluster entry owned",
        SETTLE,
        || {
            let out = fleetshard()
                .args(["status", "--output", "json", "--store", &store])
                .output()
                .map_err(|e| e.to_string())?;
            let v: Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
            let clusters = v["clusters"].as_array().ok_or("no clusters yet")?;
            let mut owned: Vec<&str> = clusters
                .iter()
                .filter(|c| !c["owner"].is_null())
                .filter_map(|c| c["id"].as_str())
                .collect();
            owned.sort_unstable();
            let mut want: Vec<&str> = sims.iter().map(|s| s.uid.as_str()).collect();
            want.push("");
            want.sort_unstable();
            if owned == want {
                Ok(())
            } else {
                Err(v.to_string())
            }
        },
    );

    // The app is synced to sim-1, over its token: the objects are there, read with plain
    // HTTP, and on no other cluster.
    wait_for("both apps synced", SETTLE, || {
        let out = fleetshard()
            .args(["apps", "--output", "json", "--store", &store])
            .output()
            .map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
        let apps = v["apps"].as_array().ok_or("no apps yet")?;
        let synced = apps.iter().filter(|a| {
            let sync = &a["record"]["comparison"]["sync"];
            sync["status"] == "Synced" && sync["revision"] == commit
        });
        if synced.count() == 2 {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });
    let s1 = &sims[1];
    let cm = "/api/v1/namespaces/default/configmaps/demo";
    let (code, obj) = call(&s1.addr, "GET", cm, Some(&s1.token), None);
    assert_eq!((code, &obj["data"]["value"]), (200, &json!("1")), "{obj}");
    let widget = "/apis/example.com/v1/namespaces/default/widgets/w1";
    let (code, obj) = call(&s1.addr, "GET", widget, Some(&s1.token), None);
    assert_eq!((code, &obj["spec"]["size"]), (200, &json!(3)), "{obj}");
    for other in [&sims[0], &sims[2]] {
        assert_eq!(
            call(&other.addr, "GET", cm, Some(&other.token), None).0,
            404
        );
    }

    let replica_status = terminate(&mut replica.0);
    assert!(replica_status.success(), "{replica_status}");
    // The inventory's problems are logged as `fleet: …` (`fleet, not loaded yet: …`
    // before the first load); the demo app's retries until its CRD is served are not.
    let text = std::fs::read_to_string(&log).unwrap();
    let about_the_fleet = |l: &&str| l.contains(" fleet: ") || l.contains(" fleet, not loaded");
    let problems: Vec<&str> = text.lines().filter(about_the_fleet).collect();
    assert!(
        problems.is_empty(),
        "the Secrets were not read cleanly: {problems:#?}"
    );
    assert!(!text.contains("ERROR"), "{text}");
    assert!(terminate(&mut sim.0).success());
}

#[test]
fn with_tls_the_secrets_carry_the_ca_that_reaches_the_cluster() {
    use fleetshard_gitops::live::{ClusterAccess, ClusterConnections, LiveOptions};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sim");
    let _sim = simulate(
        &["--clusters", "1", "--tls"],
        &out,
        &dir.path().join("simulate.log"),
    );
    let text = std::fs::read_to_string(out.join("clusters.yaml")).unwrap();
    let list: Value = serde_saphyr::from_str(&text).unwrap();
    let data = &list["items"][0]["stringData"];
    let server = data["server"].as_str().unwrap().to_owned();
    assert!(server.starts_with("https://127.0.0.1:"), "{server}");
    let config = data["config"].as_str().unwrap();
    let (credentials, warnings) =
        fleetshard_manifest::ClusterCredentials::from_argo_config(config, "config").unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(credentials.ca_data.is_some() && !credentials.insecure);
    // Plain HTTP to the TLS port gets no HTTP answer.
    let addr = server.strip_prefix("https://").unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may close before the whole request is written (its handshake failed).
    let _ = write!(
        s,
        "GET /version HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    assert!(!answer.starts_with(b"HTTP/1.1 200"), "plain HTTP answered");
    // fleetshard's own client path, with the Secret's CA and token: reached.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        ClusterConnections::new(LiveOptions::default())
            .start(&ClusterAccess {
                id: "sim-0".into(),
                server,
                credentials,
            })
            .await
            .expect("a client")
            .check_reachable()
            .await
            .expect("reached with the Secret's CA");
    });
}
