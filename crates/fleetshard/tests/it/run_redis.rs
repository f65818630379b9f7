//! `fleetshard run --redis`: Argo CD's app-state cache written by the replicas, read back
//! from real `redis-server`s by a decoder written from Argo CD's documented layout
//! (`<key>|1.8.3.gz`, gzip of JSON), independent of the writer. Each replica writes to a
//! Redis of its own, so what each writes is told apart: the tree, managed resources and
//! cluster info of exactly the apps and clusters it owns; after a replica leaves, the new
//! owner writes its apps and cluster; Redis killed and restarted mid-run does not stop
//! reconciliation, and the keys come back.

use std::io::Read;
use std::time::Duration;

use crate::run_gitops::{SETTLE, World, synced, world_with};
use crate::support::{signal, wait_for};
use fleetshard_testsupport::git::config_map;
use fleetshard_testsupport::redis::RedisServer;
use serde_json::Value;

/// A document at `key|1.8.3.gz`, gunzipped and parsed (Argo CD's API server's reading).
fn read(redis: &RedisServer, key: &str) -> Option<Value> {
    let bytes = redis.get(&format!("{key}|1.8.3.gz")).ok()??;
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(bytes.as_slice())
        .read_to_end(&mut json)
        .ok()?;
    serde_json::from_slice(&json).ok()
}

fn tree_key(app: &str) -> String {
    format!("app|resources-tree|{app}")
}

fn managed_key(app: &str) -> String {
    format!("app|managed-resources|{app}")
}

fn cluster_key(world: &World, i: usize) -> String {
    format!("cluster|info|{}", world.fakes.clusters[i].url())
}

/// The ConfigMap names in app `i`'s tree and managed resources in `redis`, once both are
/// there and show the ConfigMap with `value` (the live one).
fn app_state(redis: &RedisServer, i: usize, value: &str) -> Result<(), String> {
    let app = format!("app{i}");
    let tree = read(redis, &tree_key(&app)).ok_or("no tree")?;
    let nodes: Vec<&str> = tree["nodes"]
        .as_array()
        .ok_or("no nodes")?
        .iter()
        .filter_map(|n| n["name"].as_str())
        .collect();
    if nodes != [format!("cm{i}")] {
        return Err(format!("tree {tree}"));
    }
    let managed = read(redis, &managed_key(&app)).ok_or("no managed resources")?;
    let live: Value = serde_json::from_str(managed[0]["liveState"].as_str().unwrap_or("null"))
        .map_err(|e| e.to_string())?;
    if live["data"]["value"] != value {
        return Err(format!("managed resources {managed}"));
    }
    Ok(())
}

fn cluster_info(world: &World, redis: &RedisServer, i: usize) -> Result<Value, String> {
    let info = read(redis, &cluster_key(world, i)).ok_or("no cluster info")?;
    if info["connectionState"]["status"] != "Successful" || info["applicationsCount"] != 1 {
        return Err(format!("cluster info {info}"));
    }
    Ok(info)
}

/// Which Redis (0 or 1) holds app `i`'s state, once exactly one does.
fn holder(redis: &[RedisServer; 2], i: usize) -> Result<usize, String> {
    let has: Vec<bool> = redis.iter().map(|r| app_state(r, i, "1").is_ok()).collect();
    match has.as_slice() {
        [true, false] => Ok(0),
        [false, true] => Ok(1),
        other => Err(format!("app{i} in {other:?}")),
    }
}

#[test]
fn replicas_write_argo_cds_app_state_for_what_they_own() {
    let mut redis = [RedisServer::start().unwrap(), RedisServer::start().unwrap()];
    let args = |r: &RedisServer| vec!["--redis".to_owned(), r.address()];
    let (a0, a1) = (args(&redis[0]), args(&redis[1]));
    let mut world = world_with(&[], [&a0, &a1]);

    // Replicas started together may both have held a cluster at first: start clean and
    // let the owners' next refreshes (every second) write again.
    for r in &redis {
        r.command(&["FLUSHALL"]).unwrap();
    }
    let owners: Vec<usize> = (0..2)
        .map(|i| {
            wait_for(&format!("app{i}'s state in one Redis"), SETTLE, || {
                holder(&redis, i)
            })
        })
        .collect();
    // A few more refreshes: still only in its owner's Redis, with its cluster's info.
    std::thread::sleep(Duration::from_secs(3));
    for i in 0..2 {
        assert_eq!(holder(&redis, i), Ok(owners[i]));
        let info = cluster_info(&world, &redis[owners[i]], i).unwrap();
        assert!(
            info["serverVersion"]
                .as_str()
                .is_some_and(|v| !v.is_empty()),
            "{info}"
        );
        assert!(
            read(&redis[1 - owners[i]], &cluster_key(&world, i)).is_none(),
            "cluster c{i}'s info written by a replica that does not own it"
        );
    }

    // The owner of c0 leaves; the other replica (its Redis) then has app0 and c0.
    let leaving = owners[0];
    let staying = 1 - leaving;
    signal(world.replicas[leaving].0.id(), "-TERM");
    assert!(world.replicas[leaving].0.wait().unwrap().success());
    wait_for("app0's state under its new owner", SETTLE, || {
        app_state(&redis[staying], 0, "1")?;
        cluster_info(&world, &redis[staying], 0).map(|_| ())
    });

    // The staying replica's Redis goes away: reconciliation goes on without it.
    redis[staying].kill().unwrap();
    world.git.write("app0/cm.yaml", &config_map("cm0", "2"));
    world.git.write("app1/cm.yaml", &config_map("cm1", "2"));
    let second = world.git.commit("second");
    for i in 0..2 {
        wait_for(&format!("app{i} synced without Redis"), SETTLE, || {
            synced(&world.fakes, &format!("app{i}"), &second)
        });
    }
    // Back, empty: the keys come back with what is live now.
    redis[staying].restart().unwrap();
    for i in 0..2 {
        wait_for(&format!("app{i}'s state back in Redis"), SETTLE, || {
            app_state(&redis[staying], i, "2")?;
            cluster_info(&world, &redis[staying], i).map(|_| ())
        });
    }
}
