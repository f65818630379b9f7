//! Applications written back (`kubectl get -o yaml`'s shape): what the writers of fleet
//! files and Application lists emit, read back as the same [`App`] and [`AppSpec`].

use fleetshard_core::App;
use serde::Serialize;
use serde_json::Value;

use super::{Automated, Dest, Directory, NamespaceMetadata, Retry, Source, Spec, SyncPolicy};
use crate::app_spec::{AppSource, AppSpec, DirectoryOptions};
use crate::secret::ObjectMeta;

/// `source.directory` as written: the typed options and what else the source read had
/// there (`jsonnet`); absent when both are empty and the source read had none.
fn write_directory(source: &AppSource) -> Option<Directory> {
    let d = &source.directory;
    let read = source.raw.get("directory");
    let rest = read.map_or_else(serde_json::Map::new, |r| {
        untyped(r, &["recurse", "include", "exclude"])
    });
    (*d != DirectoryOptions::default() || read.is_some_and(Value::is_object)).then(|| Directory {
        recurse: Some(d.recurse).filter(|r| *r),
        include: Some(d.include.clone()).filter(|s| !s.is_empty()),
        exclude: Some(d.exclude.clone()).filter(|s| !s.is_empty()),
        rest,
    })
}

/// The fields of the object `raw` other than `typed` (none when it is not an object).
fn untyped(raw: &Value, typed: &[&str]) -> serde_json::Map<String, Value> {
    match raw {
        Value::Object(map) => map
            .iter()
            .filter(|(k, _)| !typed.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        _ => serde_json::Map::new(),
    }
}

/// `spec.syncPolicy` as written (absent when it says nothing).
fn write_sync_policy(spec: &AppSpec) -> Option<SyncPolicy> {
    let p = &spec.policy;
    let policy = SyncPolicy {
        automated: spec.auto_sync.map(|a| Automated {
            enabled: None,
            prune: Some(a.prune),
            self_heal: Some(a.self_heal),
            allow_empty: Some(a.allow_empty).filter(|e| *e),
        }),
        sync_options: Some(p.sync_options.clone()).filter(|o| !o.is_empty()),
        retry: p.retry.as_ref().map(Retry::of),
        managed_namespace_metadata: p.managed_namespace_metadata.as_ref().map(|m| {
            NamespaceMetadata {
                labels: Some(m.labels.clone()).filter(|l| !l.is_empty()),
                annotations: Some(m.annotations.clone()).filter(|a| !a.is_empty()),
            }
        }),
    };
    (policy.automated.is_some()
        || policy.sync_options.is_some()
        || policy.retry.is_some()
        || policy.managed_namespace_metadata.is_some())
    .then_some(policy)
}

/// The `spec.source` fields [`AppSource`] has typed fields for.
const TYPED_SOURCE_FIELDS: [&str; 4] = ["repoURL", "path", "targetRevision", "directory"];

/// An Application as `kubectl get -o yaml` prints it, for the writers.
#[derive(Debug, Serialize)]
pub(crate) struct ApplicationOut {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    metadata: ObjectMeta,
    spec: Spec,
}

/// The Application manifest for `app` and its `spec`. Every field is written so that
/// reading it back gives the same [`App`] and [`AppSpec`] (`targetRevision` always, since a
/// missing one reads as `HEAD`), except `operation`, which is not part of a definition.
/// Without a spec, the Application has no source and no sync policy (it reads back as the
/// default source at `HEAD`).
pub(crate) fn to_application(app: &App, spec: Option<&AppSpec>) -> ApplicationOut {
    let non_empty = |s: &str| Some(s.to_owned()).filter(|s| !s.is_empty());
    ApplicationOut {
        api_version: "argoproj.io/v1alpha1",
        kind: "Application",
        metadata: ObjectMeta {
            name: Some(app.name.clone()),
            // An empty namespace reads back as empty whether written or not.
            namespace: non_empty(&app.namespace),
            ..ObjectMeta::default()
        },
        spec: Spec {
            project: Some(app.project.clone()),
            source: spec.map(|s| Source {
                repo_url: non_empty(&s.source.repo_url),
                path: non_empty(&s.source.path),
                target_revision: Some(s.source.target_revision.clone()),
                directory: write_directory(&s.source),
                // What the typed fields above do not say, as read.
                rest: untyped(&s.source.raw, &TYPED_SOURCE_FIELDS),
            }),
            sources: None,
            destination: Some(Dest {
                server: app.destination.server.clone(),
                name: app.destination.name.clone(),
                namespace: app.destination.namespace.clone(),
            }),
            sync_policy: spec.and_then(write_sync_policy),
            ignore_differences: spec
                .map(|s| s.ignore_differences.clone())
                .filter(|d| !d.is_empty()),
            revision_history_limit: spec.and_then(|s| s.lifecycle.revision_history_limit),
        },
    }
}
