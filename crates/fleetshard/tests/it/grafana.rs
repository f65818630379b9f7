//! The Grafana dashboard (`deploy/grafana/fleetshard.json`) asks only for series a
//! running replica's `/metrics` exposes: every metric name in every PromQL expression of
//! the dashboard (panels and variables) is one of them, so a renamed metric fails here
//! instead of leaving an empty panel.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::support::http;
use crate::support::replicas::{Harness, Setup};
use crate::support::store::StoreUnderTest;
use serde_json::Value;

fn dashboard() -> Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/grafana/fleetshard.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every PromQL string of the dashboard: targets' `expr`, variables' `query`/`definition`
/// (the datasource variable's `query` is a plugin name, not PromQL).
fn expressions(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr" | "definition", Value::String(s)) => out.push(promql(s)),
                    ("query", Value::String(s)) if s.contains('(') => out.push(promql(s)),
                    _ => expressions(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| expressions(v, out)),
        _ => {}
    }
}

/// The PromQL of a query: Grafana's `label_values(SELECTOR, LABEL)` selects SELECTOR.
fn promql(query: &str) -> String {
    query
        .strip_prefix("label_values(")
        .and_then(|rest| rest.rsplit_once(','))
        .map_or(query, |(selector, _)| selector)
        .to_owned()
}

/// PromQL words that are not metric names.
const KEYWORDS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
];

/// Aggregation operators (`sum by (l) (…)`: not always followed by a parenthesis).
const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];

/// The metric names an expression selects: identifiers outside label matchers `{…}`,
/// ranges `[…]`, strings and label lists (`by (…)`, `on (…)`, ...), not called as a
/// function and not a keyword.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let (mut i, mut skip_list) = (0, false);
    while i < chars.len() {
        let c = chars[i];
        let close = match c {
            '{' => Some('}'),
            '[' => Some(']'),
            '"' => Some('"'),
            '(' if skip_list => Some(')'),
            _ => None,
        };
        if let Some(close) = close {
            skip_list = false;
            i += 1 + chars[i + 1..]
                .iter()
                .position(|&d| d == close)
                .expect("balanced");
            i += 1;
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' || c == ':' || c == '$' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_:$".contains(chars[i]))
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace());
            if KEYWORDS.contains(&word.as_str()) {
                skip_list = matches!(
                    word.as_str(),
                    "by" | "without" | "on" | "ignoring" | "group_left" | "group_right"
                );
            } else if next != Some(&'(')
                && !word.starts_with('$')
                && !AGGREGATIONS.contains(&word.as_str())
            {
                names.insert(word);
            }
            continue;
        }
        i += 1;
    }
    names
}

/// The series names a `/metrics` body exposes, from its `# TYPE` lines (a family is
/// listed even before its first sample): a counter's `_total`, a histogram's `_bucket`,
/// `_sum` and `_count`, a gauge's own name.
fn exposed(body: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in body.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let (Some(name), Some(kind)) = (words.next(), words.next()) else {
            continue;
        };
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            _ => &[""],
        };
        out.extend(suffixes.iter().map(|s| format!("{name}{s}")));
    }
    out
}

#[test]
fn the_metric_name_reader_finds_selectors_only() {
    let e = r#"histogram_quantile(0.99, sum by (le, op) (rate(a_b_bucket{job=~"$job", x="y z"}[5m]))) / on (instance) group_left (shard) c_total or vector(0) + max without (x) (d)"#;
    let got: Vec<String> = metric_names(e).into_iter().collect();
    assert_eq!(got, ["a_b_bucket", "c_total", "d"]);
}

#[test]
fn every_metric_the_grafana_dashboard_queries_is_exposed_by_a_replica() {
    let dash = dashboard();
    let mut exprs = Vec::new();
    expressions(&dash, &mut exprs);
    assert!(exprs.len() > 10, "{exprs:?}");

    let dir = tempfile::tempdir().unwrap();
    let store = StoreUnderTest::sqlite(dir.path());
    let setup = Setup {
        shards: 1,
        clusters: 3,
        ..Setup::default()
    };
    let db = dir.path().join("fleetshard.db");
    let mut h = Harness::new(dir, store, setup);
    // Measured costs, so that what exists only once something is measured is exposed.
    crate::run_costs::write_costs(&db, &h.store.root(), &h.clusters[0], &h.clusters[1..]);
    let r0 = h.start("r0");
    h.wait_settled("one replica");
    let (code, body) = http::get(h.replicas[r0].port, "/metrics").expect("/metrics answers");
    assert_eq!(code, 200, "{body}");
    let exposed = exposed(&body);
    assert!(
        exposed.contains("fleetshard_failovers_total"),
        "{exposed:?}"
    );

    let mut used = BTreeSet::new();
    for e in &exprs {
        let names = metric_names(e);
        assert!(!names.is_empty(), "no metric in {e:?}");
        for n in names {
            assert!(
                exposed.contains(&n),
                "the dashboard queries {n} (in {e:?}), which /metrics does not expose; it exposes {exposed:?}"
            );
            used.insert(n);
        }
    }
    // What the issue asks the dashboard to show is there.
    for needed in [
        "fleetshard_clusters_acting",
        "fleetshard_failovers_total",
        "fleetshard_handovers_total",
        "fleetshard_lease_renew_seconds_bucket",
        "fleetshard_workqueue_depth",
        "fleetshard_workqueue_work_duration_seconds_count",
    ] {
        assert!(used.contains(needed), "{needed} not on the dashboard");
    }
}
