//! Argo CD cluster Secrets, read as Argo CD reads them and written as `kubectl` exports them.
//!
//! Field mapping (argo-compat §1 in `docs/glossary.md`):
//!
//! | [`Cluster`] field | Secret field |
//! |---|---|
//! | `id` | `metadata.uid`; see below when it is missing |
//! | `name` | `data.name` (empty when missing) |
//! | `server` | `data.server` with trailing `/` removed; missing or empty is an error |
//! | `shard` | `data.shard` parsed like Go's `strconv.Atoi`; unparsable is a warning and no pin |
//! | `labels` | `metadata.labels` without `argocd.argoproj.io/secret-type` (as Argo CD) |
//! | `skip_reconcile` | annotation `argocd.argoproj.io/skip-reconcile`, Go `strconv.ParseBool` |
//! | `weight` | annotation `fleetshard.io/weight`, a non-negative integer; bad values are errors |
//!
//! `namespaces` and `clusterResources` (a namespace-scoped cluster, [`ClusterScope`]) go
//! with the credentials; `clusterResources` is true only when it is exactly `"true"`, as
//! Argo CD compares it (another value is false, with a warning).
//!
//! Each value is taken from `stringData` when the key is there, else from `data`
//! (base64), as the API server merges them. Only the keys above and `config` (how to reach
//! the cluster, [`ClusterCredentials`]) are decoded; a corrupt value in a key fleetshard
//! does not read is not reported.
//!
//! **Missing `metadata.uid`.** Exports from a live cluster always carry one; hand-written
//! Secrets often do not. For `https://kubernetes.default.svc` the id is `""`, as Argo CD's
//! built-in in-cluster entry has. Otherwise the loader warns and uses `metadata.name`
//! (or, without a name, the server) as the id: stable and unique per namespace, but not
//! the uid Argo CD would hash, so `legacy` and `round-robin` results can differ from the
//! live controller's.
//!
//! Secrets without the label `argocd.argoproj.io/secret-type: cluster` are skipped with a
//! warning, except repository Secrets and credential templates, which `repository.rs`
//! reads.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use fleetshard_core::Cluster;
use fleetshard_core::model::normalize_server;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ClusterScope;
use crate::credentials::ClusterCredentials;
use crate::document::{meta_names, typed};
use crate::error::{Ctx, LoadError, object_name};

/// Label that marks a Secret as an Argo CD cluster (value `cluster`).
pub const SECRET_TYPE_LABEL: &str = "argocd.argoproj.io/secret-type";
/// Annotation that takes a cluster out of every shard (Go `strconv.ParseBool` true).
pub const SKIP_RECONCILE_ANNOTATION: &str = "argocd.argoproj.io/skip-reconcile";
/// Annotation carrying fleetshard's load weight for a cluster (a non-negative integer).
pub const WEIGHT_ANNOTATION: &str = "fleetshard.io/weight";
/// The in-cluster API server, whose built-in Argo CD entry has id `""`.
pub use fleetshard_core::argo::IN_CLUSTER_SERVER;

/// The parts of `metadata` that fleetshard reads and writes.
#[derive(Debug, Default, Deserialize, Serialize)]
pub(crate) struct ObjectMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) annotations: Option<BTreeMap<String, String>>,
}

/// A Secret as far as fleetshard cares. Other fields (`type`, `status`, …) are ignored.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct SecretObject {
    #[serde(default)]
    pub(crate) metadata: Option<ObjectMeta>,
    #[serde(default)]
    pub(crate) data: Option<BTreeMap<String, String>>,
    #[serde(default, rename = "stringData")]
    pub(crate) string_data: Option<BTreeMap<String, String>>,
}

impl SecretObject {
    /// The value of `key` and the field it came from: `stringData` wins over `data`, as
    /// the API server merges them.
    fn get(
        &self,
        ctx: &Ctx,
        object: &str,
        key: &str,
    ) -> Result<Option<(String, String)>, LoadError> {
        if let Some(v) = self.string_data.as_ref().and_then(|d| d.get(key)) {
            return Ok(Some((v.clone(), format!("stringData.{key}"))));
        }
        let Some(encoded) = self.data.as_ref().and_then(|d| d.get(key)) else {
            return Ok(None);
        };
        let field = format!("data.{key}");
        let bytes = STANDARD
            .decode(encoded)
            .map_err(|e| ctx.field_error(object, &field, format!("invalid base64: {e}")))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            ctx.field_error(
                object,
                &field,
                format!("decoded value is not UTF-8 text: {e}"),
            )
        })?;
        Ok(Some((text, field)))
    }
}

