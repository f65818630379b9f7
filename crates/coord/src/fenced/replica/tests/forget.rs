//! Presence records of replicas gone for the grace are deleted by the distributor, with
//! compare-and-swap on the version it judged; live ones never are.

use super::*;

fn presence(holder: &str, beat: u64) -> Vec<u8> {
    encode(&PresenceRecord {
        holder: holder.into(),
        incarnation: 3,
        beat,
        released: false,
    })
}

/// Steps and runs every second from `from` to `to` (ms), returning when each presence
/// delete was sent, with its precondition and whether it applied.
fn run_until(b: &mut Bench, from: u64, to: u64) -> Vec<(u64, Precondition, bool)> {
    let mut deletes = Vec::new();
    let mut t = from;
    while t <= to {
        let a = b.step(ms(t));
        for (purpose, pre, ok) in b.run(a) {
            if purpose == WritePurpose::ForgetPresence {
                deletes.push((t, pre, ok));
            }
        }
        t += 1_000;
    }
    deletes
}

#[test]
fn a_dead_spares_presence_is_deleted_once_unchanged_for_the_grace() {
    let mut b = Bench::new("a", 1, 2);
    b.settle(ms(0));
    assert!(b.r.is_distributor(ms(0)));
    let key = presence_key(ROOT, "z");
    let v = b.put(&key, presence("z", 9));
    // First seen at 1 s: not deleted before 1 s + grace.
    let grace = PRESENCE_GRACE.as_millis() as u64;
    assert_eq!(run_until(&mut b, 1_000, grace), vec![]);
    assert!(b.entries.contains_key(&key));
    assert_eq!(
        run_until(&mut b, grace + 1_000, grace + 3_000),
        vec![(grace + 1_000, Precondition::Version(v), true)]
    );
    assert!(!b.entries.contains_key(&key));
    // Our own records are untouched, and we still distribute.
    assert!(b.entries.contains_key(&shard_key(ROOT, 0)));
    assert!(b.r.is_distributor(ms(grace + 3_000)));
}

#[test]
fn a_record_that_changes_is_kept_and_a_delete_meeting_a_renew_fails() {
    let mut b = Bench::new("a", 1, 2);
    b.settle(ms(0));
    let key = presence_key(ROOT, "z");
    b.put(&key, presence("z", 1));
    let grace = PRESENCE_GRACE.as_millis() as u64;
    assert_eq!(run_until(&mut b, 1_000, grace / 2), vec![]);
    // The replica renews (it was only slow, or came back): the wait starts again.
    b.put(&key, presence("z", 2));
    assert_eq!(run_until(&mut b, grace / 2 + 1_000, grace + 2_000), vec![]);
    assert!(b.entries.contains_key(&key));
    // Due now; the delete goes out, but the record changes before it arrives.
    run_until(&mut b, grace + 3_000, grace / 2 + grace);
    let actions = b.step(ms(grace / 2 + grace + 1_000));
    let judged = b.entries[&key].1;
    assert!(
        actions.iter().any(|a| matches!(a,
            Action::Delete { pre: Precondition::Version(v), .. } if *v == judged)),
        "{actions:?}"
    );
    let renewed = b.put(&key, presence("z", 3));
    let done = b.run(actions);
    assert!(done.contains(&(
        WritePurpose::ForgetPresence,
        Precondition::Version(judged),
        false
    )));
    assert_eq!(b.entries[&key].1, renewed);
    // The renewed record is judged afresh: no delete at the next step.
    assert_eq!(
        run_until(&mut b, grace / 2 + grace + 2_000, grace / 2 + grace + 5_000),
        vec![]
    );
}

#[test]
fn only_the_distributor_deletes() {
    let mut b = Bench::new("a", 2, 2);
    // Someone else distributes, live: its record changes every second.
    let dist = distributor_key(ROOT);
    let key = presence_key(ROOT, "z");
    b.put(&key, presence("z", 1));
    let grace = PRESENCE_GRACE.as_millis() as u64;
    let mut t = 0;
    while t <= grace + 10_000 {
        b.put(
            &dist,
            encode(&DistributorRecord {
                holder: "d".into(),
                incarnation: 1,
                beat: t,
                released: false,
                shard: None,
            }),
        );
        let a = b.step(ms(t));
        assert!(!b.r.is_distributor(ms(t)));
        assert!(
            !a.iter().any(|a| matches!(a, Action::Delete { .. })),
            "t={t}: {a:?}"
        );
        b.run(a);
        t += 1_000;
    }
    assert!(b.entries.contains_key(&key));
}

#[test]
fn a_refused_delete_is_reported_and_tried_again_a_grace_later() {
    let mut b = Bench::new("a", 1, 2);
    b.settle(ms(0));
    let key = presence_key(ROOT, "z");
    b.put(&key, presence("z", 1));
    let grace = PRESENCE_GRACE.as_millis() as u64;
    run_until(&mut b, 1_000, grace);
    let t = grace + 1_000;
    let actions = b.step(ms(t));
    let ticket = actions
        .iter()
        .find_map(|a| match a {
            Action::Delete { ticket, .. } => Some(*ticket),
            _ => None,
        })
        .expect("a delete is due");
    // The store refuses it (a Role without `delete` on Leases): reported once.
    b.r.on_delete(ticket, Err(StoreError::Backend("forbidden".into())));
    let warnings = b.r.take_warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(&key) && w.contains("forbidden")),
        "{warnings:?}"
    );
    let others: Vec<Action> = actions
        .into_iter()
        .filter(|a| !matches!(a, Action::Delete { .. }))
        .collect();
    b.run(others);
    // Not at every step after that: only a grace later.
    assert_eq!(run_until(&mut b, t + 1_000, t + grace - 1_000), vec![]);
    let again = run_until(&mut b, t + grace, t + grace + 1_000);
    assert_eq!(again.len(), 1, "{again:?}");
    assert!(!b.entries.contains_key(&key));
}

