//! The distributor's hysteresis over measured costs: costs that wobble inside the band
//! move nothing that the engine alone would move, a real shift still moves clusters off
//! the overloaded shard, and estimates (not measured) are placed by the engine alone. A
//! dead holder's clusters are spread over the survivors whatever their costs.

use fleetshard_core::placement::hysteresis::Hysteresis;

use super::*;

const SHARDS: u32 = 6;
const CLUSTERS: u64 = 24;

/// Six shards held by "a" (the bench) and five others; 24 clusters with costs from 5 to
/// 104; placed once.
fn fleet(measured: bool) -> (Bench, Vec<u64>) {
    let mut b = Bench::new("a", SHARDS, CLUSTERS as usize);
    b.r = Replica::new(ReplicaConfig {
        hysteresis: Some(Hysteresis::default()),
        ..config("a", SHARDS)
    });
    b.measured = measured;
    let base: Vec<u64> = (0..CLUSTERS).map(|i| 5 + (i * 37) % 100).collect();
    b.loads = base.clone();
    renew_others(&mut b, 0);
    b.settle(ms(0));
    let generation = b.doc().generation;
    renew_others(&mut b, generation);
    b.settle(ms(100));
    (b, base)
}

/// The other holders renew, acknowledging `acked`.
fn renew_others(b: &mut Bench, acked: u64) {
    for n in 1..SHARDS {
        b.put(&shard_key(ROOT, n), shard_record(&format!("r{n}"), acked));
    }
}

/// Clusters whose shard differs between two documents.
fn moved(before: &AssignmentDoc, after: &AssignmentDoc) -> usize {
    after
        .clusters
        .iter()
        .filter(|(id, s)| before.clusters.get(*id) != Some(s))
        .count()
}

/// Twelve rounds of every cost multiplied by an independent factor in 1 ± `w`: the
/// clusters moved in all.
fn wobble(b: &mut Bench, base: &[u64], w: f64) -> usize {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut total = 0;
    for round in 1..=12u64 {
        b.loads = base
            .iter()
            .map(|&l| {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let factor = 1.0 - w + (seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 * w;
                (l as f64 * factor * 100.0).round() as u64
            })
            .collect();
        b.fleet_revision += 1;
        let before = b.doc();
        renew_others(b, before.generation);
        b.settle(ms(round * 1_000));
        let generation = b.doc().generation;
        renew_others(b, generation);
        b.settle(ms(round * 1_000 + 100));
        total += moved(&before, &b.doc());
    }
    total
}

/// Moves over twelve rounds on this fleet (6 shards of 4 lumpy clusters each): ±5 %: 0
/// and 0; ±10 %: 1 and 1; ±15 %: 6 and 6; ±20 %: 10 and 15; ±25 %: 13 and 22; ±30 %: 15
/// and 27 (with hysteresis, and the engine alone). Shards of four clusters drift beyond
/// the band from ±15 %; the moves the band allows are then the ones that pay.
#[test]
fn wobbling_measured_costs_move_fewer_clusters_than_the_engine_alone() {
    for (w, fewer) in [(0.05, false), (0.20, true), (0.25, true), (0.30, true)] {
        let (mut held, base) = fleet(true);
        let (mut engine, _) = fleet(false);
        assert_eq!(held.doc().clusters, engine.doc().clusters);
        let with = wobble(&mut held, &base, w);
        let without = wobble(&mut engine, &base, w);
        println!("±{w}: {with} with hysteresis, {without} without");
        if fewer {
            assert!(
                with < without,
                "±{w}: {with} with hysteresis, {without} without"
            );
        } else {
            assert_eq!(
                (with, without),
                (0, 0),
                "±{w}: inside the band nothing moves"
            );
        }
    }
}

#[test]
fn a_real_shift_still_moves_clusters_off_the_overloaded_shard() {
    let (mut b, base) = fleet(true);
    let doc = b.doc();
    // Every cluster of shard 0 now costs four times as much.
    b.loads = base
        .iter()
        .enumerate()
        .map(|(i, &l)| {
            if doc.clusters[&format!("c{i}")] == 0 {
                l * 4
            } else {
                l
            }
        })
        .collect();
    b.fleet_revision += 1;
    renew_others(&mut b, doc.generation);
    b.settle(ms(1_000));
    let after = b.doc();
    let moved_off: Vec<_> = after
        .clusters
        .iter()
        .filter(|(id, s)| doc.clusters[*id] == 0 && **s != 0)
        .collect();
    assert!(
        !moved_off.is_empty(),
        "nothing left the overloaded shard: {after:?}"
    );
    assert!(
        after
            .clusters
            .iter()
            .all(|(id, s)| doc.clusters[id] == 0 || *s == doc.clusters[id]),
        "only the overloaded shard gave clusters away"
    );
}

/// A holder dies while costs are measured and one survivor's clusters cost four fifths of
/// the others': the dead holder's clusters are spread, no survivor taking more than its
/// share of them plus the tolerance (the engine alone gives the cheap survivor
/// twice its share: a failover's burst on one replica). Nothing else moves.
#[test]
fn a_dead_holders_clusters_are_spread_over_the_survivors() {
    let mut b = Bench::new("a", SHARDS, 120);
    b.r = Replica::new(ReplicaConfig {
        hysteresis: Some(Hysteresis::default()),
        ..config("a", SHARDS)
    });
    b.measured = true;
    b.loads = vec![30; 120];
    renew_others(&mut b, 0);
    b.settle(ms(0));
    let generation = b.doc().generation;
    renew_others(&mut b, generation);
    b.settle(ms(100));
    let before = b.doc();
    // Shard 1's clusters measure cheaper: 24 against 30.
    b.loads = (0..120)
        .map(|i| {
            if before.clusters[&format!("c{i}")] == 1 {
                24
            } else {
                30
            }
        })
        .collect();
    b.fleet_revision += 1;
    // Shard 5's holder stops renewing; the others renew until it has expired.
    for t in (200..=5_000).step_by(200) {
        for n in 1..SHARDS - 1 {
            b.put(
                &shard_key(ROOT, n),
                shard_record(&format!("r{n}"), b.doc().generation),
            );
        }
        b.settle(ms(t));
    }
    let after = b.doc();
    assert!(after.clusters.values().all(|&s| s != 5), "{after:?}");
    let vacated: Vec<&String> = before
        .clusters
        .iter()
        .filter(|(_, s)| **s == 5)
        .map(|(id, _)| id)
        .collect();
    let mut taken = [0u64; SHARDS as usize];
    for id in &vacated {
        taken[after.clusters[*id] as usize] += 30;
    }
    let share = taken.iter().sum::<u64>() as f64 / f64::from(SHARDS - 1);
    assert!(
        taken.iter().all(|&t| t as f64 <= share * 1.10),
        "each survivor's share is {share}: {taken:?}"
    );
    assert!(
        after
            .clusters
            .iter()
            .all(|(id, s)| before.clusters[id] == 5 || *s == before.clusters[id]),
        "only the dead holder's clusters moved"
    );
}
