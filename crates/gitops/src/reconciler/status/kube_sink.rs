//! The status sink of Kubernetes mode: the Application object itself.

use std::time::Duration;

use fleetshard_controller::AppKey;
use futures::future::BoxFuture;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::{
    ComparisonStatus, OperationState, Recorded, RecordedStatuses, RevisionHistory, SinkError,
    StatusSink, StatusUpdate,
};

/// Kubernetes mode: a merge patch of the Application's `status` (`argoproj.io/v1alpha1`,
/// `applications`) on the control-plane cluster. Argo CD's CRD has no status subresource,
/// so the patch goes to the object itself, as Argo CD's controller writes it.
#[derive(Clone)]
pub struct KubeStatusSink {
    client: Client,
    resource: ApiResource,
    call_timeout: Duration,
}

impl KubeStatusSink {
    /// Writes through `client` (its retries should be off), each call bounded by
    /// `call_timeout`.
    pub fn new(client: Client, call_timeout: Duration) -> Self {
        KubeStatusSink {
            client,
            resource: fleetshard_controller::inventory::application_resource(),
            call_timeout,
        }
    }
}

impl KubeStatusSink {
    /// The Applications of `app`'s namespace, and its name.
    fn api<'a>(&self, app: &'a AppKey) -> (Api<DynamicObject>, &'a str) {
        let (namespace, name) = app.parts();
        let api = Api::namespaced_with(self.client.clone(), namespace, &self.resource);
        (api, name)
    }

    /// The Application `app` as stored ([`SinkError::NotFound`] when it is gone).
    async fn application(&self, app: &AppKey) -> Result<DynamicObject, SinkError> {
        let (api, name) = self.api(app);
        self.call(app, api.get_opt(name))
            .await?
            .ok_or_else(|| SinkError::NotFound(app.to_string()))
    }

    /// `call` bounded by `call_timeout`: a 404 is [`SinkError::NotFound`], any other
    /// failure or no answer [`SinkError::Unavailable`].
    async fn call<T>(
        &self,
        app: &AppKey,
        call: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, SinkError> {
        let unavailable = |message: String| SinkError::Unavailable {
            app: app.to_string(),
            message,
        };
        match tokio::time::timeout(self.call_timeout, call).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(kube::Error::Api(s))) if s.code == 404 => {
                Err(SinkError::NotFound(app.to_string()))
            }
            Ok(Err(e)) => Err(unavailable(e.to_string())),
            Err(_) => Err(unavailable(format!(
                "no answer within {:?}",
                self.call_timeout
            ))),
        }
    }
}

/// The API server's answer to an object beyond its size limit (Request Entity Too Large).
const TOO_LARGE: u16 = 413;

/// The condition a status too large to be stored leaves instead (Argo CD's type).
const UNKNOWN_ERROR: &str = "UnknownError";

impl KubeStatusSink {
    /// After a refresh's status was refused as too large: the status stays as stored, with
    /// an `UnknownError` condition saying so (the app's other conditions kept), as Argo CD
    /// does. The next status that fits replaces the conditions, and so clears it.
    async fn write_too_large(
        &self,
        app: &AppKey,
        comparison: &ComparisonStatus,
    ) -> Result<(), SinkError> {
        let stored = self.application(app).await?;
        let mut conditions: Vec<Value> = stored
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| c.get("type").and_then(Value::as_str) != Some(UNKNOWN_ERROR))
            .cloned()
            .collect();
        conditions.push(json!({
            "type": UNKNOWN_ERROR,
            "message": "the Application's status is beyond the API server's size limit: the \
                        last comparison was not recorded and the status shown may be stale; \
                        fewer resources per Application, ApplyOutOfSyncOnly=true or a lower \
                        spec.revisionHistoryLimit make it fit",
            "lastTransitionTime": comparison.reconciled_at,
        }));
        let (api, name) = self.api(app);
        let patch = Patch::Merge(json!({"status": {"conditions": conditions}}));
        self.call(app, api.patch(name, &PatchParams::default(), &patch))
            .await?;
        Ok(())
    }
}

impl StatusSink for KubeStatusSink {
    fn write<'a>(
        &'a self,
        app: &'a AppKey,
        update: &'a StatusUpdate,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            let (api, name) = self.api(app);
            let patch = Patch::Merge(update.merge_patch());
            let params = PatchParams::default();
            let comparison = match update {
                StatusUpdate::Comparison(c) => Some(c),
                _ => None,
            };
            let patched = self.call(app, async {
                match api.patch(name, &params, &patch).await {
                    Err(kube::Error::Api(s)) if s.code == TOO_LARGE && comparison.is_some() => {
                        Ok(false)
                    }
                    other => other.map(|_| true),
                }
            });
            match (patched.await?, comparison) {
                (false, Some(c)) => self.write_too_large(app, c).await,
                _ => Ok(()),
            }
        })
    }

    fn last_operation<'a>(
        &'a self,
        app: &'a AppKey,
    ) -> BoxFuture<'a, Result<Option<OperationState>, SinkError>> {
        Box::pin(async move { Ok(operation_of(&self.application(app).await?)) })
    }

    fn recorded<'a>(&'a self, app: &'a AppKey) -> BoxFuture<'a, Result<Recorded, SinkError>> {
        Box::pin(async move {
            let obj = self.application(app).await?;
            let text = |pointer: &str| {
                obj.data
                    .pointer(pointer)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            Ok(Recorded {
                operation: operation_of(&obj),
                statuses: Some(RecordedStatuses {
                    sync: text("/status/sync/status"),
                    health: text("/status/health/status"),
                }),
            })
        })
    }

    fn history<'a>(
        &'a self,
        app: &'a AppKey,
    ) -> BoxFuture<'a, Result<Vec<RevisionHistory>, SinkError>> {
        Box::pin(async move {
            let obj = self.application(app).await?;
            // Entries that do not read (written by someone else) are kept out.
            Ok(obj
                .data
                .pointer("/status/history")
                .and_then(Value::as_array)
                .map(|h| {
                    h.iter()
                        .filter_map(|e| serde_json::from_value(e.clone()).ok())
                        .collect()
                })
                .unwrap_or_default())
        })
    }

    fn change_finalizers<'a>(
        &'a self,
        app: &'a AppKey,
        add: &'a [String],
        remove: &'a [String],
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            let obj = self.application(app).await?;
            let mut finalizers: Vec<String> = obj.metadata.finalizers.clone().unwrap_or_default();
            let before = finalizers.clone();
            finalizers.retain(|f| !remove.contains(f));
            for f in add {
                if !finalizers.contains(f) {
                    finalizers.push(f.clone());
                }
            }
            if finalizers == before {
                return Ok(());
            }
            // The resourceVersion read makes the patch conditional: another writer's change
            // of the list in between fails it (retried by the next operation).
            let patch = json!({"metadata": {
                "resourceVersion": obj.metadata.resource_version,
                "finalizers": finalizers,
            }});
            let (api, name) = self.api(app);
            let params = PatchParams::default();
            self.call(app, api.patch(name, &params, &Patch::Merge(patch)))
                .await?;
            Ok(())
        })
    }
}

/// The Application's `operationState`; a malformed one (written by someone else) counts
/// as none: the next operation overwrites it.
fn operation_of(obj: &DynamicObject) -> Option<OperationState> {
    obj.data
        .pointer("/status/operationState")
        .and_then(|o| serde_json::from_value(o.clone()).ok())
}