/// Runs from `from` to `to` (ms, every second) with a live shard record beyond the count
/// renewed (or not) by its holder; returns when each shard record delete was sent.
fn shard_deletes(b: &mut Bench, from: u64, to: u64, renewed: Option<&str>) -> Vec<(u64, bool)> {
    let mut deletes = Vec::new();
    let mut t = from;
    while t <= to {
        if let Some(key) = renewed {
            let beat = b.entries.get(key).map_or(0, |e| e.1);
            b.put(key, shard_record("z", beat));
        }
        let a = b.step(ms(t));
        for (purpose, _, ok) in b.run(a) {
            if purpose == WritePurpose::ForgetShard {
                deletes.push((t, ok));
            }
        }
        t += 1_000;
    }
    deletes
}

/// A holder of a shard beyond the count that died before releasing it leaves its record
/// for ever (nobody claims there). A replica started later must watch it a whole lease
/// duration before its barrier may pass it (simulation seed 1,005,205,671,012 of the
/// scaling configuration: a restarted pod's every start waited 4 s on it). The
/// distributor deletes it once expired, with compare-and-swap on the version it judged.
#[test]
fn a_dead_holders_record_beyond_the_count_is_deleted_once_expired() {
    let mut b = Bench::new("a", 1, 2);
    b.settle(ms(0));
    let key = shard_key(ROOT, 3);
    let v = b.put(&key, shard_record("z", 1));
    assert_eq!(shard_deletes(&mut b, 1_000, 4_000, None), vec![]);
    assert_eq!(b.entries[&key].1, v, "kept while it may be live");
    assert_eq!(
        shard_deletes(&mut b, 5_000, 6_000, None),
        vec![(5_000, true)]
    );
    assert!(!b.entries.contains_key(&key));
    // Our own shard's record stays.
    assert!(b.entries.contains_key(&shard_key(ROOT, 0)));
}

#[test]
fn a_live_record_beyond_the_count_is_kept_and_a_released_one_deleted_at_once() {
    let mut b = Bench::new("a", 1, 2);
    b.settle(ms(0));
    let key = shard_key(ROOT, 1);
    b.put(&key, shard_record("z", 1));
    assert_eq!(shard_deletes(&mut b, 1_000, 20_000, Some(&key)), vec![]);
    let mut released: ShardRecord = serde_json::from_slice(&b.entries[&key].0).unwrap();
    released.released = true;
    b.put(&key, encode(&released));
    assert_eq!(
        shard_deletes(&mut b, 21_000, 22_000, None),
        vec![(21_000, true)]
    );
}

/// A record below the count is never deleted: it is claimed (a takeover), not forgotten.
#[test]
fn an_expired_record_below_the_count_is_not_deleted() {
    let mut b = Bench::new("a", 2, 2);
    b.put(&shard_key(ROOT, 1), shard_record("z", 1));
    b.settle(ms(0));
    assert_eq!(b.r.shard(ms(0)), Some(0));
    assert_eq!(shard_deletes(&mut b, 1_000, 10_000, None), vec![]);
    assert!(b.entries.contains_key(&shard_key(ROOT, 1)));
}

/// A renew of ours that landed after our deadline (its reply late) names this very
/// incarnation on a shard we no longer hold: it is released at once, not left to look live
/// for a lease duration (simulation seed 666,924,577,494 of the scaling configuration: its
/// old acknowledgement held the barrier of a cluster moved away from it for 9.4 s). Another
/// incarnation's record of the same identity is not ours to release.
#[test]
fn a_stray_record_of_this_incarnation_is_released_at_once() {
    let mut b = Bench::new("a", 1, 2);
    b.settle(ms(0));
    assert_eq!(b.r.shard(ms(0)), Some(0));
    let ours = |incarnation: u64| {
        encode(&ShardRecord {
            holder: "a".into(),
            incarnation,
            beat: 9,
            acked: 1,
            released: false,
            zone: None,
            capacity: None,
        })
    };
    let stray = b.put(&shard_key(ROOT, 3), ours(7));
    let older = b.put(&shard_key(ROOT, 4), ours(6));
    let a = b.step(ms(100));
    let releases: Vec<_> = writes(&a)
        .into_iter()
        .filter(|w| w.0 == WritePurpose::ReleaseShard)
        .collect();
    assert_eq!(
        releases,
        [(
            WritePurpose::ReleaseShard,
            "f/shards/3",
            Precondition::Version(stray)
        )]
    );
    b.run(a);
    let rec: ShardRecord = serde_json::from_slice(&b.entries[&shard_key(ROOT, 3)].0).unwrap();
    assert!(rec.released);
    assert_eq!(b.entries[&shard_key(ROOT, 4)].1, older, "not ours");
    // Our own shard is untouched.
    assert_eq!(b.r.shard(ms(110)), Some(0));
}
