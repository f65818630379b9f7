//! The machine's steps, pure: a map held in a variable, time passed by hand (H = 10 s,
//! S = 30 s).

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use fleetshard_core::argo::{ArgoAlgorithm, ArgoControllerAssignment};

use super::*;
use crate::argocd::{MAPPING_KEY, ShardEntry, decode, encode};
use crate::store::Entry;

mod shutdown;

const H: Duration = Duration::from_secs(10);
const S: Duration = Duration::from_secs(30);

fn ms(ms: u64) -> Mono {
    Mono(Duration::from_millis(ms))
}

fn secs(s: u64) -> Mono {
    Mono(Duration::from_secs(s))
}

/// The wall clock: a fixed date plus the monotonic reading (any value would do).
fn wall(now: Mono) -> WallTime {
    WallTime::from_unix_seconds(1_795_000_000).saturating_add(now.0)
}

fn clusters(n: usize) -> Vec<Cluster> {
    (0..n)
        .map(|i| Cluster::new(format!("c{i:02}"), format!("https://c{i}.example")))
        .collect()
}

/// Argo CD's clusters of `shard` among `replicas` (legacy), of [`clusters`]`(n)`.
fn expected(n: usize, replicas: u32, shard: i64) -> BTreeSet<String> {
    let cl = clusters(n);
    let a = ArgoControllerAssignment::compute(ArgoAlgorithm::Legacy, replicas, &cl, &[]);
    cl.iter()
        .zip(a.shards())
        .filter(|(_, s)| **s == shard)
        .map(|(c, _)| c.id.clone())
        .collect()
}

fn replica(name: &str, replicas: u32, n: usize, now: Mono) -> ArgoReplica {
    let cfg = ArgoConfig {
        jitter_seed: 7,
        ..ArgoConfig::new(name)
    };
    cfg.validate().unwrap();
    ArgoReplica::new(cfg, clusters(n), &[], replicas, now)
}

/// The store: one key, versions never reused; and the latest time actions were carried out
/// at (timers overdue after a pause fire then, not in the past).
#[derive(Default)]
struct Map {
    value: Option<(Vec<u8>, u64)>,
    revision: u64,
    clock: Mono,
}

impl Map {
    fn listing(&self) -> Listing {
        Listing {
            entries: self
                .value
                .iter()
                .map(|(v, version)| Entry {
                    key: MAPPING_KEY.to_owned(),
                    value: v.clone(),
                    version: *version,
                })
                .collect(),
            revision: self.revision,
        }
    }

    fn put(&mut self, value: Vec<u8>, pre: Precondition) -> Result<u64, StoreError> {
        if !pre.admits(self.value.as_ref().map(|v| v.1)) {
            return Err(StoreError::Conflict {
                key: MAPPING_KEY.to_owned(),
            });
        }
        self.revision += 1;
        self.value = Some((value, self.revision));
        Ok(self.revision)
    }

    /// Someone else writes the map.
    fn set(&mut self, entries: &[ShardEntry]) {
        self.put(encode(entries).into_bytes(), Precondition::Any)
            .unwrap();
    }

    fn entries(&self) -> Vec<ShardEntry> {
        let (v, _) = self.value.as_ref().expect("a map");
        decode(std::str::from_utf8(v).unwrap()).unwrap()
    }
}

/// Carries `actions` out at `now`, as a runner over a store that answers at once would:
/// reads are served, writes applied and confirmed, stops reported done. Returns every
/// action seen, in order.
fn run(r: &mut ArgoReplica, map: &mut Map, now: Mono, actions: Vec<Action>) -> Vec<Action> {
    map.clock = map.clock.max(now);
    let mut seen = Vec::new();
    let mut queue = VecDeque::from(actions);
    while let Some(a) = queue.pop_front() {
        match &a {
            Action::Write {
                ticket, value, pre, ..
            } => {
                let result = map.put(value.clone(), *pre);
                queue.extend(r.on_write(*ticket, result, now));
            }
            Action::Read => queue.extend(r.step(now, wall(now), Ok(map.listing()))),
            Action::Stop { cluster, .. } => queue.extend(r.on_stopped(cluster, now)),
            Action::Start { .. } => {}
        }
        seen.push(a);
    }
    seen
}

