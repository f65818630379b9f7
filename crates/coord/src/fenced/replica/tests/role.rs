//! The distributor role bound to its holder's shard record, and a fleet mixed with an older
//! release (whose records are written here byte for byte as that release writes them).

use serde::Deserialize;

use super::*;
use crate::fenced::inventory::{InventorySummary, inventory_key};

/// The distributor record as the previous release parses it: unknown fields refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code, reason = "the fields are what is parsed, not read")]
struct OlderDistributorRecord {
    holder: String,
    incarnation: u64,
    beat: u64,
    #[serde(default)]
    released: bool,
}

/// Records of a replica "b" (incarnation 1) of the previous release: its shard record,
/// and its inventory record without `protocol`.
const OLDER_SHARD: &[u8] =
    br#"{"holder":"b","incarnation":1,"beat":4,"acked":0,"released":false,"capacity":2}"#;
const OLDER_INVENTORY: &[u8] =
    br#"{"holder":"b","incarnation":1,"digest":"0000000000000001","clusters":4,"problems":0}"#;
const ANNOUNCED_INVENTORY: &[u8] = br#"{"holder":"b","incarnation":1,"digest":"0000000000000001","clusters":4,"problems":0,"protocol":2}"#;
const OLDER_DISTRIBUTOR: &[u8] = br#"{"holder":"b","incarnation":1,"beat":9,"released":false}"#;

fn summary() -> InventorySummary {
    InventorySummary {
        digest: 1,
        clusters: 4,
        problems: 0,
    }
}

/// Steps every 250 ms over `from..to`, with `each` run before every step (to keep other
/// replicas' records live); returns the distributor records written.
fn run_for(
    b: &mut Bench,
    from: u64,
    to: u64,
    mut each: impl FnMut(&mut Bench),
) -> Vec<(u64, Vec<u8>)> {
    let mut written = Vec::new();
    let mut now = from;
    while now < to {
        each(b);
        let a = b.step(ms(now));
        for action in &a {
            if let Action::Write {
                purpose: WritePurpose::Distributor,
                value,
                ..
            } = action
            {
                written.push((now, value.clone()));
            }
        }
        b.run(a);
        now += 250;
    }
    written
}

#[test]
fn an_older_release_keeps_the_separate_lease_which_it_can_read() {
    let mut b = Bench::new("a", 2, 4);
    b.r.set_inventory(summary());
    b.put(&inventory_key(ROOT, "b"), OLDER_INVENTORY.to_vec());
    b.put(&distributor_key(ROOT), OLDER_DISTRIBUTOR.to_vec());
    // b of the older release holds shard 1 and the role, renewing both.
    let renew_both = |b: &mut Bench| {
        b.put(&shard_key(ROOT, 1), OLDER_SHARD.to_vec());
        b.put(&distributor_key(ROOT), OLDER_DISTRIBUTOR.to_vec());
    };
    let written = run_for(&mut b, 0, 8_000, renew_both);
    assert!(
        written.is_empty(),
        "a live distributor is obeyed: {written:?}"
    );
    assert!(!b.r.is_distributor(ms(8_000)));
    // b's distributor record stands still (its shard is renewed): a takes the role after
    // the lease period, in the separate form b reads, and renews it like a lease.
    let renew_shard = |b: &mut Bench| {
        b.put(&shard_key(ROOT, 1), OLDER_SHARD.to_vec());
    };
    let written = run_for(&mut b, 8_000, 20_000, renew_shard);
    let first = written.first().expect("the role is taken").0;
    // Its last change was seen at 7,750 ms; the lease lasts 4 s.
    assert!(first >= 11_750, "not before the lease expired: {first}");
    assert!(b.r.is_distributor(ms(20_000)));
    assert_eq!(b.r.distributor_bound_to(ms(20_000)), None);
    for (at, value) in &written {
        let older: Result<OlderDistributorRecord, _> = serde_json::from_slice(value);
        assert!(
            older.is_ok(),
            "the older release reads it ({at}): {}",
            String::from_utf8_lossy(value)
        );
    }
    assert!(
        written.len() >= 6,
        "renewed every 1.25 s: {} writes",
        written.len()
    );
}

#[test]
fn the_role_binds_to_the_shard_once_every_live_replica_announced_it() {
    let mut b = Bench::new("a", 2, 4);
    b.r.set_inventory(summary());
    b.put(&inventory_key(ROOT, "b"), OLDER_INVENTORY.to_vec());
    let renew_b = |b: &mut Bench| {
        b.put(&shard_key(ROOT, 1), OLDER_SHARD.to_vec());
    };
    let written = run_for(&mut b, 0, 5_000, renew_b);
    assert!(written.len() >= 3, "separate and renewed: {written:?}");
    assert!(
        written
            .iter()
            .all(|(_, v)| !v.windows(5).any(|w| w == b"shard"))
    );
    // b restarted as the newer release (same incarnation here, for brevity): it announces.
    b.put(&inventory_key(ROOT, "b"), ANNOUNCED_INVENTORY.to_vec());
    let written = run_for(&mut b, 5_000, 15_000, renew_b);
    assert_eq!(written.len(), 1, "one write binds the role: {written:?}");
    let bound: DistributorRecord = serde_json::from_slice(&written[0].1).unwrap();
    assert_eq!((bound.holder.as_str(), bound.shard), ("a", Some(0)));
    assert!(
        b.r.is_distributor(ms(15_000)),
        "its shard renewals carry it"
    );
    assert_eq!(b.r.distributor_bound_to(ms(15_000)), Some(0));
    // A replica of the older release joins as a spare: back to the separate form at once,
    // before it could take over a record standing still.
    b.put(
        &presence_key(ROOT, "c"),
        encode(&PresenceRecord {
            holder: "c".into(),
            incarnation: 3,
            beat: 1,
            released: false,
        }),
    );
    let written = run_for(&mut b, 15_000, 18_000, renew_b);
    assert_eq!(written[0].0, 15_000, "{written:?}");
    for (_, value) in &written {
        let older: OlderDistributorRecord = serde_json::from_slice(value).unwrap();
        assert_eq!(older.holder, "a");
    }
    assert!(written.len() >= 2, "renewed again: {written:?}");
    assert!(b.r.is_distributor(ms(18_000)));
    assert_eq!(b.r.distributor_bound_to(ms(18_000)), None);
}

