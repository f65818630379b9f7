//! Three `fleetshard run` processes on one SQLite file (3 shards, no spare): they cover the
//! fleet, survive a `kill -9` of one and a SIGTERM of another, never have two owners for a
//! cluster at one instant (the audit-log replay of `tests/support`), and `fleetshard status`
//! agrees with what the processes report. The longer scenarios over every backend are in
//! `failover.rs`.

use crate::support::http;
use crate::support::replicas::{Harness, Setup, fleetshard};
use crate::support::store::StoreUnderTest;
use crate::support::timing;
use serde_json::Value;

#[test]
fn three_processes_hand_over_after_kill_and_sigterm_without_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreUnderTest::sqlite(dir.path());
    let setup = Setup {
        shards: 3,
        clusters: 12,
        ..Setup::default()
    };
    let mut h = Harness::new(dir, store, setup);
    for name in ["r0", "r1", "r2"] {
        h.start(name);
    }
    let settled = h.wait_settled("three replicas");
    assert_eq!(
        http::get(h.replicas[0].port, "/healthz").map(|(c, _)| c),
        Some(200)
    );

    // kill -9 r0: its clusters move to the others once its lease has run out.
    let f = h.kill9(0);
    let kill_failover = h.wait_takeover(&f);
    assert!(
        kill_failover >= timing::earliest_takeover_ms(),
        "taken over {kill_failover} ms after kill -9, before r0's lease could have run out"
    );
    h.wait_settled("after kill -9 of r0");

    // SIGTERM r1: it releases, r2 takes everything, r1 exits 0.
    let r1_distributor = h.is_distributor(1);
    let f = h.term(1);
    let term_failover = h.wait_takeover(&f);
    let exit = h.wait_exit(1);
    assert!(exit.success(), "r1 exit: {exit}");
    h.wait_settled("after SIGTERM of r1");

    // The whole history: no overlap; r1's handover went through its release, not its
    // lease, as did every other.
    let hist = h.check_history(settled, timing::lease_ms());
    let owners = hist.current_owners();
    assert!(h.clusters.iter().all(|c| owners[c] == ["r2"]), "{owners:?}");

    // `fleetshard status` agrees.
    let status = h.status_all_owned();
    assert!(status["generation"].as_u64().unwrap() >= 1);
    let rows = status["clusters"].as_array().unwrap();
    assert_eq!(rows.len(), h.clusters.len());
    assert!(rows.iter().all(|c| c["owner"] == "r2"), "{rows:?}");
    assert_eq!(status["unowned"], serde_json::json!([]));
    assert_eq!(status["shards"].as_array().unwrap().len(), 3);

    eprintln!(
        "failover: kill -9 {kill_failover} ms, SIGTERM {term_failover} ms (the replica leaving \
         was the distributor: {r1_distributor})"
    );
}

#[test]
fn unknown_stores_and_empty_identities_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("fleet.yaml");
    std::fs::write(
        &fleet,
        "clusters:\n- name: a\n  server: https://a.example\n",
    )
    .unwrap();
    let out = fleetshard()
        .args(["run", "--store", "ftp://x", "--identity", "r0"])
        .arg("--fleet")
        .arg(&fleet)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ftp://x"), "{err}");
    let out = fleetshard()
        .args(["run", "--store", "memory://", "--identity", " "])
        .arg("--fleet")
        .arg(&fleet)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no identity"));
}

#[test]
fn status_of_an_empty_store_lists_vacant_shards() {
    let dir = tempfile::tempdir().unwrap();
    // Made by a replica's first start (`status` reads; it never creates a store).
    drop(fleetshard_store_sqlite::SqliteStore::open(dir.path().join("empty.db")).unwrap());
    let store = format!("sqlite://{}", dir.path().join("empty.db").display());
    let out = fleetshard()
        .args([
            "status", "--store", &store, "--shards", "2", "--output", "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["generation"], Value::Null);
    assert_eq!(v["shards"].as_array().unwrap().len(), 2);
    assert_eq!(v["shards"][0]["holder"], Value::Null);
    assert_eq!(v["clusters"], serde_json::json!([]));
}
