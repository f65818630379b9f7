//! The one list of what fleetshard implements of an Argo CD Application: every field,
//! sync option and annotation not listed here is refused (a [`Refusal`] naming it), so a
//! field Argo CD adds later is refused by default rather than silently ignored.
//!
//! A field set to its zero value (`null`, `false`, `0`, `""`, `{}`, `[]`, or an object of
//! only such values) counts as absent: Argo CD's Go types cannot tell the two apart
//! either, and its CLI and UI write such empty values (`directory: {jsonnet: {}}`).
//!
//! Per-object annotations of the rendered manifests (sync waves, hooks, per-object sync
//! options) are checked by the reconciler against [`APP_SYNC_OPTIONS`],
//! [`OBJECT_ANNOTATIONS`] and [`OBJECT_COMPARE_OPTIONS`].

use serde_json::Value;

use crate::app_spec::{Refusal, RefusalKind};

/// The `spec` fields fleetshard implements, as dotted paths. A path names a leaf taken as
/// is (its type is checked by the loader); the objects on the way are walked.
/// `spec.sources` is read as a list of one source (each entry against the `source.`
/// paths); more than one is refused as `spec.sources` (only a repo-server renders them,
/// and the reconciler then leaves a source's fields to it). `syncPolicy.syncOptions` values are checked against
/// [`APP_SYNC_OPTIONS`].
pub const SPEC_FIELDS: &[&str] = &[
    "project",
    "destination.server",
    "destination.name",
    "destination.namespace",
    "source.repoURL",
    "source.path",
    "source.targetRevision",
    "source.directory.recurse",
    "source.directory.include",
    "source.directory.exclude",
    // Jsonnet files of a directory app, rendered in process.
    "source.directory.jsonnet.extVars",
    "source.directory.jsonnet.tlas",
    "source.directory.jsonnet.libs",
    // Kustomize, built by a `kustomize` or `kubectl` executable; the overrides are
    // written into a copy of the kustomization as Argo CD's `kustomize edit` calls do.
    // Not rendered (refused): `version`, `kubeVersion`, `apiVersions`,
    // `commonAnnotationsEnvsubst`.
    "source.kustomize.namePrefix",
    "source.kustomize.nameSuffix",
    "source.kustomize.images",
    "source.kustomize.replicas",
    "source.kustomize.commonLabels",
    "source.kustomize.forceCommonLabels",
    "source.kustomize.labelWithoutSelector",
    "source.kustomize.labelIncludeTemplates",
    "source.kustomize.commonAnnotations",
    "source.kustomize.forceCommonAnnotations",
    "source.kustomize.namespace",
    "source.kustomize.patches",
    "source.kustomize.components",
    "source.kustomize.ignoreMissingComponents",
    // Helm charts in Git, through a `helm` executable only (`helm template`). Not
    // rendered (refused): `fileParameters`, `passCredentials`, `version`,
    // `skipSchemaValidation` and a chart from a Helm repository (`source.chart`).
    "source.helm.releaseName",
    "source.helm.namespace",
    "source.helm.valueFiles",
    "source.helm.ignoreMissingValueFiles",
    "source.helm.values",
    "source.helm.valuesObject",
    "source.helm.parameters",
    "source.helm.skipCrds",
    "source.helm.skipTests",
    "source.helm.kubeVersion",
    "source.helm.apiVersions",
    "syncPolicy.automated.enabled",
    "syncPolicy.automated.prune",
    "syncPolicy.automated.selfHeal",
    "syncPolicy.automated.allowEmpty",
    "syncPolicy.syncOptions",
    // What the comparison leaves out (group, kind, name, namespace, jsonPointers,
    // jqPathExpressions, managedFieldsManagers; the loader reads the entries' types).
    "ignoreDifferences",
    // Retries of a failed sync, with Argo CD's backoff (fleetshard-sync's `retry`).
    "syncPolicy.retry.limit",
    "syncPolicy.retry.backoff.duration",
    "syncPolicy.retry.backoff.factor",
    "syncPolicy.retry.backoff.maxDuration",
    "syncPolicy.retry.refresh",
    // What `CreateNamespace=true` gives the namespace it creates.
    "syncPolicy.managedNamespaceMetadata.labels",
    "syncPolicy.managedNamespaceMetadata.annotations",
    // Informational only: shown by Argo CD's UI, never read by its controller.
    "info",
    // Bounds `status.history` (default 10).
    "revisionHistoryLimit",
];

