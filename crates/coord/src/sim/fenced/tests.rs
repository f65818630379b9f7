//! Fenced mode's runs: G1 in every run, G2 bounded, and the end states of scaling.

use std::time::Duration;

use super::super::world::Slicing;
use super::super::{percentile, replay, seeds};
use super::*;

#[test]
fn converges_without_faults() {
    let out = simulate(
        SimConfig {
            faults: false,
            run_ms: 15_000,
            ..SimConfig::default()
        },
        1,
    );
    assert!(out.overlaps.is_empty(), "{:?}", out.overlaps);
    assert!(out.open_at_end.is_empty(), "every cluster has an owner");
}

/// A new fleet whose replicas start within 1.5 s of each other (a Deployment's pods): no
/// replica acts on more than its share at any instant (the first one up used to be given
/// the whole fleet for a moment: `cold_start.rs`), and every cluster has an owner within
/// two seconds of the last start (a store spike is up to 0.8 s each way). G1 at every event.
#[test]
fn a_new_fleet_starts_without_a_herd() {
    let test = "sim::fenced::tests::a_new_fleet_starts_without_a_herd";
    for (nodes, shards) in [(3, 3), (6, 5)] {
        let cfg = SimConfig {
            nodes,
            shards,
            clusters: 60,
            faults: false,
            run_ms: 12_000,
            start_spread_ms: 1_500,
            ..SimConfig::default()
        };
        // A shard's share of the load, per mille, and half as much again: the placement
        // balances within a tolerance, on clusters of load 1–10.
        let bound = 1_500 / u64::from(shards);
        let (mut peak, mut latest, mut runs) = (0, 0, 0);
        for seed in seeds(20) {
            runs += 1;
            let out = simulate(cfg.clone(), seed);
            peak = peak.max(out.cold_peak_permille);
            latest = latest.max(out.first_covered.unwrap_or(u64::MAX));
            assert!(out.overlaps.is_empty(), "{:?}", out.overlaps);
            assert!(
                out.cold_peak_permille <= bound,
                "{nodes} replicas, {shards} shards, seed {seed}: one replica acted on {} ‰ of \
                 the fleet's load at once (bound {bound} ‰; {})",
                out.cold_peak_permille,
                replay(seed, test)
            );
            let covered = out.first_covered.expect("every cluster owned");
            assert!(
                covered <= 1_500 + 2_000,
                "seed {seed}: every cluster owned only at {covered} ms ({})",
                replay(seed, test)
            );
        }
        eprintln!(
            "FIGURE cold start, {nodes} replicas, {shards} shards: {runs} runs; worst peak {peak} ‰ \
             (bound {bound} ‰), every cluster owned by {latest} ms at the latest (bound 3500 ms)"
        );
    }
}

/// The crash bound (G2): lease duration + grace + one renew + two polls + the slowest
/// store round trip (the spikes are 0.8 s each way). `docs/reliability.md` derives it.
fn crash_bound(cfg: &SimConfig) -> Duration {
    cfg.timing.duration
        + cfg.grace
        + cfg.timing.renew_every
        + Duration::from_millis(2 * cfg.poll_ms + 1_600)
}

/// What all runs of a configuration showed, beyond the checks.
#[derive(Debug, Default)]
struct Totals {
    /// How often the distributor record changed form (separate → bound, bound → separate).
    switches: (u64, u64),
    /// With slices: splits, re-splits, joins and failures on slice owners, summed.
    slicing: Slicing,
    /// With slices: the runs that saw a split, a re-split and a join.
    all_three: u64,
    runs: u64,
}

