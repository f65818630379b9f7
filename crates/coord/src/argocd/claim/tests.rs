//! The deviations from upstream, one test each, then properties and a small simulation.
//! The argo-compat §6.5 vectors (`docs/glossary.md`), side by side with upstream, are in
//! `argocd/vectors.rs`.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::argocd::upstream;
use crate::argocd::{ChangeObserver, decode, encode};
use crate::lease::Mono;

const T: WallTime = WallTime::from_unix_seconds(1_787_423_492);
const STALE: Duration = Duration::from_secs(30);

fn held(n: i64, name: &str) -> ShardEntry {
    ShardEntry::held(n, name, T)
}

fn free(n: i64) -> ShardEntry {
    ShardEntry::free(n)
}

fn request(identity: &str, replicas: u32, pin: Option<i64>) -> ClaimRequest<'_> {
    ClaimRequest {
        identity,
        replicas,
        pin,
        now: T.checked_add_seconds(10).unwrap(),
        stale_after: STALE,
    }
}

fn fresh(_: &ShardEntry) -> Duration {
    Duration::ZERO
}

/// Entries held by these names have been seen unchanged for longer than the threshold.
fn stale_for(names: &'static [&'static str]) -> impl Fn(&ShardEntry) -> Duration {
    move |e| {
        if names.contains(&e.controller_name.as_str()) {
            STALE + Duration::from_secs(1)
        } else {
            Duration::ZERO
        }
    }
}

fn claim(entries: &[ShardEntry], req: &ClaimRequest<'_>) -> Outcome {
    get_or_update_shard(entries, req, fresh).unwrap()
}

#[test]
fn w11_scale_down_keeps_surviving_owners() {
    let list = [held(0, "a"), held(1, "b"), held(2, "c"), held(3, "d")];
    // Upstream: the first replica to probe wipes everyone and takes 0.
    let (shard, after) =
        upstream::get_or_update_shard_number_for_controller(&list, "b", 2, -1, T, STALE);
    assert_eq!((shard, after), (0, vec![held(0, "b"), free(1)]));
    // fleetshard: b keeps 1, a keeps 0, c and d lose only the removed shards.
    let out = claim(&list, &request("b", 2, None));
    assert_eq!(out.status, ClaimStatus::Holds(1));
    let now = T.checked_add_seconds(10).unwrap();
    assert_eq!(
        out.write,
        Some(vec![held(0, "a"), ShardEntry::held(1, "b", now)])
    );
    assert!(out.warnings.is_empty());
    let after = out.write.unwrap();
    assert_eq!(
        claim(&after, &request("c", 2, None)).status,
        ClaimStatus::Spare
    );
}

#[test]
fn w12_pinned_shard_is_taken_only_when_free_or_stale() {
    let list = [held(0, "a"), held(1, "b")];
    // Upstream: c pinned to 1 takes it from the live b; b is still processing it.
    let (shard, after) =
        upstream::get_or_update_shard_number_for_controller(&list, "c", 2, 1, T, STALE);
    assert_eq!((shard, after), (1, vec![held(0, "a"), held(1, "c")]));
    // fleetshard: c waits, and nothing is written.
    let out = claim(&list, &request("c", 2, Some(1)));
    assert_eq!(
        out.status,
        ClaimStatus::WaitingForPinned {
            shard: 1,
            holder: "b".into()
        }
    );
    assert_eq!(out.shard(), None);
    assert_eq!(out.write, None);
    // Once b's entry is stale, c takes it, and says so.
    let out = get_or_update_shard(&list, &request("c", 2, Some(1)), stale_for(&["b"])).unwrap();
    assert_eq!(out.status, ClaimStatus::Holds(1));
    assert_eq!(
        out.warnings,
        vec![Warning::StaleTakeover {
            shard: 1,
            previous: "b".into(),
            unchanged_for: STALE + Duration::from_secs(1)
        }]
    );
    // A free pinned shard is taken at once; a pinned replica gives up what else it held.
    let out = claim(&[held(0, "c"), free(1)], &request("c", 2, Some(1)));
    assert_eq!(out.status, ClaimStatus::Holds(1));
    assert_eq!(out.write.unwrap()[0], free(0));
    // While it waits it holds nothing, so nothing else is blocked by it.
    let out = claim(&[held(0, "c"), held(1, "b")], &request("c", 2, Some(1)));
    assert_eq!(out.write, Some(vec![free(0), held(1, "b")]));
}

#[test]
fn w12_two_replicas_with_one_pin_do_not_share_it() {
    // A Deployment gives every pod the same ARGOCD_CONTROLLER_SHARD.
    let first = claim(&[], &request("p1", 2, Some(0)));
    let map = first.write.unwrap();
    let second = claim(&map, &request("p2", 2, Some(0)));
    assert_eq!(first.status, ClaimStatus::Holds(0));
    assert_eq!(
        second.status,
        ClaimStatus::WaitingForPinned {
            shard: 0,
            holder: "p1".into()
        }
    );
    assert_eq!(second.write, None);
}

