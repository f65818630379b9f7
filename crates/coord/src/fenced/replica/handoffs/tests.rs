//! The per-cluster handover barrier's memory, one generation at a time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::Handoffs;
use crate::fenced::records::{AssignmentDoc, ShardRecord};
use crate::fenced::replica::seen::{Seen, View};
use crate::lease::Verdict;

fn doc(generation: u64, clusters: &[(&str, u32)]) -> Arc<AssignmentDoc> {
    Arc::new(AssignmentDoc {
        generation,
        shards: 4,
        clusters: clusters.iter().map(|&(c, s)| (c.to_owned(), s)).collect(),
        homes: BTreeMap::new(),
    })
}

/// A view of shard records: (shard, acked, live).
fn view(shards: &[(u32, u64, bool)]) -> View {
    let mut v = View::default();
    for &(n, acked, live) in shards {
        let unchanged_for = Duration::from_millis(if live { 100 } else { 5_000 });
        v.shards.insert(
            n,
            Seen {
                version: 1,
                record: ShardRecord {
                    holder: format!("r{n}"),
                    incarnation: 1,
                    beat: 1,
                    acked,
                    released: false,
                    zone: None,
                    capacity: None,
                },
                verdict: if live {
                    Verdict::Live { unchanged_for }
                } else {
                    Verdict::Expired { unchanged_for }
                },
            },
        );
    }
    v
}

#[test]
fn a_cluster_that_moved_waits_only_for_the_shard_it_left() {
    let mut h = Handoffs::default();
    h.applied(&doc(4, &[("a", 0), ("b", 1), ("c", 2)]));
    h.applied(&doc(5, &[("a", 3), ("b", 1), ("c", 3)]));
    // Shard 1 is still draining something generation 5 took (acked 4); shard 0 acknowledged
    // generation 5, shard 2 did not.
    let v = view(&[(0, 5, true), (1, 4, true), (2, 4, true)]);
    assert!(h.base_acknowledged(&v, 3), "everyone acknowledged 4");
    assert!(h.let_go(&v, "a", 3), "shard 0 let a go");
    assert!(!h.let_go(&v, "c", 3), "shard 2 may still act on c");
    // Shard 1 never had a or c: its acknowledgement of 5 is not waited for.
    let v = view(&[(0, 5, true), (1, 4, true), (2, 5, true)]);
    assert!(h.let_go(&v, "c", 3));
}

#[test]
fn a_crashed_holders_orphans_start_without_waiting_for_anyone() {
    let mut h = Handoffs::default();
    h.applied(&doc(4, &[("a", 0), ("b", 1)]));
    h.applied(&doc(5, &[("a", 1), ("b", 1)]));
    // Shard 0's holder is gone (expired by our clock); shard 2 drains a move of its own.
    let v = view(&[(0, 4, false), (2, 4, true)]);
    assert!(h.base_acknowledged(&v, 1));
    assert!(h.let_go(&v, "a", 1));
}

#[test]
fn a_gap_in_the_generations_seen_waits_for_everyone() {
    let mut h = Handoffs::default();
    h.applied(&doc(4, &[("a", 0)]));
    // Generation 5 was missed: a may have gone anywhere meanwhile.
    h.applied(&doc(6, &[("a", 1)]));
    let v = view(&[(0, 6, true), (2, 5, true)]);
    assert!(
        !h.base_acknowledged(&v, 1),
        "shard 2 has not acknowledged 6"
    );
    let v = view(&[(0, 6, true), (2, 6, true)]);
    assert!(h.base_acknowledged(&v, 1));
    assert!(h.let_go(&v, "a", 1));
}

#[test]
fn a_cluster_that_left_a_shard_twice_waits_for_the_later_leave() {
    let mut h = Handoffs::default();
    h.applied(&doc(1, &[("a", 0)]));
    h.applied(&doc(2, &[("a", 1)]));
    h.applied(&doc(3, &[("a", 0)]));
    h.applied(&doc(4, &[("a", 2)]));
    assert!(!h.let_go(&view(&[(0, 3, true), (1, 4, true)]), "a", 2));
    assert!(h.let_go(&view(&[(0, 4, true), (1, 4, true)]), "a", 2));
}

#[test]
fn a_cluster_removed_and_added_back_waits_for_its_old_shard() {
    let mut h = Handoffs::default();
    h.applied(&doc(1, &[("a", 0)]));
    h.applied(&doc(2, &[]));
    h.applied(&doc(3, &[("a", 1)]));
    assert!(!h.let_go(&view(&[(0, 1, true)]), "a", 1));
    assert!(h.let_go(&view(&[(0, 2, true)]), "a", 1));
}

#[test]
fn a_let_go_once_seen_is_forgotten() {
    let mut h = Handoffs::default();
    h.applied(&doc(1, &[("a", 0)]));
    h.applied(&doc(2, &[("a", 1)]));
    assert!(h.let_go(&view(&[(0, 2, true)]), "a", 1));
    assert!(h.left.is_empty());
    // Later the shard's new holder knows older generations only: not waited for again
    // (its listings are newer than its claim, and so than our generation).
    assert!(h.let_go(&view(&[(0, 0, true)]), "a", 1));
}

#[test]
fn the_shard_we_hold_now_is_not_waited_for() {
    let mut h = Handoffs::default();
    h.applied(&doc(1, &[("a", 0)]));
    h.applied(&doc(2, &[("a", 1)]));
    h.applied(&doc(3, &[("a", 0)]));
    // We hold shard 0 now: whoever held it before gave it up; our own stops are ours.
    assert!(h.let_go(&view(&[(0, 1, true), (1, 3, true)]), "a", 0));
}

#[test]
fn clusters_started_after_their_holder_expired_count_one_failover_per_holder() {
    let mut h = Handoffs::default();
    h.applied(&doc(4, &[("a", 0), ("b", 0), ("c", 1), ("d", 2)]));
    // Shard 0's holder died (expired, acked 4): its clusters move to shards 1 and 3; d
    // moves from shard 2, whose live holder lets it go by acknowledging.
    h.applied(&doc(5, &[("a", 3), ("b", 3), ("c", 1), ("d", 3)]));
    let v = view(&[(0, 4, false), (1, 5, true), (2, 5, true)]);
    assert!(h.let_go(&v, "a", 3) && h.let_go(&v, "b", 3) && h.let_go(&v, "d", 3));
    assert_eq!(h.failovers(), 1, "one dead holder, however many clusters");
    assert_eq!(
        Handoffs::default().failovers(),
        0,
        "nothing started: no failover"
    );
}

#[test]
fn a_handover_from_a_live_holder_is_no_failover() {
    let mut h = Handoffs::default();
    h.applied(&doc(4, &[("a", 0)]));
    h.applied(&doc(5, &[("a", 1)]));
    assert!(h.let_go(&view(&[(0, 5, true)]), "a", 1));
    assert_eq!(h.failovers(), 0);
}
