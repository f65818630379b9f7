//! Tests for `generate.rs`.

use super::*;
use proptest::prelude::*;

fn counts(fleet: &Fleet) -> Vec<u64> {
    fleet.app_counts()
}

fn is_uuid_shaped(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        && groups[2].starts_with('4')
        && groups[3].starts_with('8')
}

#[test]
fn same_spec_same_fleet_and_seed_matters() {
    let spec = FleetSpec::new(500)
        .with_seed(11)
        .with_zones(["a-1a", "a-1b"])
        .with_pins(0.1, 4);
    let fleet = spec.generate();
    assert_eq!(fleet, spec.generate());
    assert_eq!(fleet, spec.clone().try_generate().unwrap());

    let other = spec.clone().with_seed(12).generate();
    assert_ne!(fleet.clusters[0].id, other.clusters[0].id);
    assert_ne!(counts(&fleet), counts(&other));
    let zones = |f: &Fleet| -> Vec<Option<String>> {
        f.clusters
            .iter()
            .map(|c| c.zone().map(str::to_owned))
            .collect()
    };
    assert_ne!(zones(&fleet), zones(&other));
}

#[test]
fn output_is_pinned_across_platforms_and_versions() {
    // Golden values: if this fails, the generator changed and every recorded benchmark
    // fleet with it. Only update deliberately.
    let fleet = FleetSpec::new(1000)
        .with_seed(42)
        .with_zones(["eu-west-1a", "eu-west-1b", "eu-west-1c"])
        .generate();
    assert_eq!(fleet.clusters[0].id, "70b8aaf8-5128-4aac-8a25-069547035c50");
    let c = counts(&fleet);
    let heaviest = (0..c.len())
        .max_by_key(|&i| (c[i], usize::MAX - i))
        .unwrap();
    assert_eq!((heaviest, c[heaviest]), (196, 1336));
    assert_eq!(fleet.clusters[0].zone(), Some("eu-west-1a"));
    let fingerprint = c
        .iter()
        .fold(0u64, |h, &x| h.wrapping_mul(0x100_0000_01B3) ^ x);
    assert_eq!(fingerprint, 0x4dd2_a3f5_90c3_3a76);
}

#[test]
fn clusters_and_apps_have_the_documented_shape() {
    let spec = FleetSpec::new(3)
        .with_skew(Skew::Uniform)
        .with_apps_per_cluster(12.0);
    let fleet = spec.generate();
    let c = &fleet.clusters[2];
    assert_eq!(c.name, "cluster-00002");
    assert_eq!(c.server, "https://cluster-00002.fleet.example");
    assert_eq!(c.server, cluster_server(2));
    assert!(c.labels.is_empty() && c.shard.is_none() && c.weight.is_none());
    assert!(!c.skip_reconcile);

    let app = &fleet.apps[2 * 12 + 11];
    assert_eq!(app.namespace, "argocd");
    assert_eq!(app.name, "cluster-00002-app-11");
    assert_eq!(app.project, "default");
    let paths = spec.app_paths();
    assert_eq!(paths.len(), fleet.apps.len(), "one path per app");
    assert_eq!(REPO_URL, "https://git.example/apps.git");
    assert_eq!(paths[2 * 12 + 11], "apps/1");
    assert_eq!(TARGET_REVISION, "HEAD");
    assert_eq!(app.destination.server.as_deref(), Some(c.server.as_str()));
    assert_eq!(cluster_name(123_456), "cluster-123456");
    assert_eq!(app_name("c", 0), "c-app-0");
    assert_eq!(app_name("c", 1_234_567_890), "c-app-1234567890");
    assert_eq!(app_name("c", usize::MAX), format!("c-app-{}", usize::MAX));
}

#[test]
fn app_paths_follow_each_apps_rank_on_its_cluster() {
    for skew in [Skew::Uniform, Skew::Zipf { exponent: 1.0 }, Skew::Random] {
        let spec = FleetSpec::new(40).with_skew(skew).with_seed(3);
        let fleet = spec.generate();
        let paths = spec.app_paths();
        assert_eq!(paths.len(), fleet.apps.len());
        for (app, path) in fleet.apps.iter().zip(&paths) {
            let (_, k) = app.name.rsplit_once("-app-").expect("generated name");
            let k: usize = k.parse().expect("a rank");
            assert_eq!(*path, format!("apps/{}", k % 10), "{}", app.name);
        }
    }
}

#[test]
fn ids_are_unique_and_uuid_shaped() {
    let fleet = FleetSpec::new(20_000)
        .with_apps_per_cluster(0.0)
        .with_seed(5)
        .generate();
    let ids: HashSet<&str> = fleet.clusters.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), 20_000);
    for id in &ids {
        assert!(is_uuid_shaped(id), "{id}");
    }
    // Every hex digit shows up in the random positions.
    let digits: HashSet<char> = fleet.clusters[..50]
        .iter()
        .flat_map(|c| c.id.chars())
        .collect();
    assert_eq!(digits.len(), 17, "16 hex digits and '-'");
}

