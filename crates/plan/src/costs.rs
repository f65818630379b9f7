//! Measured costs: `plan --costs FILE`, a JSON object from cluster id to the cluster's
//! measured cost (a non-negative number), and what each cluster costs in a plan.
//!
//! What a cluster without a measured cost costs is
//! [`fleetshard_core::placement::measured`]'s rule; without a file the estimate is the cost.

use std::collections::BTreeMap;

use fleetshard_core::placement::measured;

use crate::PlanError;

/// Measured cost per cluster id, as read from a costs file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MeasuredCosts {
    /// The file (or source) name, for messages.
    pub source: String,
    /// Cost by cluster id.
    pub by_id: BTreeMap<String, f64>,
}

impl MeasuredCosts {
    /// Parses a costs file; `source` names it in errors. Every value must be a finite,
    /// non-negative number; the error names the key that is not.
    pub fn from_json(text: &str, source: &str) -> Result<Self, PlanError> {
        let err = |message: String| PlanError::Costs {
            source_name: source.to_owned(),
            message,
        };
        let doc: serde_json::Value =
            serde_json::from_str(text).map_err(|e| err(format!("not JSON: {e}")))?;
        let serde_json::Value::Object(map) = doc else {
            return Err(err(
                "not a JSON object from cluster id to measured cost".to_owned()
            ));
        };
        let mut by_id = BTreeMap::new();
        for (id, value) in map {
            let cost = value
                .as_f64()
                .ok_or_else(|| err(format!("cluster {id:?}: cost {value} is not a number")))?;
            if !cost.is_finite() || cost < 0.0 {
                return Err(err(format!(
                    "cluster {id:?}: cost {cost} is not a finite number ≥ 0"
                )));
            }
            by_id.insert(id, cost);
        }
        Ok(MeasuredCosts {
            source: source.to_owned(),
            by_id,
        })
    }
}

/// What each cluster costs (same order as `ids`), and the ids of `measured` no cluster
/// has. `estimates` are the clusters' base-plus-apps loads; the rule is
/// [`fleetshard_core::placement::measured::cluster_costs`].
pub fn cluster_costs(
    ids: &[&str],
    estimates: &[u64],
    measured: Option<&MeasuredCosts>,
) -> (Vec<f64>, Vec<String>) {
    let Some(measured) = measured else {
        return (estimates.iter().map(|&e| e as f64).collect(), Vec::new());
    };
    let costs = measured::cluster_costs(ids, estimates, &measured.by_id);
    let known: std::collections::HashSet<&str> = ids.iter().copied().collect();
    let unknown = measured
        .by_id
        .keys()
        .filter(|id| !known.contains(id.as_str()))
        .cloned()
        .collect();
    (costs, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_files_name_the_file_and_key() {
        let e = |text: &str| {
            MeasuredCosts::from_json(text, "costs.json")
                .unwrap_err()
                .to_string()
        };
        assert!(
            e("[1, 2]").starts_with("costs.json: not a JSON object"),
            "{}",
            e("[1]")
        );
        assert!(e("{").starts_with("costs.json: not JSON"));
        let neg = e(r#"{"a": 1, "b": -2}"#);
        assert!(
            neg.contains("costs.json") && neg.contains("\"b\"") && neg.contains("-2"),
            "{neg}"
        );
        let text = e(r#"{"a": "x"}"#);
        assert!(
            text.contains("\"a\"") && text.contains("not a number"),
            "{text}"
        );
        let ok = MeasuredCosts::from_json(r#"{"a": 1.5, "b": 0}"#, "c").unwrap();
        assert_eq!(ok.by_id.len(), 2);
    }

    #[test]
    fn unmeasured_clusters_are_scaled_by_the_median_ratio() {
        let m =
            MeasuredCosts::from_json(r#"{"a": 20, "b": 90, "c": 400, "gone": 1}"#, "c").unwrap();
        // Ratios 2, 3, 4 (median 3); d's estimate 5 becomes 15.
        let (costs, unknown) = cluster_costs(&["a", "b", "c", "d"], &[10, 30, 100, 5], Some(&m));
        assert_eq!(costs, vec![20.0, 90.0, 400.0, 15.0]);
        assert_eq!(unknown, vec!["gone".to_owned()]);
        let (plain, none) = cluster_costs(&["a"], &[7], None);
        assert_eq!((plain, none.len()), (vec![7.0], 0));
    }
}
