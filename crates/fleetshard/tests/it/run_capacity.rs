//! Pods of different sizes: two `fleetshard run` processes on one SQLite file, one with
//! `--capacity 1` and one with `--capacity 3`, own the fleet 1:3; `status` shows the
//! capacities they advertise; a bad `--capacity` is refused naming the flag.

use crate::support::replicas::{Harness, SETTLE, Setup, fleetshard};
use crate::support::store::StoreUnderTest;
use crate::support::wait_for;
use serde_json::Value;

#[test]
fn replicas_own_the_fleet_in_proportion_to_their_capacities() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreUnderTest::sqlite(dir.path());
    let setup = Setup {
        shards: 2,
        clusters: 40,
        ..Setup::default()
    };
    let mut h = Harness::new(dir, store, setup);
    // Every cluster the same load (no apps, no weights): shares are cluster counts.
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&h.fleet).unwrap()).unwrap();
    for c in doc["clusters"].as_array_mut().unwrap() {
        let c = c.as_object_mut().unwrap();
        c.insert("apps".into(), 0.into());
        c.remove("weight");
    }
    std::fs::write(&h.fleet, serde_json::to_vec(&doc).unwrap()).unwrap();
    h.start_with("small", &["--capacity", "1"]);
    h.start_with("large", &["--capacity", "3"]);
    h.wait_settled("two replicas of capacities 1 and 3");
    // Targets 10 and 30 clusters, each within the 10% tolerance; the first generation may
    // have been placed before both had advertised.
    let small = wait_for("the fleet to be owned 1:3", SETTLE, || {
        let owners = h.history().current_owners();
        let small = owners.values().filter(|o| o[..] == ["small"]).count();
        let large = owners.values().filter(|o| o[..] == ["large"]).count();
        if small + large == 40 && (9..=11).contains(&small) {
            Ok(small)
        } else {
            Err(format!("small {small}, large {large}"))
        }
    });
    h.history().check_no_overlap().unwrap();
    let status = h.status().unwrap();
    let mut advertised: Vec<(String, u64)> = status["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let holder = s["holder"].as_str().unwrap().to_owned();
            (holder, s["capacity"].as_u64().unwrap())
        })
        .collect();
    advertised.sort();
    assert_eq!(
        advertised,
        [("large".to_owned(), 3), ("small".to_owned(), 1)]
    );
    eprintln!(
        "capacity 1 owns {small} of 40 clusters, capacity 3 owns {}",
        40 - small
    );
}

#[test]
fn a_bad_capacity_is_refused_naming_the_flag() {
    for bad in ["0", "1025", "two"] {
        let out = fleetshard()
            .args(["run", "--store", "memory://", "--identity", "r0"])
            .args(["--clusters", "/nonexistent", "--capacity", bad])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--capacity") && err.contains(bad), "{err}");
    }
}