/// Replica a (announced) beside b (announced), whose role record is bound to its shard 1.
fn bound_to_b() -> Bench {
    let mut b = Bench::new("a", 2, 4);
    b.r.set_inventory(summary());
    b.put(&inventory_key(ROOT, "b"), ANNOUNCED_INVENTORY.to_vec());
    let bound = DistributorRecord {
        holder: "b".into(),
        incarnation: 1,
        beat: 1,
        released: false,
        shard: Some(1),
    };
    b.put(&distributor_key(ROOT), encode(&bound));
    b
}

#[test]
fn a_bound_role_is_judged_through_its_shard_record() {
    let mut b = bound_to_b();
    let renew_b = |b: &mut Bench| {
        b.put(&shard_key(ROOT, 1), OLDER_SHARD.to_vec());
    };
    // The record never changes, but b's shard renewals keep the role b's.
    let written = run_for(&mut b, 0, 12_000, renew_b);
    assert!(written.is_empty(), "{written:?}");
    assert!(!b.r.is_distributor(ms(12_000)));
    // b stops (its shard record stands still): the role is free once the shard expired.
    let written = run_for(&mut b, 12_000, 20_000, |_| {});
    let (at, value) = written.first().expect("the role is taken");
    // b's shard record last changed at 11,750 ms; the lease lasts 4 s.
    assert!(*at >= 15_750, "not before b's shard lease expired: {at}");
    let taken: DistributorRecord = serde_json::from_slice(value).unwrap();
    assert_eq!((taken.holder.as_str(), taken.shard), ("a", Some(0)));
    assert!(b.r.is_distributor(ms(20_000)));
}

#[test]
fn a_bound_role_is_free_at_once_when_its_shard_is_released() {
    let mut b = bound_to_b();
    b.put(&shard_key(ROOT, 1), OLDER_SHARD.to_vec());
    b.settle(ms(0));
    assert!(!b.r.is_distributor(ms(0)));
    let released = ShardRecord {
        holder: "b".into(),
        incarnation: 1,
        beat: 5,
        acked: 0,
        released: true,
        zone: None,
        capacity: Some(2),
    };
    b.put(&shard_key(ROOT, 1), encode(&released));
    b.settle(ms(100));
    assert!(b.r.is_distributor(ms(100)));
    // Its own shard release ends the role at once, before it is confirmed.
    let _releases = b.r.release();
    assert!(!b.r.is_distributor(ms(100)));
}

#[test]
fn a_role_without_a_shard_is_given_up_and_ends_when_the_release_is_sent() {
    let mut b = Bench::new("a", 2, 4);
    b.r.set_inventory(summary());
    b.put(&inventory_key(ROOT, "b"), OLDER_INVENTORY.to_vec());
    let renew_b = |b: &mut Bench| {
        b.put(&shard_key(ROOT, 1), OLDER_SHARD.to_vec());
    };
    run_for(&mut b, 0, 2_000, renew_b);
    assert_eq!(b.r.shard(ms(2_000)), Some(0));
    assert_eq!(
        b.r.distributor_bound_to(ms(2_000)),
        None,
        "separate: b is older"
    );
    // Shard 0 is taken from a (its record names c now); b and c announce the bound role.
    b.put(&shard_key(ROOT, 0), shard_record("c", 0));
    let announced_c = String::from_utf8(ANNOUNCED_INVENTORY.to_vec())
        .unwrap()
        .replace("\"b\"", "\"c\"");
    b.put(&inventory_key(ROOT, "c"), announced_c.into_bytes());
    b.put(&inventory_key(ROOT, "b"), ANNOUNCED_INVENTORY.to_vec());
    renew_b(&mut b);
    let a = b.step(ms(2_100));
    let released: Vec<DistributorRecord> = a
        .iter()
        .filter_map(|a| match a {
            Action::Write {
                purpose: WritePurpose::Distributor,
                value,
                ..
            } => serde_json::from_slice(value).ok(),
            _ => None,
        })
        .collect();
    assert!(
        released.iter().any(|r| r.released),
        "no shard to bind it to: {released:?}"
    );
    // Others may take the role the moment they see the release: it ends at the send.
    assert!(!b.r.is_distributor(ms(2_100)));
    assert_eq!(b.r.shard(ms(2_100)), None);
}
