use fleetshard_coord::store::Entry;
use serde_json::{Value, json};

use super::*;

/// A shard record of holder `h` (incarnation 1) at renew `beat`.
fn shard(h: &str, beat: u64) -> Value {
    json!({"holder": h, "incarnation": 1, "beat": beat, "acked": 2})
}

/// A read of shard records `(holder, beat, version)`, shard `i` for the `i`th.
fn read(records: &[(&str, u64, u64)]) -> Listing {
    let entries = records
        .iter()
        .enumerate()
        .map(|(n, &(h, beat, version))| Entry {
            key: format!("fs/shards/{n}"),
            value: shard(h, beat).to_string().into_bytes(),
            version,
        })
        .collect();
    Listing {
        entries,
        revision: 100,
    }
}

fn all() -> BTreeSet<String> {
    (0..3).map(|n| format!("fs/shards/{n}")).collect()
}

#[test]
fn two_replicas_seen_renewing_vouch_for_those_written_after_their_previous_renewals() {
    // Three holders, last written at 10, 11 and 12 (in that order).
    let first = read(&[("r0", 5, 10), ("r1", 5, 11), ("r2", 5, 12)]);
    let mut watch = RenewalWatch::new("fs/", &first);
    // r0 renews: one witness is not enough (it may have been paused).
    assert_eq!(
        watch.all_renewed(&read(&[("r0", 6, 13), ("r1", 5, 11), ("r2", 5, 12)])),
        None
    );
    // r1 renews: r2 wrote after both previous renewals (12 > 11).
    assert_eq!(
        watch.all_renewed(&read(&[("r0", 6, 13), ("r1", 6, 14), ("r2", 5, 12)])),
        Some(all())
    );
}

#[test]
fn a_record_older_than_the_witnesses_previous_renewals_waits_for_its_own_change() {
    // r2 last wrote before both others' previous renewals: it may have missed its turn.
    let first = read(&[("r0", 5, 10), ("r1", 5, 11), ("r2", 5, 9)]);
    let mut watch = RenewalWatch::new("fs/", &first);
    let both = read(&[("r0", 6, 13), ("r1", 6, 14), ("r2", 5, 9)]);
    assert_eq!(watch.all_renewed(&both), None);
    assert_eq!(watch.all_renewed(&both), None);
    // Its own renewal answers.
    assert_eq!(
        watch.all_renewed(&read(&[("r0", 6, 13), ("r1", 6, 14), ("r2", 6, 15)])),
        Some(all())
    );
}

#[test]
fn a_paused_witness_cannot_vouch_alone() {
    // r0 was paused: its previous renewal (3) is older than r2's last write (8), and r2 is
    // dead. r1's previous renewal (11) is the line, and r2 is below it.
    let first = read(&[("r0", 5, 3), ("r1", 5, 11), ("r2", 5, 8)]);
    let mut watch = RenewalWatch::new("fs/", &first);
    assert_eq!(
        watch.all_renewed(&read(&[("r0", 6, 13), ("r1", 5, 11), ("r2", 5, 8)])),
        None,
        "one witness"
    );
    assert_eq!(
        watch.all_renewed(&read(&[("r0", 6, 13), ("r1", 6, 14), ("r2", 5, 8)])),
        None,
        "the later of the two previous renewals is the line"
    );
}

#[test]
fn with_two_replicas_the_first_renewing_vouches_for_the_other() {
    let first = read(&[("r0", 5, 10), ("r1", 5, 11)]);
    let mut watch = RenewalWatch::new("fs/", &first);
    let renewed = watch.all_renewed(&read(&[("r0", 6, 13), ("r1", 5, 11)]));
    assert_eq!(renewed.map(|r| r.len()), Some(2));
    // The other wrote before the witness's previous renewal: it waits for its change.
    let first = read(&[("r0", 5, 10), ("r1", 5, 9)]);
    let mut watch = RenewalWatch::new("fs/", &first);
    assert_eq!(
        watch.all_renewed(&read(&[("r0", 6, 13), ("r1", 5, 9)])),
        None
    );
}

