//! Desired objects (from Git) against live objects (from the cluster): Synced or OutOfSync
//! per resource and per application, and which live objects must be pruned.
//!
//! Pure: no I/O, no clock. Objects are Kubernetes objects as JSON.
//!
//! # What is compared
//!
//! Like Argo CD's diff (gitops-engine), the live object is allowed to hold more than the
//! manifest: the API server, admission and controllers add fields. So the comparison is
//! driven by the *desired* object:
//!
//! - every field the desired object sets must be in the live object with an equal value;
//! - a field only the live object has is a difference only if *we* applied it earlier and
//!   the manifest no longer sets it (a removed label, env var or container): the live
//!   object's `managedFields` entries of our server-side-apply field manager
//!   ([`CompareOptions::field_manager`], `fleetshard`) or its
//!   `kubectl.kubernetes.io/last-applied-configuration` say so (Argo CD's three-way
//!   diff; `compare/owned.rs`). Everything else a live object has extra is ignored.
//!
//! # Normalisation
//!
//! - **Server-populated fields** are never compared, on either side: `status`, `apiVersion`
//!   (the key already matched the group and kind), `metadata.{uid, resourceVersion,
//!   generation, creationTimestamp, managedFields, selfLink, deletionTimestamp,
//!   deletionGracePeriodSeconds}` and the annotations `kubectl.kubernetes.io/
//!   last-applied-configuration`, `argocd.argoproj.io/tracking-id` and
//!   `argocd.argoproj.io/installation-id` (written by the sync, not by the manifest's
//!   author) and `deployment.kubernetes.io/revision`.
//! - **Defaults.** A field at the value the API server defaults it to equals its absence,
//!   in both directions, for Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob,
//!   Pod, Service and PersistentVolumeClaim (`replicas: 1`, `strategy`,
//!   `revisionHistoryLimit: 10`, `progressDeadlineSeconds: 600`, pod spec `restartPolicy:
//!   Always`, `dnsPolicy: ClusterFirst`, `schedulerName`, `securityContext: {}`,
//!   `terminationGracePeriodSeconds: 30`, container `terminationMessagePath/Policy`,
//!   `imagePullPolicy` (`Always` for an untagged or `latest` image, else `IfNotPresent`),
//!   probe timings, port `protocol: TCP`, Service `type: ClusterIP`, `sessionAffinity:
//!   None`, `targetPort` = `port`, …; the full table is in `compare/defaults.rs`).
//!   Server-assigned values without a fixed default (`clusterIP(s)`, `ipFamilies`,
//!   `nodePort`) are covered by the first rule: the manifest does not set them.
//! - **Empty values.** `null`, `{}`, `[]`, `""`, `false` and `0` in a manifest equal an
//!   absent live field: the API server's Go types drop them (`omitempty`).
//! - **Secrets' `stringData`** is merged into `data` (base64) as the API server stores it
//!   (`compare/secret.rs`).
//! - **Numbers** compare by value (`1` = `1.0`). **Quantities** under
//!   `resources.limits/requests` (containers, PVCs), ResourceQuota `spec.hard` and PV
//!   `spec.capacity` compare as exact amounts: `"1000m"` = `"1"` = `1`, `"1Gi"` =
//!   `"1024Mi"`.
//! - **Lists** with a Kubernetes merge key are matched by it, not by position:
//!   `containers`, `initContainers`, `env`, `volumes`, `imagePullSecrets` by `name`;
//!   container ports by `containerPort`, Service ports by `port`; `volumeMounts` by
//!   `mountPath`; any other list whose elements all have a `name` by `name`.
//!   `finalizers` is a set. Other lists (`args`, `command`, `tolerations`) are compared
//!   by position and must have the same length. A list whose key is missing or repeated
//!   is compared by position.
//!
//! - **Ignored differences.** A [`Normalizer`] (crate `fleetshard-diff`: the app's
//!   `ignoreDifferences` and argocd-cm's customizations) removes the fields it names from
//!   both objects before they are compared ([`compare_app_normalized`]).
//! - **`argocd.argoproj.io/compare-options: IgnoreExtraneous`** on a live object to be
//!   pruned: the resource is OutOfSync, but the application's status does not count it
//!   ([`ResourceStatus::extraneous_ignored`]), as in Argo CD.
//!
//! # Not normalised (yet)
//!
//! Hooks, and defaults of kinds not listed above.