/// G1 must hold in every run (with slices: per application and per unit); G2 is measured.
/// With one failure at a time, every window without an owner must close within
/// [`crash_bound`].
fn check_configuration(name: &str, test: &str, cfg: SimConfig, runs: u64) -> Totals {
    let bound = crash_bound(&cfg);
    let (mut windows, mut graceful, mut handovers, mut faults) =
        (Vec::new(), Vec::<u64>::new(), 0, 0);
    let mut totals = Totals::default();
    let (mut worst_window, mut worst_gap, mut count) = (0, 0, 0);
    for seed in seeds(runs) {
        count += 1;
        let out = simulate(cfg.clone(), seed);
        assert!(
            out.overlaps.is_empty(),
            "{name}, seed {seed}: G1 violated{}: {:?} ({})",
            if cfg.slices { " (per application)" } else { "" },
            &out.overlaps[..out.overlaps.len().min(5)],
            replay(seed, test)
        );
        assert!(
            out.unit_overlaps.is_empty(),
            "{name}, seed {seed}: G1 violated per unit: {:?} ({})",
            &out.unit_overlaps[..out.unit_overlaps.len().min(5)],
            replay(seed, test)
        );
        assert!(
            out.disagreements.is_empty(),
            "{name}, seed {seed}: the driver's executed actions and the machine disagree: {:?} ({})",
            &out.disagreements[..out.disagreements.len().min(3)],
            replay(seed, test)
        );
        assert!(
            out.distributor_overlaps.is_empty(),
            "{name}, seed {seed}: two distributors at once: {:?} ({})",
            &out.distributor_overlaps[..out.distributor_overlaps.len().min(3)],
            replay(seed, test)
        );
        // Failures at once: a window counts from the last failure to begin or end before
        // it closed (until then nobody may have been able to take over).
        let (longest, without_distributor) = if cfg.outages || cfg.concurrent {
            (
                Some(out.longest_since_disruption()),
                out.longest_after_disruption(&out.distributor_gaps),
            )
        } else {
            (
                out.uncovered.iter().chain(&out.open_at_end).max().copied(),
                out.distributor_gaps
                    .iter()
                    .map(|&(from, to)| to - from)
                    .max()
                    .unwrap_or(0),
            )
        };
        assert!(
            Duration::from_millis(without_distributor) <= bound,
            "{name}, seed {seed}: no distributor for {without_distributor} ms (bound {bound:?}; {})",
            replay(seed, test)
        );
        worst_gap = worst_gap.max(without_distributor);
        worst_window = worst_window.max(longest.unwrap_or(0));
        if let Some(w) = longest {
            assert!(
                Duration::from_millis(w) <= bound,
                "{name}, seed {seed}: {} had no owner for {w} ms (bound {bound:?}; {})",
                if cfg.slices {
                    "an application"
                } else {
                    "a cluster"
                },
                replay(seed, test)
            );
        }
        totals.switches.0 += out.role_switches.0;
        totals.switches.1 += out.role_switches.1;
        let (s, t) = (&out.slicing, &mut totals.slicing);
        t.splits += s.splits;
        t.resplits += s.resplits;
        t.joins += s.joins;
        t.on_slice_owners += s.on_slice_owners;
        t.most_slices = t.most_slices.max(s.most_slices);
        totals.all_three += u64::from(s.splits > 0 && s.resplits > 0 && s.joins > 0);
        windows.extend(out.uncovered);
        graceful.extend(out.graceful_windows);
        handovers += out.handovers;
        faults += out.faults;
    }
    assert!(
        handovers > 0 && (faults > 0 || count < 5),
        "{name}: the runs must exercise handovers"
    );
    eprintln!(
        "FIGURE {name}: {count} runs; worst {worst_window} ms without an owner and {worst_gap} ms \
         without a distributor{}, against the bound of {} ms",
        if cfg.outages || cfg.concurrent {
            " (from the last disruption)"
        } else {
            ""
        },
        bound.as_millis()
    );
    windows.sort_unstable();
    graceful.sort_unstable();
    for (what, w) in [
        ("after any failure", &windows),
        ("after a graceful shutdown", &graceful),
    ] {
        eprintln!(
            "{name}: {faults} faults, {handovers} handovers; {what}: {} windows without an owner, p50 {} ms, p99 {} ms, max {} ms",
            w.len(),
            percentile(w, 0.5),
            percentile(w, 0.99),
            w.last().copied().unwrap_or(0)
        );
    }
    totals.runs = count;
    totals
}

#[test]
fn with_a_spare_replica() {
    check_configuration(
        "4 replicas, 3 shards",
        "sim::fenced::tests::with_a_spare_replica",
        SimConfig::default(),
        25,
    );
}

#[test]
fn without_a_spare_replica() {
    check_configuration(
        "3 replicas, 3 shards",
        "sim::fenced::tests::without_a_spare_replica",
        SimConfig {
            nodes: 3,
            ..SimConfig::default()
        },
        25,
    );
}

#[test]
fn many_shards_and_clock_drift() {
    let cfg = SimConfig {
        nodes: 6,
        shards: 5,
        clusters: 40,
        drift: 0.12,
        ..SimConfig::default()
    };
    check_configuration(
        "6 replicas, 5 shards, 12 % drift",
        "sim::fenced::tests::many_shards_and_clock_drift",
        cfg,
        15,
    );
}

