//! fleetshard's own fleet file: a hand-writable description of clusters, applications and
//! the shards (replicas) that will manage them. The format is documented in the crate docs
//! and `README.md`.
//!
//! Every mapping denies unknown fields, so a typo (`weigth: 40`) is an error that names it
//! instead of a setting that silently does nothing, and a key given twice is an error.

use std::collections::BTreeMap;

use fleetshard_core::model::{REGION_LABEL, ZONE_LABEL, normalize_server};
use fleetshard_core::{App, Cluster, Destination, Fleet, ShardSpec};
use serde::{Deserialize, Serialize};

use crate::FleetFile;
use crate::app_spec::{AppSource, AppSpec, AutoSync, spec_key};
use crate::application::DEFAULT_REVISION;
use crate::document::{yaml_message, yaml_options};
use crate::error::{Ctx, LoadError};

/// Namespace of applications that do not name one, and of placeholder applications.
pub const DEFAULT_APP_NAMESPACE: &str = "argocd";
/// Project of applications that do not name one, and of placeholder applications.
pub const DEFAULT_PROJECT: &str = "default";
/// Most placeholder applications (`apps: N` on clusters) one file may ask for in total: far
/// above real fleets, low enough that a typo cannot exhaust memory.
pub const MAX_PLACEHOLDER_APPS: u64 = 5_000_000;

