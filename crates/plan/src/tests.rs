use fleetshard_core::argo::{ArgoAlgorithm, ArgoControllerAssignment};
use fleetshard_core::model::ZONE_LABEL;
use fleetshard_core::placement::PlacementConfig;
use fleetshard_core::{App, Cluster, Fleet, ShardSpec};
use serde_json::Value;

use super::*;

/// 12 clusters over three zones with skewed app counts, a pin, a weight, a negative pin
/// and a skip-reconcile cluster.
fn fleet() -> Fleet {
    let zones = ["eu-1a", "eu-1b", "eu-1c"];
    let mut clusters = Vec::new();
    let mut apps = Vec::new();
    for i in 0..12 {
        let server = format!("https://c{i}.example");
        let mut c = Cluster::new(format!("id-{i:02}"), &server);
        c.name = format!("c{i}");
        c.labels
            .insert(ZONE_LABEL.to_owned(), zones[i % 3].to_owned());
        for k in 0..(3 + (i * 7) % 11) {
            apps.push(App::to_server("argocd", &format!("c{i}-app{k}"), &server));
        }
        clusters.push(c);
    }
    clusters[1].shard = Some(2);
    clusters[4].weight = Some(25);
    clusters[7].shard = Some(-3);
    clusters[9].skip_reconcile = true;
    Fleet { clusters, apps }
}

fn options(algorithms: &str, replicas: &str) -> PlanOptions {
    PlanOptions {
        algorithms: Algorithm::parse_list(algorithms).unwrap(),
        replicas: parse_replicas(replicas).unwrap(),
        shard_template: vec![],
        config: PlacementConfig::default(),
        previous: None,
        costs: Default::default(),
    }
}

fn report(fleet: Fleet, options: &PlanOptions) -> Report {
    let input = PlanInput {
        fleet,
        warnings: vec![Warning::new("input", "x.yaml: something odd")],
    };
    build_report(&input, options, &mut NoStopwatch).unwrap()
}

fn json(r: &Report) -> Value {
    serde_json::from_str(&render_json(r)).unwrap()
}

#[test]
fn json_contract_fields_are_present_and_typed() {
    let r = report(fleet(), &options("legacy", "3"));
    let v = json(&r);
    assert_eq!(v["algorithm"], "legacy");
    assert_eq!(v["replicas"], 3);
    let clusters = v["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 12);
    for c in clusters {
        assert!(c["id"].is_string() && c["server"].is_string() && c["name"].is_string());
        assert!(c["shard"].is_i64(), "Argo shards are integers: {c}");
        assert!(c["apps"].is_u64() && c["load"].is_u64() && c["pinned"].is_boolean());
        assert!(c["zone"].is_string());
    }
    assert_eq!(clusters[7]["shard"], -3, "a negative pin passes through");
    assert_eq!(clusters[4]["load"], 25);
    let t = &v["timings"];
    assert!(t["load_ms"].is_f64() && t["distribute_ms"].is_f64());
    let b = &v["balance"];
    for k in ["max", "mean", "max_over_mean", "min"] {
        assert!(b[k].is_number(), "balance.{k}");
    }
    assert_eq!(v["shards"].as_array().unwrap().len(), 3);
    assert!(v["zones"]["mode"].is_string());
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["source"] == "input")
    );
    assert!(v.get("movement").is_none(), "no previous, no movement");
    assert!(v.get("plans").is_none(), "one plan, no plans array");
}

#[test]
fn argo_shards_match_the_controller_exactly() {
    let f = fleet();
    for alg in ArgoAlgorithm::ALL {
        for replicas in [0u32, 1, 2, 5] {
            let r = report(f.clone(), &options(alg.name(), &replicas.to_string()));
            let expected = ArgoControllerAssignment::compute(alg, replicas, &f.clusters, &f.apps);
            let got: Vec<i64> = r
                .primary()
                .clusters
                .iter()
                .map(|c| c.shard.unwrap())
                .collect();
            assert_eq!(got, expected.shards(), "{} × {replicas}", alg.name());
        }
    }
}