#[test]
fn generated_fleets_are_clean() {
    let fleet = FleetSpec::new(300).with_seed(3).generate();
    assert!(fleet.problems().is_empty(), "{:?}", &fleet.problems()[..1]);
}

#[test]
fn totals_are_exact_for_every_skew() {
    for skew in [
        Skew::Uniform,
        Skew::zipf(),
        Skew::Zipf { exponent: 1.7 },
        Skew::Zipf { exponent: 0.0 },
        Skew::Random,
    ] {
        for (n, mean) in [(1, 10.0), (7, 2.5), (999, 10.0), (1000, 0.3), (13, 0.0)] {
            let spec = FleetSpec::new(n)
                .with_skew(skew)
                .with_apps_per_cluster(mean)
                .with_seed(n as u64);
            let fleet = spec.generate();
            assert_eq!(fleet.apps.len(), spec.total_apps(), "{skew:?} {n} {mean}");
            assert_eq!(
                counts(&fleet).iter().sum::<u64>() as usize,
                spec.total_apps()
            );
        }
    }
    assert_eq!(FleetSpec::new(0).generate(), Fleet::default());
}

#[test]
fn uniform_is_flat() {
    let c = counts(&FleetSpec::new(100).with_skew(Skew::Uniform).generate());
    assert!(c.iter().all(|&x| x == 10));
    let c = counts(
        &FleetSpec::new(100)
            .with_skew(Skew::Uniform)
            .with_apps_per_cluster(2.5)
            .generate(),
    );
    assert_eq!(c.iter().filter(|&&x| x == 3).count(), 50);
    assert_eq!(c.iter().filter(|&&x| x == 2).count(), 50);
    assert_ne!(c[..50], [3; 50], "the extras land on seeded clusters");
}

#[test]
fn zipf_is_really_skewed() {
    for seed in 0..5 {
        let spec = FleetSpec::new(1000).with_seed(seed);
        let mut c = counts(&spec.generate());
        c.sort_unstable_by(|a, b| b.cmp(a));
        let total: u64 = c.iter().sum();
        assert_eq!(total, 10_000);
        // Exact shares at s = 1: 1/H_1000 ≈ 13.4 % and H_100/H_1000 ≈ 69.3 %.
        assert!(c[0] >= 1300, "max {} ≫ mean 10", c[0]);
        let top10: u64 = c[..100].iter().sum();
        assert!(top10 * 100 >= 68 * total, "top 10 % hold {top10}");
        assert!(c.windows(2).all(|w| w[0] >= w[1]));
        assert!(c[999] >= 1, "the tail is thin but present");
    }
    // Steeper exponent, steeper spread; exponent 0 is flat.
    let steep = counts(
        &FleetSpec::new(1000)
            .with_skew(Skew::Zipf { exponent: 2.0 })
            .generate(),
    );
    assert!(*steep.iter().max().unwrap() >= 6000);
    let flat = counts(
        &FleetSpec::new(1000)
            .with_skew(Skew::Zipf { exponent: 0.0 })
            .generate(),
    );
    assert!(flat.iter().all(|&x| x == 10));
}

#[test]
fn the_heaviest_cluster_moves_with_the_seed() {
    let heaviest: HashSet<usize> = (0..8)
        .map(|seed| {
            let c = counts(&FleetSpec::new(1000).with_seed(seed).generate());
            (0..c.len()).max_by_key(|&i| c[i]).unwrap()
        })
        .collect();
    assert!(heaviest.len() >= 6, "{heaviest:?}");
}

#[test]
fn random_skew_is_roughly_poisson() {
    let c = counts(&FleetSpec::new(1000).with_skew(Skew::Random).generate());
    let max = *c.iter().max().unwrap();
    assert!((15..=35).contains(&max), "max {max}");
    assert!(c.iter().filter(|&&x| x == 10).count() > 50);
}

#[test]
fn zones_are_spread_evenly_with_regions() {
    let fleet = FleetSpec::new(1000)
        .with_seed(1)
        .with_zones(["eu-west-1a", "eu-west-1b", "us-central1-c"])
        .generate();
    let mut per_zone: BTreeMap<&str, usize> = BTreeMap::new();
    for c in &fleet.clusters {
        *per_zone.entry(c.zone().unwrap()).or_default() += 1;
        let region = c.labels[REGION_LABEL].as_str();
        let want = if c.zone().unwrap().starts_with("eu") {
            "eu-west-1"
        } else {
            "us-central1"
        };
        assert_eq!(region, want);
    }
    let sizes: Vec<usize> = per_zone.values().copied().collect();
    assert_eq!(sizes.iter().sum::<usize>(), 1000);
    assert!(sizes.iter().all(|&s| s == 333 || s == 334), "{sizes:?}");
    // Interleaved by the seed, not in blocks.
    let first: HashSet<_> = fleet.clusters[..12].iter().map(|c| c.zone()).collect();
    assert_eq!(first.len(), 3);
}