#[test]
fn spares_and_lease_deadlines_are_exposed() {
    let cfg = SimConfig {
        faults: false,
        run_ms: 15_000,
        ..SimConfig::default()
    };
    let mut sim = Sim::new(cfg.clone(), 3);
    sim.advance();
    let mut spares = 0;
    for (shard, left, spare) in sim.holders() {
        match shard {
            Some(_) => {
                let left = left.expect("a holder has a deadline ahead");
                assert!(left <= cfg.timing.renew_deadline, "{left:?}");
                assert!(!spare);
            }
            None => {
                assert_eq!(left, None);
                assert!(spare, "a replica holds nothing while every shard is held");
                spares += 1;
            }
        }
    }
    assert_eq!(spares, cfg.nodes - cfg.shards as usize);
}

/// 6 replicas; the operator scales 3 → 6 → 2 → 4 while failures are injected.
fn scaling_configuration() -> SimConfig {
    SimConfig {
        nodes: 6,
        shards: 3,
        clusters: 36,
        run_ms: 90_000,
        count: Some(ShardCount::Desired { default: 3 }),
        scale: vec![(15_000, 6), (35_000, 2), (60_000, 4)],
        ..SimConfig::default()
    }
}

#[test]
fn scaling_by_desired_count_under_failures() {
    let cfg = scaling_configuration();
    check_configuration(
        "desired count 3→6→2→4, 6 replicas",
        "sim::fenced::tests::scaling_by_desired_count_under_failures",
        cfg.clone(),
        12,
    );
    // Without failures the end state is exact: 4 shards, each held, every cluster owned.
    let mut sim = Sim::new(
        SimConfig {
            faults: false,
            ..cfg
        },
        7,
    );
    sim.advance();
    let (doc, holders) = sim.final_state();
    assert_eq!(doc.shards, 4);
    assert!(holders.iter().all(Option::is_some), "{holders:?}");
    assert!(doc.clusters.values().all(|&s| s < 4));
    assert!(sim.checker.all_covered(), "every cluster has an owner");
    let spares = sim.holders().iter().filter(|h| h.2).count();
    assert_eq!(spares, 2);
}

#[test]
fn auto_count_follows_the_live_replicas() {
    // 5 replicas and `auto`: the count grows to 5 from the presence of spares; failures
    // come and go; a dead replica's shard stays (vacant, its clusters displaced) rather than
    // shrinking the count under the others.
    let cfg = SimConfig {
        nodes: 5,
        shards: 1,
        clusters: 30,
        count: Some(ShardCount::Auto { min: 1, max: 8 }),
        ..SimConfig::default()
    };
    check_configuration(
        "auto count, 5 replicas",
        "sim::fenced::tests::auto_count_follows_the_live_replicas",
        cfg.clone(),
        12,
    );
    let mut sim = Sim::new(
        SimConfig {
            faults: false,
            run_ms: 20_000,
            ..cfg
        },
        3,
    );
    sim.advance();
    let (doc, holders) = sim.final_state();
    assert_eq!(doc.shards, 5, "one shard per live replica");
    assert!(holders.iter().all(Option::is_some), "{holders:?}");
    assert!(sim.checker.all_covered(), "every cluster has an owner");
}

#[test]
fn corrupt_records_and_a_replaced_store() {
    // Half the failures become a corrupt record (shard, distributor, presence, assignment,
    // desired count; garbage, a newer schema or oversized) or the store replaced by an
    // empty one. G1 at every event; G2 within the same bound as a crash: a corrupt shard
    // record is a lease whose holder stopped (it cannot renew over it), claimed once
    // unchanged for the lease duration; the rest recover without a window.
    check_configuration(
        "4 replicas, 3 shards, corrupt records",
        "sim::fenced::tests::corrupt_records_and_a_replaced_store",
        SimConfig {
            corruption: true,
            ..SimConfig::default()
        },
        25,
    );
    // At the end every record the replicas own is readable again: only the desired count
    // (an operator's value, kept at its last good value meanwhile) waits for
    // `fleetshard store repair`.
    for seed in seeds(8) {
        let mut sim = Sim::new(
            SimConfig {
                corruption: true,
                ..SimConfig::default()
            },
            seed,
        );
        sim.advance();
        let snap = crate::fenced::FencedSnapshot::decode("fs/", &sim.store.listing());
        let left: Vec<&str> = snap.corrupt.iter().map(|c| c.key.as_str()).collect();
        assert!(
            left.iter().all(|&k| k == "fs/desired-shards"),
            "seed {seed}: still unreadable at the end: {left:?} ({})",
            replay(
                seed,
                "sim::fenced::tests::corrupt_records_and_a_replaced_store"
            )
        );
        assert!(
            snap.assignment.is_some(),
            "seed {seed}: an assignment is committed"
        );
    }
    check_configuration(
        "desired count 3→5, 5 replicas, corrupt records",
        "sim::fenced::tests::corrupt_records_and_a_replaced_store",
        SimConfig {
            nodes: 5,
            corruption: true,
            count: Some(ShardCount::Desired { default: 3 }),
            scale: vec![(12_000, 5)],
            ..SimConfig::default()
        },
        12,
    );
}