/// What to do with a cluster Secret whose `config` cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnreadableConfig {
    /// Skip the Secret with a warning, as Argo CD's cluster list does: an export is read
    /// as Argo CD would list it, so `plan` sees the clusters Argo CD shards.
    Skip,
    /// An error naming the field: a watcher keeps the Secret's last good version.
    Error,
}

/// Reads one Secret: the cluster and, when the Secret has a `config`, how to reach it;
/// `Ok(None)` when it is not a cluster Secret, or its `config` is unreadable and
/// `unreadable` says skip (skipped with a warning).
pub(crate) fn to_cluster(
    ctx: &mut Ctx,
    value: &Value,
    locator: &str,
    unreadable: UnreadableConfig,
) -> Result<Option<crate::ClusterSecret>, LoadError> {
    let (ns, name) = meta_names(value);
    let object = object_name("Secret", ns, name, locator);
    let secret: SecretObject = typed(ctx, value, &object)?;
    let meta = secret.metadata.as_ref();
    let mut labels = meta.and_then(|m| m.labels.clone()).unwrap_or_default();
    let annotations = meta.and_then(|m| m.annotations.as_ref());

    match labels.remove(SECRET_TYPE_LABEL).as_deref() {
        Some("cluster") => {}
        other => {
            let found = match other {
                Some(v) => format!("label {SECRET_TYPE_LABEL}={v:?}"),
                None => format!("no label {SECRET_TYPE_LABEL}"),
            };
            ctx.warn(
                &object,
                None,
                format!("{found}, so not an Argo CD cluster Secret; skipped"),
            );
            return Ok(None);
        }
    }

    let server = match secret.get(ctx, &object, "server")? {
        None => {
            return Err(ctx.field_error(
                &object,
                "data.server",
                "missing; a cluster Secret needs the API server URL".to_owned(),
            ));
        }
        Some((s, field)) => {
            let server = normalize_server(&s).to_owned();
            if server.is_empty() {
                return Err(ctx.field_error(&object, &field, format!("empty server URL ({s:?})")));
            }
            server
        }
    };
    let cluster_name = secret
        .get(ctx, &object, "name")?
        .map(|(n, _)| n)
        .unwrap_or_default();

    let shard = match secret.get(ctx, &object, "shard")? {
        None => None,
        // Go's strconv.Atoi and Rust's i64 parser agree: ASCII decimal digits with an
        // optional sign, no spaces or underscores, within 64 bits.
        Some((s, field)) => match s.parse::<i64>() {
            Ok(n) => Some(n),
            Err(_) => {
                ctx.warn(
                    &object,
                    Some(&field),
                    format!("{s:?} is not an integer; no shard pin (as Argo CD)"),
                );
                None
            }
        },
    };

    let id = match meta
        .and_then(|m| m.uid.as_deref())
        .filter(|u| !u.is_empty())
    {
        Some(uid) => uid.to_owned(),
        None if server == IN_CLUSTER_SERVER => String::new(),
        None => {
            let fallback = name.filter(|n| !n.is_empty()).unwrap_or(&server).to_owned();
            ctx.warn(
                &object,
                Some("metadata.uid"),
                format!(
                    "missing; using {fallback:?} as the cluster id (hash-based shards may \
                     differ from the live Argo CD, which uses the uid)"
                ),
            );
            fallback
        }
    };

    let skip_reconcile = match annotations.and_then(|a| a.get(SKIP_RECONCILE_ANNOTATION)) {
        None => false,
        Some(v) => parse_go_bool(v).unwrap_or_else(|| {
            ctx.warn(
                &object,
                Some(&format!(
                    "metadata.annotations[{SKIP_RECONCILE_ANNOTATION}]"
                )),
                format!("{v:?} is not a boolean; treated as false (as Argo CD)"),
            );
            false
        }),
    };

    let weight = match annotations.and_then(|a| a.get(WEIGHT_ANNOTATION)) {
        None => None,
        Some(v) => Some(v.parse::<u64>().map_err(|_| {
            ctx.field_error(
                &object,
                &format!("metadata.annotations[{WEIGHT_ANNOTATION}]"),
                format!("{v:?} is not a non-negative integer"),
            )
        })?),
    };

    let credentials = match secret.get(ctx, &object, "config")? {
        None => None,
        Some((text, field)) => {
            let (credentials, unsupported) =
                match ClusterCredentials::from_argo_config(&text, &field) {
                    Ok(read) => read,
                    Err(p) if unreadable == UnreadableConfig::Skip => {
                        ctx.warn(
                            &object,
                            Some(&p.field),
                            format!(
                                "{}; the Secret is skipped, as Argo CD skips a cluster \
                                 Secret it cannot read",
                                p.message
                            ),
                        );
                        return Ok(None);
                    }
                    Err(p) => return Err(ctx.field_error(&object, &p.field, p.message)),
                };
            for p in unsupported {
                ctx.warn(&object, Some(&p.field), p.message);
            }
            Some(credentials)
        }
    };
    let scope = read_scope(ctx, &secret, &object)?;
    let mut credentials = credentials.unwrap_or_default();
    credentials.scope = scope;
    // The default (anonymous, verified TLS, the whole cluster) is the same as no config.
    let credentials = Some(credentials).filter(|c| *c != ClusterCredentials::default());

    let cluster = Cluster {
        id,
        name: cluster_name,
        server,
        shard,
        labels,
        skip_reconcile,
        weight,
    };
    Ok(Some((cluster, credentials)))
}

