//! Argo CD Applications, read as `kubectl get applications -A` exports them.
//!
//! Only what sharding and GitOps need is read. For sharding (the [`App`]):
//! `metadata.{namespace,name}`, `spec.project` and `spec.destination.{server,name,namespace}`;
//! for GitOps (the [`AppSpec`]): `spec.source.{repoURL,targetRevision,path,directory}`
//! (`targetRevision` defaults to `HEAD`), `spec.syncPolicy.automated` and `operation`
//! (a sync asked for by hand: `sync.{revision,prune,dryRun,resources}`, `initiatedBy`). The
//! destination server is kept exactly as written: Argo CD's load counting compares it raw
//! (W5 in `docs/glossary.md`), so normalising here would hide the mismatch it produces.
//!
//! What fleetshard does not implement (a few source kinds and sync options, …) is listed in [`AppSpec::refusals`] by the allow-list of
//! [`crate::implemented`]; the reconciler shows each as a condition and syncs nothing. `spec.syncPolicy.automated` present means automated sync (`{}` is
//! automated without prune or self-heal) unless `automated.enabled` is `false`, which Argo
//! CD 3.x honours as "configured but off".

use fleetshard_core::{App, Destination};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::app_spec::{
    AppDefinition, AppSource, AppSpec, AutoSync, DirectoryOptions, InitiatedBy, Lifecycle,
    ManagedNamespaceMetadata, RefreshRequest, Refusal, RefusalKind, RetryPolicy, SyncRequest,
    SyncResource, SyncStrategy,
};
use crate::document::{meta_names, typed};
use crate::error::{Ctx, LoadError, object_name};
use crate::secret::ObjectMeta;

mod write;

pub(crate) use write::to_application;

/// `targetRevision` when the source does not say.
/// The revision an Application without `targetRevision` follows (Argo CD reads none as `HEAD`).
pub const DEFAULT_REVISION: &str = "HEAD";

/// `operation`: what a user asked the controller to do now (only `sync` exists).
#[derive(Debug, Default, Deserialize)]
struct Operation {
    #[serde(default)]
    sync: Option<OperationSync>,
    #[serde(default, rename = "initiatedBy")]
    initiated_by: Option<OperationInitiator>,
    #[serde(default)]
    retry: Option<Retry>,
}

#[derive(Debug, Default, Deserialize)]
struct OperationSync {
    #[serde(default)]
    revision: Option<String>,
    #[serde(default)]
    source: Option<Source>,
    #[serde(default, rename = "syncOptions")]
    sync_options: Option<Vec<String>>,
    #[serde(default, rename = "syncStrategy")]
    sync_strategy: Option<Strategy>,
    #[serde(default)]
    prune: Option<bool>,
    #[serde(default, rename = "dryRun")]
    dry_run: Option<bool>,
    #[serde(default)]
    resources: Option<Vec<OperationResource>>,
}

/// `syncStrategy`: `{apply: {force}}` or `{hook: {force}}`.
#[derive(Debug, Default, Deserialize)]
struct Strategy {
    #[serde(default)]
    apply: Option<StrategyForce>,
    #[serde(default)]
    hook: Option<StrategyForce>,
}

#[derive(Debug, Default, Deserialize)]
struct StrategyForce {
    #[serde(default)]
    force: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
struct OperationResource {
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct OperationInitiator {
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    automated: Option<bool>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
struct Spec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<Source>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sources: Option<Vec<Source>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    destination: Option<Dest>,
    #[serde(
        default,
        rename = "syncPolicy",
        skip_serializing_if = "Option::is_none"
    )]
    sync_policy: Option<SyncPolicy>,
    #[serde(
        default,
        rename = "ignoreDifferences",
        skip_serializing_if = "Option::is_none"
    )]
    ignore_differences: Option<Vec<crate::customizations::IgnoreDifference>>,
    #[serde(
        default,
        rename = "revisionHistoryLimit",
        skip_serializing_if = "Option::is_none"
    )]
    revision_history_limit: Option<i64>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
struct Source {
    #[serde(default, rename = "repoURL", skip_serializing_if = "Option::is_none")]
    repo_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(
        default,
        rename = "targetRevision",
        skip_serializing_if = "Option::is_none"
    )]
    target_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    directory: Option<Directory>,
    /// Every other field (`kustomize`, `helm`, …): kept by the reader in
    /// [`AppSource::raw`], written back as read.
    #[serde(flatten, default)]
    rest: serde_json::Map<String, Value>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