#[test]
fn balanced_leaves_skip_reconcile_unmanaged_and_balances() {
    let r = report(fleet(), &options("balanced", "3"));
    let p = r.primary();
    assert_eq!(p.clusters[9].shard, None);
    assert_eq!(p.clusters[1].shard, Some(2), "a valid pin is obeyed");
    let v = json(&r);
    assert!(v["clusters"][9]["shard"].is_null());
    let placed: usize = p.shards.iter().map(|s| s.clusters).sum();
    // 12 clusters less the skip-reconcile one; the negative pin is placed automatically.
    assert_eq!(placed + p.unassigned.clusters, 11);
    assert_eq!(p.fleet.managed_clusters, 11);
    assert!(
        p.warnings
            .iter()
            .any(|w| w.source == "placement" && w.message.contains("-3")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn replica_sweep_measures_movement_from_each_count_to_the_next() {
    let r = report(fleet(), &options("balanced,round-robin", "3..6"));
    assert_eq!(r.plans.len(), 8);
    let v = json(&r);
    let plans = v["plans"].as_array().unwrap();
    assert_eq!(plans.len(), 8);
    // The top level is the primary plan, unchanged.
    assert_eq!(v["algorithm"], "balanced");
    assert_eq!(v["replicas"], 3);
    assert_eq!(plans[0]["clusters"], v["clusters"]);
    for (i, p) in r.plans.iter().enumerate() {
        let expected_alg = if i < 4 { "balanced" } else { "round-robin" };
        assert_eq!(p.algorithm, expected_alg);
        assert_eq!(p.replicas, 3 + (i % 4) as u32);
        match (&p.movement, i % 4) {
            (None, 0) => {}
            (Some(m), k) if k > 0 => {
                assert_eq!(m.from.kind, "sweep");
                assert_eq!(m.from.replicas, Some(p.replicas - 1));
                assert_eq!(m.from.algorithm.as_deref(), Some(expected_alg));
                assert!(m.load_moved <= m.load_total);
            }
            other => panic!("plan {i}: unexpected movement {other:?}"),
        }
    }
    // Balanced scaling moves far less than a full reshuffle: never more than half.
    for p in &r.plans[1..4] {
        assert!(
            p.movement.as_ref().unwrap().load_fraction < 0.5,
            "{:?}",
            p.movement
        );
    }
}

#[test]
fn descending_ranges_and_lists_parse() {
    assert_eq!(parse_replicas("5..3").unwrap(), vec![5, 4, 3]);
    assert_eq!(parse_replicas("2, 4..=5,0").unwrap(), vec![2, 4, 5, 0]);
    assert!(matches!(
        parse_replicas("-1"),
        Err(PlanError::NegativeReplicas { .. })
    ));
    assert!(matches!(
        parse_replicas("3..-2"),
        Err(PlanError::NegativeReplicas { .. })
    ));
    let e = parse_replicas("three").unwrap_err().to_string();
    assert!(e.contains("three"), "{e}");
    assert!(parse_replicas("20000").is_err());
}

#[test]
fn algorithm_lists_parse_and_unknown_names_list_the_valid_ones() {
    let all = Algorithm::parse_list("all").unwrap();
    assert_eq!(all.len(), 4);
    assert_eq!(all[0], Algorithm::Balanced);
    let l = Algorithm::parse_list("legacy,balanced,legacy").unwrap();
    assert_eq!(
        l,
        vec![Algorithm::Argo(ArgoAlgorithm::Legacy), Algorithm::Balanced]
    );
    let e = Algorithm::parse("fair").unwrap_err().to_string();
    for name in [
        "fair",
        "balanced",
        "legacy",
        "round-robin",
        "consistent-hashing",
    ] {
        assert!(e.contains(name), "{e}");
    }
}

#[test]
fn previous_plan_round_trips_through_json() {
    let first = report(fleet(), &options("balanced", "4"));
    let text = render_json(&first);
    let previous = PreviousPlan::from_json(&text, "before.json").unwrap();
    assert_eq!(previous.replicas, Some(4));
    assert_eq!(previous.algorithm.as_deref(), Some("balanced"));
    assert_eq!(previous.assignment.len(), 11);

    // Same fleet, same replicas: balanced stays put.
    let mut o = options("balanced,legacy", "4");
    o.previous = Some(previous.clone());
    let r = report(fleet(), &o);
    let m = r.plans[0].movement.as_ref().unwrap();
    assert_eq!((m.clusters_moved, m.load_moved), (0, 0.0));
    assert_eq!(m.from.kind, "previous");
    assert!(
        r.plans[1].movement.is_some(),
        "every algorithm is compared with it"
    );

    // Scale-up by one from the previous plan moves a bounded share.
    o.replicas = vec![5];
    o.algorithms = vec![Algorithm::Balanced];
    let r = report(fleet(), &o);
    assert!(r.primary().movement.as_ref().unwrap().load_fraction < 0.5);

    let err = PreviousPlan::from_json("{\"clusters\": 3}", "bad.json").unwrap_err();
    assert!(err.to_string().starts_with("bad.json: "), "{err}");
}

#[test]
fn zone_aware_plan_reports_zones_and_cross_zone() {
    let mut o = options("balanced,legacy", "6");
    o.shard_template =
        override_template(&[], Some(&parse_zones("eu-1a,eu-1b,eu-1c").unwrap()), None);
    let r = report(fleet(), &o);
    let b = &r.plans[0];
    assert_eq!(b.fleet.zones, vec!["eu-1a", "eu-1b", "eu-1c"]);
    assert!(
        matches!(b.zones.mode.as_str(), "aware" | "fallback"),
        "{:?}",
        b.zones
    );
    assert_eq!(b.zones.zones.len(), 3);
    for z in &b.zones.zones {
        assert!((z.capacity_share - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(z.shards, 2);
    }
    if b.zones.mode == "aware" {
        assert!(b.zones.zones.iter().all(|z| z.local.is_some()));
    }
    let legacy = &r.plans[1];
    assert_eq!(legacy.zones.mode, "ignored");
    assert!(legacy.zones.cross_zone.zoned_load > 0.0);
    assert!(legacy.zones.zones.iter().all(|z| z.local.is_none()));
    assert_eq!(b.shards[4].zone.as_deref(), Some("eu-1b"), "zones cycle");
}

#[test]
fn shard_template_overrides_cycle() {
    let base = vec![
        ShardSpec {
            zone: Some("a".into()),
            capacity: 2,
        },
        ShardSpec {
            zone: Some("b".into()),
            capacity: 1,
        },
    ];
    let t = override_template(&base, None, Some(&[3]));
    assert_eq!(t.len(), 2);
    assert_eq!((t[0].capacity, t[1].capacity), (3, 3));
    let t = override_template(&base, Some(&["x".into(), "y".into(), "z".into()]), None);
    assert_eq!(t.len(), 3);
    assert_eq!(t[2].zone.as_deref(), Some("z"));
    assert_eq!(t[2].capacity, 2, "capacities cycle from the base");
    let specs = shard_specs(&t, 5);
    assert_eq!(specs[4].zone.as_deref(), Some("y"));
    assert!(parse_capacities("1,0").is_err());
    assert!(parse_zones("a,,b").is_err());
}

#[test]
fn zero_replicas_is_a_plan_with_everything_unassigned() {
    let r = report(fleet(), &options("balanced,legacy", "0"));
    for p in &r.plans {
        assert!(p.shards.is_empty());
        assert_eq!(p.unassigned.clusters, 11, "{}", p.algorithm);
        assert_eq!(p.balance.max_over_mean, 0.0);
    }
    assert!(
        r.plans[1]
            .clusters
            .iter()
            .all(|c| c.shard == Some(0) || c.pinned)
    );
    let svg = render_svg(&r);
    roxmltree::Document::parse(&svg).unwrap();
    render_table(&r, TableOptions::default());
}

#[test]
fn svg_is_well_formed_with_one_bar_per_shard() {
    let mut o = options("all", "3..4");
    o.shard_template = override_template(
        &[],
        Some(&["eu-1a".into(), "eu-1b".into()]),
        Some(&[2, 1, 1]),
    );
    let mut f = fleet();
    f.clusters[0].name = "<weird & \"quoted\">".into();
    let r = report(f, &o);
    let svg = render_svg(&r);
    let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
    let panels: Vec<_> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("panel"))
        .collect();
    assert_eq!(panels.len(), r.plans.len());
    for (panel, plan) in panels.iter().zip(&r.plans) {
        let bars = panel
            .descendants()
            .filter(|n| n.attribute("class") == Some("bar"))
            .count();
        assert_eq!(bars, plan.replicas as usize);
        assert_eq!(
            panel.attribute("data-algorithm"),
            Some(plan.algorithm.as_str())
        );
    }
}

#[test]
fn table_shows_shards_balance_zones_and_warnings() {
    let mut o = options("balanced,consistent-hashing", "3");
    o.shard_template =
        override_template(&[], Some(&parse_zones("eu-1a,eu-1b,eu-1c").unwrap()), None);
    let text = render_table(
        &report(fleet(), &o),
        TableOptions {
            clusters: true,
            all_warnings: false,
        },
    );
    for needle in [
        "fleet: 12 clusters (11 managed)",
        "comparison",
        "balanced × 3 replicas",
        "consistent-hashing × 3 replicas",
        "max/mean",
        "zones:",
        "cross-zone",
        "warnings",
        "[input] x.yaml: something odd",
        "id-07",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

#[test]
fn invalid_options_are_refused() {
    let mut o = options("balanced", "3");
    o.config.tolerance = -0.1;
    let input = PlanInput::default();
    assert!(matches!(
        build_report(&input, &o, &mut NoStopwatch),
        Err(PlanError::InvalidTolerance(_))
    ));
    let mut o = options("balanced", "3");
    o.replicas.clear();
    assert!(build_report(&input, &o, &mut NoStopwatch).is_err());
}

#[test]
fn empty_fleet_plans_cleanly() {
    let r = report(Fleet::default(), &options("all", "2"));
    for p in &r.plans {
        assert_eq!(p.balance.max, 0.0);
        assert!(p.balance.max_over_mean.is_finite());
    }
    roxmltree::Document::parse(&render_svg(&r)).unwrap();
    assert!(json(&r)["plans"].is_array());
}

#[test]
fn table_caps_the_warning_list() {
    let mut f = fleet();
    for k in 0..40 {
        f.apps.push(App::to_server(
            "argocd",
            &format!("lost-{k}"),
            "https://nowhere",
        ));
    }
    let r = report(f, &options("legacy", "3"));
    let short = render_table(&r, TableOptions::default());
    assert!(short.contains("lost-0:"), "{short}");
    assert!(!short.contains("lost-39:"), "{short}");
    assert!(short.contains("more (--all-warnings"), "{short}");
    let all = TableOptions {
        all_warnings: true,
        ..TableOptions::default()
    };
    assert!(render_table(&r, all).contains("lost-39:"));
}