/// Runs the replica's timers up to `to` (inclusive), carrying their actions out.
fn advance(r: &mut ArgoReplica, map: &mut Map, to: Mono) -> Vec<Action> {
    let mut seen = Vec::new();
    for _ in 0..10_000 {
        let Some(at) = r.next_wake().filter(|w| *w <= to) else {
            return seen;
        };
        let at = at.max(map.clock);
        let actions = r.tick(at);
        seen.extend(run(r, map, at, actions));
    }
    panic!("the timers do not advance");
}

fn started(actions: &[Action]) -> BTreeSet<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Start { cluster, .. } => Some(cluster.clone()),
            _ => None,
        })
        .collect()
}

fn stopped(actions: &[Action]) -> BTreeSet<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Stop { cluster, .. } => Some(cluster.clone()),
            _ => None,
        })
        .collect()
}

fn writes(actions: &[Action]) -> usize {
    actions
        .iter()
        .filter(|a| matches!(a, Action::Write { .. }))
        .count()
}

fn acting(r: &ArgoReplica, now: Mono) -> BTreeSet<String> {
    r.acting(now).map(str::to_owned).collect()
}

/// A replica alone on a fresh map, holding shard 0 and acting on its clusters (at S).
fn settled(replicas: u32, n: usize) -> (ArgoReplica, Map) {
    let mut map = Map::default();
    let mut r = replica("a", replicas, n, secs(0));
    advance(&mut r, &mut map, secs(30));
    assert_eq!(acting(&r, secs(30)), expected(n, replicas, 0));
    (r, map)
}

#[test]
fn config_is_validated() {
    let ok = ArgoConfig::new("a");
    assert_eq!(ok.validity(), Duration::from_secs(20));
    assert_eq!(ok.start_delay(), S);
    assert!((ok.drift_tolerance() - 0.2).abs() < 1e-9);
    assert!(ok.validate().is_ok());
    assert!(matches!(
        ArgoConfig::new("").validate(),
        Err(ArgoConfigError::Identity(0))
    ));
    let tight = ArgoConfig {
        stale_after: H * 2,
        ..ArgoConfig::new("a")
    };
    let e = tight.validate().unwrap_err().to_string();
    assert!(e.contains("two heartbeats"), "{e}");
}

#[test]
fn a_fresh_map_is_created_and_its_clusters_wait_the_start_delay() {
    let mut map = Map::default();
    let mut r = replica("a", 2, 8, secs(0));
    // The first tick is the first heartbeat: a read.
    assert_eq!(r.next_wake(), Some(secs(0)));
    assert_eq!(r.tick(secs(0)), vec![Action::Read]);
    let actions = r.step(secs(0), wall(secs(0)), Ok(map.listing()));
    let [
        Action::Write {
            ticket, value, pre, ..
        },
    ] = actions.as_slice()
    else {
        panic!("{actions:?}")
    };
    assert_eq!(*pre, Precondition::Absent);
    let list = decode(std::str::from_utf8(value).unwrap()).unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].controller_name, "a");
    assert!(list[1].is_free());
    let result = map.put(value.clone(), *pre);
    assert!(r.on_write(*ticket, result, ms(5)).is_empty());
    assert_eq!(r.shard(), Some(0));
    // Valid for V = 2H from the send, not from the confirmation.
    assert_eq!(r.valid_until(), Some(secs(20)));
    assert_eq!(r.claim_status(), Some(&ClaimStatus::Holds(0)));
    assert_eq!(r.pending(), expected(8, 2, 0).len());
    // Nobody knows who acted before: nothing starts until S after the claim.
    let early = advance(&mut r, &mut map, ms(29_999));
    assert!(started(&early).is_empty(), "{early:?}");
    assert_eq!(writes(&early), 2, "heartbeats at H and 2H");
    let late = advance(&mut r, &mut map, secs(31));
    assert_eq!(started(&late), expected(8, 2, 0));
    assert_eq!(acting(&r, secs(31)), expected(8, 2, 0));
    assert_eq!(r.handovers(), expected(8, 2, 0).len() as u64);
}

