//! `fleetshard run --fleet-dir DIR`: the fleet comes from a watched directory, and a
//! change to it is placed without a restart.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::support::replicas::fleetshard;
use crate::support::{KillOnDrop, http, wait_for};
use serde_json::{Value, json};

fn write_fleet(path: &Path, ids: std::ops::Range<usize>) {
    let clusters: Vec<Value> = ids
        .map(|i| json!({"name": format!("c{i}"), "server": format!("https://c{i}.example")}))
        .collect();
    std::fs::write(path, json!({"clusters": clusters}).to_string()).unwrap();
}

fn status_json(store: &str) -> Result<Value, String> {
    let out = fleetshard()
        .args(["status", "--output", "json", "--store", store])
        .output()
        .map_err(|e| e.to_string())?;
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

fn owned(store: &str) -> Result<usize, String> {
    let v = status_json(store)?;
    let clusters = v["clusters"].as_array().ok_or("no clusters yet")?;
    if clusters.iter().any(|c| c["owner"].is_null()) {
        return Err(format!("{} clusters, some unowned", clusters.len()));
    }
    Ok(clusters.len())
}

/// Waits until exactly `n` clusters are placed, every one owned.
fn wait_owned(store: &str, n: usize) {
    wait_for(
        &format!("{n} clusters owned"),
        Duration::from_secs(60),
        || match owned(store)? {
            have if have == n => Ok(()),
            have => Err(format!("{have} clusters")),
        },
    );
}

#[test]
fn a_watched_directory_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let fleet_dir = dir.path().join("fleet");
    std::fs::create_dir(&fleet_dir).unwrap();
    write_fleet(&fleet_dir.join("a.json"), 0..4);
    let store = format!("sqlite://{}", dir.path().join("fs.db").display());
    let _replica = KillOnDrop(
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
            .arg("--fleet-dir")
            .arg(&fleet_dir)
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", http::free_port()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("r0.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_owned(&store, 4);
    // A second file with two more clusters; then the first loses two.
    write_fleet(&fleet_dir.join("b.json"), 4..6);
    wait_owned(&store, 6);
    write_fleet(&fleet_dir.join("a.json"), 0..2);
    wait_owned(&store, 4);
}

/// An operator empties most of the fleet under a running distributor: the clusters stay
/// assigned and owned while the distributor says it holds the drop back (`status`,
/// `/metrics`, one log line), and go once the smaller fleet has held for the grace.
#[test]
fn a_fleet_emptied_under_the_distributor_is_held_back_for_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let fleet_dir = dir.path().join("fleet");
    std::fs::create_dir(&fleet_dir).unwrap();
    write_fleet(&fleet_dir.join("a.json"), 0..6);
    let store = format!("sqlite://{}", dir.path().join("fs.db").display());
    let port = http::free_port();
    let log = dir.path().join("r0.log");
    let _replica = spawn_replica(
        dir.path(),
        "r0",
        &store,
        &fleet_dir,
        port,
        &[
            "--shards",
            "1",
            "--fleet-drop-grace-ms",
            "6000",
            // Every field of every line, as a log shipper sees them.
            "--log-format",
            "json",
            "--log-level",
            "info,fleetshard=debug,fleetshard_coord=debug,fleetshard_replica=debug,fleetshard_controller=debug",
        ],
    );
    wait_owned(&store, 6);
    // Five of six go at once: more than 50 %.
    write_fleet(&fleet_dir.join("a.json"), 0..1);
    let status = wait_for("the drop to be held back", Duration::from_secs(30), || {
        // And a read that saw r0 renewing (a loaded machine can starve it past one).
        let v = status_json(&store)?;
        let owned = v["clusters"]
            .as_array()
            .is_some_and(|c| c.iter().all(|c| c["owner"].is_string()));
        (!v["held_back"].is_null() && owned)
            .then_some(v)
            .ok_or("nothing held back yet, or r0 not seen renewing".to_owned())
    });
    assert_eq!(status["held_back"]["dropped"], 5, "{status}");
    assert_eq!(status["held_back"]["previous"], 6, "{status}");
    // Held back means kept: every cluster is still assigned and owned.
    let clusters = status["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 6, "{status}");
    assert!(clusters.iter().all(|c| c["owner"] == "r0"), "{status}");
    let (_, metrics) = http::get(port, "/metrics").unwrap();
    assert_eq!(
        http::metric(&metrics, "fleetshard_fleet_drop_held_back"),
        Some(5.0),
        "{metrics}"
    );
    // Once the smaller fleet has held for the grace, it is committed.
    wait_owned(&store, 1);
    assert!(status_json(&store).unwrap()["held_back"].is_null());
    let said = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        said.matches("drops 5 of the 6 clusters").count(),
        1,
        "{said}"
    );
    assert_eq!(
        said.matches("dropping 5 of 6 clusters").count(),
        1,
        "{said}"
    );
    // Values, never Rust's `Debug` text of an option or a result.
    for debug in ["Some(", "Ok(", "Err("] {
        assert!(!said.contains(debug), "{debug} in the log:\n{said}");
    }
}

