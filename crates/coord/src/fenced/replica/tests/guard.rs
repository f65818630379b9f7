//! The drop guard, one step at a time: a drop beyond the share waits for the grace on the
//! step's own time, is said once per episode, and ends when the inventory comes back.

use super::*;
use crate::fenced::replica::guard::{DropCheck, keep_dropped};

/// Replaces the fleet with its first `n` clusters (a new revision).
fn shrink_to(b: &mut Bench, n: usize) {
    b.clusters = clusters(n);
    b.loads = vec![1; n];
    b.fleet_revision += 1;
}

/// Settles once a second from `from` to `to` (seconds), renewing on the way.
fn settle_secs(b: &mut Bench, from: u64, to: u64) {
    for s in from..=to {
        b.settle(ms(s * 1_000));
    }
}

fn drop_warnings(b: &mut Bench) -> Vec<String> {
    b.r.take_warnings()
        .into_iter()
        .filter(|w| w.starts_with("distributor:"))
        .collect()
}

#[test]
fn a_drop_beyond_the_share_is_committed_only_once_it_has_held_for_the_grace() {
    // Warm: a new fleet's unclaimed shard 1 would become vacant at 4 s (a new generation).
    let mut b = Bench::new("a", 2, 10).warm();
    b.settle(ms(0));
    assert_eq!(b.doc().clusters.len(), 10);
    let generation = b.doc().generation;
    shrink_to(&mut b, 4);
    b.settle(ms(1_000));
    assert_eq!(b.doc().clusters.len(), 10, "6 of 10 dropped at once");
    let held = b.r.held_back().unwrap();
    assert_eq!((held.previous, held.dropped), (10, 6));
    assert_eq!((held.since, held.until), (ms(1_000), ms(13_000)));
    let said = drop_warnings(&mut b);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("drops 6 of the 10"), "{said:?}");
    settle_secs(&mut b, 2, 12);
    assert_eq!(b.doc().clusters.len(), 10);
    assert_eq!(b.doc().generation, generation);
    assert!(drop_warnings(&mut b).is_empty(), "said once per episode");
    settle_secs(&mut b, 13, 14);
    assert_eq!(b.doc().clusters.len(), 4);
    assert!(b.doc().generation > generation);
    assert_eq!(b.r.held_back(), None);
    let said = drop_warnings(&mut b);
    assert!(
        said.len() == 1 && said[0].contains("dropping 6 of 10"),
        "{said:?}"
    );
}

#[test]
fn a_drop_within_the_share_is_committed_at_once() {
    let mut b = Bench::new("a", 2, 10);
    b.settle(ms(0));
    shrink_to(&mut b, 5);
    b.settle(ms(100));
    assert_eq!(b.doc().clusters.len(), 5, "half is not more than 50 %");
    assert_eq!(b.r.held_back(), None);
    assert!(drop_warnings(&mut b).is_empty());
}

#[test]
fn an_inventory_that_comes_back_ends_the_episode_without_a_drop() {
    let mut b = Bench::new("a", 2, 10);
    b.settle(ms(0));
    shrink_to(&mut b, 0);
    settle_secs(&mut b, 1, 5);
    assert_eq!(b.r.held_back().map(|h| h.dropped), Some(10));
    shrink_to(&mut b, 10);
    settle_secs(&mut b, 6, 20);
    assert_eq!(b.doc().clusters.len(), 10);
    assert_eq!(b.r.held_back(), None);
    let said = drop_warnings(&mut b);
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(said[1].contains("nothing held back"), "{said:?}");
}

#[test]
fn an_empty_inventory_is_never_committed_without_allow_empty() {
    let mut b = Bench::new("a", 1, 10);
    b.settle(ms(0));
    shrink_to(&mut b, 0);
    settle_secs(&mut b, 1, 60);
    assert_eq!(b.doc().clusters.len(), 10, "the fleet was emptied");
    let held = b.r.held_back().unwrap();
    assert_eq!((held.previous, held.dropped), (10, 10));
    let said = drop_warnings(&mut b);
    assert_eq!(said.len(), 1, "said once: {said:?}");
    assert!(
        said[0].contains("none of the 10") && said[0].contains("--allow-empty-fleet"),
        "{said:?}"
    );
    // Even a guard that never holds a drop back keeps an empty fleet out.
    let mut b = Bench::new("a", 1, 10);
    b.r = Replica::new(config("a", 1)).with_drop_guard(DropGuard {
        max_drop_percent: 100,
        ..DropGuard::default()
    });
    b.settle(ms(0));
    shrink_to(&mut b, 0);
    settle_secs(&mut b, 1, 30);
    assert_eq!(b.doc().clusters.len(), 10);
}