#[test]
fn a_holder_renews_once_per_heartbeat_and_its_validity_follows() {
    let (mut r, mut map) = settled(1, 4);
    let before = r.writes();
    let actions = advance(&mut r, &mut map, secs(130));
    assert_eq!(writes(&actions), 10);
    assert_eq!(r.writes() - before, 10);
    assert!(stopped(&actions).is_empty());
    // The last heartbeat was sent at 130 s.
    assert_eq!(r.valid_until(), Some(secs(150)));
    // Each heartbeat changed the entry (so that observers see it live).
    let beats: BTreeSet<WallTime> = (0..3)
        .map(|i| {
            advance(&mut r, &mut map, secs(140 + 10 * i));
            map.entries()[0].heartbeat_time
        })
        .collect();
    assert_eq!(beats.len(), 3);
}

#[test]
fn without_a_confirmed_heartbeat_the_holder_stops_2h_after_the_last_send() {
    let (mut r, mut map) = settled(1, 4);
    advance(&mut r, &mut map, secs(40));
    assert_eq!(r.valid_until(), Some(secs(60)));
    // From now on every write fails (a partition): reads and writes alike.
    let mut t = secs(40);
    let mut stops = Vec::new();
    while t < secs(61) {
        let wake = r.next_wake().unwrap();
        t = wake;
        for a in r.tick(t) {
            let more = match a {
                Action::Read => r.step(t, wall(t), Err(StoreError::Unavailable("cut".into()))),
                Action::Stop { .. } => {
                    stops.push(a.clone());
                    Vec::new()
                }
                other => panic!("{other:?}"),
            };
            for m in more {
                assert!(matches!(m, Action::Stop { .. } | Action::Read), "{m:?}");
                if let Action::Stop { .. } = m {
                    stops.push(m);
                }
            }
        }
        if t < secs(60) {
            assert_eq!(acting(&r, t), expected(4, 1, 0), "{t:?}");
        }
    }
    assert!(acting(&r, secs(60)).is_empty());
    assert_eq!(stopped(&stops), expected(4, 1, 0));
    assert!(
        stops.iter().all(|s| matches!(
            s,
            Action::Stop { lapsed_at: Some(at), shard: Some(0), .. } if *at == secs(60)
        )),
        "{stops:?}"
    );
    assert!(r.store_errors() > 0);
    assert_eq!(r.last_store_error(), Some("store unavailable: cut"));
}

#[test]
fn a_live_entry_is_never_taken_and_a_stale_one_is_taken_and_started_at_once() {
    let mut map = Map::default();
    let mut b = replica("b", 1, 4, secs(0));
    let beat = |i: u64| ShardEntry::held(0, "x", WallTime::from_unix_seconds(1_000 + i as i64));
    map.set(&[beat(0)]);
    // x heartbeats every H: b reads each change and never takes the entry.
    for i in 0..10 {
        let now = secs(10 * i);
        map.set(&[beat(i)]);
        let a = advance(&mut b, &mut map, now);
        let a2 = run(&mut b, &mut map, now, vec![Action::Read]);
        assert_eq!(writes(&a) + writes(&a2), 0, "{now:?}");
        assert_eq!(b.shard(), None);
    }
    assert_eq!(b.claim_status(), Some(&ClaimStatus::Spare));
    // x stops heartbeating at 90 s: b takes the entry once it has been unchanged for more
    // than S on b's clock, waking exactly then.
    let quiet = advance(&mut b, &mut map, secs(120));
    assert_eq!(writes(&quiet), 0);
    assert_eq!(b.next_wake(), Some(ms(120_001)));
    assert_eq!(b.failovers(), 0);
    let taken = advance(&mut b, &mut map, ms(120_001));
    assert_eq!(writes(&taken), 1);
    assert_eq!(b.shard(), Some(0));
    assert_eq!(b.failovers(), 1, "a stale entry taken over is a failover");
    assert_eq!(map.entries()[0].controller_name, "b");
    // A stale takeover: x stopped H before, so the clusters start at once.
    assert_eq!(started(&taken), expected(4, 1, 0));
}