#[test]
fn one_replica_must_be_seen_renewing_every_record() {
    // Two records of one replica (a shard and a spare's presence, say): no witness vouches
    // for its own other record.
    let first = read(&[("r0", 5, 10), ("r0", 5, 11)]);
    let now = read(&[("r0", 6, 13), ("r0", 5, 11)]);
    assert_eq!(RenewalWatch::new("fs/", &first).all_renewed(&now), None);
}

#[test]
fn only_a_single_renewal_of_the_same_incarnation_makes_a_witness() {
    let first = read(&[("r0", 5, 10), ("r1", 5, 11), ("r2", 5, 12)]);
    // r0 renewed twice (its previous write is not the first read's), r1 restarted (a new
    // incarnation's record): both changed, neither is a witness, r2 must change itself.
    let mut now = read(&[("r0", 7, 16), ("r1", 1, 17), ("r2", 5, 12)]);
    now.entries[1].value = json!({"holder": "r1", "incarnation": 2, "beat": 1, "acked": 2})
        .to_string()
        .into_bytes();
    let mut watch = RenewalWatch::new("fs/", &first);
    assert_eq!(watch.all_renewed(&now), None);
}

#[test]
fn proofs_by_order_are_drawn_only_when_a_new_witness_is_seen() {
    // Two witnesses appear while r2 is below their line; later r2's record is replaced by
    // a claim of another incarnation (a change, not a witness): nothing is proven by
    // order at that read, so r0 and r1 count only because they changed.
    let first = read(&[("r0", 5, 10), ("r1", 5, 11), ("r2", 5, 9), ("r3", 5, 12)]);
    let mut watch = RenewalWatch::new("fs/", &first);
    assert_eq!(
        watch.all_renewed(&read(&[
            ("r0", 6, 13),
            ("r1", 6, 14),
            ("r2", 5, 9),
            ("r3", 5, 12)
        ])),
        None
    );
    let mut later = read(&[("r0", 6, 13), ("r1", 6, 14), ("r9", 1, 20), ("r3", 5, 12)]);
    later.entries[2].value = json!({"holder": "r9", "incarnation": 4, "beat": 1, "acked": 2})
        .to_string()
        .into_bytes();
    assert_eq!(watch.all_renewed(&later), None, "r3 is not proven now");
}

#[test]
fn released_records_and_a_bound_distributor_record_are_not_waited_for() {
    let bound = |shard: Option<u32>| {
        let mut record = json!({"holder": "r0", "incarnation": 1, "beat": 1});
        if let Some(n) = shard {
            record["shard"] = json!(n);
        }
        let at = |v0: u64, beat: u64| Listing {
            entries: vec![
                Entry {
                    key: "fs/distributor".into(),
                    value: record.to_string().into_bytes(),
                    version: 4,
                },
                Entry {
                    key: "fs/shards/0".into(),
                    value: shard_value("r0", beat, false),
                    version: v0,
                },
                Entry {
                    key: "fs/shards/1".into(),
                    value: shard_value("r1", 5, true),
                    version: 6,
                },
            ],
            revision: 20,
        };
        (at(5, 1), at(11, 2))
    };
    let (first, now) = bound(Some(0));
    let renewed = RenewalWatch::new("fs/", &first).all_renewed(&now);
    assert_eq!(renewed, Some(BTreeSet::from(["fs/shards/0".to_owned()])));
    // The separate form is renewed on its own: it is waited for.
    let (first, now) = bound(None);
    assert_eq!(RenewalWatch::new("fs/", &first).all_renewed(&now), None);
}

fn shard_value(h: &str, beat: u64, released: bool) -> Vec<u8> {
    json!({"holder": h, "incarnation": 1, "beat": beat, "acked": 2, "released": released})
        .to_string()
        .into_bytes()
}