/// The `operation` fields fleetshard implements (a sync asked for by hand).
/// `sync.syncOptions` values are checked against [`APP_SYNC_OPTIONS`]. `sync.source` is
/// the source a rollback syncs (`argocd app rollback` writes the history entry's).
pub const OPERATION_FIELDS: &[&str] = &[
    "sync.revision",
    "sync.prune",
    "sync.dryRun",
    "sync.resources",
    "sync.syncOptions",
    "sync.syncStrategy.apply.force",
    "sync.syncStrategy.hook.force",
    "sync.source.repoURL",
    "sync.source.path",
    "sync.source.targetRevision",
    "sync.source.directory.recurse",
    "sync.source.directory.include",
    "sync.source.directory.exclude",
    "sync.source.directory.jsonnet.extVars",
    "sync.source.directory.jsonnet.tlas",
    "sync.source.directory.jsonnet.libs",
    // Kept for the history of self-heals (Argo CD's field; informational here).
    "sync.autoHealAttemptsCount",
    "retry.limit",
    "retry.backoff.duration",
    "retry.backoff.factor",
    "retry.backoff.maxDuration",
    "retry.refresh",
    "initiatedBy.username",
    "initiatedBy.automated",
    "info",
];

/// Sync options accepted (`syncPolicy.syncOptions`, `operation.sync.syncOptions`, and on
/// a manifest `argocd.argoproj.io/sync-options`), each with Argo CD's meaning
/// (`fleetshard-sync`); one Argo CD reads only at one level does nothing at the other,
/// as in Argo CD.
/// `ServerSideApply` either way and `ClientSideApplyMigration=true`: fleetshard always
/// applies server-side and takes over `kubectl apply`'s fields (a test per case shows the
/// user sees what `kubectl apply` would give). `Force=true` at app level is accepted and,
/// as in Argo CD, does nothing (force is per object or per request). Not here, so refused:
/// `ClientSideApplyMigration=false`.
pub const APP_SYNC_OPTIONS: &[&str] = &[
    "ServerSideApply=true",
    "ServerSideApply=false",
    "ClientSideApplyMigration=true",
    "Validate=true",
    "Validate=false",
    "CreateNamespace=true",
    "CreateNamespace=false",
    "PruneLast=true",
    "PruneLast=false",
    "ApplyOutOfSyncOnly=true",
    "ApplyOutOfSyncOnly=false",
    "Replace=true",
    "Replace=false",
    "Force=true",
    "Force=false",
    "RespectIgnoreDifferences=false",
    // A sync leaves the fields `ignoreDifferences` names as they are live.
    "RespectIgnoreDifferences=true",
    "FailOnSharedResource=true",
    "FailOnSharedResource=false",
    "SkipDryRunOnMissingResource=true",
    "SkipDryRunOnMissingResource=false",
    "PrunePropagationPolicy=foreground",
    "PrunePropagationPolicy=background",
    "PrunePropagationPolicy=orphan",
    "Prune=true",
    "Prune=false",
    "Prune=confirm",
    "Delete=true",
    "Delete=false",
    "Delete=confirm",
];

/// Annotations under Argo CD's and Helm's prefixes accepted on a manifest; any other key
/// with prefix [`CONTROLLED_PREFIXES`] is refused. `helm.sh/resource-policy` is accepted
/// with the value `keep` only. The tracking id and the installation id are what Argo CD itself
/// stamps on every object it renders.
pub const OBJECT_ANNOTATIONS: &[&str] = &[
    "argocd.argoproj.io/tracking-id",
    "argocd.argoproj.io/installation-id",
    "argocd.argoproj.io/sync-options",
    "argocd.argoproj.io/sync-wave",
    "argocd.argoproj.io/hook",
    "argocd.argoproj.io/hook-delete-policy",
    "helm.sh/resource-policy",
    "helm.sh/hook",
    "helm.sh/hook-weight",
    "helm.sh/hook-delete-policy",
    // Compare options, checked against OBJECT_COMPARE_OPTIONS.
    "argocd.argoproj.io/compare-options",
    // `"true"`: the object's health does not count towards its application's.
    "argocd.argoproj.io/ignore-healthcheck",
];