#[test]
fn a_graceful_release_seen_starts_at_once_but_only_once_the_shape_is_stable() {
    let x = |t: i64| ShardEntry::held(0, "x", WallTime::from_unix_seconds(t));
    for (stable, fast) in [(true, true), (false, false)] {
        let mut map = Map::default();
        map.set(&[x(1)]);
        let mut b = replica("b", 1, 4, secs(0));
        let release_at = if stable { secs(25) } else { secs(5) };
        advance(&mut b, &mut map, secs(0));
        // x is live: it heartbeats at 0, H, …; then frees its entry (shutdown).
        let mut t = 0;
        while secs(t) < release_at {
            map.set(&[x(t as i64 + 1)]);
            run(&mut b, &mut map, secs(t), vec![Action::Read]);
            t += 5;
        }
        // A release frees the entry and keeps the holder's last heartbeat.
        let released = ShardEntry {
            controller_name: String::new(),
            ..x(t as i64)
        };
        map.set(&[released]);
        let now = release_at.after(Duration::from_secs(10));
        let claimed = run(&mut b, &mut map, now, vec![Action::Read]);
        assert_eq!(b.shard(), Some(0), "stable {stable}");
        assert_eq!(b.failovers(), 0, "a graceful release taken is no failover");
        if fast {
            assert_eq!(started(&claimed), expected(4, 1, 0));
        } else {
            // b started 5 s before the release: the map's shape is not known stable for
            // S, so the clusters wait S.
            assert!(started(&claimed).is_empty());
            let later = advance(&mut b, &mut map, now.after(S));
            assert_eq!(started(&later), expected(4, 1, 0));
        }
    }
}

/// A free entry without a heartbeat is not a release: between two reads of `b` the map
/// shrank (x's entry dropped: x may not have read that yet, and still acts) and grew again
/// with a free entry. `b` must not start x's clusters at once (seed 462 of the scaling
/// simulation overlapped this way).
#[test]
fn a_free_entry_without_a_heartbeat_is_no_release() {
    let x = |t: i64| ShardEntry::held(0, "x", WallTime::from_unix_seconds(t));
    let mut map = Map::default();
    map.set(&[x(1)]);
    let mut b = replica("b", 1, 4, secs(0));
    advance(&mut b, &mut map, secs(0));
    let mut t = 0;
    while t < 30 {
        map.set(&[x(t as i64 + 1)]);
        run(&mut b, &mut map, secs(t), vec![Action::Read]);
        t += 5;
    }
    // Shrunk and grown again between two reads: the entry is free, with no heartbeat.
    map.set(&[ShardEntry::free(0)]);
    let now = secs(40);
    let claimed = run(&mut b, &mut map, now, vec![Action::Read]);
    assert_eq!(b.shard(), Some(0));
    assert!(started(&claimed).is_empty(), "x may still act: wait S");
    let later = advance(&mut b, &mut map, now.after(S));
    assert_eq!(started(&later), expected(4, 1, 0));
}

/// Our own release frees the entry and keeps our last heartbeat (the mark of a release).
#[test]
fn a_release_keeps_the_last_heartbeat() {
    let (mut r, mut map) = settled(1, 4);
    let beat = map.entries()[0].heartbeat_time;
    assert_ne!(beat, WallTime::ZERO);
    let t = secs(41);
    let actions = r.shutdown(t);
    run(&mut r, &mut map, t, actions);
    let entry = &map.entries()[0];
    assert!(entry.is_free(), "{entry:?}");
    assert_ne!(entry.heartbeat_time, WallTime::ZERO, "{entry:?}");
}

