use super::*;

const T: WallTime = WallTime::from_unix_seconds(1_787_423_492);

fn held(n: i64, name: &str) -> ShardEntry {
    ShardEntry::held(n, name, T)
}

fn free(n: i64) -> ShardEntry {
    ShardEntry::free(n)
}

#[test]
fn a_good_list_comes_back_equal() {
    let list = vec![held(1, "b"), held(0, "a"), free(2)];
    assert_eq!(repair(&list, 3), Ok((list, vec![])));
}

#[test]
fn scale_up_appends_free_entries_silently() {
    let list = vec![held(0, "a")];
    assert_eq!(
        repair(&list, 3),
        Ok((vec![held(0, "a"), free(1), free(2)], vec![]))
    );
    assert_eq!(repair(&[], 2), Ok((vec![free(0), free(1)], vec![])));
}

#[test]
fn scale_down_drops_only_removed_shards() {
    // W11: upstream resets the whole list; here a and b keep their shards.
    let list = vec![held(0, "a"), held(1, "b"), held(2, "c"), held(3, "d")];
    assert_eq!(
        repair(&list, 2),
        Ok((vec![held(0, "a"), held(1, "b")], vec![]))
    );
}

#[test]
fn out_of_range_numbers() {
    let list = vec![held(0, "a"), held(-1, "neg"), held(7, "far")];
    let (entries, warnings) = repair(&list, 3).unwrap();
    assert_eq!(entries, vec![held(0, "a"), free(1), free(2)]);
    assert_eq!(
        warnings,
        vec![
            Warning::ShardNumberOutOfRange {
                shard: -1,
                controller: "neg".into(),
                entries: 3,
                kept: false
            },
            Warning::ShardNumberOutOfRange {
                shard: 7,
                controller: "far".into(),
                entries: 3,
                kept: false
            },
            Warning::MissingShardNumber { shard: 1 },
            Warning::MissingShardNumber { shard: 2 },
        ]
    );
    // Beyond the list but within the replicas: kept (upstream would append a second 2).
    let (entries, warnings) = repair(&[held(0, "a"), held(2, "c")], 3).unwrap();
    assert_eq!(entries, vec![held(0, "a"), held(2, "c"), free(1)]);
    assert_eq!(
        warnings,
        vec![
            Warning::ShardNumberOutOfRange {
                shard: 2,
                controller: "c".into(),
                entries: 2,
                kept: true
            },
            Warning::MissingShardNumber { shard: 1 },
        ]
    );
}

#[test]
fn duplicate_numbers_keep_a_holder_then_the_first() {
    let (entries, warnings) = repair(&[free(0), held(0, "a"), held(0, "b"), free(1)], 2).unwrap();
    assert_eq!(entries, vec![held(0, "a"), free(1)]);
    assert_eq!(
        warnings,
        vec![
            Warning::DuplicateShardNumber {
                shard: 0,
                kept: "a".into(),
                dropped: String::new()
            },
            Warning::DuplicateShardNumber {
                shard: 0,
                kept: "a".into(),
                dropped: "b".into()
            },
            // Three entries, so 2 is a number the list should have had; but it is beyond
            // the replicas, so nothing is added.
        ]
    );
}

#[test]
fn an_identity_keeps_its_first_entry() {
    let (entries, warnings) = repair(&[held(1, "a"), held(0, "a"), held(2, "b")], 3).unwrap();
    assert_eq!(entries, vec![held(1, "a"), free(0), held(2, "b")]);
    assert_eq!(
        warnings,
        vec![Warning::DuplicateController {
            controller: "a".into(),
            kept: 1,
            released: 0
        }]
    );
}

#[test]
fn unreadable_heartbeats_are_clamped() {
    let past = WallTime::EARLIEST_READABLE.checked_add_seconds(-5).unwrap();
    let future = WallTime::new(WallTime::LATEST_READABLE.unix_seconds() + 100, 7).unwrap();
    let (entries, warnings) = repair(
        &[
            ShardEntry::held(0, "a", past),
            ShardEntry::held(1, "b", future),
        ],
        2,
    )
    .unwrap();
    assert_eq!(entries[0].heartbeat_time, WallTime::EARLIEST_READABLE);
    assert_eq!(
        entries[1].heartbeat_time,
        WallTime::LATEST_READABLE.truncated()
    );
    assert_eq!(warnings.len(), 2);
    // The result can be written and read back.
    let text = super::super::encode(&entries);
    assert_eq!(super::super::decode(&text), Ok(entries));
}

#[test]
fn replica_counts_the_map_cannot_hold_are_refused() {
    assert_eq!(repair(&[], 0), Err(ClaimError::NoReplicas));
    assert_eq!(
        repair(&[], MAX_REPLICAS + 1),
        Err(ClaimError::TooManyReplicas {
            replicas: MAX_REPLICAS + 1,
            max: MAX_REPLICAS
        })
    );
    assert_eq!(
        repair(&[], MAX_REPLICAS).unwrap().0.len(),
        MAX_REPLICAS as usize
    );
}

#[test]
fn warnings_read_well() {
    let (_, warnings) = repair(&[held(0, "a"), held(0, "b"), held(1, "a")], 2).unwrap();
    let text: Vec<String> = warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        vec![
            r#"shard mapping has ShardNumber 0 twice; kept ControllerName "a", dropped "b""#,
            r#"ControllerName "a" holds several shards; kept 0, freed 1"#,
        ]
    );
}