#[test]
fn w13_staleness_is_observed_not_read_from_the_clock() {
    let long_ago = ShardEntry::held(0, "slow-clock", WallTime::from_unix_seconds(1));
    let far_ahead = ShardEntry::held(1, "fast-clock", WallTime::from_unix_seconds(4_000_000_000));
    let list = [long_ago.clone(), far_ahead.clone()];
    // Upstream: the entry written by a clock behind ours looks dead; it is taken over.
    let (shard, _) =
        upstream::get_or_update_shard_number_for_controller(&list, "x", 2, -1, T, STALE);
    assert_eq!(shard, 0);
    // fleetshard: both were just seen changing, so both are live.
    assert_eq!(
        claim(&list, &request("x", 2, None)).status,
        ClaimStatus::Spare
    );
    // The one whose holder stopped (unchanged > 3H on our clock) is taken, whatever it says.
    let out =
        get_or_update_shard(&list, &request("x", 2, None), stale_for(&["fast-clock"])).unwrap();
    assert_eq!(out.status, ClaimStatus::Holds(1));
    // Exactly 3H is not yet stale (upstream's test is strict too).
    let at_threshold = |_: &ShardEntry| STALE;
    let out = get_or_update_shard(&list, &request("x", 2, None), at_threshold).unwrap();
    assert_eq!(out.status, ClaimStatus::Spare);
}

#[test]
fn w13_every_heartbeat_changes_the_entry() {
    // A stuck clock: every round has the same `now`.
    let mut req = request("a", 1, None);
    let mut map = vec![];
    let mut written = vec![];
    for _ in 0..4 {
        let out = claim(&map, &req);
        map = out.write.expect("a heartbeat is always written");
        written.push(map[0].heartbeat_time);
    }
    // Each differs from the one before; the written time stays within a second of the
    // clock, so Argo CD's readers are not misled further than the clock itself misleads them.
    let (now, next) = (req.now, req.now.checked_add_seconds(1).unwrap());
    assert_eq!(written, vec![now, next, now, next]);
    // A clock stepped back is written as it is: still a change.
    req.now = T;
    assert_eq!(claim(&map, &req).write.unwrap()[0].heartbeat_time, T);
    // Sub-second times are written truncated, and the same second is bumped.
    req.now = WallTime::new(next.unix_seconds(), 900_000_000).unwrap();
    assert_eq!(
        claim(&map, &req).write.unwrap()[0].heartbeat_time,
        next.checked_add_seconds(1).unwrap()
    );
    // At the last readable second, the bump goes back instead.
    let last = WallTime::LATEST_READABLE.truncated();
    req.now = last;
    let out = claim(&[ShardEntry::held(0, "a", last)], &req);
    assert_eq!(
        out.write.unwrap()[0].heartbeat_time,
        last.checked_add_seconds(-1).unwrap()
    );
}

#[test]
fn w15_the_result_says_whether_a_shard_is_held() {
    let full = [held(0, "a"), held(1, "b")];
    // Upstream answers -1 and the replica still reports ready.
    let (shard, _) =
        upstream::get_or_update_shard_number_for_controller(&full, "c", 2, -1, T, STALE);
    assert_eq!(shard, -1);
    let out = claim(&full, &request("c", 2, None));
    assert_eq!(
        (out.status.clone(), out.shard()),
        (ClaimStatus::Spare, None)
    );
    // A spare on a healthy map writes nothing (upstream PUTs on every probe, W16).
    assert_eq!(out.write, None);
}

#[test]
fn w18_out_of_range_pins_never_index() {
    for pin in [2, 3, -2, i64::MIN, i64::MAX] {
        // Upstream, on a missing ConfigMap: index out of range for == replicas and < -1.
        let created = upstream::generate_default_shard_mapping(2, "a", pin, T);
        assert_eq!(created.is_err(), pin == 2 || pin < -1, "{pin}");
        // fleetshard: a warning, and no shard.
        let out = claim(&[], &request("a", 2, Some(pin)));
        assert_eq!(out.status, ClaimStatus::PinOutOfRange { pin, replicas: 2 });
        assert_eq!(out.write, Some(vec![free(0), free(1)]));
        assert_eq!(
            out.warnings,
            vec![Warning::PinOutOfRange { pin, replicas: 2 }]
        );
    }
    // An entry already held is kept (upstream reads it from the ConfigMap too).
    let out = claim(&[free(0), held(1, "a")], &request("a", 2, Some(2)));
    assert_eq!(out.status, ClaimStatus::Holds(1));
    assert_eq!(
        out.warnings[0].to_string(),
        "ARGOCD_CONTROLLER_SHARD=2 is outside 0..2; ignored"
    );
}