/// Compare options (`argocd.argoproj.io/compare-options`) accepted, on a manifest and on an
/// Application: `IgnoreExtraneous` (a live object's, when it is to be pruned),
/// `ServerSideDiff=true|false` and `IncludeMutationWebhook=true|false`. Argo CD reads the
/// last two on the Application only (server-side diff for the whole app, or not); on a
/// manifest it ignores them, and so does fleetshard.
pub const OBJECT_COMPARE_OPTIONS: &[&str] = &[
    "IgnoreExtraneous",
    "ServerSideDiff=true",
    "ServerSideDiff=false",
    "IncludeMutationWebhook=true",
    "IncludeMutationWebhook=false",
];

/// Annotation prefixes whose keys steer Argo CD's controller.
pub const CONTROLLED_PREFIXES: &[&str] = &["argocd.argoproj.io/", "helm.sh/"];

/// Annotations under `argocd.argoproj.io/` accepted on an Application: the refresh request
/// (`normal` or `hard`: served, then removed with the refresh's status), the path hint
/// (only an optimisation of Argo CD's), the Application's own `sync-wave` and
/// `sync-options` (as in Argo CD they order and steer the Application object inside the
/// sync of its *parent* — an app of apps deploys it as a manifest — and never change how
/// the app itself is reconciled), `skip-reconcile`, `deletion-approved`, a parent's
/// `tracking-id` and the UI's `managed-by-url`.
pub const APP_ANNOTATIONS: &[&str] = &[
    "argocd.argoproj.io/refresh",
    "argocd.argoproj.io/manifest-generate-paths",
    "argocd.argoproj.io/sync-wave",
    "argocd.argoproj.io/sync-options",
    // The app is not reconciled while it says true (Go's ParseBool).
    "argocd.argoproj.io/skip-reconcile",
    // When a deletion or prune waiting for confirmation was approved.
    "argocd.argoproj.io/deletion-approved",
    // The parent's tracking of an Application an app of apps deploys: the parent's
    // business, not this app's.
    "argocd.argoproj.io/tracking-id",
    // Which Argo CD instance's UI links to the app: informational only.
    "argocd.argoproj.io/managed-by-url",
];

/// Argo CD's compare options annotation; on an Application its values are checked against
/// [`OBJECT_COMPARE_OPTIONS`].
const APP_COMPARE_OPTIONS: &str = "argocd.argoproj.io/compare-options";

