//! argo-compat §6.5 (`docs/glossary.md`), side by side: every vector passes exactly as
//! Argo CD asserts it through [`upstream`], and through [`get_or_update_shard`] with the same
//! result wherever upstream's is safe. Where fleetshard differs, the row says which defect
//! and why.

use std::time::Duration;

use super::upstream::{
    default_shard_mapping_data, generate_default_shard_mapping,
    get_or_update_shard_number_for_controller,
};
use super::{ClaimRequest, ClaimStatus, ShardEntry, WallTime, Warning, get_or_update_shard};

/// The test's "now" (upstream uses the time the test runs; any instant will do as long as
/// the input heartbeats marked T are not stale, which they are not when equal to it).
const T: WallTime = WallTime::from_unix_seconds(1_787_423_492);
const Z: WallTime = WallTime::ZERO;
const TIMEOUT: Duration = Duration::from_secs(30);

fn e(name: &str, shard: i64, time: WallTime) -> ShardEntry {
    ShardEntry::held(shard, name, time)
}

/// What fleetshard answers for a row.
enum Ours {
    /// Upstream's shard and list.
    Same,
    /// Something else, on purpose.
    Differs {
        status: ClaimStatus,
        write: Vec<ShardEntry>,
        why: &'static str,
    },
}

struct Row {
    case: &'static str,
    input: Vec<ShardEntry>,
    host: &'static str,
    replicas: i64,
    shard_in: i64,
    shard_out: i64,
    output: Vec<ShardEntry>,
    ours: Ours,
}

/// `Test_getOrUpdateShardNumberForController`, row by row.
fn rows() -> Vec<Row> {
    vec![
        Row {
            case: "len<replicas, existing controller",
            input: vec![e("test-example", 0, Z)],
            host: "test-example",
            replicas: 2,
            shard_in: -1,
            shard_out: 0,
            output: vec![e("test-example", 0, T), e("", 1, Z)],
            ours: Ours::Same,
        },
        Row {
            case: "len<replicas, new controller",
            input: vec![e("test-example", 0, T)],
            host: "test-example-1",
            replicas: 2,
            shard_in: -1,
            shard_out: 1,
            output: vec![e("test-example", 0, T), e("test-example-1", 1, T)],
            ours: Ours::Same,
        },
        Row {
            case: "len>replicas",
            input: vec![e("test-example", 0, T), e("test-example-1", 1, T)],
            host: "test-example",
            replicas: 1,
            shard_in: -1,
            shard_out: 0,
            output: vec![e("test-example", 0, T)],
            ours: Ours::Differs {
                // Same holder and shard. Upstream got there by wiping the list (W11) and
                // re-claiming; fleetshard keeps the entry and refreshes it. The input already
                // carries T, the same second as now, so the heartbeat moves one second on.
                status: ClaimStatus::Holds(0),
                write: vec![e("test-example", 0, T.checked_add_seconds(1).unwrap())],
                why: "W13: every heartbeat changes the entry (the input was written at 'now')",
            },
        },
        Row {
            case: "pre-specified, existing",
            input: vec![e("test-example-1", 1, Z), e("test-example", 0, T)],
            host: "test-example-1",
            replicas: 2,
            shard_in: 1,
            shard_out: 1,
            output: vec![e("test-example-1", 1, T), e("test-example", 0, T)],
            ours: Ours::Same,
        },
        Row {
            case: "pre-specified, new",
            input: vec![e("test-example", 0, T)],
            host: "test-example-1",
            replicas: 2,
            shard_in: 1,
            shard_out: 1,
            output: vec![e("test-example", 0, T), e("test-example-1", 1, T)],
            ours: Ours::Same,
        },
        Row {
            // §6.5 says "3 entries 0..2, all at T" without their names (upstream wipes them
            // anyway); the names here are the natural ones.
            case: "pre-specified, len>replicas",
            input: vec![
                e("test-example", 0, T),
                e("test-example-1", 1, T),
                e("test-example-2", 2, T),
            ],
            host: "test-example",
            replicas: 2,
            shard_in: 1,
            shard_out: 1,
            output: vec![e("", 0, Z), e("test-example", 1, T)],
            ours: Ours::Differs {
                // Upstream wipes the live test-example-1 (W11) and takes its shard (W12):
                // both would process shard 1 until test-example-1's next probe.
                status: ClaimStatus::WaitingForPinned {
                    shard: 1,
                    holder: "test-example-1".into(),
                },
                write: vec![e("", 0, Z), e("test-example-1", 1, T)],
                why: "W11 + W12: shard 1 is held by a live replica; a pinned replica waits",
            },
        },
        Row {
            case: "updating heartbeat",
            input: vec![e("test-example", 0, T), e("test-example-1", 1, Z)],
            host: "test-example-1",
            replicas: 2,
            shard_in: -1,
            shard_out: 1,
            output: vec![e("test-example", 0, T), e("test-example-1", 1, T)],
            ours: Ours::Same,
        },
        Row {
            case: "updating heartbeat, pre-defined",
            input: vec![e("test-example", 0, T), e("test-example-1", 1, Z)],
            host: "test-example-1",
            replicas: 2,
            shard_in: 1,
            shard_out: 1,
            output: vec![e("test-example", 0, T), e("test-example-1", 1, T)],
            ours: Ours::Same,
        },
    ]
}

