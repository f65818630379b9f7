//! A new fleet's cold start: the shards nobody has held yet are expected for a lease
//! duration, so the first replica up gets its share, not the fleet (`cold_start.rs`).

use super::*;

impl Bench {
    /// A fleet that has run before: an assignment is stored (generation 0, nothing placed),
    /// so a shard nobody holds is vacant at once — no cold start.
    pub(super) fn warm(mut self) -> Bench {
        let doc = AssignmentDoc {
            shards: 1,
            ..AssignmentDoc::default()
        };
        self.put(&assignment_key(ROOT), encode(&doc));
        self
    }

    fn on_shard(&self, n: u32) -> usize {
        self.doc().clusters.values().filter(|&&s| s == n).count()
    }
}

fn presence(holder: &str) -> Vec<u8> {
    encode(&PresenceRecord {
        holder: holder.into(),
        incarnation: 1,
        beat: 1,
        released: false,
    })
}

/// The first replica of a new four-shard fleet commits the first generation at once, with
/// each shard's share on it: it starts a quarter of the fleet, not all of it. A holder
/// claiming its shard later finds its clusters there (none moved); shards still unclaimed
/// after the lease duration are vacant, and their clusters move to the held shards.
#[test]
fn a_new_fleets_first_replica_starts_its_share_and_the_others_are_expected_for_a_lease() {
    let mut b = Bench::new("a", 4, 40);
    b.settle(ms(0));
    assert_eq!(b.doc().generation, 1);
    assert_eq!(b.doc().clusters.len(), 40);
    for n in 0..4 {
        assert_eq!(b.on_shard(n), 10, "shard {n}: {:?}", b.doc());
    }
    assert_eq!(b.r.acting(ms(10)).count(), 10, "its share, not the fleet");
    // Shard 1's holder comes up 300 ms later: its clusters are waiting for it.
    b.put(&shard_key(ROOT, 1), shard_record("b", 1));
    b.settle(ms(300));
    assert_eq!(b.doc().generation, 1, "nothing moved");
    // Until just before the lease duration (4 s) shards 2 and 3 are expected. Both
    // holders renew on the way.
    for t in (800..4_000).step_by(500).chain([3_999]) {
        b.put(&shard_key(ROOT, 1), shard_record("b", 1));
        b.settle(ms(t));
        assert_eq!(b.doc().generation, 1, "at {t} ms");
    }
    // ...and at it, vacant: their clusters go to the held shards 0 and 1.
    b.put(&shard_key(ROOT, 1), shard_record("b", 1));
    b.settle(ms(4_000));
    assert!(b.doc().generation > 1);
    assert_eq!(b.on_shard(0) + b.on_shard(1), 40, "{:?}", b.doc());
    assert_eq!(b.on_shard(0), 20, "{:?}", b.doc());
    // Once shard 1's holder has acknowledged the generation (the handover barrier).
    b.put(&shard_key(ROOT, 1), shard_record("b", b.doc().generation));
    b.settle(ms(4_100));
    assert_eq!(b.r.acting(ms(4_110)).count(), 20);
}

/// A replica whose first listing shows a stored assignment (the fleet has run before; a
/// replica joining it) expects nobody: a shard nobody holds is vacant at once.
#[test]
fn a_fleet_that_has_run_before_expects_nobody() {
    let mut b = Bench::new("a", 4, 40).warm();
    b.settle(ms(0));
    assert_eq!(b.on_shard(0), 40, "{:?}", b.doc());
    assert_eq!(b.r.acting(ms(10)).count(), 40);
}

/// With the automatic count the first generation waits half the lease duration, so that
/// the replicas starting beside this one are counted; it is then committed with a shard per
/// replica seen, and the others' shards are expected for the rest of the lease duration.
#[test]
fn with_the_automatic_count_the_first_generation_counts_the_replicas_starting_beside() {
    let mut b = Bench::with_count("a", ShardCount::Auto { min: 1, max: 10 }, 30);
    b.settle(ms(0));
    assert!(!b.entries.contains_key(&assignment_key(ROOT)));
    b.put(&presence_key(ROOT, "b"), presence("b"));
    b.put(&presence_key(ROOT, "c"), presence("c"));
    b.settle(ms(1_000));
    assert!(
        !b.entries.contains_key(&assignment_key(ROOT)),
        "committed before half the lease duration"
    );
    b.put(&presence_key(ROOT, "b"), presence("b"));
    b.put(&presence_key(ROOT, "c"), presence("c"));
    b.settle(ms(2_000));
    assert_eq!(b.doc().shards, 3, "{:?}", b.doc());
    assert_eq!(b.on_shard(0), 10, "{:?}", b.doc());
    assert_eq!(b.r.acting(ms(2_010)).count(), 10);
}

/// A scale-up inside the lease duration after a cold start: the new shards were not in the
/// first generation, so they are vacant at once, and no cluster leaves its running owner
/// for a shard nobody holds yet (the Deployment rollout test saw a 2 s gap when they were
/// expected).
#[test]
fn a_scale_up_right_after_a_cold_start_moves_nothing_to_the_new_shards() {
    let mut b = Bench::with_count("a", ShardCount::Desired { default: 2 }, 40);
    b.put(&shard_key(ROOT, 1), shard_record("b", 0));
    b.settle(ms(0));
    b.put(&shard_key(ROOT, 1), shard_record("b", 1));
    b.settle(ms(100));
    assert_eq!((b.doc().shards, b.on_shard(0), b.on_shard(1)), (2, 20, 20));
    assert_eq!(b.r.acting(ms(110)).count(), 20);
    let desired = crate::fenced::desired_shards_key(ROOT);
    b.put(&desired, br#"{"shards":4}"#.to_vec());
    b.put(&shard_key(ROOT, 1), shard_record("b", 1));
    b.settle(ms(1_000));
    assert_eq!(b.doc().shards, 4, "{:?}", b.doc());
    assert_eq!(
        (b.on_shard(0), b.on_shard(1)),
        (20, 20),
        "moved to shards nobody holds: {:?}",
        b.doc()
    );
    assert_eq!(b.r.acting(ms(1_010)).count(), 20);
}