struct Directory {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    recurse: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    include: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exclude: Option<String>,
    /// Every other field (`jsonnet`): kept in [`AppSource::raw`], written back as read.
    #[serde(flatten, default)]
    rest: serde_json::Map<String, Value>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
struct Dest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
struct SyncPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    automated: Option<Automated>,
    #[serde(
        default,
        rename = "syncOptions",
        skip_serializing_if = "Option::is_none"
    )]
    sync_options: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry: Option<Retry>,
    #[serde(
        default,
        rename = "managedNamespaceMetadata",
        skip_serializing_if = "Option::is_none"
    )]
    managed_namespace_metadata: Option<NamespaceMetadata>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
struct Retry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    limit: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    backoff: Option<Backoff>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refresh: Option<bool>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
struct Backoff {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    duration: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    factor: Option<i64>,
    #[serde(
        default,
        rename = "maxDuration",
        skip_serializing_if = "Option::is_none"
    )]
    max_duration: Option<String>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
struct NamespaceMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    labels: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    annotations: Option<std::collections::BTreeMap<String, String>>,
}

impl Retry {
    fn policy(self) -> RetryPolicy {
        let backoff = self.backoff.unwrap_or_default();
        RetryPolicy {
            limit: self.limit.unwrap_or(0),
            duration: backoff.duration.filter(|d| !d.is_empty()),
            factor: backoff.factor,
            max_duration: backoff.max_duration.filter(|d| !d.is_empty()),
            refresh: self.refresh.unwrap_or(false),
        }
    }

    fn of(p: &RetryPolicy) -> Self {
        let backoff = Backoff {
            duration: p.duration.clone(),
            factor: p.factor,
            max_duration: p.max_duration.clone(),
        };
        Retry {
            limit: Some(p.limit),
            backoff: (backoff.duration.is_some()
                || backoff.factor.is_some()
                || backoff.max_duration.is_some())
            .then_some(backoff),
            refresh: Some(p.refresh).filter(|r| *r),
        }
    }
}

#[derive(Debug, Default, Deserialize, Serialize)]
struct Automated {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prune: Option<bool>,
    #[serde(default, rename = "selfHeal", skip_serializing_if = "Option::is_none")]
    self_heal: Option<bool>,
    #[serde(
        default,
        rename = "allowEmpty",
        skip_serializing_if = "Option::is_none"
    )]
    allow_empty: Option<bool>,
}

/// The fields that place an Application in the fleet: read strictly, since an app that
/// cannot be placed cannot be shown anywhere either.
#[derive(Debug, Default, Deserialize)]
struct PlacementObject {
    #[serde(default)]
    metadata: Option<ObjectMeta>,
    #[serde(default)]
    spec: Option<PlacementSpec>,
}

#[derive(Debug, Default, Deserialize)]
struct PlacementSpec {
    #[serde(default)]
    project: Option<String>,
    #[serde(default)]
    destination: Option<Dest>,
}

/// `part` of the Application read as `T`; a part of the wrong shape is a refusal of `kind`
/// naming the field (the app is shown with a condition and nothing of it is synced), and
/// reads as the default.
fn lenient<T: serde::de::DeserializeOwned + Default>(
    value: &Value,
    pointer: &str,
    kind: RefusalKind,
    refusals: &mut Vec<Refusal>,
) -> T {
    let Some(part) = value.pointer(pointer) else {
        return T::default();
    };
    match T::deserialize(part) {
        Ok(v) => v,
        Err(_) => {
            let base = pointer.trim_start_matches('/').replace('/', ".");
            let (field, message) = match serde_path_to_error::deserialize::<_, T>(part) {
                Ok(_) => (base, "unreadable".to_owned()),
                Err(e) => {
                    let mut field = base;
                    for segment in e.path().iter() {
                        use serde_path_to_error::Segment;
                        match segment {
                            Segment::Seq { index } => field.push_str(&format!("[{index}]")),
                            Segment::Map { key } | Segment::Enum { variant: key } => {
                                field.push('.');
                                field.push_str(key);
                            }
                            Segment::Unknown => {}
                        }
                    }
                    (field, e.inner().to_string())
                }
            };
            refusals.push(Refusal {
                kind,
                field,
                message: format!("malformed ({message}); nothing of the app is synced"),
            });
            T::default()
        }
    }
}