/// Everything the Application `value` sets that fleetshard does not implement.
pub fn refusals(value: &Value) -> Vec<Refusal> {
    let mut out = Vec::new();
    let spec = |field: String, message: String| Refusal {
        kind: RefusalKind::InvalidSpec,
        field,
        message,
    };
    if let Some(Value::Object(annotations)) = value.pointer("/metadata/annotations") {
        for (key, v) in annotations {
            if key == APP_COMPARE_OPTIONS {
                // On the Application itself: `ServerSideDiff` and `IncludeMutationWebhook`
                // choose how the app is compared (`AppSpec::compare_options`);
                // `IgnoreExtraneous` steers its parent's comparison of the Application, as
                // Argo CD reads it. Anything else is refused.
                let text = v.as_str().unwrap_or_default();
                out.extend(
                    text.split(',')
                        .map(str::trim)
                        .filter(|o| !o.is_empty() && !OBJECT_COMPARE_OPTIONS.contains(o))
                        .map(|o| {
                            spec(
                                format!("metadata.annotations[{key}]"),
                                format!(
                                    "compare option {o:?} is not implemented by fleetshard; \
                                     the app is not synced"
                                ),
                            )
                        }),
                );
                continue;
            }
            if key.starts_with("argocd.argoproj.io/") && !APP_ANNOTATIONS.contains(&key.as_str()) {
                out.push(spec(
                    format!("metadata.annotations[{key}]"),
                    "not implemented by fleetshard; the app is not synced".to_owned(),
                ));
            }
        }
    }
    if let Some(s) = value.get("spec") {
        let mut fields = Vec::new();
        let mut walk_spec = |node: &Value| {
            let Value::Object(map) = node else { return };
            for (k, v) in map {
                if k == "sources" {
                    continue;
                }
                walk(SPEC_FIELDS, k, v, &mut fields);
            }
        };
        walk_spec(s);
        match s.get("sources") {
            Some(Value::Array(list)) if list.len() > 1 => out.push(spec(
                "spec.sources".to_owned(),
                format!(
                    "{} sources: multi-source applications are rendered only by Argo CD's \
                     repo-server (--repo-server), not on this replica (syncing one source \
                     would prune the others' objects)",
                    list.len()
                ),
            )),
            Some(Value::Array(list)) => {
                for (i, one) in list.iter().enumerate() {
                    let mut inner = Vec::new();
                    walk(SPEC_FIELDS, "source", one, &mut inner);
                    fields.extend(
                        inner
                            .into_iter()
                            .map(|f| f.replacen("source", &format!("sources[{i}]"), 1)),
                    );
                }
            }
            _ => {}
        }
        out.extend(fields.into_iter().map(|f| {
            spec(
                format!("spec.{f}"),
                "not implemented by fleetshard; the app is not synced".to_owned(),
            )
        }));
        if let Some(opts) = s.pointer("/syncPolicy/syncOptions") {
            out.extend(
                unknown_options(opts, APP_SYNC_OPTIONS)
                    .map(|o| spec("spec.syncPolicy.syncOptions".to_owned(), o)),
            );
        }
    }
    if let Some(op) = value.get("operation") {
        let mut fields = Vec::new();
        if let Value::Object(map) = op {
            for (k, v) in map {
                walk(OPERATION_FIELDS, k, v, &mut fields);
            }
        }
        let sync = |field: String, message: String| Refusal {
            kind: RefusalKind::Sync,
            field,
            message,
        };
        out.extend(fields.into_iter().map(|f| {
            sync(
                format!("operation.{f}"),
                "not implemented by fleetshard; the sync request is not run".to_owned(),
            )
        }));
        if let Some(opts) = op.pointer("/sync/syncOptions") {
            out.extend(
                unknown_options(opts, APP_SYNC_OPTIONS)
                    .map(|o| sync("operation.sync.syncOptions".to_owned(), o)),
            );
        }
    }
    out
}

/// The refusal messages of sync options (a list of `Name=value` strings) not in `allowed`.
pub fn unknown_options<'a>(
    opts: &'a Value,
    allowed: &'a [&'a str],
) -> impl Iterator<Item = String> + 'a {
    let items: Vec<&Value> = match opts {
        Value::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    items.into_iter().filter_map(move |o| {
        let text = o
            .as_str()
            .map_or_else(|| o.to_string(), |s| s.trim().to_owned());
        (!allowed.contains(&text.as_str()) && !is_zero(o)).then(|| {
            format!("sync option {text:?} is not implemented by fleetshard; nothing is synced")
        })
    })
}

/// Walks `value` at `path` against `allowed`, adding each field set but not implemented.
pub(crate) fn walk(allowed: &[&str], path: &str, value: &Value, out: &mut Vec<String>) {
    if allowed.contains(&path) || is_zero(value) {
        return;
    }
    let prefix = format!("{path}.");
    let inner = allowed.iter().any(|a| a.starts_with(&prefix));
    match value {
        Value::Object(map) if inner => {
            for (k, v) in map {
                walk(allowed, &format!("{path}.{k}"), v, out);
            }
        }
        _ => out.push(path.to_owned()),
    }
}

