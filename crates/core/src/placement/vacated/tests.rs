use super::*;
use crate::model::Cluster;
use crate::placement::{BalancedPlacer, PlacementConfig};

/// 900 clusters on 10 shards, placed evenly by equal loads; then measured: shard 8's
/// clusters cost 60, every other 100 (shard 8 is far below its target), and shard 9 is
/// vacant.
fn failover() -> Failover {
    let clusters: Vec<Cluster> = (0..900)
        .map(|i| Cluster::new(format!("id-{i:05}"), format!("https://c{i}.example")))
        .collect();
    let specs = vec![ShardSpec::default(); 10];
    let config = PlacementConfig::default();
    let even = vec![100; clusters.len()];
    let before = BalancedPlacer::new(config.clone(), specs.clone()).place(&clusters, &even, None);
    let loads: Vec<u64> = before
        .shards
        .iter()
        .map(|s| if *s == Some(8) { 60 } else { 100 })
        .collect();
    let after = BalancedPlacer::new(config, specs).with_vacant([9]).place(
        &clusters,
        &loads,
        Some(&before.as_previous(&clusters)),
    );
    let vacated = before.shards.iter().map(|s| *s == Some(9)).collect();
    Failover {
        clusters,
        loads,
        vacated,
        placement: after,
    }
}

/// A placement just after shard 9 lost its holder, and what [`spread_vacated`] needs.
struct Failover {
    clusters: Vec<Cluster>,
    loads: Vec<u64>,
    vacated: Vec<bool>,
    placement: Placement,
}

impl Failover {
    fn units(&self) -> Vec<Unit<'_>> {
        self.clusters
            .iter()
            .zip(&self.loads)
            .zip(&self.vacated)
            .map(|((c, &load), &vacated)| Unit {
                id: &c.id,
                load,
                // Every cluster has ten apps: the same work to take over.
                work: 15,
                vacated,
            })
            .collect()
    }
}

/// Per shard: vacated work taken, and all load.
fn taken_and_load(p: &Placement, units: &[Unit<'_>]) -> (Vec<u64>, Vec<u64>) {
    let n = p.targets.len();
    let (mut taken, mut load) = (vec![0; n], vec![0; n]);
    for (u, s) in units.iter().zip(&p.shards) {
        let s = s.expect("placed") as usize;
        load[s] += u.load;
        if u.vacated {
            taken[s] += u.work;
        }
    }
    (taken, load)
}

#[test]
fn no_survivor_takes_more_than_its_share_of_a_vacant_shards_clusters() {
    let f = failover();
    let units = f.units();
    let mut p = f.placement.clone();
    let (taken, _) = taken_and_load(&p, &units);
    let share = taken.iter().sum::<u64>() as f64 / 9.0;
    // What placement alone does: the cheap survivor takes far more than its share (of the
    // work: every vacated cluster is as much work to take over).
    assert!(taken[8] as f64 > 2.0 * share, "{taken:?}");

    let moved = spread_vacated(&mut p, &units, &vec![ShardSpec::default(); 10], 0.10)
        .expect("vacated")
        .moved;
    assert!(moved > 0);
    let (taken, load) = taken_and_load(&p, &units);
    for s in 0..9 {
        assert!(
            taken[s] as f64 <= share * 1.10 + 1e-9,
            "shard {s}: {taken:?}"
        );
        assert!(
            load[s] as f64 <= p.targets[s] * 1.10 + 1e-9,
            "shard {s}: {load:?}"
        );
    }
    assert_eq!(taken[9], 0);
    // Only vacated clusters moved, and the count says how many.
    let changed: Vec<usize> = (0..units.len())
        .filter(|&i| f.placement.shards[i] != p.shards[i])
        .collect();
    assert!(changed.iter().all(|&i| units[i].vacated));
    assert_eq!(changed.len(), moved);

    // The same result from the reversed input order.
    let mut reversed = failover();
    reversed.clusters.reverse();
    reversed.loads.reverse();
    reversed.vacated.reverse();
    reversed.placement.shards.reverse();
    let mut rp = reversed.placement.clone();
    spread_vacated(
        &mut rp,
        &reversed.units(),
        &vec![ShardSpec::default(); 10],
        0.10,
    );
    rp.shards.reverse();
    assert_eq!(rp.shards, p.shards);
}

#[test]
fn a_spread_stays_within_its_zone_and_every_bound() {
    // Zone b: shards 0 and 1; zone a: 2, 3 and the vacant 4. Shard 0 took six vacated
    // clusters (zone b spilled), shard 3 four; shard 1 is nearly full.
    let held: [(u32, u64, usize); 4] = [(0, 40, 6), (1, 90, 0), (2, 50, 0), (3, 50, 4)];
    let mut ids = Vec::new();
    let mut placed = Vec::new();
    for (shard, own, vacated) in held {
        ids.push((format!("own-{shard}"), own, false));
        placed.push(Some(shard));
        for k in 0..vacated {
            ids.push((format!("vacated-{shard}-{k}"), 10, true));
            placed.push(Some(shard));
        }
    }
    let units: Vec<Unit<'_>> = ids
        .iter()
        .map(|(id, load, vacated)| Unit {
            id,
            load: *load,
            work: *load,
            vacated: *vacated,
        })
        .collect();
    let specs: Vec<ShardSpec> = ["zb", "zb", "za", "za", "za"]
        .iter()
        .map(|z| ShardSpec {
            zone: Some((*z).to_owned()),
            capacity: 1,
        })
        .collect();
    let mut p = Placement {
        shards: placed.clone(),
        targets: vec![100.0, 100.0, 100.0, 100.0, 0.0],
        zones: ZonePlan::Aware(Vec::new()),
        homes: vec![None; units.len()],
        cross_zone: Default::default(),
        warnings: Vec::new(),
    };
    // Zone b's share: 60 × ½ × 1.1 = 33 each; zone a's: 40 × ½ × 1.1 = 22 each. Shard 1
    // has room for two (to its bound, 110); shard 0 keeps 40, since the room in zone a is
    // not its zone's. Shard 3 hands two to shard 2.
    let spread = spread_vacated(&mut p, &units, &specs, 0.10).expect("vacated");
    assert_eq!(spread.moved, 4);
    let (taken, load) = taken_and_load(&p, &units);
    assert_eq!(taken[..4], [40, 20, 20, 20]);
    assert_eq!(load[..4], [80, 110, 70, 70]);
    // The report says the same, and names each shard that took vacated work.
    assert_eq!(
        (&spread.taken[..4], &spread.load[..4]),
        (&taken[..4], &load[..4])
    );
    assert_eq!(
        spread.to_string(),
        "4 moved by the spread; 0: 40/33 (0.73 of bound) 1: 20/33 (1.00 of bound) \
         2: 20/22 (0.64 of bound) 3: 20/22 (0.64 of bound)"
    );
}

#[test]
fn nothing_vacated_moves_nothing() {
    let mut f = failover();
    f.vacated.iter_mut().for_each(|v| *v = false);
    let mut p = f.placement.clone();
    assert_eq!(
        spread_vacated(&mut p, &f.units(), &vec![ShardSpec::default(); 10], 0.10),
        None
    );
    assert_eq!(p.shards, f.placement.shards);
}