#[test]
fn a_count_change_stops_at_once_and_delays_every_gain_by_s() {
    let (mut r, mut map) = settled(1, 12);
    // Scale up 1 → 2: the new count takes clusters away at once, and the claim round that
    // follows (asked for now) extends the map.
    let t = secs(35);
    let actions = r.on_replicas(2, t);
    let lost: BTreeSet<String> = expected(12, 1, 0)
        .difference(&expected(12, 2, 0))
        .cloned()
        .collect();
    assert!(!lost.is_empty());
    assert_eq!(stopped(&actions), lost);
    assert_eq!(actions.last(), Some(&Action::Read));
    run(&mut r, &mut map, t, actions);
    assert_eq!(map.entries().len(), 2);
    assert_eq!(acting(&r, t), expected(12, 2, 0));
    // Scale down 2 → 1: shard 0 gains back what it lost, but only S after the change.
    let t = secs(50);
    let actions = r.on_replicas(1, t);
    assert!(stopped(&actions).is_empty());
    run(&mut r, &mut map, t, actions);
    assert_eq!(map.entries().len(), 1);
    assert!(started(&advance(&mut r, &mut map, ms(79_999))).is_empty());
    assert_eq!(started(&advance(&mut r, &mut map, secs(80))), lost);
}

#[test]
fn scale_down_drops_our_entry_and_the_write_waits_for_our_stops() {
    // b holds shard 1 of 2 and acts on it.
    let mut map = Map::default();
    let a_entry = |t: i64| ShardEntry::held(0, "a", WallTime::from_unix_seconds(t));
    map.set(&[a_entry(1), ShardEntry::free(1)]);
    let mut b = replica("b", 2, 12, secs(0));
    advance(&mut b, &mut map, secs(30));
    assert_eq!(b.shard(), Some(1));
    assert_eq!(acting(&b, secs(30)), expected(12, 2, 1));
    // a heartbeats too.
    let mut live = map.entries();
    live[0] = a_entry(2);
    map.set(&live);
    run(&mut b, &mut map, secs(31), vec![Action::Read]);
    // The count drops to 1: b's shard no longer exists; it stops everything at once.
    let t = secs(35);
    let actions = b.on_replicas(1, t);
    assert_eq!(stopped(&actions), expected(12, 2, 1));
    assert!(!b.all_stopped());
    // The claim round drops b's entry; that write waits until the stops are reported.
    let round = b.step(t, wall(t), Ok(map.listing()));
    assert_eq!(writes(&round), 0, "{round:?}");
    assert_eq!(b.shard(), None);
    let mut pending: Vec<String> = expected(12, 2, 1).into_iter().collect();
    let last = pending.pop().unwrap();
    for c in &pending {
        assert!(b.on_stopped(c, t).is_empty());
    }
    let actions = b.on_stopped(&last, t);
    assert_eq!(writes(&actions), 1);
    run(&mut b, &mut map, t, actions);
    assert_eq!(map.entries(), vec![a_entry(2)]);
    assert_eq!(b.claim_status(), Some(&ClaimStatus::Spare));
}

#[test]
fn store_errors_back_off_exponentially_up_to_a_quarter_heartbeat() {
    let mut r = replica("a", 1, 4, secs(0));
    assert_eq!(r.tick(secs(0)), vec![Action::Read]);
    let mut now = secs(0);
    let mut waits = Vec::new();
    for _ in 0..12 {
        let actions = r.step(now, wall(now), Err(StoreError::Unavailable("down".into())));
        assert!(actions.is_empty(), "no read at once: {actions:?}");
        let at = r.timers.read_at.unwrap();
        waits.push(at.since(now));
        assert_eq!(r.tick(at), vec![Action::Read]);
        now = at;
    }
    assert_eq!(r.store_errors(), 12);
    // 25 ms × 2^streak × [0.5, 1), capped at H/4.
    for (i, w) in waits.iter().enumerate() {
        let base = (Duration::from_millis(25) * (1 << (i + 1).min(8))).min(H / 4);
        assert!(*w >= base / 2 && *w < base, "{i}: {w:?} vs {base:?}");
    }
    // A good read resets the streak: the claim goes out, and the next error waits little.
    let mut map = Map::default();
    let actions = r.step(now, wall(now), Ok(map.listing()));
    assert_eq!(writes(&actions), 1);
    run(&mut r, &mut map, now, actions);
    assert_eq!(r.shard(), Some(0));
    r.step(now, wall(now), Err(StoreError::Unavailable("down".into())));
    assert!(r.timers.read_at.unwrap().since(now) < Duration::from_millis(50));
}