/// A Go zero value: what Argo CD's types cannot tell from an absent field.
pub fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.values().all(is_zero),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(app: &Value) -> Vec<String> {
        refusals(app).into_iter().map(|r| r.field).collect()
    }

    #[test]
    fn implemented_and_empty_fields_pass_and_everything_else_is_named() {
        let ok = json!({
            "metadata": {"annotations": {"argocd.argoproj.io/sync-wave": "-1",
                                         "argocd.argoproj.io/sync-options": "Prune=false",
                                         "argocd.argoproj.io/skip-reconcile": "false",
                                         "argocd.argoproj.io/tracking-id": "parent:argoproj.io/Application:argocd/child",
                                         "argocd.argoproj.io/managed-by-url": "https://argocd.example",
                                         "argocd.argoproj.io/compare-options": "IgnoreExtraneous, ServerSideDiff=true,IncludeMutationWebhook=true"}},
            "spec": {
            "project": "default",
            "revisionHistoryLimit": 3,
            "source": {"repoURL": "r", "path": "p", "targetRevision": "HEAD",
                       "directory": {"recurse": true, "jsonnet": {"libs": ["vendor"]}},
                       "kustomize": {"images": ["nginx:1.27"], "namePrefix": "p-"}},
            "syncPolicy": {"automated": {"prune": true, "allowEmpty": true},
                           "syncOptions": ["ServerSideApply=true", "CreateNamespace=true",
                                           "PruneLast=true", "PrunePropagationPolicy=background"],
                           "retry": {"limit": 5, "backoff": {"duration": "5s", "factor": 2,
                                                            "maxDuration": "3m"}},
                           "managedNamespaceMetadata": {"labels": {"team": "a"}}},
            },
            "operation": {"sync": {"syncStrategy": {"apply": {"force": true}},
                                   "source": {"repoURL": "r", "path": "p", "targetRevision": "abc"},
                                   "syncOptions": ["Replace=true"]},
                          "retry": {"limit": 2}},
        });
        assert_eq!(fields(&ok), Vec::<String>::new());
        let bad = json!({
            "metadata": {"annotations": {"argocd.argoproj.io/compare-options": "x",
                                         "argocd.argoproj.io/refresh": "hard"}},
            "spec": {
                "source": {"repoURL": "r",
                           "helm": {"valueFiles": ["v.yaml"], "fileParameters": [{"name": "a"}]},
                           "kustomize": {"version": "v5.4.0"}, "plugin": {"name": "cmp"},
                           "directory": {"jsonnet": {"libs": ["vendor"], "tomorrow": 1}}},
                "ignoreDifferences": [{"kind": "Deployment"}],
                "syncPolicy": {"retry": {"limit": 5, "soon": 1},
                               "syncOptions": ["ClientSideApplyMigration=false"]},
                "someFieldOfTomorrow": {"x": 1},
            },
            "operation": {"sync": {"manifests": ["a"], "syncStrategy": {"apply": {"force": true, "x": 1}}}},
        });
        let mut got = fields(&bad);
        got.sort();
        assert_eq!(
            got,
            [
                "metadata.annotations[argocd.argoproj.io/compare-options]",
                "operation.sync.manifests",
                "operation.sync.syncStrategy.apply.x",
                "spec.someFieldOfTomorrow",
                "spec.source.directory.jsonnet.tomorrow",
                "spec.source.helm.fileParameters",
                "spec.source.kustomize.version",
                "spec.source.plugin",
                "spec.syncPolicy.retry.soon",
                "spec.syncPolicy.syncOptions",
            ]
        );
        let kinds: Vec<RefusalKind> = refusals(&bad)
            .into_iter()
            .filter(|r| r.field.starts_with("operation"))
            .map(|r| r.kind)
            .collect();
        assert_eq!(kinds, [RefusalKind::Sync, RefusalKind::Sync]);
    }

    #[test]
    fn more_than_one_source_is_refused_and_one_is_read_as_source() {
        let two = json!({"spec": {"sources": [{"repoURL": "a"}, {"repoURL": "b"}]}});
        assert_eq!(fields(&two), ["spec.sources"]);
        let one = json!({"spec": {"sources": [{"repoURL": "a", "chart": "c"}]}});
        assert_eq!(fields(&one), ["spec.sources[0].chart"]);
    }
}