/// Reads one Application. Only what places it (`metadata.name`, `metadata.namespace`,
/// `spec.project`, `spec.destination`) must be well-formed: a malformed GitOps part (a
/// source, the sync policy, the operation) is a [`Refusal`] naming the field, so the app
/// is loaded and shown with its own condition instead of failing the file it is in.
pub(crate) fn to_app(
    ctx: &mut Ctx,
    value: &Value,
    locator: &str,
) -> Result<AppDefinition, LoadError> {
    let (ns, name) = meta_names(value);
    let object = object_name("Application", ns, name, locator);
    let obj: PlacementObject = typed(ctx, value, &object)?;
    let meta = obj.metadata.unwrap_or_default();
    let name = meta.name.filter(|n| !n.is_empty()).ok_or_else(|| {
        ctx.field_error(
            &object,
            "metadata.name",
            "missing; an Application needs a name".to_owned(),
        )
    })?;
    let placement = obj.spec.unwrap_or_default();
    let mut refusals = crate::implemented::refusals(value);
    let malformed = &mut Vec::new();
    let sources: Option<Vec<Source>> =
        lenient(value, "/spec/sources", RefusalKind::InvalidSpec, malformed);
    let single: Option<Source> =
        lenient(value, "/spec/source", RefusalKind::InvalidSpec, malformed);
    let sync_policy: Option<SyncPolicy> = lenient(
        value,
        "/spec/syncPolicy",
        RefusalKind::InvalidSpec,
        malformed,
    );
    let operation: Option<Operation> = lenient(value, "/operation", RefusalKind::Sync, malformed);

    // Argo CD uses `sources` whenever it is non-empty, ignoring `source`. With more than
    // one, every source is kept (only a repo-server renders them; `refusals` refuses them
    // otherwise) and the first is the one shown.
    let raw_sources: Vec<Value> = value
        .pointer("/spec/sources")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let (source, sources) = match sources {
        Some(sources) if !sources.is_empty() => {
            let many = sources.len() > 1;
            if many {
                ctx.warn(
                    &object,
                    Some("spec.sources"),
                    format!(
                        "{} sources: a multi-source application is rendered only by Argo CD's \
                         repo-server (--repo-server); refused (InvalidSpecError) otherwise",
                        sources.len()
                    ),
                );
            }
            let all: Vec<AppSource> = sources
                .into_iter()
                .enumerate()
                .map(|(i, s)| app_source(s, raw_sources.get(i).cloned().unwrap_or_default()))
                .collect();
            let first = all[0].clone();
            (first, if many { all } else { Vec::new() })
        }
        _ => {
            let raw = value.pointer("/spec/source").cloned().unwrap_or_default();
            (app_source(single.unwrap_or_default(), raw), Vec::new())
        }
    };
    // A malformed part's own field paths are not refused twice.
    refusals.retain(|r| !malformed.iter().any(|m| r.field.starts_with(&m.field)));
    refusals.append(malformed);

    let revision_history_limit: Option<i64> = lenient(
        value,
        "/spec/revisionHistoryLimit",
        RefusalKind::InvalidSpec,
        &mut refusals,
    );
    // What the comparison leaves out; malformed, a refusal naming the entry's field.
    let ignore_differences: Option<Vec<crate::customizations::IgnoreDifference>> = lenient(
        value,
        "/spec/ignoreDifferences",
        RefusalKind::InvalidSpec,
        &mut refusals,
    );
    let dest = placement.destination.unwrap_or_default();
    let sync_policy = sync_policy.unwrap_or_default();
    let sync_options = sync_policy.sync_options.unwrap_or_default();
    let policy = crate::app_spec::SyncPolicy {
        sync_options,
        managed_namespace_metadata: sync_policy.managed_namespace_metadata.map(|m| {
            ManagedNamespaceMetadata {
                labels: m.labels.unwrap_or_default(),
                annotations: m.annotations.unwrap_or_default(),
            }
        }),
        retry: sync_policy.retry.map(Retry::policy),
    };
    let auto_sync = sync_policy
        .automated
        .filter(|a| a.enabled != Some(false))
        .map(|a| AutoSync {
            prune: a.prune.unwrap_or(false),
            self_heal: a.self_heal.unwrap_or(false),
            allow_empty: a.allow_empty.unwrap_or(false),
        });

    let (op_sync, initiator, op_retry) = operation
        .map(|o| (o.sync, o.initiated_by, o.retry))
        .unwrap_or_default();
    let initiator = initiator.unwrap_or_default();
    let raw_op_source = value
        .pointer("/operation/sync/source")
        .cloned()
        .unwrap_or_default();
    let sync_request = op_sync.map(|s| SyncRequest {
        revision: s.revision.filter(|r| !r.is_empty()),
        source: s.source.map(|src| app_source(src, raw_op_source)),
        sync_options: s.sync_options.unwrap_or_default(),
        strategy: s
            .sync_strategy
            .map(|st| {
                let force =
                    |f: &Option<StrategyForce>| f.as_ref().and_then(|f| f.force).unwrap_or(false);
                SyncStrategy {
                    apply: st.apply.is_some(),
                    force: force(&st.apply) || force(&st.hook),
                }
            })
            .unwrap_or_default(),
        retry: op_retry.map(Retry::policy),
        prune: s.prune.unwrap_or(false),
        dry_run: s.dry_run.unwrap_or(false),
        resources: s.resources.filter(|r| !r.is_empty()).map(|list| {
            list.into_iter()
                .map(|r| SyncResource {
                    group: r.group.unwrap_or_default(),
                    kind: r.kind.unwrap_or_default(),
                    namespace: r.namespace.unwrap_or_default(),
                    name: r.name.unwrap_or_default(),
                })
                .collect()
        }),
        initiated_by: InitiatedBy {
            username: initiator.username.unwrap_or_default(),
            automated: initiator.automated.unwrap_or(false),
        },
    });

    let app = App {
        namespace: meta.namespace.unwrap_or_default(),
        name,
        project: placement.project.unwrap_or_default(),
        destination: Destination {
            server: dest.server,
            name: dest.name,
            namespace: dest.namespace,
        },
    };
    let lifecycle = Lifecycle {
        deleting: value
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null()),
        deleted_at: value
            .pointer("/metadata/deletionTimestamp")
            .and_then(Value::as_str)
            .map(str::to_owned),
        finalizers: value
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .map(|f| {
                f.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        skip_reconcile: annotation(value, "argocd.argoproj.io/skip-reconcile")
            .is_some_and(|v| parse_bool(v) == Some(true)),
        terminating: value
            .pointer("/status/operationState/phase")
            .and_then(Value::as_str)
            == Some("Terminating"),
        deletion_approved: annotation(value, "argocd.argoproj.io/deletion-approved")
            .map(str::to_owned),
        revision_history_limit,
    };
    let spec = AppSpec {
        source,
        sources,
        auto_sync,
        sync_request,
        refusals,
        refresh: refresh_request(value),
        manifest_generate_paths: annotation(value, "argocd.argoproj.io/manifest-generate-paths")
            .map(str::to_owned),
        links: crate::app_spec::app_links(value),
        labels: crate::app_spec::app_labels(value),
        ignore_differences: ignore_differences.unwrap_or_default(),
        policy,
        lifecycle,
        compare_options: annotation(value, "argocd.argoproj.io/compare-options")
            .map(crate::AppCompareOptions::parse)
            .unwrap_or_default(),
    };
    Ok((app, spec))
}

impl AppSource {
    /// A source read from its JSON (an operation's or a history entry's `source`), or
    /// `None` when it is not one.
    pub fn from_raw(raw: &Value) -> Option<AppSource> {
        let source: Source = serde_json::from_value(raw.clone()).ok()?;
        Some(app_source(source, raw.clone()))
    }
}

/// One source as read: its typed fields, and `raw`, the object as written.
fn app_source(source: Source, raw: Value) -> AppSource {
    AppSource {
        repo_url: source.repo_url.unwrap_or_default(),
        target_revision: source
            .target_revision
            .unwrap_or_else(|| DEFAULT_REVISION.to_owned()),
        path: source.path.unwrap_or_default(),
        directory: source
            .directory
            .map(|d| DirectoryOptions {
                recurse: d.recurse.unwrap_or(false),
                include: d.include.unwrap_or_default(),
                exclude: d.exclude.unwrap_or_default(),
            })
            .unwrap_or_default(),
        raw,
    }
}

/// The Application's annotation `key`.
fn annotation<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

use fleetshard_util::boolean::parse_go_bool as parse_bool;

/// The refresh asked for by the annotation `argocd.argoproj.io/refresh` (`hard`, or any
/// other value: `normal`, as Argo CD reads it).
fn refresh_request(value: &Value) -> Option<RefreshRequest> {
    let asked = value.pointer("/metadata/annotations/argocd.argoproj.io~1refresh")?;
    Some(match asked.as_str() {
        Some("hard") => RefreshRequest::Hard,
        _ => RefreshRequest::Normal,
    })
}