#[test]
fn a_new_smaller_view_restarts_the_grace() {
    let mut b = Bench::new("a", 1, 10);
    b.settle(ms(0));
    shrink_to(&mut b, 4);
    settle_secs(&mut b, 1, 8);
    shrink_to(&mut b, 2);
    settle_secs(&mut b, 9, 15);
    assert_eq!(b.doc().clusters.len(), 10, "the grace restarted at 9 s");
    let held = b.r.held_back().unwrap();
    assert_eq!((held.dropped, held.since), (8, ms(9_000)));
    settle_secs(&mut b, 16, 22);
    assert_eq!(b.doc().clusters.len(), 2);
}

#[test]
fn no_guard_at_one_hundred_percent() {
    let mut b = Bench::new("a", 1, 10);
    b.r = Replica::new(config("a", 1)).with_drop_guard(DropGuard {
        max_drop_percent: 100,
        grace: Duration::from_secs(12),
        allow_empty: true,
    });
    b.settle(ms(0));
    shrink_to(&mut b, 0);
    b.settle(ms(100));
    assert!(b.doc().clusters.is_empty());
}

#[test]
fn kept_clusters_stay_on_their_shard_or_go_to_a_live_one() {
    let doc = AssignmentDoc {
        generation: 3,
        shards: 3,
        clusters: [("a", 0), ("b", 1), ("c", 2), ("d", 0)]
            .iter()
            .map(|&(k, v)| (k.to_owned(), v))
            .collect(),
        homes: [("d".to_owned(), 2)].into_iter().collect(),
    };
    let guard = DropGuard::default();
    let (mut assigned, mut homes) = (BTreeMap::new(), BTreeMap::new());
    // Shard 1 is vacant now, shard 2 is beyond the new count of 2.
    let check = keep_dropped(&guard, None, &doc, 2, &[1], &mut assigned, &mut homes);
    let DropCheck::Held(seen) = check else {
        panic!("{check:?}")
    };
    assert_eq!((seen.previous, seen.dropped), (4, 4));
    let kept: Vec<(&str, u32)> = assigned.iter().map(|(k, &v)| (k.as_str(), v)).collect();
    assert_eq!(kept, [("a", 0), ("b", 0), ("c", 0), ("d", 0)]);
    assert!(homes.is_empty(), "a home beyond the count is forgotten");
    // The same drop, once allowed, is still held: it empties the fleet.
    let (mut assigned, mut homes) = (BTreeMap::new(), BTreeMap::new());
    let check = keep_dropped(
        &guard,
        Some(seen.digest),
        &doc,
        2,
        &[1],
        &mut assigned,
        &mut homes,
    );
    assert!(matches!(check, DropCheck::Held(_)), "{check:?}");
    // With an empty fleet allowed, it goes through untouched.
    let guard = DropGuard {
        allow_empty: true,
        ..guard
    };
    let (mut assigned, mut homes) = (BTreeMap::new(), BTreeMap::new());
    let check = keep_dropped(
        &guard,
        Some(seen.digest),
        &doc,
        2,
        &[1],
        &mut assigned,
        &mut homes,
    );
    assert_eq!(check, DropCheck::Released);
    assert!(assigned.is_empty());
}

#[test]
fn a_drop_whose_commit_fails_is_retried_not_held_again() {
    let mut b = Bench::new("a", 1, 10);
    b.settle(ms(0));
    shrink_to(&mut b, 4);
    settle_secs(&mut b, 1, 12);
    drop_warnings(&mut b);
    let a = b.step(ms(13_000));
    assert!(writes(&a).iter().any(|w| w.0 == WritePurpose::Commit));
    // Someone rewrites the assignment meanwhile: the commit conflicts.
    let same = b.entries[&assignment_key(ROOT)].0.clone();
    b.put(&assignment_key(ROOT), same);
    let outcomes = b.run(a);
    assert!(outcomes.iter().any(|o| o.0 == WritePurpose::Commit && !o.2));
    assert_eq!(b.doc().clusters.len(), 10);
    b.settle(ms(13_200));
    assert_eq!(b.doc().clusters.len(), 4, "retried at once, no new grace");
    let said = drop_warnings(&mut b);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("dropping 6 of 10"), "{said:?}");
    assert_eq!(b.r.held_back(), None);
}