#[test]
fn w20_a_corrupted_map_never_yields_a_duplicate() {
    // Two entries numbered 1 (one free): upstream hands the free one to c, so shard 1 has
    // two owners.
    let corrupt = [held(0, "a"), held(1, "b"), free(1)];
    let (shard, _) =
        upstream::get_or_update_shard_number_for_controller(&corrupt, "c", 3, -1, T, STALE);
    assert_eq!(shard, 1);
    let out = claim(&corrupt, &request("c", 3, None));
    assert_eq!(out.status, ClaimStatus::Holds(2));
    let written = out.write.unwrap();
    assert_eq!(written.iter().filter(|e| e.shard_number == 1).count(), 1);
    assert!(matches!(
        out.warnings[0],
        Warning::DuplicateShardNumber { shard: 1, .. }
    ));
    // An out-of-range number: upstream hands out shard 5 of 2, which owns nothing.
    let (shard, _) = upstream::get_or_update_shard_number_for_controller(
        &[held(0, "a"), free(5)],
        "c",
        2,
        -1,
        T,
        STALE,
    );
    assert_eq!(shard, 5);
    let out = claim(&[held(0, "a"), free(5)], &request("c", 2, None));
    assert_eq!(out.status, ClaimStatus::Holds(1));
}

#[test]
fn w29_a_stable_identity_gets_its_shard_back_at_once() {
    // The runner may use a stable identity: a restarted replica finds its own entry and
    // refreshes it, instead of waiting 3H as a stranger.
    let map = [held(0, "ctrl-0"), held(1, "ctrl-1")];
    assert_eq!(
        claim(&map, &request("ctrl-1", 2, None)).status,
        ClaimStatus::Holds(1)
    );
}

#[test]
fn refused_requests() {
    let mut req = request("", 2, None);
    assert_eq!(
        get_or_update_shard(&[], &req, fresh),
        Err(ClaimError::EmptyIdentity)
    );
    let long = "x".repeat(MAX_IDENTITY_LEN + 1);
    req.identity = &long;
    assert!(matches!(
        get_or_update_shard(&[], &req, fresh),
        Err(ClaimError::IdentityTooLong { .. })
    ));
    req = request("a", 0, None);
    assert_eq!(
        get_or_update_shard(&[], &req, fresh),
        Err(ClaimError::NoReplicas)
    );
    req = request("a", MAX_REPLICAS + 1, None);
    assert!(matches!(
        get_or_update_shard(&[], &req, fresh),
        Err(ClaimError::TooManyReplicas { .. })
    ));
    req = request("a", 2, None);
    for bad in [WallTime::ZERO, WallTime::from_unix_seconds(i64::MAX)] {
        req.now = bad;
        assert_eq!(
            get_or_update_shard(&[], &req, fresh),
            Err(ClaimError::UnwritableTime(bad))
        );
    }
}

#[test]
fn repairs_are_written_even_by_a_spare() {
    let corrupt = [held(0, "a"), held(0, "b")];
    let out = claim(&corrupt, &request("c", 1, None));
    assert_eq!(out.status, ClaimStatus::Spare);
    assert_eq!(out.write, Some(vec![held(0, "a")]));
}

fn arb_map() -> impl Strategy<Value = Vec<ShardEntry>> {
    let name = prop::sample::select(vec!["", "me", "a", "b", "c"]);
    let entry = (-1i64..7, name, 0i64..3).prop_map(|(n, name, t)| {
        let time = if t == 0 {
            WallTime::ZERO
        } else {
            T.checked_add_seconds(t).unwrap()
        };
        ShardEntry::held(n, name, time)
    });
    prop::collection::vec(entry, 0..8)
}