mod defaults;
mod diff;
mod key;
mod known;
mod owned;
mod quantity;
mod secret;
mod tracking;

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;

use fleetshard_diff::Normalizer;
use serde::Serialize;
use serde_json::Value;

pub use key::{KeyError, ResourceKey};
pub(crate) use owned::LAST_APPLIED;
pub use tracking::{
    DEFAULT_APP_LABEL_KEY, INSTALLATION_ID_ANNOTATION, TRACKING_ANNOTATION, Tracking, TrackingId,
    TrackingMethod, tracking_annotation,
};
pub(crate) use tracking::{candidate_apps, child_map};

/// The field manager fleetshard's server-side apply uses.
pub const FIELD_MANAGER: &str = "fleetshard";

/// Whether a resource, or a whole application, matches Git.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SyncStatus {
    /// The live state matches the desired state.
    Synced,
    /// Something differs, is missing, or is to be pruned.
    OutOfSync,
}

/// How one path differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum DifferenceKind {
    /// Both sides have the field, with different values.
    Changed,
    /// The desired object sets the field; the live object does not have it.
    MissingInLive,
    /// The live object has a field we applied before and the manifest no longer sets.
    ExtraInLive,
}

/// One difference between a desired and a live object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// Where, e.g. `spec.template.spec.containers[name=web].image`.
    pub path: String,
    /// How it differs.
    pub kind: DifferenceKind,
    /// The desired value (absent for [`DifferenceKind::ExtraInLive`]).
    pub desired: Option<Value>,
    /// The live value (absent for [`DifferenceKind::MissingInLive`]).
    pub live: Option<Value>,
}

/// The comparison of one resource.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceStatus {
    /// Which object.
    pub key: ResourceKey,
    /// Synced iff it is desired, exists, and has no difference.
    pub status: SyncStatus,
    /// The desired object has no live counterpart.
    pub missing: bool,
    /// The object is live and tracked by the application but no longer desired.
    pub requires_pruning: bool,
    /// The differing paths (empty when missing or to be pruned).
    pub differences: Vec<Difference>,
    /// To be pruned, and its live object says `compare-options: IgnoreExtraneous`: the
    /// application's sync status does not count it.
    pub extraneous_ignored: bool,
}

impl ResourceStatus {
    /// A one-line reason: `missing`, `to prune`, or the differing paths.
    pub fn summary(&self) -> String {
        if self.missing {
            return "missing in the cluster".to_owned();
        }
        if self.requires_pruning {
            return "not in Git; to be pruned".to_owned();
        }
        if self.differences.is_empty() {
            return "matches".to_owned();
        }
        let paths: Vec<&str> = self.differences.iter().map(|d| d.path.as_str()).collect();
        format!("differs at {}", paths.join(", "))
    }
}

/// The comparison of a whole application.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AppComparison {
    /// Synced iff every resource is Synced and nothing is to be pruned.
    pub status: SyncStatus,
    /// Every desired resource, then every tracked live resource to prune, ordered by key.
    pub resources: Vec<ResourceStatus>,
}

/// How to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompareOptions {
    /// The application's instance name, as in its tracking ids.
    pub app_name: String,
    /// The namespace of desired objects that do not name one (the application's
    /// destination namespace); cluster-scoped kinds ([`ResourceKey::is_cluster_scoped_kind`])
    /// never get it.
    pub destination_namespace: Option<String>,
    /// The server-side-apply field manager whose `managedFields` entries are ours.
    pub field_manager: String,
    /// How live objects are recognised as the application's (argocd-cm).
    pub tracking: Tracking,
}