#[test]
fn weighted_zones_get_exact_shares() {
    let mut spec = FleetSpec::new(1000).with_zones(["z-1a", "z-1b", "z-1c"]);
    spec.zone_weights = vec![2, 1, 1];
    let fleet = spec.generate();
    let in_zone = |z: &str| {
        fleet
            .clusters
            .iter()
            .filter(|c| c.zone() == Some(z))
            .count()
    };
    assert_eq!(
        (in_zone("z-1a"), in_zone("z-1b"), in_zone("z-1c")),
        (500, 250, 250)
    );
}

#[test]
fn knobs_do_not_disturb_each_other() {
    let base = FleetSpec::new(400).with_seed(9).generate();
    let zoned = FleetSpec::new(400)
        .with_seed(9)
        .with_zones(["a-1a", "a-1b"])
        .with_pins(0.5, 3)
        .generate();
    let ids = |f: &Fleet| f.clusters.iter().map(|c| c.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&base), ids(&zoned));
    assert_eq!(counts(&base), counts(&zoned));
    assert_eq!(base.apps, zoned.apps);
}

#[test]
fn pins_hit_the_requested_fraction_and_range() {
    let fleet = FleetSpec::new(1000).with_pins(0.25, 6).generate();
    let pins: Vec<i64> = fleet.clusters.iter().filter_map(|c| c.shard).collect();
    assert_eq!(pins.len(), 250);
    assert!(pins.iter().all(|p| (0..6).contains(p)));
    let used: HashSet<i64> = pins.into_iter().collect();
    assert_eq!(used.len(), 6);
    let all = FleetSpec::new(10).with_pins(1.0, 2).generate();
    assert!(all.clusters.iter().all(|c| c.shard.is_some()));
}

#[test]
#[should_panic(expected = "invalid FleetSpec")]
fn generate_panics_on_an_invalid_spec() {
    FleetSpec::new(10).with_apps_per_cluster(-1.0).generate();
}

#[test]
fn try_generate_reports_an_invalid_spec() {
    assert_eq!(
        FleetSpec::new(10).with_pins(0.5, 0).try_generate(),
        Err(SpecError::PinsWithoutReplicas)
    );
}

#[test]
fn regions_strip_the_zone_letter() {
    assert_eq!(region_of("eu-west-1a"), Some("eu-west-1"));
    assert_eq!(region_of("europe-west4-b"), Some("europe-west4"));
    assert_eq!(region_of("zone-a"), Some("zone"));
    assert_eq!(region_of("westeurope"), None);
    assert_eq!(region_of("1"), None);
    assert_eq!(region_of("a"), None);
    assert_eq!(region_of("-a"), None);
    assert_eq!(region_of(""), None);
}

#[test]
fn shards_round_robin_over_zones() {
    let s = shards(5, &["a", "b"]);
    let zones: Vec<_> = s.iter().map(|s| s.zone.as_deref().unwrap()).collect();
    assert_eq!(zones, ["a", "b", "a", "b", "a"]);
    assert!(s.iter().all(|s| s.capacity == 1));
    let none = shards::<&str>(2, &[]);
    assert_eq!(none, vec![ShardSpec::default(); 2]);
    assert!(shards(0, &["a"]).is_empty());
}

fn any_skew() -> impl Strategy<Value = Skew> {
    prop_oneof![
        Just(Skew::Uniform),
        Just(Skew::Random),
        (0.0..4.0f64).prop_map(|exponent| Skew::Zipf { exponent }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(fleetshard_util::cases::property_cases(ProptestConfig::default().cases, 96)))]

    #[test]
    fn totals_match_for_random_specs(
        clusters in 0usize..400,
        mean in 0.0..40.0f64,
        skew in any_skew(),
        seed in any::<u64>(),
        zones in 0usize..5,
        pinned in 0.0..=1.0f64,
    ) {
        let spec = FleetSpec {
            clusters,
            apps_per_cluster: mean,
            skew,
            zones: (0..zones).map(|z| format!("r-1{}", (b'a' + z as u8) as char)).collect(),
            zone_weights: Vec::new(),
            seed,
            pinned_fraction: pinned,
            replicas: 3,
        };
        let fleet = spec.generate();
        let want = (clusters as f64 * mean).round() as usize;
        prop_assert_eq!(fleet.apps.len(), want);
        prop_assert_eq!(fleet.clusters.len(), clusters);
        prop_assert_eq!(fleet.app_counts().iter().sum::<u64>() as usize, want);
        prop_assert_eq!(
            fleet.clusters.iter().filter(|c| c.shard.is_some()).count(),
            spec.pinned_clusters()
        );
        prop_assert!(fleet.problems().is_empty());
        if zones > 0 && clusters > 0 {
            let mut sizes = vec![0usize; zones];
            for c in &fleet.clusters {
                let z = c.zone().unwrap();
                sizes[(z.as_bytes()[3] - b'a') as usize] += 1;
            }
            let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            prop_assert!(hi - lo <= 1, "{:?}", sizes);
        }
        if let Skew::Uniform = skew {
            let c = fleet.app_counts();
            let (lo, hi) = (c.iter().min(), c.iter().max());
            prop_assert!(hi.zip(lo).is_none_or(|(h, l)| h - l <= 1));
        }
    }
}