#[test]
fn concurrent_faults_store_outages_churn_and_sigterm_drains() {
    // Failures at once (one to three replicas), store outages for every replica at once,
    // clusters joining and leaving, and SIGTERMs whose stops drain for up to 3 s (beyond
    // the runner's 2 s release bound). G1 at every event; G2 within the crash bound of the
    // last failure to begin or end.
    let cfg = SimConfig {
        nodes: 5,
        shards: 4,
        clusters: 30,
        outages: true,
        concurrent: true,
        churn: true,
        long_drains: true,
        ..SimConfig::default()
    };
    check_configuration(
        "5 replicas, 4 shards, concurrent faults, outages, churn, long drains",
        "sim::fenced::tests::concurrent_faults_store_outages_churn_and_sigterm_drains",
        cfg.clone(),
        25,
    );
    check_configuration(
        "desired count 3→5→2, 5 replicas, concurrent faults, outages, churn, long drains",
        "sim::fenced::tests::concurrent_faults_store_outages_churn_and_sigterm_drains",
        SimConfig {
            count: Some(ShardCount::Desired { default: 3 }),
            scale: vec![(15_000, 5), (40_000, 2)],
            run_ms: 70_000,
            ..cfg
        },
        12,
    );
}

#[test]
fn measured_costs_that_change_under_faults_with_hysteresis() {
    // The distributor places by costs that change every 2–6 s (a wobble on every cluster,
    // a fivefold shift on one), with hysteresis, while replicas crash, pause and leave,
    // and clusters join and leave: G1 at every event, G2 within the crash bound.
    check_configuration(
        "5 replicas, 4 shards, measured costs changing, churn, faults",
        "sim::fenced::tests::measured_costs_that_change_under_faults_with_hysteresis",
        SimConfig {
            nodes: 5,
            shards: 4,
            clusters: 30,
            churn: true,
            costs: true,
            ..SimConfig::default()
        },
        25,
    );
}

/// A hub with a third of a few hundred applications, clusters split into slices, the hub's
/// load moving (`fenced/apps.rs`) so that it is split, re-split into another count and
/// joined whole again, while replicas crash, pause, are cut off, get a SIGTERM whose stops
/// drain long, and the store goes away for everyone: one acting owner per application and
/// per unit at every event, every application owned again within the crash bound. Then
/// with measured costs (hysteresis) and clusters joining and leaving too.
#[test]
fn slices_that_split_re_split_and_join_under_faults() {
    let test = "sim::fenced::tests::slices_that_split_re_split_and_join_under_faults";
    let cfg = SimConfig {
        nodes: 5,
        shards: 4,
        clusters: 12,
        slices: true,
        outages: true,
        long_drains: true,
        ..SimConfig::default()
    };
    let runs = [
        (
            "5 replicas, 4 shards, a hub split and joined, outages, long drains",
            cfg.clone(),
        ),
        (
            "5 replicas, 4 shards, measured costs changing, churn, one failure at a time",
            SimConfig {
                costs: true,
                churn: true,
                outages: false,
                long_drains: false,
                ..cfg
            },
        ),
    ];
    for (name, cfg) in runs {
        let t = check_configuration(name, test, cfg, 20);
        let s = t.slicing;
        eprintln!(
            "FIGURE slices, {name}: {} runs; {} splits, {} re-splits, {} joins committed (all \
             three in {} runs), up to {} slices; {} failures hit a slice owner",
            t.runs, s.splits, s.resplits, s.joins, t.all_three, s.most_slices, s.on_slice_owners
        );
        // Not vacuous: the cut changed every way, in many runs (about four in five: a
        // quarter leaves no room for a flaky CI run), and failures hit slice owners. Judged
        // over a sweep, not a replayed seed or two.
        if t.runs < 10 {
            continue;
        }
        assert!(
            s.splits > 0 && s.resplits > 0 && s.joins > 0 && s.most_slices >= 3,
            "{name}: {s:?}"
        );
        assert!(
            t.all_three * 4 >= t.runs,
            "{name}: all three in {} runs",
            t.all_three
        );
        assert!(s.on_slice_owners * 4 >= t.runs, "{name}: {s:?}");
    }
}