impl CompareOptions {
    /// Options for application `app_name`, no destination namespace, field manager
    /// [`FIELD_MANAGER`].
    pub fn new(app_name: &str) -> CompareOptions {
        CompareOptions {
            app_name: app_name.to_owned(),
            destination_namespace: None,
            field_manager: FIELD_MANAGER.to_owned(),
            tracking: Tracking::default(),
        }
    }

    /// With a destination namespace.
    pub fn with_destination_namespace(mut self, namespace: &str) -> CompareOptions {
        self.destination_namespace = Some(namespace.to_owned());
        self
    }

    /// With a tracking method other than Argo CD's default.
    pub fn with_tracking(mut self, tracking: Tracking) -> CompareOptions {
        self.tracking = tracking;
        self
    }
}

/// Which input an object came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The desired objects.
    Desired,
    /// The live objects.
    Live,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Desired => "desired",
            Side::Live => "live",
        })
    }
}

/// Why a comparison could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompareError {
    /// An object lacks an identifying field or has it with the wrong type.
    #[error("{side} object #{index} ({name}): field {field} is missing or not a non-empty string")]
    BadObject {
        /// Desired or live.
        side: Side,
        /// Position in its input.
        index: usize,
        /// What can be told of the object (`kind name`, or `?`).
        name: String,
        /// The offending field.
        field: &'static str,
    },
    /// Two objects of one side have the same key.
    #[error("{side} objects #{first} and #{second} are both {key}")]
    Duplicate {
        /// Desired or live.
        side: Side,
        /// The shared key.
        key: ResourceKey,
        /// Position of the first.
        first: usize,
        /// Position of the second.
        second: usize,
    },
}

/// The annotation of per-object compare options.
pub const COMPARE_OPTIONS_ANNOTATION: &str = "argocd.argoproj.io/compare-options";

/// Whether `obj`'s compare options (comma-separated) include `option`.
pub fn has_compare_option(obj: &Value, option: &str) -> bool {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(COMPARE_OPTIONS_ANNOTATION))
        .and_then(Value::as_str)
        .is_some_and(|v| v.split(',').any(|o| o.trim() == option))
}

/// Compares one desired object with its live counterpart (`None`: not in the cluster).
/// Keys are not checked here; `compare_app` pairs objects by key.
pub fn compare_resource(
    key: ResourceKey,
    desired: &Value,
    live: Option<&Value>,
    opts: &CompareOptions,
) -> ResourceStatus {
    compare_resource_normalized(key, desired, live, opts, &Normalizer::default())
}

/// [`compare_resource`], with what `normalizer` leaves out removed from both objects.
pub fn compare_resource_normalized(
    key: ResourceKey,
    desired: &Value,
    live: Option<&Value>,
    opts: &CompareOptions,
    normalizer: &Normalizer,
) -> ResourceStatus {
    let Some(live) = live else {
        return ResourceStatus {
            key,
            status: SyncStatus::OutOfSync,
            missing: true,
            requires_pruning: false,
            differences: Vec::new(),
            extraneous_ignored: false,
        };
    };
    let normalized = normalizer.normalize_pair(key.object_ref(), desired, live);
    let (desired, live) = match &normalized {
        Some((d, l)) => (d, l),
        None => (desired, live),
    };
    let records = owned::Records::of(live, &opts.field_manager);
    let desired = secret::as_stored(&key.group, &key.kind, desired);
    let known = normalizer.known_fields(&key.group, &key.kind);
    let differences = diff::Walker::new(&key.kind, known).run(&desired, live, records.root());
    let status = if differences.is_empty() {
        SyncStatus::Synced
    } else {
        SyncStatus::OutOfSync
    };
    ResourceStatus {
        key,
        status,
        missing: false,
        requires_pruning: false,
        differences,
        extraneous_ignored: false,
    }
}