/// The whole file.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NativeFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    clusters: Option<Vec<NativeCluster>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    apps: Option<Vec<NativeApp>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shards: Option<Vec<NativeShard>>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NativeCluster {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    region: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shard: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    weight: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    apps: Option<u64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    skip_reconcile: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NativeApp {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    project: Option<String>,
    #[serde(default, rename = "repoURL", skip_serializing_if = "Option::is_none")]
    repo_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    destination: Option<NativeDestination>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    auto_sync: Option<NativeAutoSync>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NativeDestination {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NativeAutoSync {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    prune: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    self_heal: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NativeShard {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    zone: Option<String>,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    capacity: u32,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// Parses a fleet file (the caller has checked that it is one) into the model.
pub(crate) fn parse(text: &str, json: bool, ctx: &mut Ctx) -> Result<FleetFile, LoadError> {
    const BASE: &str = "fleet file";
    let file: NativeFile = if json {
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut de)
            .map_err(|e| ctx.path_error(BASE, true, e.path(), e.inner().to_string()))?
    } else {
        let mut path = None;
        serde_saphyr::with_deserializer_from_str_with_options(
            text,
            yaml_options(text.len()),
            |de| {
                serde_path_to_error::deserialize(de).map_err(|e| {
                    path = Some(e.path().clone());
                    e.into_inner()
                })
            },
        )
        .map_err(|e| match &path {
            Some(path) => ctx.path_error(BASE, true, path, e.to_string()),
            None => LoadError::Syntax {
                file: ctx.file.clone(),
                message: yaml_message(&e),
            },
        })?
    };
    to_model(file, ctx)
}

fn to_model(file: NativeFile, ctx: &mut Ctx) -> Result<FleetFile, LoadError> {
    let mut clusters = Vec::new();
    let mut apps = Vec::new();
    let mut specs = BTreeMap::new();
    let mut placeholders = 0u64;
    for (i, nc) in file.clusters.unwrap_or_default().into_iter().enumerate() {
        let object = format!("clusters[{i}]");
        let server = normalize_server(&nc.server).to_owned();
        if server.is_empty() {
            return Err(ctx.field_error(
                &object,
                "server",
                format!("empty server URL ({:?})", nc.server),
            ));
        }
        let mut labels = nc.labels;
        for (field, label, value) in [
            ("zone", ZONE_LABEL, nc.zone),
            ("region", REGION_LABEL, nc.region),
        ] {
            let Some(value) = value else { continue };
            match labels.get(label) {
                Some(existing) if *existing != value => {
                    return Err(ctx.field_error(
                        &object,
                        field,
                        format!("{value:?} contradicts labels[{label}] = {existing:?}"),
                    ));
                }
                _ => {
                    labels.insert(label.to_owned(), value);
                }
            }
        }
        let cluster = Cluster {
            id: nc.id.unwrap_or_else(|| nc.name.clone()),
            name: nc.name,
            server,
            shard: nc.shard,
            labels,
            skip_reconcile: nc.skip_reconcile,
            weight: nc.weight,
        };
        let count = nc.apps.unwrap_or(0);
        placeholders = placeholders.saturating_add(count);
        if placeholders > MAX_PLACEHOLDER_APPS {
            return Err(ctx.field_error(
                &object,
                "apps",
                format!("{count} placeholder apps bring the file over its limit of {MAX_PLACEHOLDER_APPS}"),
            ));
        }
        for k in 1..=count {
            let app = placeholder(&cluster, k);
            specs.entry(spec_key(&app)).or_insert_with(placeholder_spec);
            apps.push(app);
        }
        clusters.push(cluster);
    }
    for (i, na) in file.apps.unwrap_or_default().into_iter().enumerate() {
        if na.name.is_empty() {
            return Err(ctx.field_error(&format!("apps[{i}]"), "name", "empty".to_owned()));
        }
        let dest = na.destination.unwrap_or_default();
        let app = App {
            namespace: na
                .namespace
                .unwrap_or_else(|| DEFAULT_APP_NAMESPACE.to_owned()),
            name: na.name,
            project: na.project.unwrap_or_else(|| DEFAULT_PROJECT.to_owned()),
            destination: Destination {
                server: dest.server,
                name: dest.name,
                namespace: dest.namespace,
            },
        };
        let spec = AppSpec {
            source: AppSource {
                repo_url: na.repo_url.unwrap_or_default(),
                target_revision: na
                    .target_revision
                    .unwrap_or_else(|| DEFAULT_REVISION.to_owned()),
                path: na.path.unwrap_or_default(),
                directory: Default::default(),
                raw: Default::default(),
            }
            .with_typed_raw(),
            auto_sync: na.auto_sync.map(|a| AutoSync {
                prune: a.prune,
                self_heal: a.self_heal,
                allow_empty: false,
            }),
            sync_request: None,
            refusals: Vec::new(),
            refresh: None,
            sources: Vec::new(),
            policy: Default::default(),
            lifecycle: Default::default(),
        };
        // The first definition of a key is the one that counts (as in the fleet's loads).
        specs.entry(spec_key(&app)).or_insert(spec);
        apps.push(app);
    }
    let mut shards = Vec::new();
    for (i, ns) in file.shards.unwrap_or_default().into_iter().enumerate() {
        if ns.capacity == 0 {
            return Err(ctx.field_error(
                &format!("shards[{i}]"),
                "capacity",
                "must be at least 1".to_owned(),
            ));
        }
        shards.push(ShardSpec {
            zone: ns.zone,
            capacity: ns.capacity,
        });
    }
    Ok(FleetFile {
        fleet: Fleet { clusters, apps },
        specs,
        shards,
        // A fleet file names clusters for placement; it carries no credentials.
        credentials: Default::default(),
        projects: Default::default(),
        repositories: Default::default(),
        format: crate::InputFormat::Native,
    })
}

/// The `k`-th (from 1) placeholder application of `cluster`: `argocd/<cluster>-<k>` in
/// project `default`, deploying to the cluster's server.
pub(crate) fn placeholder(cluster: &Cluster, k: u64) -> App {
    let base = if cluster.name.is_empty() {
        &cluster.id
    } else {
        &cluster.name
    };
    App {
        namespace: DEFAULT_APP_NAMESPACE.to_owned(),
        name: format!("{base}-{k}"),
        project: DEFAULT_PROJECT.to_owned(),
        destination: Destination {
            server: Some(cluster.server.clone()),
            ..Destination::default()
        },
    }
}

/// The GitOps spec of every placeholder application: no repository, at `HEAD`, no sync
/// policy.
pub(crate) fn placeholder_spec() -> AppSpec {
    AppSpec {
        source: AppSource {
            target_revision: DEFAULT_REVISION.to_owned(),
            ..AppSource::default()
        },
        ..AppSpec::default()
    }
}

/// The fleet file that reads back as `file`.
///
/// Applications are written as placeholder counts where the application list begins with
/// exactly the placeholders the reader would generate (cluster by cluster, in order, each
/// with the placeholder spec or none), which keeps generated fleets compact; the rest are
/// written in full, each with its spec from `file.specs` (none: no source, no sync policy).
pub(crate) fn from_model(file: &FleetFile) -> NativeFile {
    let apps = &file.fleet.apps;
    let spec_of = |a: &App| file.specs.get(&spec_key(a));
    let placeholder_spec = placeholder_spec();
    let is_placeholder = |a: &App, c: &Cluster, k: u64| {
        *a == placeholder(c, k) && spec_of(a).is_none_or(|s| *s == placeholder_spec)
    };
    let mut next = 0;
    let mut clusters = Vec::with_capacity(file.fleet.clusters.len());
    for c in &file.fleet.clusters {
        let mut count = 0u64;
        while next < apps.len() && is_placeholder(&apps[next], c, count + 1) {
            count += 1;
            next += 1;
        }
        let mut labels = c.labels.clone();
        clusters.push(NativeCluster {
            name: c.name.clone(),
            id: Some(c.id.clone()).filter(|id| *id != c.name),
            server: c.server.clone(),
            zone: labels.remove(ZONE_LABEL),
            region: labels.remove(REGION_LABEL),
            shard: c.shard,
            weight: c.weight,
            apps: Some(count).filter(|n| *n > 0),
            labels,
            skip_reconcile: c.skip_reconcile,
        });
    }
    let unless = |value: &str, default: &str| Some(value.to_owned()).filter(|v| v != default);
    let native_apps = apps[next..]
        .iter()
        .map(|a| {
            let spec = spec_of(a);
            let source = spec.map(|s| &s.source);
            NativeApp {
                name: a.name.clone(),
                namespace: unless(&a.namespace, DEFAULT_APP_NAMESPACE),
                project: unless(&a.project, DEFAULT_PROJECT),
                repo_url: source.and_then(|s| unless(&s.repo_url, "")),
                path: source.and_then(|s| unless(&s.path, "")),
                target_revision: source.and_then(|s| unless(&s.target_revision, DEFAULT_REVISION)),
                destination: Some(NativeDestination {
                    server: a.destination.server.clone(),
                    name: a.destination.name.clone(),
                    namespace: a.destination.namespace.clone(),
                })
                .filter(|_| a.destination != Destination::default()),
                auto_sync: spec.and_then(|s| s.auto_sync).map(|s| NativeAutoSync {
                    prune: s.prune,
                    self_heal: s.self_heal,
                }),
            }
        })
        .collect::<Vec<_>>();
    let shards = file
        .shards
        .iter()
        .map(|s| NativeShard {
            zone: s.zone.clone(),
            capacity: s.capacity,
        })
        .collect::<Vec<_>>();
    NativeFile {
        clusters: (!clusters.is_empty()).then_some(clusters),
        apps: (!native_apps.is_empty()).then_some(native_apps),
        shards: (!shards.is_empty()).then_some(shards),
    }
}