#[test]
fn upstream_passes_every_vector_exactly() {
    for row in rows() {
        let (shard, output) = get_or_update_shard_number_for_controller(
            &row.input,
            row.host,
            row.replicas,
            row.shard_in,
            T,
            TIMEOUT,
        );
        assert_eq!((shard, output), (row.shard_out, row.output), "{}", row.case);
    }
}

#[test]
fn fleetshard_side_by_side() {
    let mut differing = Vec::new();
    for row in rows() {
        let request = ClaimRequest {
            identity: row.host,
            replicas: u32::try_from(row.replicas).unwrap(),
            pin: (row.shard_in != -1).then_some(row.shard_in),
            now: T,
            stale_after: TIMEOUT,
        };
        // Every entry was just seen: nothing is stale (upstream: none is older than 3H).
        let out = get_or_update_shard(&row.input, &request, |_| Duration::ZERO).unwrap();
        assert!(out.warnings.is_empty(), "{}: {:?}", row.case, out.warnings);
        let written = out.write.clone().unwrap_or(row.input.clone());
        match row.ours {
            Ours::Same => {
                let shard = u32::try_from(row.shard_out).unwrap();
                assert_eq!(out.status, ClaimStatus::Holds(shard), "{}", row.case);
                assert_eq!(written, row.output, "{}", row.case);
            }
            Ours::Differs { status, write, why } => {
                assert_eq!(out.status, status, "{}", row.case);
                assert_eq!(written, write, "{}", row.case);
                differing.push((row.case, why));
            }
        }
    }
    assert_eq!(differing.len(), 2, "{differing:?}");
}

#[test]
fn default_mapping_data() {
    assert_eq!(
        default_shard_mapping_data(2),
        vec![e("", 0, Z), e("", 1, Z)]
    );
}

/// `generateDefaultShardMappingCM("test", "test-example", 2, shard)` for shard -1 and 1, and
/// fleetshard's answer on a missing ConfigMap (an empty list): the same.
#[test]
fn missing_config_map() {
    for (shard, expected) in [
        (-1, vec![e("test-example", 0, T), e("", 1, Z)]),
        (1, vec![e("", 0, Z), e("test-example", 1, T)]),
    ] {
        let (got_shard, list) =
            generate_default_shard_mapping(2, "test-example", shard, T).unwrap();
        assert_eq!(list, expected);
        let request = ClaimRequest {
            identity: "test-example",
            replicas: 2,
            pin: (shard != -1).then_some(shard),
            now: T,
            stale_after: TIMEOUT,
        };
        let out = get_or_update_shard(&[], &request, |_| Duration::ZERO).unwrap();
        assert_eq!(
            out.status,
            ClaimStatus::Holds(u32::try_from(got_shard).unwrap())
        );
        assert_eq!(out.write, Some(expected));
    }
}

/// `TestGetClusterSharding`, "Explicit shard with deployment and multiple replicas will
/// read from configmap": pin 3 of 3, the hostname already on shard 0 → 0. Run alone (no
/// ConfigMap yet) upstream panics (W18); fleetshard holds nothing and says why.
#[test]
fn explicit_shard_reads_from_the_config_map() {
    let map = vec![e("test-example", 0, T), e("", 1, Z), e("", 2, Z)];
    let (shard, _) =
        get_or_update_shard_number_for_controller(&map, "test-example", 3, 3, T, TIMEOUT);
    assert_eq!(shard, 0);
    let request = ClaimRequest {
        identity: "test-example",
        replicas: 3,
        pin: Some(3),
        now: T.checked_add_seconds(10).unwrap(),
        stale_after: TIMEOUT,
    };
    let out = get_or_update_shard(&map, &request, |_| Duration::ZERO).unwrap();
    assert_eq!(out.status, ClaimStatus::Holds(0));
    assert_eq!(
        out.warnings,
        vec![Warning::PinOutOfRange {
            pin: 3,
            replicas: 3
        }]
    );

    assert!(generate_default_shard_mapping(3, "test-example", 3, T).is_err());
    let out = get_or_update_shard(&[], &request, |_| Duration::ZERO).unwrap();
    assert_eq!(
        out.status,
        ClaimStatus::PinOutOfRange {
            pin: 3,
            replicas: 3
        }
    );
}
