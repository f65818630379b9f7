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

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

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

/// Decodes a Secret's `data` value as the API server does: standard base64 with padding,
/// line breaks (`\r`, `\n`) anywhere ignored (Go's `encoding/base64`, which decodes a
/// `[]byte` field, skips them), any other character refused. One rule for cluster and
/// repository Secrets alike.
pub fn decode_secret_data(encoded: &str) -> Result<Vec<u8>, base64::DecodeError> {
    if encoded.contains(['\r', '\n']) {
        let joined: String = encoded
            .chars()
            .filter(|c| !matches!(c, '\r' | '\n'))
            .collect();
        STANDARD.decode(joined)
    } else {
        STANDARD.decode(encoded)
    }
}

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
/// Its `Debug` shows the keys of `data` and `stringData`, never their values.
#[derive(Default, Deserialize)]
pub(crate) struct SecretObject {
    #[serde(default)]
    pub(crate) metadata: Option<ObjectMeta>,
    #[serde(default)]
    pub(crate) data: Option<BTreeMap<String, String>>,
    #[serde(default, rename = "stringData")]
    pub(crate) string_data: Option<BTreeMap<String, String>>,
}

impl fmt::Debug for SecretObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = |m: &Option<BTreeMap<String, String>>| {
            m.as_ref().map(|m| m.keys().cloned().collect::<Vec<_>>())
        };
        f.debug_struct("SecretObject")
            .field("metadata", &self.metadata)
            .field("data (keys)", &keys(&self.data))
            .field("stringData (keys)", &keys(&self.string_data))
            .finish()
    }
}

/// What the conversion of a cluster Secret reads, whichever way the Secret was read: as a
/// value then typed ([`SecretObject`], the generic path), or straight from the text
/// (`crate::placement_secret`).
pub(crate) trait SecretFields {
    /// `metadata.name`.
    fn name(&self) -> Option<&str>;
    /// `metadata.uid`.
    fn uid(&self) -> Option<&str>;
    /// `metadata.labels`, all of them.
    fn labels(&self) -> BTreeMap<String, String>;
    /// One of `metadata.annotations`.
    fn annotation(&self, key: &str) -> Option<&str>;
    /// One key of `stringData`.
    fn string_data(&self, key: &str) -> Option<&str>;
    /// One key of `data`, still in base64.
    fn data(&self, key: &str) -> Option<&str>;
}

impl SecretFields for SecretObject {
    fn name(&self) -> Option<&str> {
        self.metadata.as_ref()?.name.as_deref()
    }
    fn uid(&self) -> Option<&str> {
        self.metadata.as_ref()?.uid.as_deref()
    }
    fn labels(&self) -> BTreeMap<String, String> {
        let meta = self.metadata.as_ref();
        meta.and_then(|m| m.labels.clone()).unwrap_or_default()
    }
    fn annotation(&self, key: &str) -> Option<&str> {
        let annotations = self.metadata.as_ref()?.annotations.as_ref()?;
        annotations.get(key).map(String::as_str)
    }
    fn string_data(&self, key: &str) -> Option<&str> {
        self.string_data.as_ref()?.get(key).map(String::as_str)
    }
    fn data(&self, key: &str) -> Option<&str> {
        self.data.as_ref()?.get(key).map(String::as_str)
    }
}

/// Where a Secret's value was found: `stringData.{key}` or `data.{key}`, formatted only
/// for a message.
#[derive(Clone, Copy)]
struct Field {
    key: &'static str,
    string_data: bool,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let map = if self.string_data {
            "stringData"
        } else {
            "data"
        };
        write!(f, "{map}.{}", self.key)
    }
}

/// The value of `key` and the field it came from: `stringData` wins over `data`, as the
/// API server merges them.
fn get<'s, R: Report>(
    secret: &'s impl SecretFields,
    r: &R,
    key: &'static str,
) -> Result<Option<(Cow<'s, str>, Field)>, R::Error> {
    if let Some(v) = secret.string_data(key) {
        let field = Field {
            key,
            string_data: true,
        };
        return Ok(Some((Cow::Borrowed(v), field)));
    }
    let Some(encoded) = secret.data(key) else {
        return Ok(None);
    };
    let field = Field {
        key,
        string_data: false,
    };
    let bytes = decode_secret_data(encoded)
        .map_err(|e| r.error(&field.to_string(), format!("invalid base64: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        r.error(
            &field.to_string(),
            format!("decoded value is not UTF-8 text: {e}"),
        )
    })?;
    Ok(Some((Cow::Owned(text), field)))
}

/// Where the conversion's warnings and errors go.
pub(crate) trait Report {
    /// What an error is.
    type Error;
    /// A warning about `field` (or the whole object); an error stops the conversion.
    fn warn(&mut self, field: Option<&str>, message: String) -> Result<(), Self::Error>;
    /// An error about `field`.
    fn error(&self, field: &str, message: String) -> Self::Error;
}

/// The generic path's reports: warnings and errors naming the file and the object.
struct Reporting<'c> {
    ctx: &'c mut Ctx,
    object: &'c str,
}

impl Report for Reporting<'_> {
    type Error = LoadError;
    fn warn(&mut self, field: Option<&str>, message: String) -> Result<(), LoadError> {
        self.ctx.warn(self.object, field, message);
        Ok(())
    }
    fn error(&self, field: &str, message: String) -> LoadError {
        self.ctx.field_error(self.object, field, message)
    }
}