#[test]
fn a_crashed_spares_presence_record_is_deleted_after_the_grace() {
    let cfg = SimConfig {
        faults: false,
        run_ms: 20_000,
        ..SimConfig::default()
    };
    let mut sim = Sim::new(cfg, 4);
    sim.advance();
    let spare = sim
        .holders()
        .iter()
        .position(|&(_, _, spare)| spare)
        .expect("4 replicas, 3 shards: one spare");
    let key = crate::fenced::presence_key("fs/", &sim.nodes[spare].life.identity);
    assert!(sim.store.entries.contains_key(&key));
    let crashed = sim.t;
    sim.queue.at(crashed, Ev::Fault(spare, Fault::Crash));
    // Clocks run up to 1 % fast: 300 s may be 297 s of real time, after the last renew
    // (at most one renew period before the crash).
    let grace = crate::fenced::PRESENCE_GRACE.as_millis() as u64;
    sim.cfg.run_ms = crashed + grace - 10_000;
    sim.advance();
    assert!(
        sim.store.entries.contains_key(&key),
        "deleted within the grace"
    );
    sim.cfg.run_ms = crashed + grace + 10_000;
    sim.advance();
    assert!(
        !sim.store.entries.contains_key(&key),
        "kept after the grace"
    );
    // The live replicas' presence and shard records are all still there.
    let live: Vec<&String> = sim.store.entries.keys().collect();
    for shard in 0..3 {
        let k = crate::fenced::shard_key("fs/", shard);
        assert!(sim.store.entries.contains_key(&k), "{live:?}");
    }
    let out = sim.run();
    assert!(out.overlaps.is_empty(), "{:?}", out.overlaps);
    assert!(out.open_at_end.is_empty(), "every cluster has an owner");
}

/// Store writes per replica per second once a fleet has settled, with every replica
/// holding a shard (`n` replicas, `n` shards) and no failures: the distributor's role rides
/// on its shard record's renewals, so it writes no more than any other holder.
fn writes_per_second(nodes: usize, unannounced: usize) -> Vec<f64> {
    let cfg = SimConfig {
        nodes,
        shards: nodes as u32,
        clusters: 4 * nodes,
        faults: false,
        run_ms: 45_000,
        warmup_ms: 15_000,
        unannounced,
        ..SimConfig::default()
    };
    let out = simulate(cfg.clone(), 5);
    assert!(out.overlaps.is_empty() && out.distributor_overlaps.is_empty());
    let secs = (cfg.run_ms - cfg.warmup_ms) as f64 / 1_000.0;
    let rates: Vec<f64> = out.writes.iter().map(|&w| w as f64 / secs).collect();
    eprintln!(
        "FIGURE writes/s per replica, {nodes} replicas ({unannounced} unannounced): {rates:.2?}"
    );
    rates
}

#[test]
fn every_replica_writes_at_most_0_9_per_second() {
    let rates: Vec<(usize, Vec<f64>)> = [3, 10]
        .into_iter()
        .map(|nodes| (nodes, writes_per_second(nodes, 0)))
        .collect();
    for (nodes, rates) in rates {
        let most = rates.iter().copied().fold(0.0, f64::max);
        assert!(most <= 0.9, "{nodes} replicas: {rates:.2?} writes/s");
    }
    // With one replica of an older release in the fleet the distributor keeps the separate
    // lease renewed (about 1.6/s), as that release requires.
    let mixed = writes_per_second(3, 1);
    assert!(mixed.iter().any(|&r| r > 1.2), "{mixed:.2?}");
}

/// A rolling update from an older release: half the replicas start without announcing the
/// bound role and announce it once restarted. No two distributors at any event, none for
/// longer than the bound, G1 throughout, as the role moves between its two forms (that it
/// does move both ways is shown deterministically below).
#[test]
fn a_rolling_update_from_the_separate_distributor_lease() {
    let (binds, unbinds) = check_configuration(
        "4 replicas, 3 shards, 2 of an older release",
        "sim::fenced::tests::a_rolling_update_from_the_separate_distributor_lease",
        SimConfig {
            unannounced: 2,
            ..SimConfig::default()
        },
        25,
    )
    .switches;
    eprintln!("the role was bound {binds} times and unbound {unbinds} times");
}