/// Compares an application's desired objects with the live objects of its destination.
/// `live` may hold objects of other applications: a live object without a desired
/// counterpart is reported (to prune) only if it is tracked by this application
/// ([`Tracking::is_tracked_by`]). Errors name the first object that has no valid key, or a key
/// given twice on one side.
/// `live` may be the cache's shared objects (`Arc<Value>`): they are read, not copied.
pub fn compare_app<L: Borrow<Value>>(
    desired: &[Value],
    live: &[L],
    opts: &CompareOptions,
) -> Result<AppComparison, CompareError> {
    compare_app_normalized(desired, live, opts, &Normalizer::default())
}

/// [`compare_app`], each pair of objects compared without what `normalizer` leaves out.
pub fn compare_app_normalized<L: Borrow<Value>>(
    desired: &[Value],
    live: &[L],
    opts: &CompareOptions,
    normalizer: &Normalizer,
) -> Result<AppComparison, CompareError> {
    let desired_keys = keys(desired, Side::Desired, opts)?;
    let live_keys = keys(live, Side::Live, opts)?;
    let mut resources = Vec::with_capacity(desired_keys.len());
    let mut used = vec![false; live.len()];
    for (key, &d) in &desired_keys {
        let found = live_keys.get(key).copied().or_else(|| {
            // A desired object of a cluster-scoped kind we do not know got the destination
            // namespace; the live object tells us it has none.
            let unscoped = ResourceKey {
                namespace: String::new(),
                ..key.clone()
            };
            let defaulted = desired[d]
                .pointer("/metadata/namespace")
                .is_none_or(Value::is_null);
            if defaulted {
                live_keys.get(&unscoped).copied()
            } else {
                None
            }
        });
        if let Some(l) = found {
            used[l] = true;
        }
        resources.push(compare_resource_normalized(
            key.clone(),
            &desired[d],
            found.map(|l| live[l].borrow()),
            opts,
            normalizer,
        ));
    }
    for (key, &l) in &live_keys {
        if !used[l]
            && opts
                .tracking
                .is_tracked_by(live[l].borrow(), &opts.app_name)
        {
            resources.push(ResourceStatus {
                key: key.clone(),
                status: SyncStatus::OutOfSync,
                missing: false,
                requires_pruning: true,
                differences: Vec::new(),
                extraneous_ignored: has_compare_option(live[l].borrow(), "IgnoreExtraneous"),
            });
        }
    }
    resources.sort_by(|a, b| a.key.cmp(&b.key));
    let synced = resources
        .iter()
        .all(|r| r.status == SyncStatus::Synced || r.extraneous_ignored);
    let status = if synced {
        SyncStatus::Synced
    } else {
        SyncStatus::OutOfSync
    };
    Ok(AppComparison { status, resources })
}

/// The keys of `objects`, each with its position; desired objects without a namespace get
/// the destination namespace unless their kind is cluster-scoped.
fn keys<V: Borrow<Value>>(
    objects: &[V],
    side: Side,
    opts: &CompareOptions,
) -> Result<BTreeMap<ResourceKey, usize>, CompareError> {
    let mut out = BTreeMap::new();
    for (index, obj) in objects.iter().enumerate() {
        let obj = obj.borrow();
        let mut key = ResourceKey::of(obj).map_err(|e| CompareError::BadObject {
            side,
            index,
            name: describe(obj),
            field: e.field,
        })?;
        if side == Side::Desired
            && key.namespace.is_empty()
            && !ResourceKey::is_cluster_scoped_kind(&key.group, &key.kind)
            && let Some(ns) = &opts.destination_namespace
        {
            key.namespace = ns.clone();
        }
        if let Some(first) = out.insert(key.clone(), index) {
            return Err(CompareError::Duplicate {
                side,
                key,
                first,
                second: index,
            });
        }
    }
    Ok(out)
}

/// `kind name` as far as they can be read, for error messages.
fn describe(obj: &Value) -> String {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("?");
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("?");
    format!("{kind} {name}")
}
