use proptest::prelude::*;

use super::*;

/// The example of argo-compat §5.3 (`docs/glossary.md`), verbatim.
const SPEC_EXAMPLE: &str = r#"[{"ShardNumber":0,"ControllerName":"argocd-application-controller-7b9c8d6f5-x2kqp","HeartbeatTime":"2026-08-22T18:31:32Z"},{"ShardNumber":1,"ControllerName":"","HeartbeatTime":null}]"#;

fn at(s: &str) -> WallTime {
    WallTime::parse_rfc3339(s).unwrap()
}

fn spec_example_entries() -> Vec<ShardEntry> {
    vec![
        ShardEntry::held(
            0,
            "argocd-application-controller-7b9c8d6f5-x2kqp",
            at("2026-08-22T18:31:32Z"),
        ),
        ShardEntry::free(1),
    ]
}

#[test]
fn spec_example_both_ways() {
    assert_eq!(decode(SPEC_EXAMPLE), Ok(spec_example_entries()));
    assert_eq!(encode(&spec_example_entries()), SPEC_EXAMPLE);
}

#[test]
fn encoding_details() {
    assert_eq!(encode(&[]), "[]");
    // The fraction is dropped and the zone is always Z.
    let entry = ShardEntry::held(
        -3,
        "a<b>&\"c\"\u{2028}",
        WallTime::new(1_787_423_492, 999_000_000).unwrap(),
    );
    assert_eq!(
        encode(&[entry]),
        r#"[{"ShardNumber":-3,"ControllerName":"a\u003cb\u003e\u0026\"c\"\u2028","HeartbeatTime":"2026-08-22T18:31:32Z"}]"#
    );
    // The getDefaultShardMappingData(2) list.
    assert_eq!(
        encode(&[ShardEntry::free(0), ShardEntry::free(1)]),
        r#"[{"ShardNumber":0,"ControllerName":"","HeartbeatTime":null},{"ShardNumber":1,"ControllerName":"","HeartbeatTime":null}]"#
    );
}