/// What `run` says about a bad inventory, whatever its source: an empty fleet is refused at
/// start (naming the way out), and a duplicate cluster id is a warning on stderr and a
/// count on `/metrics` (it used to be dropped without a word).
#[test]
fn an_empty_fleet_is_refused_and_a_duplicate_id_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let fleet_dir = dir.path().join("fleet");
    std::fs::create_dir(&fleet_dir).unwrap();
    let refused = dir.path().join("refused.log");
    let mut child = KillOnDrop(
        fleetshard()
            .args(["run", "--identity", "r0", "--store", "memory://"])
            .arg("--fleet-dir")
            .arg(&fleet_dir)
            .args(["--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&refused).unwrap())
            .spawn()
            .unwrap(),
    );
    // Bounded: a replica that accepted the empty fleet would serve forever.
    let status = wait_for(
        "run refuses the empty fleet",
        Duration::from_secs(30),
        || {
            child
                .0
                .try_wait()
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "still running".to_owned())
        },
    );
    let stderr = std::fs::read_to_string(&refused).unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("--allow-empty-fleet"), "{stderr}");

    std::fs::write(
        fleet_dir.join("a.json"),
        json!({"clusters": [
            {"name": "dup", "server": "https://a.example"},
            {"name": "dup", "server": "https://b.example"},
        ]})
        .to_string(),
    )
    .unwrap();
    let port = http::free_port();
    let log = dir.path().join("r0.log");
    let _replica = KillOnDrop(
        fleetshard()
            .args([
                "run",
                "--identity",
                "r0",
                "--store",
                "memory://",
                "--reconciler",
                "none",
            ])
            .arg("--fleet-dir")
            .arg(&fleet_dir)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for("the duplicate counted", Duration::from_secs(30), || {
        let (_, body) = http::get(port, "/metrics").ok_or("not serving yet")?;
        match http::metric(
            &body,
            r#"fleetshard_inventory_problems{severity="warning"}"#,
        ) {
            Some(1.0) => Ok(()),
            other => Err(format!("inventory warnings: {other:?}")),
        }
    });
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(
        stderr.contains("cluster dup") && stderr.contains("not placed"),
        "{stderr}"
    );
}

/// `fleetshard run --fleet-dir FLEET --reconciler none` as `identity` on `store`, serving
/// HTTP on `port`, with `extra` arguments; its log is `DIR/IDENTITY.log`.
fn spawn_replica(
    dir: &Path,
    identity: &str,
    store: &str,
    fleet: &Path,
    port: u16,
    extra: &[&str],
) -> KillOnDrop {
    KillOnDrop(
        fleetshard()
            .args(["run", "--identity", identity, "--store", store])
            .args(["--reconciler", "none"])
            .args(extra)
            .arg("--fleet-dir")
            .arg(fleet)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join(format!("{identity}.log"))).unwrap())
            .spawn()
            .unwrap(),
    )
}

/// Two replicas read different fleets (one has a cluster fewer and a duplicate id): every
/// replica's `/metrics` counts the other as disagreeing, and `status` shows both digests,
/// the disagreement, and the problem of the replica that has it.
#[test]
fn replicas_that_read_different_fleets_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    write_fleet(&a.join("fleet.json"), 0..4);
    let mut clusters: Vec<Value> = (0..3)
        .map(|i| json!({"name": format!("c{i}"), "server": format!("https://c{i}.example")}))
        .collect();
    clusters.push(json!({"name": "c0", "server": "https://other.example"}));
    std::fs::write(
        b.join("fleet.json"),
        json!({ "clusters": clusters }).to_string(),
    )
    .unwrap();
    let store = format!("sqlite://{}", dir.path().join("fs.db").display());
    let ports = [http::free_port(), http::free_port()];
    let _r0 = spawn_replica(dir.path(), "r0", &store, &a, ports[0], &["--shards", "2"]);
    let _r1 = spawn_replica(dir.path(), "r1", &store, &b, ports[1], &["--shards", "2"]);
    for port in ports {
        wait_for("the disagreement counted", Duration::from_secs(60), || {
            let (_, body) = http::get(port, "/metrics").ok_or("not serving yet")?;
            match http::metric(&body, "fleetshard_inventory_disagreement") {
                Some(1.0) => Ok(()),
                other => Err(format!("disagreement: {other:?}")),
            }
        });
    }
    // Inventories are compared among live replicas: a read that saw a renewal of both
    // (on a loaded machine one may miss it, and then judges nothing).
    let status = wait_for("status to compare both", Duration::from_secs(30), || {
        let v = status_json(&store)?;
        let live = v["replicas"]
            .as_array()
            .map_or(0, |r| r.iter().filter(|r| r["live"] == true).count());
        (v["replicas"].as_array().map(Vec::len) == Some(2) && live == 2)
            .then_some(v)
            .ok_or("fewer than two live inventories".to_owned())
    });
    assert_eq!(status["inventory_disagreement"], true, "{status}");
    let replicas = status["replicas"].as_array().unwrap();
    assert_ne!(replicas[0]["digest"], replicas[1]["digest"], "{status}");
    assert_eq!(
        replicas.iter().filter(|r| r["disagrees"] == true).count(),
        1,
        "{status}"
    );
    assert_eq!(replicas[1]["identity"], "r1", "{status}");
    assert_eq!(replicas[1]["problems"], 1, "{status}");
    let warnings = status["warnings"].to_string();
    assert!(
        warnings.contains("different inventories")
            && warnings.contains("r1: its inventory has 1 problem"),
        "{status}"
    );
}
