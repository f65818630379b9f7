//! Server-side diff (Argo CD's `argocd.argoproj.io/compare-options: ServerSideDiff=true`,
//! or the controller-wide `controller.diff.server.side`): the object a desired resource
//! is compared with is the live object the cluster predicts for it — a server-side apply
//! dry run of the desired object (`apply::predict_live`) — less what mutating admission
//! webhooks added (`fleetshard_diff::remove_webhook_mutations`) unless the app says
//! `IncludeMutationWebhook=true`. The predicted object then takes the manifest's place in
//! the comparison, with the same normalisation (`ignoreDifferences` included).
//!
//! As Argo CD: a resource not live yet is simply missing (no dry run); a dry run that
//! fails fails the app's comparison (`ComparisonError`, nothing synced). The Application's
//! own annotation decides (`ServerSideDiff=false` turns the controller-wide setting off for
//! it); on a manifest the option is ignored, as Argo CD ignores it.
//!
//! **Cost and cache.** One dry-run request per resource per comparison, unless cached:
//! Argo CD reuses a resource's last diff while the live object's `resourceVersion` is the
//! one it was computed against, as long as no refresh was asked for and the app's revision
//! and spec are unchanged. Here a prediction is kept per app and resource with the desired
//! object it was made for (a digest), the live `resourceVersion` and the webhook choice,
//! and reused while all three are the same and the comparison is not one a refresh asked
//! for (`Refresh::Resolve`, `Refresh::Hard`): a steady app sends no dry run.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use fleetshard_controller::AppKey;
use serde_json::Value;

use super::{AppTarget, GitOpsReconciler};
use crate::apply::predict_live;
use crate::compare::{FIELD_MANAGER, ResourceKey};
use crate::live::{AppConn, ClusterConn, KindInfo};
use crate::source::Refresh;

/// One resource's prediction, kept for the app's next comparison.
pub(super) struct Prediction {
    /// Digest of the desired object the dry run was sent.
    desired: u64,
    /// The live object's `resourceVersion` then.
    live_version: String,
    /// `IncludeMutationWebhook=true` then.
    include_mutations: bool,
    /// The object compared (webhooks' additions removed unless included).
    predicted: Arc<Value>,
}

/// One desired resource to predict: its key, kind, the desired object (stamped and
/// placed) and its live object.
pub(super) type ToPredict<'a> = (&'a ResourceKey, &'a KindInfo, &'a Value, &'a Value);

impl GitOpsReconciler {
    /// Whether `target` is compared server-side.
    pub(super) fn compares_server_side(&self, target: &AppTarget) -> bool {
        target
            .spec
            .compare_options
            .server_side_diff(self.config.server_side_diff)
    }

    /// The predicted live object of each of `resources` (see the module's documentation),
    /// by key; `Err` names the first resource whose dry run or prediction failed.
    pub(super) async fn predicted_live(
        &self,
        key: &AppKey,
        conn: &ClusterConn,
        target: &AppTarget,
        refresh: Refresh,
        resources: Vec<ToPredict<'_>>,
    ) -> Result<HashMap<ResourceKey, Value>, String> {
        let include_mutations = target.spec.compare_options.include_mutation_webhook;
        let conn = self.app_conn(key, conn, false);
        let reuse = !matches!(refresh, Refresh::Resolve | Refresh::Hard);
        let mut cached =
            std::mem::take(&mut self.memos().entry(key.clone()).or_default().predictions);
        let mut kept = HashMap::with_capacity(resources.len());
        let mut out = HashMap::with_capacity(resources.len());
        for (rkey, kind, desired, live) in resources {
            let digest = digest(desired);
            let live_version = live
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let hit = cached.remove(rkey).filter(|p| {
                reuse
                    && p.desired == digest
                    && p.live_version == live_version
                    && p.include_mutations == include_mutations
            });
            let predicted = match hit {
                Some(p) => p.predicted,
                None => {
                    Arc::new(predict(&conn, kind, rkey, desired, live, include_mutations).await?)
                }
            };
            out.insert(rkey.clone(), (*predicted).clone());
            kept.insert(
                rkey.clone(),
                Prediction {
                    desired: digest,
                    live_version: live_version.to_owned(),
                    include_mutations,
                    predicted,
                },
            );
        }
        self.memos().entry(key.clone()).or_default().predictions = kept;
        Ok(out)
    }

    /// The predicted live objects of `key`'s last server-side comparison, by resource
    /// (none for an app compared client-side): Argo CD's `predictedLiveState`.
    pub(super) fn predictions_of(&self, key: &AppKey) -> HashMap<ResourceKey, Arc<Value>> {
        self.memos().get(key).map_or_else(HashMap::new, |m| {
            m.predictions
                .iter()
                .map(|(k, p)| (k.clone(), p.predicted.clone()))
                .collect()
        })
    }

    /// Forgets `key`'s predictions (an app no longer compared server-side).
    pub(super) fn forget_predictions(&self, key: &AppKey) {
        if let Some(m) = self.memos().get_mut(key) {
            m.predictions.clear();
        }
    }
}

/// One dry run, and the webhooks' additions removed unless `include_mutations`.
async fn predict(
    conn: &AppConn<'_>,
    kind: &KindInfo,
    key: &ResourceKey,
    desired: &Value,
    live: &Value,
    include_mutations: bool,
) -> Result<Value, String> {
    let failed = |why: String| {
        format!(
            "Failed to compare desired state to live state: server-side diff of {}/{} {}: {why}",
            key.kind, key.namespace, key.name
        )
    };
    let predicted = predict_live(conn, kind, key, desired)
        .await
        .map_err(|e| failed(format!("server-side apply dry run: {e}")))?;
    if include_mutations {
        return Ok(predicted);
    }
    fleetshard_diff::remove_webhook_mutations(&predicted, live, FIELD_MANAGER)
        .map_err(|e| failed(e.to_string()))
}

/// A digest of `value` (within this process: never stored).
fn digest(value: &Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.to_string().hash(&mut hasher);
    hasher.finish()
}