#[test]
fn decoding_follows_go() {
    let t = at("2026-08-22T18:31:32Z");
    // Whitespace, key case, unknown keys, key order, missing keys.
    let text = r#" [ { "controllername" : "a", "Extra": {"x":[1,2]}, "SHARDNUMBER": 2,
        "heartbeatTime": "2026-08-22T20:31:32+02:00" }, {}, null, {"ShardNumber": 4} ] "#;
    assert_eq!(
        decode(text),
        Ok(vec![
            ShardEntry::held(2, "a", t),
            ShardEntry::free(0),
            ShardEntry::free(0),
            ShardEntry::free(4),
        ])
    );
    // Go's key folding: long s, Kelvin sign, dotless and dotted I.
    assert_eq!(
        decode(
            "[{\"\u{17F}hardNumber\":7,\"HeartbeatT\u{131}me\":null,\"HEARTBEATT\u{130}ME\":null}]"
        ),
        Ok(vec![ShardEntry::free(7)])
    );
    assert_eq!(
        decode(r#"[{"Shard_Number":7,"ShardNumber ":8}]"#),
        Ok(vec![ShardEntry::free(0)])
    );
    // The last of repeated keys wins; null keeps an int or a string, but zeroes the time.
    assert_eq!(
        decode(
            r#"[{"ShardNumber":1,"shardNumber":2,"ShardNumber":null,"ControllerName":"x",
            "ControllerName":null,"HeartbeatTime":"2026-08-22T18:31:32Z","HeartbeatTime":null}]"#
        ),
        Ok(vec![ShardEntry::held(2, "x", WallTime::ZERO)])
    );
    // Escapes in keys and values.
    assert_eq!(
        decode(
            r#"[{"\u0053hardNumber":1,"ControllerName":"\u003c\ud800","HeartbeatTime":"\u0032026-08-22T18:31:32Z"}]"#
        ),
        Ok(vec![ShardEntry::held(1, "<\u{FFFD}", t)])
    );
    // A fraction is kept internally; the zero instant written as a string is the zero time.
    assert_eq!(
        decode(r#"[{"HeartbeatTime":"2026-08-22T18:31:32.25Z"},{"HeartbeatTime":"0001-01-01T00:00:00Z"}]"#)
            .unwrap()
            .iter()
            .map(|e| e.heartbeat_time)
            .collect::<Vec<_>>(),
        vec![WallTime::new(t.unix_seconds(), 250_000_000).unwrap(), WallTime::ZERO]
    );
    // Top-level null is an empty list, as for a Go slice.
    assert_eq!(decode("null"), Ok(vec![]));
    assert_eq!(decode(" [ ] "), Ok(vec![]));
    assert!(decode("[-0]").is_err());
    assert_eq!(
        decode(r#"[{"ShardNumber":-0}]"#),
        Ok(vec![ShardEntry::free(0)])
    );
    assert_eq!(
        decode(r#"[{"ShardNumber":-9223372036854775808}]"#),
        Ok(vec![ShardEntry::free(i64::MIN)])
    );
}

#[test]
fn decoding_errors() {
    assert_eq!(decode(""), Err(MappingError::Empty));
    assert_eq!(decode(" \n\t"), Err(MappingError::Empty));
    for (text, expected_at) in [
        ("{}", "the mapping"),
        ("\"[]\"", "the mapping"),
        ("3", "the mapping"),
        ("[3]", "entry 0"),
        ("[{},[]]", "entry 1"),
        (r#"[{"ShardNumber":"1"}]"#, "entry 0, ShardNumber"),
        (r#"[{"ShardNumber":1.0}]"#, "entry 0, ShardNumber"),
        (r#"[{"ShardNumber":1e2}]"#, "entry 0, ShardNumber"),
        (
            r#"[{"ShardNumber":9223372036854775808}]"#,
            "entry 0, ShardNumber",
        ),
        (r#"[{"ShardNumber":true}]"#, "entry 0, ShardNumber"),
        (r#"[{"ControllerName":1}]"#, "entry 0, ControllerName"),
        (r#"[{"ControllerName":{}}]"#, "entry 0, ControllerName"),
        (r#"[{"HeartbeatTime":0}]"#, "entry 0, HeartbeatTime"),
        (r#"[{"HeartbeatTime":{}}]"#, "entry 0, HeartbeatTime"),
    ] {
        match decode(text) {
            Err(MappingError::Type { at, .. }) => assert_eq!(at, expected_at, "{text}"),
            other => panic!("{text}: expected a type error, got {other:?}"),
        }
    }
    for text in [
        r#"[{"HeartbeatTime":""}]"#,
        r#"[{"HeartbeatTime":"2026-08-22 18:31:32 +0000 UTC"}]"#,
        // The format the upstream docs show, which is not what is stored (§5.3).
        r#"[{"HeartbeatTime":"2009-11-17 20:34:58.651387237 +0000 UTC"}]"#,
        r#"[{"HeartbeatTime":"2026-02-30T00:00:00Z"}]"#,
    ] {
        assert!(
            matches!(decode(text), Err(MappingError::Time { .. })),
            "{text}"
        );
    }
    // Syntax errors win over type errors anywhere before them.
    assert!(matches!(
        decode(r#"[3, }"#),
        Err(MappingError::Syntax { .. })
    ));
    assert!(matches!(
        decode(&SPEC_EXAMPLE[1..]),
        Err(MappingError::Syntax { .. })
    ));
    let message = decode(r#"[{"ShardNumber":1.5}]"#).unwrap_err().to_string();
    assert!(
        message.contains("entry 0, ShardNumber") && message.contains("number 1.5"),
        "{message}"
    );
}

fn arb_time() -> impl Strategy<Value = WallTime> {
    prop_oneof![
        1 => Just(WallTime::ZERO),
        4 => (
            WallTime::EARLIEST_READABLE.unix_seconds()..=WallTime::LATEST_READABLE.unix_seconds(),
            0u32..1_000_000_000
        )
            .prop_map(|(s, n)| WallTime::new(s, n).unwrap()),
    ]
}

fn arb_entry() -> impl Strategy<Value = ShardEntry> {
    (
        any::<i64>(),
        "\\PC{0,12}|[\\x00-\\x7f\u{2028}\u{2029}]{0,12}",
        arb_time(),
    )
        .prop_map(
            |(shard_number, controller_name, heartbeat_time)| ShardEntry {
                shard_number,
                controller_name,
                heartbeat_time,
            },
        )
}

proptest! {
    #[test]
    fn round_trip_modulo_subsecond(entries in prop::collection::vec(arb_entry(), 0..6)) {
        let text = encode(&entries);
        let back = decode(&text);
        // The fraction is dropped; a zero instant with a fraction truncates to the zero time.
        let expected: Vec<ShardEntry> = entries
            .iter()
            .map(|e| ShardEntry { heartbeat_time: e.heartbeat_time.truncated(), ..e.clone() })
            .collect();
        prop_assert_eq!(back, Ok(expected.clone()));
        // Encoding is stable once truncated.
        prop_assert_eq!(encode(&expected), text);
    }

    #[test]
    fn encode_never_panics(
        entries in prop::collection::vec(
            (any::<i64>(), "\\PC{0,8}", any::<i64>(), 0u32..1_000_000_000),
            0..4,
        )
    ) {
        let entries: Vec<ShardEntry> = entries
            .into_iter()
            .map(|(n, name, s, ns)| ShardEntry::held(n, name, WallTime::new(s, ns).unwrap()))
            .collect();
        let text = encode(&entries);
        prop_assert!(text.starts_with('[') && text.ends_with(']'));
    }

    #[test]
    fn decode_never_panics(text in "\\PC{0,80}") {
        let _ = decode(&text);
    }

    #[test]
    fn decode_never_panics_on_near_misses(
        text in r#"[\[\]{}:, "nul0-9.eE+\-]{0,10}(\{"(ShardNumber|controllerNAME|HeartbeatTime|x)":("[0-9T:Z.+\-]{0,24}"|-?[0-9]{1,20}(\.[0-9])?|null|true|\[\]|\{\})\}[,\] ]{0,2}){0,4}[\]} ]{0,3}"#
    ) {
        let _ = decode(&text);
    }
}