/// The Secret's `namespaces` and `clusterResources` ([`ClusterScope`]). As Argo CD reads
/// it, `clusterResources` is true only when it is exactly `"true"`; another value (`True`,
/// `1`) is false, with a warning.
fn read_scope(
    ctx: &mut Ctx,
    secret: &SecretObject,
    object: &str,
) -> Result<ClusterScope, LoadError> {
    let namespaces = secret
        .get(ctx, object, "namespaces")?
        .map(|(n, _)| n)
        .unwrap_or_default();
    let cluster_resources = match secret.get(ctx, object, "clusterResources")? {
        None => false,
        Some((v, _)) if v == "true" => true,
        Some((v, _)) if v == "false" => false,
        Some((v, field)) => {
            ctx.warn(
                object,
                Some(&field),
                format!("{v:?} is not \"true\"; read as false, as Argo CD reads it"),
            );
            false
        }
    };
    let scope = ClusterScope::from_secret(&namespaces, cluster_resources);
    if cluster_resources && !scope.is_namespaced() {
        ctx.warn(
            object,
            Some("clusterResources"),
            "means nothing without namespaces: the whole cluster is reached".to_owned(),
        );
    }
    Ok(scope)
}

use fleetshard_util::boolean::parse_go_bool;

/// A Secret as `kubectl get -o yaml` prints it, for the writers.
#[derive(Debug, Serialize)]
pub(crate) struct SecretOut {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    metadata: ObjectMeta,
    #[serde(rename = "type")]
    type_: &'static str,
    data: BTreeMap<String, String>,
}

/// The cluster Secret Argo CD would hold for `cluster`, named `secret_name` in `argocd`.
pub(crate) fn to_secret(cluster: &Cluster, secret_name: String) -> SecretOut {
    let mut labels = cluster.labels.clone();
    labels.insert(SECRET_TYPE_LABEL.to_owned(), "cluster".to_owned());
    let mut annotations = BTreeMap::new();
    if cluster.skip_reconcile {
        annotations.insert(SKIP_RECONCILE_ANNOTATION.to_owned(), "true".to_owned());
    }
    if let Some(w) = cluster.weight {
        annotations.insert(WEIGHT_ANNOTATION.to_owned(), w.to_string());
    }
    let mut data = BTreeMap::new();
    let mut put = |k: &str, v: &str| data.insert(k.to_owned(), STANDARD.encode(v));
    put("name", &cluster.name);
    put("server", &cluster.server);
    // What `argocd cluster add` stores for a cluster reached with default TLS settings.
    put("config", r#"{"tlsClientConfig":{"insecure":false}}"#);
    if let Some(shard) = cluster.shard {
        put("shard", &shard.to_string());
    }
    SecretOut {
        api_version: "v1",
        kind: "Secret",
        metadata: ObjectMeta {
            name: Some(secret_name),
            namespace: Some("argocd".to_owned()),
            // The in-cluster entry has no Secret uid; leaving it out reads back as "".
            uid: Some(cluster.id.clone()).filter(|id| !id.is_empty()),
            labels: Some(labels),
            annotations: Some(annotations).filter(|a| !a.is_empty()),
        },
        type_: "Opaque",
        data,
    }
}

/// A DNS-1123 Secret name for a cluster: `cluster-` and the lower-cased name (or id), with
/// anything else replaced by `-`, cut to fit the 253-character limit.
pub(crate) fn secret_name(cluster: &Cluster) -> String {
    let base = if cluster.name.is_empty() {
        &cluster.id
    } else {
        &cluster.name
    };
    let mut name: String = base
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '.') => c,
            _ => '-',
        })
        .take(200)
        .collect();
    name = name.trim_matches(['-', '.']).to_owned();
    if name.is_empty() {
        "cluster".to_owned()
    } else {
        format!("cluster-{name}")
    }
}
