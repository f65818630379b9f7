//! The inventory record: written when it changes, and compared with live replicas' only.

use super::*;
use crate::fenced::inventory::{InventoryRecord, InventorySummary, inventory_key};

fn summary(digest: u64) -> InventorySummary {
    InventorySummary {
        digest,
        clusters: 4,
        problems: 1,
    }
}

fn inventory(holder: &str, incarnation: u64, digest: &str) -> Vec<u8> {
    encode(&InventoryRecord {
        holder: holder.into(),
        incarnation,
        digest: digest.into(),
        clusters: 4,
        problems: 0,
        held_back: None,
        protocol: None,
    })
}

#[test]
fn the_record_is_written_when_it_changes_and_only_then() {
    let mut b = Bench::new("a", 2, 4);
    b.settle(ms(0));
    assert!(
        !b.entries.contains_key(&inventory_key(ROOT, "a")),
        "unknown yet"
    );
    b.r.set_inventory(summary(0xff));
    b.settle(ms(100));
    let stored: InventoryRecord =
        serde_json::from_slice(&b.entries[&inventory_key(ROOT, "a")].0).unwrap();
    assert_eq!(
        (stored.digest.as_str(), stored.clusters, stored.problems),
        ("00000000000000ff", 4, 1)
    );
    let a = b.step(ms(200));
    assert!(
        !writes(&a).iter().any(|w| w.0 == WritePurpose::Inventory),
        "unchanged: not rewritten"
    );
    b.r.set_inventory(summary(0xfe));
    let a = b.step(ms(300));
    assert!(writes(&a).iter().any(|w| w.0 == WritePurpose::Inventory));
}

#[test]
fn only_live_replicas_that_differ_count_as_disagreeing() {
    let mut b = Bench::new("a", 3, 4);
    b.r.set_inventory(summary(1));
    // b holds shard 1 and sees another fleet; c's record is of an older incarnation; d
    // agrees.
    b.put(&shard_key(ROOT, 1), shard_record("b", 0));
    b.put(
        &inventory_key(ROOT, "b"),
        inventory("b", 1, "0000000000000002"),
    );
    b.put(&shard_key(ROOT, 2), shard_record("c", 0));
    b.put(
        &inventory_key(ROOT, "c"),
        inventory("c", 9, "0000000000000002"),
    );
    b.put(
        &presence_key(ROOT, "d"),
        encode(&PresenceRecord {
            holder: "d".into(),
            incarnation: 1,
            beat: 1,
            released: false,
        }),
    );
    b.put(
        &inventory_key(ROOT, "d"),
        inventory("d", 1, "0000000000000001"),
    );
    b.settle(ms(0));
    assert_eq!(b.r.inventory_disagreement(), 1);
    // b stops renewing: once its lease expired it no longer counts.
    let shard_b = b.entries[&shard_key(ROOT, 1)].1;
    let mut now = 0;
    while now < 5_000 {
        now += 500;
        b.settle(ms(now));
        // Keep c and d live (b's version stays).
        b.put(&shard_key(ROOT, 2), shard_record("c", 0));
    }
    assert_eq!(b.entries[&shard_key(ROOT, 1)].1, shard_b);
    assert_eq!(b.r.inventory_disagreement(), 0);
}

#[test]
fn an_unreadable_own_record_is_overwritten_at_its_version() {
    let mut b = Bench::new("a", 1, 4);
    b.r.set_inventory(summary(1));
    let v = b.put(&inventory_key(ROOT, "a"), b"garbage".to_vec());
    let a = b.step(ms(0));
    let w = writes(&a);
    assert!(
        w.contains(&(
            WritePurpose::Inventory,
            "f/inventory/a",
            Precondition::Version(v)
        )),
        "{w:?}"
    );
    assert_eq!(b.r.corrupt_records()[0].key, "f/inventory/a");
}

#[test]
fn a_live_twin_with_the_same_identity_is_not_overwritten() {
    let mut b = Bench::new("a", 2, 4);
    b.r.set_inventory(summary(1));
    // Another process named "a" (incarnation 1; ours is 7) holds shard 1, live.
    b.put(&shard_key(ROOT, 1), shard_record("a", 0));
    b.put(
        &inventory_key(ROOT, "a"),
        inventory("a", 1, "0000000000000002"),
    );
    let a = b.step(ms(0));
    assert!(
        !writes(&a).iter().any(|w| w.0 == WritePurpose::Inventory),
        "{:?}",
        writes(&a)
    );
}
