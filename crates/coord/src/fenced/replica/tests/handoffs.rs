//! The handover barrier cluster by cluster (`handoffs.rs`): a cluster waits only for the
//! holders that may still act on it, so a crashed holder's orphans start without waiting
//! for other clusters' stops to drain.

use super::*;

/// Replica `a` holds shard 1; `x` holds shard 0, renewing; `y` held shard 2 and crashed.
/// Generation 2 gives `a` one of `y`'s clusters (an orphan) and one of `x`'s (a rebalancing
/// move `x` is still draining): the orphan starts at once, the other once `x` acknowledged.
/// Under the old barrier (every live holder acknowledges 2 first) neither started until
/// `x`'s drain ended: simulation seed 779,547,789,007 of the scaling configuration.
#[test]
fn an_orphan_starts_without_waiting_for_another_clusters_drain() {
    let mut b = Bench::new("a", 3, 0);
    b.put(&shard_key(ROOT, 0), shard_record("x", 1));
    b.put(&shard_key(ROOT, 2), shard_record("y", 1));
    someone_distributes(&mut b, 0);
    commit(&mut b, 1, &[("c0", 0), ("c1", 1), ("c2", 2)]);
    b.settle(ms(0));
    assert_eq!(b.r.shard(ms(0)), Some(1));
    assert_eq!(b.r.acting(ms(0)).collect::<Vec<_>>(), ["c1"]);
    // y stops renewing; x renews every second. At 4.5 s y's lease has expired by our clock.
    for t in 1..=4 {
        b.put(&shard_key(ROOT, 0), shard_record("x", 1));
        someone_distributes(&mut b, t);
        b.settle(ms(t * 1_000));
    }
    commit(&mut b, 2, &[("c0", 1), ("c1", 1), ("c2", 1)]);
    let a = b.step(ms(4_500));
    assert_eq!(started(&a), ["c2"], "the orphan starts; c0 waits for x");
    b.run(a);
    // x has stopped c0 and acknowledges generation 2.
    b.put(&shard_key(ROOT, 0), shard_record("x", 2));
    let a = b.step(ms(4_600));
    assert_eq!(started(&a), ["c0"]);
}

/// The same replica, having missed a generation, cannot know where a cluster went
/// meanwhile: it waits for every live holder, as before.
#[test]
fn after_a_missed_generation_every_live_holder_is_waited_for() {
    let mut b = Bench::new("a", 3, 0);
    b.put(&shard_key(ROOT, 0), shard_record("x", 1));
    someone_distributes(&mut b, 0);
    commit(&mut b, 1, &[("c0", 0), ("c1", 1)]);
    b.settle(ms(0));
    // Generation 2 (not seen) moved c1 to shard 0; generation 3 moves it back.
    commit(&mut b, 3, &[("c0", 0), ("c1", 1), ("c2", 1)]);
    b.put(&shard_key(ROOT, 0), shard_record("x", 2));
    let a = b.step(ms(100));
    assert!(started(&a).is_empty(), "{a:?}");
    b.run(a);
    b.put(&shard_key(ROOT, 0), shard_record("x", 3));
    let a = b.step(ms(200));
    assert_eq!(started(&a), ["c2"], "c1 was never stopped here");
}
