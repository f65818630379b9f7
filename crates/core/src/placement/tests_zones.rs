//! The zone rules of `ARCHITECTURE.md` ("Zones") as properties of random zoned fleets:
//! a local zone keeps its clusters at home; spill goes only to zones with spare capacity,
//! in proportion to their spare; a cluster that fits under no bound stays home. And the
//! docs/plan.md's zone-aware example, where a spilling zone's cluster used to land on a zone
//! with no spare.

use proptest::prelude::*;

use super::*;
use crate::model::{Cluster, ShardSpec, ZONE_LABEL};

const ZONES: [&str; 4] = ["za", "zb", "zc", "zd"];

fn zoned(i: usize, zone: &str, pin: Option<i64>) -> Cluster {
    let mut c = Cluster::new(format!("id-{i:05}"), format!("https://c{i}.example"));
    c.labels.insert(ZONE_LABEL.into(), zone.into());
    c.shard = pin;
    c
}

/// What a test needs to judge a zone-aware placement.
struct Judged {
    p: Placement,
    reports: Vec<ZoneReport>,
    /// Per shard: its zone's index in `reports`, its load and its bound.
    shard_zone: Vec<usize>,
    load: Vec<u64>,
    bound: Vec<f64>,
}

fn judge(clusters: &[Cluster], loads: &[u64], specs: &[ShardSpec]) -> Option<Judged> {
    let config = PlacementConfig::default();
    let p = place(clusters, loads, specs, None, &config);
    let ZonePlan::Aware(reports) = p.zones.clone() else {
        return None;
    };
    let zone_index = |z: &str| reports.iter().position(|r| r.zone == z).unwrap();
    let shard_zone: Vec<usize> = specs
        .iter()
        .map(|s| zone_index(s.zone.as_deref().unwrap()))
        .collect();
    let mut load = vec![0; specs.len()];
    for (s, &w) in p.shards.iter().zip(loads) {
        if let Some(s) = s {
            load[*s as usize] += w;
        }
    }
    let bound = p
        .targets
        .iter()
        .map(|t| t * (1.0 + config.tolerance))
        .collect();
    Some(Judged {
        p,
        reports,
        shard_zone,
        load,
        bound,
    })
}

/// A random zoned fleet: 2–4 zones of 1–3 shards of capacity 1–3; clusters with skewed
/// loads in random zones, a few pinned.
fn zoned_fleet() -> impl Strategy<Value = (Vec<Cluster>, Vec<u64>, Vec<ShardSpec>)> {
    let shards = prop::collection::vec((0usize..4, 1u32..4), 2..10);
    let clusters = prop::collection::vec((0usize..4, 0u32..10_000, 0u32..100), 5..120);
    (shards, clusters).prop_filter_map("every zone with clusters has a shard", |(sh, cl)| {
        let specs: Vec<ShardSpec> = sh
            .iter()
            .map(|&(z, capacity)| ShardSpec {
                zone: Some(ZONES[z].into()),
                capacity,
            })
            .collect();
        let with_shard = |z: usize| sh.iter().any(|s| s.0 == z);
        let mut clusters = Vec::new();
        let mut loads = Vec::new();
        for (i, &(z, r, pin)) in cl.iter().enumerate() {
            if !with_shard(z) {
                continue;
            }
            // One in 25 pinned to some shard.
            let pin = (pin < 4).then(|| i64::from(pin) % specs.len() as i64);
            clusters.push(zoned(i, ZONES[z], pin));
            loads.push(u64::from(r % 20) + if r % 13 == 0 { u64::from(r % 150) } else { 0 });
        }
        (!clusters.is_empty()).then_some((clusters, loads, specs))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(fleetshard_util::cases::property_cases(ProptestConfig::default().cases, 256)))]

    /// Rule 1: a local zone's (unpinned) clusters all run on its own shards.
    #[test]
    fn a_local_zone_keeps_its_clusters_at_home((clusters, loads, specs) in zoned_fleet()) {
        let Some(j) = judge(&clusters, &loads, &specs) else { return Ok(()) };
        for (c, s) in clusters.iter().zip(&j.p.shards) {
            let (Some(s), None) = (s, c.shard) else { continue };
            let home = j.reports.iter().position(|r| Some(r.zone.as_str()) == c.zone()).unwrap();
            if j.reports[home].local {
                prop_assert_eq!(j.shard_zone[*s as usize], home, "{} left local zone {}", c.id, j.reports[home].zone);
            }
        }
    }

    /// Rule 2: spill goes only to local zones with spare capacity (demand below their
    /// fair share), never to a spilling zone or a full one; and each such zone's target
    /// grows by the spill in proportion to its spare.
    #[test]
    fn spill_goes_only_to_zones_with_spare_in_proportion((clusters, loads, specs) in zoned_fleet()) {
        let Some(j) = judge(&clusters, &loads, &specs) else { return Ok(()) };
        let total: f64 = j.p.shards.iter().zip(&loads).filter(|(s, _)| s.is_some()).map(|(_, &w)| w as f64).sum();
        let demand = |r: &ZoneReport| r.demand_share * total;
        let fair = |r: &ZoneReport| r.capacity_share * total;
        let spare = |r: &ZoneReport| if r.local { (fair(r) - demand(r)).max(0.0) } else { 0.0 };
        for (c, s) in clusters.iter().zip(&j.p.shards) {
            let (Some(s), None) = (s, c.shard) else { continue };
            let to = &j.reports[j.shard_zone[*s as usize]];
            if Some(to.zone.as_str()) != c.zone() {
                prop_assert!(to.local && spare(to) > 1e-9 * total.max(1.0),
                    "{} spilled to zone {} without spare: {:?}", c.id, to.zone, j.reports);
            }
        }
        let spill: f64 = j.reports.iter().filter(|r| !r.local).map(|r| demand(r) - fair(r)).sum();
        let total_spare: f64 = j.reports.iter().map(spare).sum();
        for r in j.reports.iter().filter(|r| spare(r) > 0.0) {
            let want = demand(r) + spill * spare(r) / total_spare;
            prop_assert!((r.target_load - want).abs() <= 1e-6 * total.max(1.0), "{r:?}: target {want}");
        }
    }

    /// Rule 3: a cluster that fits under no bound of the shards it may use stays home;
    /// and a cluster away from home always fits under its host's bound.
    #[test]
    fn a_cluster_that_fits_nowhere_stays_home((clusters, loads, specs) in zoned_fleet()) {
        let Some(j) = judge(&clusters, &loads, &specs) else { return Ok(()) };
        let heaviest_bound = j.bound.iter().copied().fold(0.0, f64::max);
        for ((c, s), &w) in clusters.iter().zip(&j.p.shards).zip(&loads) {
            let (Some(s), None) = (s, c.shard) else { continue };
            let s = *s as usize;
            let at_home = Some(j.reports[j.shard_zone[s]].zone.as_str()) == c.zone();
            if w as f64 > heaviest_bound {
                prop_assert!(at_home, "{} ({w}) fits under no bound but left home", c.id);
            }
            if !at_home {
                prop_assert!(w as f64 <= j.bound[s], "{} ({w}) is away above shard {s}'s bound {}", c.id, j.bound[s]);
            }
        }
        // Every load is accounted for.
        prop_assert_eq!(j.load.iter().sum::<u64>(), j.p.shards.iter().zip(&loads).filter(|(s, _)| s.is_some()).map(|(_, &w)| w).sum::<u64>());
    }
}

