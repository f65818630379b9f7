//! Spares and the rolling update's handover: a spare is ready only once the distributor
//! can count it, and a released shard waits the grace for a waiting spare, so each cluster
//! moves once, old holder to spare.

use super::*;

/// A replica that finds every shard held is a spare (ready) only once its presence record
/// is written: before that the distributor cannot see it, and a rolling update would stop
/// the old pod for nobody the distributor waits for.
#[test]
fn a_spare_is_one_only_once_its_presence_record_is_written() {
    let mut b = Bench::new("c", 1, 2);
    b.put(&shard_key(ROOT, 0), shard_record("b", 0));
    let a = b.step(ms(0));
    assert!(
        !b.r.is_spare(),
        "ready before its presence record is written"
    );
    assert!(
        writes(&a)
            .iter()
            .any(|(p, _, _)| *p == WritePurpose::Presence),
        "{a:?}"
    );
    b.run(a);
    b.step(ms(10));
    assert!(b.r.is_spare());
}

/// A rolling update's surge pod waits as a spare; the leaving pod releases its shard on
/// SIGTERM. With a live spare the distributor leaves the released shard's clusters where
/// they are for the grace (the spare claims the shard with them: one move); without one,
/// or once the grace has passed, they move to the other shards at once.
#[test]
fn a_released_shard_waits_the_grace_for_a_spare_else_its_clusters_move_at_once() {
    for spare in [false, true] {
        let mut b = Bench::new("a", 2, 8);
        b.put(&shard_key(ROOT, 1), shard_record("b", 0));
        b.settle(ms(0));
        b.put(&shard_key(ROOT, 1), shard_record("b", 1));
        b.settle(ms(100));
        let on_1 = |b: &Bench| b.doc().clusters.values().filter(|&&s| s == 1).count();
        assert!(on_1(&b) > 0, "spare {spare}: {:?}", b.doc());
        let released = encode(&ShardRecord {
            holder: "b".into(),
            incarnation: 1,
            beat: 2,
            acked: b.doc().generation,
            released: true,
            zone: None,
            capacity: None,
        });
        b.put(&shard_key(ROOT, 1), released);
        if spare {
            let waiting = encode(&PresenceRecord {
                holder: "c".into(),
                incarnation: 1,
                beat: 1,
                released: false,
            });
            b.put(&presence_key(ROOT, "c"), waiting);
        }
        b.settle(ms(200));
        assert_eq!(on_1(&b) > 0, spare, "spare {spare}: {:?}", b.doc());
        // The grace (500 ms) after the release was first seen: vacant, whoever waits.
        b.settle(ms(200 + 500));
        assert_eq!(on_1(&b), 0, "spare {spare}: {:?}", b.doc());
    }
}

/// A spare claiming a released shard says it is no longer a spare only once the claim has
/// landed. Sent together, the presence release could land first: a distributor listing
/// between the two sees the shard released and nobody waiting, and moves its clusters to
/// the other shards and back once the claim lands (the rolling-update test saw a cluster
/// started twice by the new pod).
#[test]
fn a_spare_releases_its_presence_only_after_its_claim_has_landed() {
    let mut b = Bench::new("c", 1, 2);
    b.put(&shard_key(ROOT, 0), shard_record("b", 0));
    b.settle(ms(0));
    assert!(b.r.is_spare());
    let released = encode(&ShardRecord {
        holder: "b".into(),
        incarnation: 1,
        beat: 2,
        acked: 0,
        released: true,
        zone: None,
        capacity: None,
    });
    b.put(&shard_key(ROOT, 0), released);
    let claim = b.step(ms(100));
    let purposes: Vec<WritePurpose> = writes(&claim).iter().map(|(p, _, _)| *p).collect();
    assert!(purposes.contains(&WritePurpose::ClaimShard), "{claim:?}");
    assert!(
        !purposes.contains(&WritePurpose::Presence),
        "the presence release went out beside the claim: {claim:?}"
    );
    let waiting = |b: &Bench| {
        let p: PresenceRecord =
            serde_json::from_slice(&b.entries[&presence_key(ROOT, "c")].0).unwrap();
        !p.released
    };
    // While the claim is in flight (not yet run), no step releases the presence either.
    let in_flight = b.step(ms(150));
    assert!(
        writes(&in_flight)
            .iter()
            .all(|(p, _, _)| *p != WritePurpose::Presence),
        "{in_flight:?}"
    );
    b.run(in_flight);
    assert!(waiting(&b));
    b.run(claim);
    let after = b.step(ms(200));
    assert!(
        writes(&after)
            .iter()
            .any(|(p, _, _)| *p == WritePurpose::Presence),
        "no presence release once the claim landed: {after:?}"
    );
    b.run(after);
    assert!(!waiting(&b));
}
