use serde_json::json;

use super::*;

#[test]
fn date_times_are_rfc3339() {
    for ok in [
        "2026-11-26T14:00:00Z",
        "2026-11-26t14:00:00z",
        "2026-11-26T14:00:00.123456789Z",
        "2026-11-26T14:00:00+01:00",
        "2026-11-26T23:59:60-08:30",
    ] {
        assert!(is_date_time(ok), "{ok}");
    }
    for bad in [
        "",
        "t",
        "2026-11-26",
        "2026-11-26 14:00:00Z",
        "2026-11-26T14:00:00",
        "2026-13-26T14:00:00Z",
        "2026-11-26T24:00:00Z",
        "2026-11-26T14:00:00.Z",
        "2026-11-26T14:00:00+0100",
        "2026-11-26T14:00:00Zjunk",
    ] {
        assert!(!is_date_time(bad), "{bad}");
    }
}

#[test]
fn pruning_follows_properties_maps_and_preserve() {
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "string"}}},
            "m": {"type": "object", "additionalProperties": {
                "type": "object", "properties": {"k": {"type": "string"}}}},
            "l": {"type": "array", "items": {"type": "object", "properties": {"x": {}}}},
            "p": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "e": {"type": "object"},
        },
    });
    let mut v = json!({
        "apiVersion": "v", "kind": "K", "metadata": {"anything": 1},
        "a": {"b": "1", "c": 2, "n": null}, "z": 1,
        "m": {"one": {"k": "v", "drop": 1}},
        "l": [{"x": 1, "y": 2}],
        "p": {"q": {"r": 1}},
        "e": {"gone": 1},
    });
    prune(&mut v, &schema, true);
    assert_eq!(
        v,
        json!({
            "apiVersion": "v", "kind": "K", "metadata": {"anything": 1},
            "a": {"b": "1"},
            "m": {"one": {"k": "v"}},
            "l": [{"x": 1}],
            "p": {"q": {"r": 1}},
            "e": {},
        })
    );
}
