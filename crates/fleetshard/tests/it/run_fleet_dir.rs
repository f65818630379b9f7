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

fn owned(store: &str) -> Result<usize, String> {
    let out = fleetshard()
        .args(["status", "--output", "json", "--store", store])
        .output()
        .map_err(|e| e.to_string())?;
    let v: Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
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
