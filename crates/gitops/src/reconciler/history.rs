//! `status.history`: the successful syncs of an app, newest last, as Argo CD records them
//! (an id counting up from 0, the revision and source synced, when the sync started and
//! ended, who asked), at most `revisionHistoryLimit` (default 10). `argocd app rollback ID`
//! and the UI's History panel read it: a rollback is a sync request with the entry's
//! revision and source, which the reconciler runs as any other.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Initiator;

/// Argo CD's default `revisionHistoryLimit`.
pub const DEFAULT_HISTORY_LIMIT: i64 = 10;

/// One entry of `status.history`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionHistory {
    /// Counts up from 0, one per successful sync.
    pub id: i64,
    /// The commit synced (empty for a multi-source app).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub revision: String,
    /// When the sync ended.
    pub deployed_at: String,
    /// When it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_started_at: Option<String>,
    /// The source synced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Value>,
    /// A multi-source app's sources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<Value>,
    /// A multi-source app's revisions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revisions: Vec<String>,
    /// Who asked.
    #[serde(default)]
    pub initiated_by: Initiator,
}

/// `history` with `entry` appended (its id the last one's plus one, 0 for the first),
/// truncated to the last `limit` entries (Argo CD's `Trunc`: below 0 counts as 0).
pub fn appended(
    mut history: Vec<RevisionHistory>,
    mut entry: RevisionHistory,
    limit: Option<i64>,
) -> Vec<RevisionHistory> {
    entry.id = history.last().map_or(0, |h| h.id + 1);
    history.push(entry);
    let keep = usize::try_from(limit.unwrap_or(DEFAULT_HISTORY_LIMIT).max(0)).unwrap_or(0);
    let drop = history.len().saturating_sub(keep);
    history.drain(..drop);
    history
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(revision: &str) -> RevisionHistory {
        RevisionHistory {
            id: -1,
            revision: revision.to_owned(),
            deployed_at: "2026-11-21T10:00:00Z".to_owned(),
            deploy_started_at: None,
            source: None,
            sources: Vec::new(),
            revisions: Vec::new(),
            initiated_by: Initiator::default(),
        }
    }

    #[test]
    fn ids_count_up_and_the_oldest_go_past_the_limit() {
        let mut h = Vec::new();
        for r in ["a", "b", "c"] {
            h = appended(h, entry(r), Some(2));
        }
        let got: Vec<(i64, &str)> = h.iter().map(|e| (e.id, e.revision.as_str())).collect();
        assert_eq!(got, [(1, "b"), (2, "c")]);
        assert_eq!(appended(Vec::new(), entry("a"), None)[0].id, 0);
        assert!(appended(h, entry("d"), Some(-1)).is_empty());
    }
}