proptest! {
    /// The safety properties, on arbitrary (mostly corrupt) maps.
    #[test]
    fn claims_are_safe(
        map in arb_map(),
        replicas in 1u32..6,
        pin in prop::option::of(-2i64..7),
        stale in prop::collection::btree_set("[abc]", 0..3),
    ) {
        let ages = |e: &ShardEntry| {
            if stale.contains(&e.controller_name) { STALE * 2 } else { Duration::ZERO }
        };
        let req = request("me", replicas, pin);
        let out = get_or_update_shard(&map, &req, ages).unwrap();
        let (repaired, _) = repair(&map, replicas).unwrap();
        let result = out.write.clone().unwrap_or_else(|| map.clone());

        // Every shard exactly once, nothing out of range, no identity twice.
        let mut numbers: Vec<i64> = result.iter().map(|e| e.shard_number).collect();
        numbers.sort_unstable();
        prop_assert_eq!(numbers, (0..i64::from(replicas)).collect::<Vec<_>>());
        let mut names: Vec<&str> =
            result.iter().map(|e| e.controller_name.as_str()).filter(|n| !n.is_empty()).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        prop_assert_eq!(names.len(), count);

        // The status agrees with the map.
        let mine = result.iter().find(|e| e.controller_name == "me");
        prop_assert_eq!(out.shard().map(i64::from), mine.map(|e| e.shard_number));

        // Others' entries are untouched, except a stale one this replica took.
        for (before, after) in repaired.iter().zip(&result) {
            if before.controller_name != "me" && !before.is_free() && before != after {
                prop_assert!(stale.contains(&before.controller_name));
                prop_assert_eq!(&after.controller_name, "me");
            }
        }
        // A pinned replica holds its pin or nothing.
        if let (Some(p), Some(shard)) = (pin, out.shard())
            && (0..i64::from(replicas)).contains(&p)
        {
            prop_assert_eq!(i64::from(shard), p);
        }
        // What is written reads back exactly.
        if let Some(write) = &out.write {
            prop_assert_eq!(decode(&encode(write)), Ok(write.clone()));
        }
        // A second round by the same replica keeps the same shard.
        let mut later = req.clone();
        later.now = req.now.checked_add_seconds(10).unwrap();
        let again = get_or_update_shard(&result, &later, ages).unwrap();
        if out.shard().is_some() {
            prop_assert_eq!(again.shard(), out.shard());
        }
    }
}

/// One replica in the simulation.
struct Sim {
    name: String,
    /// Its wall clock's offset from true time: skew must not matter (W13).
    skew: i64,
    phase: u64,
    crash_at: Option<u64>,
    seen: ChangeObserver,
    held: Option<u32>,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(fleetshard_util::cases::property_cases(ProptestConfig::default().cases, 64)))]

    /// Replicas with skewed clocks heartbeat every H over one shared map. While alive, a
    /// replica never loses its shard; no shard ever has two holders in the map; a crashed
    /// replica's shard is taken over, but only after its entry sat unchanged for 3H.
    #[test]
    fn simulation(
        replicas in 1u32..5,
        members in prop::collection::vec((-3_600i64..3_600, 0u64..10, prop::option::of(0u64..200)), 1..7),
    ) {
        const H: u64 = 10;
        let mut sims: Vec<Sim> = members
            .iter()
            .enumerate()
            .map(|(i, &(skew, phase, crash_at))| Sim {
                name: format!("pod-{i}"),
                skew,
                phase,
                crash_at,
                seen: ChangeObserver::new(),
                held: None,
            })
            .collect();
        let mut map: Vec<ShardEntry> = Vec::new();
        // Shard → (holder, true time of its last write).
        let mut last_write: BTreeMap<u32, (String, u64)> = BTreeMap::new();
        for t in 0..400u64 {
            for sim in sims.iter_mut() {
                if sim.crash_at.is_some_and(|c| t >= c) || t % H != sim.phase {
                    continue;
                }
                let mono = Mono(Duration::from_secs(t));
                sim.seen.observe(&map, mono);
                let wall = WallTime::from_unix_seconds(1_787_423_492 + t as i64 + sim.skew);
                let req = ClaimRequest {
                    identity: &sim.name,
                    replicas,
                    pin: None,
                    now: wall,
                    stale_after: Duration::from_secs(3 * H),
                };
                let seen = &sim.seen;
                let out = get_or_update_shard(&map, &req, |e| seen.unchanged_for(e, mono)).unwrap();
                if let Some(before) = sim.held {
                    prop_assert_eq!(out.shard(), Some(before), "{} lost its shard at {}", sim.name, t);
                }
                if let Some(shard) = out.shard() {
                    if let Some((previous, at)) = last_write.get(&shard)
                        && previous != &sim.name
                    {
                        prop_assert!(t > at + 3 * H, "{} took {} from live {} at {}", sim.name, shard, previous, t);
                    }
                    last_write.insert(shard, (sim.name.clone(), t));
                }
                sim.held = out.shard();
                if let Some(write) = out.write {
                    map = write;
                }
            }
        }
        // Enough survivors hold every shard in the end.
        let alive = sims.iter().filter(|s| s.crash_at.is_none()).count();
        let held = map.iter().filter(|e| !e.is_free()).count();
        let holders_alive = map
            .iter()
            .filter(|e| sims.iter().any(|s| s.name == e.controller_name && s.crash_at.is_none()))
            .count();
        prop_assert_eq!(holders_alive, alive.min(replicas as usize));
        prop_assert!(held >= holders_alive);
    }
}