/// docs/plan.md's example (`examples/fleet.yaml`, 6 replicas): eu-west-1b spills (its
/// demand is 23 % over its fair share) and only eu-west-1c has spare, since eu-west-1a
/// carries more than its share once the two pinned clusters count there. The 1b cluster of
/// 64 fits under no bound where it may go, so it stays home, isolated; it used to land
/// on a full eu-west-1a shard, which then ran 30–40 % above its target while eu-west-1c's
/// shards ran at half of theirs.
#[test]
fn the_readme_example_spills_only_where_there_is_spare() {
    let (a, b, c) = ("eu-west-1a", "eu-west-1b", "eu-west-1c");
    // (zone, load, pin)
    let fleet = [
        (a, 48, None),
        (a, 60, None),
        (a, 31, None),
        (a, 9, None),
        (b, 64, None),
        (b, 17, None),
        (b, 26, None),
        (b, 6, Some(3)),
        (c, 39, None),
        (c, 28, Some(0)),
        (c, 19, None),
    ];
    let clusters: Vec<Cluster> = fleet
        .iter()
        .enumerate()
        .map(|(i, &(z, _, pin))| zoned(i, z, pin))
        .collect();
    let loads: Vec<u64> = fleet.iter().map(|f| f.1).collect();
    let spec = |zone: &str, capacity| ShardSpec {
        zone: Some(zone.into()),
        capacity,
    };
    let specs = vec![
        spec(a, 2),
        spec(b, 1),
        spec(c, 1),
        spec(a, 2),
        spec(b, 1),
        spec(c, 1),
    ];
    let j = judge(&clusters, &loads, &specs).expect("zone-aware");
    let local: Vec<bool> = j.reports.iter().map(|r| r.local).collect();
    assert_eq!(local, vec![true, false, true], "{:?}", j.reports);
    for (i, s) in j.p.shards.iter().enumerate() {
        let s = s.unwrap() as usize;
        if fleet[i].0 == b && fleet[i].2.is_none() {
            assert_ne!(
                specs[s].zone.as_deref(),
                Some(a),
                "cluster {i} spilled into full {a}"
            );
        }
    }
    // eu-west-1a's shards hold only their own zone's load and the pins: within bound.
    for s in [0, 3] {
        assert!(j.load[s] as f64 <= j.bound[s], "{:?} {:?}", j.load, j.bound);
    }
}