/// The role moves both ways in one scripted run: bound once both older replicas have
/// restarted (announcing the bound form), and back to the separate form while a restarted
/// replica is live before its inventory is published, then bound again. Scripted, not
/// drawn: the random runs above saw an unbinding in about one run in ten, so asserting it
/// over 60 of them failed about one CI run in 500.
#[test]
fn the_distributor_role_binds_and_unbinds_as_replicas_restart() {
    let cfg = SimConfig {
        unannounced: 2,
        faults: false,
        run_ms: 45_000,
        ..SimConfig::default()
    };
    let mut sim = Sim::new(cfg, 1);
    for (at, node, fault) in [
        (12_000, 0, Fault::Crash),
        (12_500, 0, Fault::Restart),
        (20_000, 1, Fault::Crash),
        (20_500, 1, Fault::Restart),
        (30_000, 2, Fault::Crash),
        (30_500, 2, Fault::Restart),
    ] {
        sim.queue.at(at, Ev::Fault(node, fault));
    }
    sim.advance();
    let out = sim.run();
    assert!(out.overlaps.is_empty(), "{:?}", out.overlaps);
    assert!(
        out.distributor_overlaps.is_empty(),
        "{:?}",
        out.distributor_overlaps
    );
    let (binds, unbinds) = out.role_switches;
    assert!(
        binds >= 2 && unbinds >= 1,
        "bound {binds} times, unbound {unbinds} times"
    );
}

/// CI's failures of issue 31, replayed: a crashed holder restarted within its own lease
/// took its shard back while its orphans' start waited on another cluster's drain; they
/// moved home before they started and waited on a second round of drains (7.8 s without
/// an owner). Each cluster now waits only for the holders that may still act on it
/// (`fenced/replica/handoffs.rs`).
#[test]
fn seed_779547789007_orphans_wait_only_for_their_own_handoffs() {
    replay_scaling_seed(779_547_789_007);
}

/// CI's second failure of issue 31, replayed: a restarted replica's every start waited a
/// whole lease duration on the record of a holder long dead beyond the count (7.8 s without
/// an owner). The distributor deletes such records (`fenced/replica/forget.rs`).
#[test]
fn seed_1005205671012_no_start_waits_on_a_dead_record_beyond_the_count() {
    replay_scaling_seed(1_005_205_671_012);
}

/// The 10,000-seed sweep's failure, replayed: a holder's renew, its reply late, landed
/// after the holder's deadline had passed; the record looked live for another lease
/// duration with an old acknowledgement, and held back the barrier of a cluster moved away
/// from it (9.4 s without an owner). The holder releases such a stray record at once
/// (`fenced/replica/leases.rs`).
#[test]
fn seed_666924577494_a_late_renew_of_a_lapsed_holder_holds_nothing_back() {
    replay_scaling_seed(666_924_577_494);
}

/// The second 10,000-seed sweep's failure, replayed: a replica paused (SIGSTOP) with a
/// listing in flight judged that listing, when it came back 2.8 s later, as of the moment
/// it resumed: the distributor role's shard lease looked unchanged for over a lease
/// duration, and it took the role over (the bound form's record itself never changes, so
/// its compare-and-swap succeeded) while the holder was live — two distributors for 15 ms.
/// Leases are now judged as of when the listing was asked for
/// (`LeaseObserver::observe_listed`, `Replica::step_listed`).
#[test]
fn seed_328971200058_a_listing_back_after_a_pause_takes_no_role_over() {
    replay_scaling_seed(328_971_200_058);
}

/// One seed of the scaling configuration, checked as `check_configuration` checks it.
fn replay_scaling_seed(seed: u64) {
    let cfg = scaling_configuration();
    let bound = crash_bound(&cfg);
    let out = simulate(cfg, seed);
    assert!(out.overlaps.is_empty(), "{:?}", out.overlaps);
    assert!(
        out.distributor_overlaps.is_empty(),
        "two distributors: {:?}",
        out.distributor_overlaps
    );
    let longest = out.uncovered.iter().chain(&out.open_at_end).max().copied();
    assert!(
        longest.is_some_and(|w| Duration::from_millis(w) <= bound),
        "seed {seed}: longest window without an owner {longest:?} ms (bound {bound:?})"
    );
}