/// The fast path's reports: any warning or error means the Secret is unusual, and the
/// generic path converts it again from its value (so that what it reports is the generic
/// path's exactly).
pub(crate) struct Strict;

/// A Secret the fast path does not convert.
#[derive(Debug)]
pub(crate) struct Unusual;

impl Report for Strict {
    type Error = Unusual;
    fn warn(&mut self, _: Option<&str>, _: String) -> Result<(), Unusual> {
        Err(Unusual)
    }
    fn error(&self, _: &str, _: String) -> Unusual {
        Unusual
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
    let mut reporting = Reporting {
        ctx,
        object: &object,
    };
    convert(&secret, &mut reporting, unreadable)
}

/// [`to_cluster`] of a Secret already read, its warnings and errors to `r`.
pub(crate) fn convert<R: Report>(
    secret: &impl SecretFields,
    r: &mut R,
    unreadable: UnreadableConfig,
) -> Result<Option<crate::ClusterSecret>, R::Error> {
    let mut labels = secret.labels();

    match labels.remove(SECRET_TYPE_LABEL).as_deref() {
        Some("cluster") => {}
        other => {
            let found = match other {
                Some(v) => format!("label {SECRET_TYPE_LABEL}={v:?}"),
                None => format!("no label {SECRET_TYPE_LABEL}"),
            };
            r.warn(
                None,
                format!("{found}, so not an Argo CD cluster Secret; skipped"),
            )?;
            return Ok(None);
        }
    }

    let server = match get(secret, r, "server")? {
        None => {
            return Err(r.error(
                "data.server",
                "missing; a cluster Secret needs the API server URL".to_owned(),
            ));
        }
        Some((s, field)) => {
            let server = normalize_server(&s).to_owned();
            if server.is_empty() {
                return Err(r.error(&field.to_string(), format!("empty server URL ({s:?})")));
            }
            server
        }
    };
    let cluster_name = get(secret, r, "name")?
        .map(|(n, _)| n.into_owned())
        .unwrap_or_default();

    let shard = match get(secret, r, "shard")? {
        None => None,
        // Go's strconv.Atoi and Rust's i64 parser agree: ASCII decimal digits with an
        // optional sign, no spaces or underscores, within 64 bits.
        Some((s, field)) => match s.parse::<i64>() {
            Ok(n) => Some(n),
            Err(_) => {
                r.warn(
                    Some(&field.to_string()),
                    format!("{s:?} is not an integer; no shard pin (as Argo CD)"),
                )?;
                None
            }
        },
    };

    let id = match secret.uid().filter(|u| !u.is_empty()) {
        Some(uid) => uid.to_owned(),
        None if server == IN_CLUSTER_SERVER => String::new(),
        None => {
            let fallback = secret
                .name()
                .filter(|n| !n.is_empty())
                .unwrap_or(&server)
                .to_owned();
            r.warn(
                Some("metadata.uid"),
                format!(
                    "missing; using {fallback:?} as the cluster id (hash-based shards may \
                     differ from the live Argo CD, which uses the uid)"
                ),
            )?;
            fallback
        }
    };

    let skip_reconcile = match secret.annotation(SKIP_RECONCILE_ANNOTATION) {
        None => false,
        Some(v) => match parse_go_bool(v) {
            Some(b) => b,
            None => {
                r.warn(
                    Some(&format!(
                        "metadata.annotations[{SKIP_RECONCILE_ANNOTATION}]"
                    )),
                    format!("{v:?} is not a boolean; treated as false (as Argo CD)"),
                )?;
                false
            }
        },
    };

    let weight = match secret.annotation(WEIGHT_ANNOTATION) {
        None => None,
        Some(v) => Some(v.parse::<u64>().map_err(|_| {
            r.error(
                &format!("metadata.annotations[{WEIGHT_ANNOTATION}]"),
                format!("{v:?} is not a non-negative integer"),
            )
        })?),
    };

    let credentials = match get(secret, r, "config")? {
        None => None,
        Some((text, field)) => {
            let field = field.to_string();
            let (credentials, unsupported) =
                match ClusterCredentials::from_argo_config(&text, &field) {
                    Ok(read) => read,
                    Err(p) if unreadable == UnreadableConfig::Skip => {
                        r.warn(
                            Some(&p.field),
                            format!(
                                "{}; the Secret is skipped, as Argo CD skips a cluster \
                                 Secret it cannot read",
                                p.message
                            ),
                        )?;
                        return Ok(None);
                    }
                    Err(p) => return Err(r.error(&p.field, p.message)),
                };
            for p in unsupported {
                r.warn(Some(&p.field), p.message)?;
            }
            Some(credentials)
        }
    };
    let scope = read_scope(r, secret)?;
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
fn read_scope<R: Report>(r: &mut R, secret: &impl SecretFields) -> Result<ClusterScope, R::Error> {
    let namespaces = get(secret, r, "namespaces")?
        .map(|(n, _)| n)
        .unwrap_or_default();
    let cluster_resources = match get(secret, r, "clusterResources")? {
        None => false,
        Some((v, _)) if v == "true" => true,
        Some((v, _)) if v == "false" => false,
        Some((v, field)) => {
            r.warn(
                Some(&field.to_string()),
                format!("{v:?} is not \"true\"; read as false, as Argo CD reads it"),
            )?;
            false
        }
    };
    let scope = ClusterScope::from_secret(&namespaces, cluster_resources);
    if cluster_resources && !scope.is_namespaced() {
        r.warn(
            Some("clusterResources"),
            "means nothing without namespaces: the whole cluster is reached".to_owned(),
        )?;
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
