//! Failover figures of real `fleetshard run` processes — not part of the normal suite
//! (every test is `#[ignore]`d): `scripts/failover-figures [sqlite|etcd]` runs them in
//! release mode, one at a time, and prints a table of the `FIGURE` lines they print.
//!
//! - crash failover: `kill -9` of a shard holder, from the kill to the last of its clusters
//!   acquired by another process (audit logs, wall clock; the harness dates the kill with the
//!   same clock), with and without a spare replica;
//! - graceful handover: the same after SIGTERM;
//! - convergence after 10 → 20 replicas on 20 fixed shards: from starting the 10 new
//!   processes until all 20 shards are held and every cluster is on its home shard;
//! - steady-state store writes per second per replica (the store revision's growth).
//!
//! Every trial also replays all audit logs: an overlap fails the run.
//! Environment: `FLEETSHARD_FIGURES_STORE` (`sqlite`, or `etcd` with the `etcd` feature),
//! `FLEETSHARD_FIGURES_TRIALS` (default 20), `FLEETSHARD_FIGURES_WINDOW_SECS` (writes/s
//! window, default 30).

use std::time::Duration;

use crate::support::replicas::{Harness, Setup};
use crate::support::store::StoreUnderTest;
use crate::support::{percentiles, unix_ms};

fn env_num(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?}: not a number")),
        Err(_) => default,
    }
}

fn trials() -> usize {
    env_num("FLEETSHARD_FIGURES_TRIALS", 20) as usize
}

/// The store named by `FLEETSHARD_FIGURES_STORE`.
fn harness(setup: Setup) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let backend = std::env::var("FLEETSHARD_FIGURES_STORE").unwrap_or_else(|_| "sqlite".into());
    let store = match backend.as_str() {
        "sqlite" => StoreUnderTest::sqlite(dir.path()),
        #[cfg(feature = "etcd")]
        "etcd" => StoreUnderTest::etcd(dir.path()),
        other => panic!(
            "FLEETSHARD_FIGURES_STORE={other:?}: expected sqlite or etcd (etcd needs --features etcd)"
        ),
    };
    Harness::new(dir, store, setup)
}

/// One figure line for the script: name, backend, trials, p50, p99, max, unit, note.
fn figure(name: &str, h: &Harness, samples: &[u64], unit: &str, note: &str) {
    let (p50, p99, max) = percentiles(samples).expect("at least one sample");
    println!(
        "\nFIGURE\t{name}\t{}\t{}\t{p50}\t{p99}\t{max}\t{unit}\t{note}",
        h.store.name(),
        samples.len()
    );
}

/// No two processes ever owned one cluster at one instant, over the whole run.
fn assert_no_overlap(h: &Harness) -> usize {
    let hist = h.history();
    hist.check_no_overlap()
        .unwrap_or_else(|e| panic!("{}: {e}", h.store.name()));
    hist.overlaps().len()
}

/// `replicas` replicas on 5 shards; each trial stops a shard holder (round robin over the
/// identities) with `stop`, measures the takeover, waits for the fleet to settle, restarts
/// the identity and waits again.
fn failover_trials(replicas: usize, graceful: bool) -> (Harness, Vec<u64>) {
    let mut h = harness(Setup::default());
    for i in 0..replicas {
        h.start(&format!("r{i}"));
    }
    h.wait_settled("started");
    let mut took = Vec::new();
    for trial in 0..trials() {
        // The next identity, in turn, among those holding a shard (a spare has nothing to
        // hand over).
        let live = h.live();
        let holders: Vec<usize> = live
            .iter()
            .copied()
            .filter(|&i| h.shard_of(i).is_some())
            .collect();
        let victim = holders[trial % holders.len()];
        let identity = h.replicas[victim].identity.clone();
        let distributor = h.is_distributor(victim);
        let f = if graceful {
            h.term(victim)
        } else {
            h.kill9(victim)
        };
        let t = h.wait_takeover(&f);
        if graceful {
            let exit = h.wait_exit(victim);
            assert!(exit.success(), "exit after SIGTERM: {exit}");
        }
        eprintln!("trial {trial}: {identity} (distributor: {distributor}) taken over in {t} ms");
        took.push(t);
        h.wait_settled("after the failure");
        h.start(&identity);
        h.wait_settled("after the restart");
    }
    assert_no_overlap(&h);
    (h, took)
}