#[test]
fn a_conflict_is_retried_after_the_backoff_with_a_fresh_read() {
    let mut map = Map::default();
    let mut a = replica("a", 2, 4, secs(0));
    let mut b = replica("b", 2, 4, secs(0));
    // Both read the absent map and both try to create it: b loses.
    assert_eq!(a.tick(secs(0)), vec![Action::Read]);
    assert_eq!(b.tick(secs(0)), vec![Action::Read]);
    let wa = a.step(secs(0), wall(secs(0)), Ok(map.listing()));
    let wb = b.step(secs(0), wall(secs(0)), Ok(map.listing()));
    run(&mut a, &mut map, secs(0), wa);
    let Some(Action::Write {
        ticket, value, pre, ..
    }) = wb.first()
    else {
        panic!("{wb:?}")
    };
    let lost = map.put(value.clone(), *pre);
    assert!(matches!(lost, Err(StoreError::Conflict { .. })));
    assert!(b.on_write(*ticket, lost, ms(1)).is_empty());
    assert_eq!(b.shard(), None);
    let retry = b.next_wake().unwrap();
    assert!(retry > ms(1) && retry < ms(100), "{retry:?}");
    advance(&mut b, &mut map, retry);
    assert_eq!(b.shard(), Some(1));
    assert_eq!(a.shard(), Some(0));
}

#[test]
fn a_read_older_than_our_own_write_is_ignored() {
    let (mut r, map) = settled(1, 4);
    let old = Listing {
        entries: Vec::new(),
        revision: map.revision - 1,
    };
    let actions = r.step(secs(31), wall(secs(31)), Ok(old));
    assert!(actions.is_empty(), "{actions:?}");
    assert_eq!(r.shard(), Some(0));
    assert_eq!(acting(&r, secs(31)), expected(4, 1, 0));
    // …and a fresh read follows shortly.
    assert!(r.next_wake().unwrap() < ms(31_100));
}

#[test]
fn an_undecodable_map_is_reported_and_never_overwritten() {
    let (mut r, mut map) = settled(1, 4);
    map.put(b"not json".to_vec(), Precondition::Any).unwrap();
    let version = map.value.as_ref().unwrap().1;
    let actions = advance(&mut r, &mut map, secs(100));
    assert_eq!(writes(&actions), 0);
    assert_eq!(map.value.as_ref().unwrap().1, version);
    assert!(r.map_error().unwrap().contains(MAPPING_KEY));
    // The hold runs out with its validity (the last confirmed heartbeat was at 30 s).
    assert_eq!(stopped(&actions), expected(4, 1, 0));
    assert!(acting(&r, secs(100)).is_empty());
    let warnings = r.take_warnings();
    assert_eq!(
        warnings
            .iter()
            .filter(|w| w.contains("cannot decode"))
            .count(),
        1,
        "{warnings:?}"
    );
}

#[test]
fn a_replica_paused_past_its_validity_stops_before_anything_else() {
    let (mut r, mut map) = settled(1, 4);
    assert_eq!(r.valid_until(), Some(secs(50)));
    // Paused from 31 s to 95 s; nobody took the entry. The first input is a read.
    let actions = r.step(secs(95), wall(secs(95)), Ok(map.listing()));
    map.clock = secs(95);
    let Some(Action::Stop { lapsed_at, .. }) = actions.first() else {
        panic!("{actions:?}")
    };
    assert_eq!(*lapsed_at, Some(secs(50)));
    assert_eq!(stopped(&actions), expected(4, 1, 0));
    // Its overdue heartbeat renews (the entry is still its own) and it regains its
    // clusters only S later.
    let renewed = advance(&mut r, &mut map, secs(95));
    assert_eq!(writes(&renewed), 1);
    assert_eq!(r.valid_until(), Some(secs(115)));
    assert!(started(&advance(&mut r, &mut map, ms(124_999))).is_empty());
    assert_eq!(
        started(&advance(&mut r, &mut map, secs(125))),
        expected(4, 1, 0)
    );
}