#[test]
#[ignore = "figures: scripts/failover-figures"]
fn figures_crash_failover_without_spare() {
    let (h, took) = failover_trials(5, false);
    figure(
        "kill -9, 5 replicas / 5 shards (no spare)",
        &h,
        &took,
        "ms",
        "0 overlaps",
    );
}

#[test]
#[ignore = "figures: scripts/failover-figures"]
fn figures_crash_failover_with_spare() {
    let (h, took) = failover_trials(6, false);
    figure(
        "kill -9, 6 replicas / 5 shards (one spare)",
        &h,
        &took,
        "ms",
        "0 overlaps",
    );
}

#[test]
#[ignore = "figures: scripts/failover-figures"]
fn figures_graceful_handover_without_spare() {
    let (h, took) = failover_trials(5, true);
    figure(
        "SIGTERM, 5 replicas / 5 shards (no spare)",
        &h,
        &took,
        "ms",
        "0 overlaps",
    );
}

#[test]
#[ignore = "figures: scripts/failover-figures"]
fn figures_graceful_handover_with_spare() {
    let (h, took) = failover_trials(6, true);
    figure(
        "SIGTERM, 6 replicas / 5 shards (one spare)",
        &h,
        &took,
        "ms",
        "0 overlaps",
    );
}

/// 20 fixed shards, 10 replicas (the clusters of the 10 vacant shards displaced); start 10
/// more and time until every shard is held and every cluster is home; SIGTERM the 10 new
/// ones and settle again; repeat.
#[test]
#[ignore = "figures: scripts/failover-figures"]
fn figures_convergence_10_to_20() {
    let mut h = harness(Setup {
        shards: 20,
        clusters: 100,
        ..Setup::default()
    });
    for i in 0..10 {
        h.start(&format!("r{i}"));
    }
    h.wait_settled("10 replicas on 20 shards");
    let mut took = Vec::new();
    for trial in 0..trials().div_ceil(2) {
        let t0 = unix_ms();
        let new: Vec<usize> = (10..20).map(|i| h.start(&format!("r{i}"))).collect();
        h.wait_settled("20 replicas");
        // Settled is detected by polling; the fleet converged at the last handover, which
        // the audit logs date: the latest start of a current ownership.
        let last = h
            .history()
            .intervals
            .iter()
            .filter(|iv| iv.end.is_none())
            .map(|iv| iv.start)
            .max()
            .unwrap();
        let t = last.saturating_sub(t0);
        eprintln!("trial {trial}: converged in {t} ms");
        took.push(t);
        for &i in &new {
            h.term(i);
        }
        for &i in &new {
            assert!(h.wait_exit(i).success());
        }
        h.wait_settled("back to 10 replicas");
    }
    assert_no_overlap(&h);
    figure(
        "convergence 10 → 20 replicas, 20 shards, 100 clusters",
        &h,
        &took,
        "ms",
        "0 overlaps",
    );
}

/// Store writes per second per replica in steady state: the store revision (one per write)
/// over a window, divided by the replica count.
fn writes_per_second(replicas: usize) {
    let mut h = harness(Setup::default());
    for i in 0..replicas {
        h.start(&format!("r{i}"));
    }
    h.wait_settled("started");
    // Let the start-up writes (claims, generations, acks) pass.
    std::thread::sleep(Duration::from_secs(3));
    h.wait_settled("steady");
    let window = env_num("FLEETSHARD_FIGURES_WINDOW_SECS", 30);
    let (r0, t0) = (h.revision(), unix_ms());
    std::thread::sleep(Duration::from_secs(window));
    let (r1, t1) = (h.revision(), unix_ms());
    h.wait_settled("still steady");
    assert_no_overlap(&h);
    let per_replica_milli = (r1 - r0) * 1_000_000 / ((t1 - t0) * replicas as u64);
    println!(
        "\nFIGURE\twrites/s per replica, {replicas} replicas / 5 shards\t{}\t1\t{}.{:03}\t-\t-\twrites/s\t{} writes in {} ms",
        h.store.name(),
        per_replica_milli / 1000,
        per_replica_milli % 1000,
        r1 - r0,
        t1 - t0
    );
}

#[test]
#[ignore = "figures: scripts/failover-figures"]
fn figures_writes_per_second_without_spare() {
    writes_per_second(5);
}

#[test]
#[ignore = "figures: scripts/failover-figures"]
fn figures_writes_per_second_with_spare() {
    writes_per_second(6);
}
