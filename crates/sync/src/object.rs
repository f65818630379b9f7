//! What the engine knows of an object: its key, and of a desired object (a manifest) or a
//! live one only what the sync reads — annotations, whether it defines a CRD, whether its
//! kind is served, its health. The driver digests Kubernetes objects into these; the
//! engine never sees JSON.

use std::collections::BTreeMap;
use std::fmt;

/// An object's identity on its cluster (Argo CD's `ResourceKey`): the namespace is empty
/// for cluster-scoped kinds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ObjectKey {
    /// API group (`""` for core).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace (`""`: cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// A key from its parts.
    pub fn new(group: &str, kind: &str, namespace: &str, name: &str) -> Self {
        ObjectKey {
            group: group.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// Whether this is the core Namespace `name`.
    pub fn is_namespace(&self, name: &str) -> bool {
        self.group.is_empty() && self.kind == "Namespace" && self.name == name
    }
}

impl fmt::Display for ObjectKey {
    /// `group/kind/namespace/name`, as Argo CD prints a resource key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}/{}",
            self.group, self.kind, self.namespace, self.name
        )
    }
}

/// One desired object, as rendered and placed on its cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Manifest {
    /// Its key (a hook with only `metadata.generateName` has an empty name).
    pub key: ObjectKey,
    /// Its API version (`v1`, `apps/v1` gives `v1`): recorded in the results.
    pub version: String,
    /// `metadata.generateName`, when the name is to be generated.
    pub generate_name: String,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// For a CustomResourceDefinition: the group and kind it defines (`spec.group`,
    /// `spec.names.kind`), which must exist before objects of that kind.
    pub defines: Option<(String, String)>,
    /// The cluster serves its kind now. Without, its dry run is skipped when a CRD of this
    /// sync defines the kind or `SkipDryRunOnMissingResource=true` says so; otherwise the
    /// task is not valid.
    pub kind_served: bool,
    /// The comparison found it differing from its live object (`None`: not compared).
    /// With `ApplyOutOfSyncOnly=true`, a resource compared equal is not applied.
    pub out_of_sync: Option<bool>,
}

/// A resource's health, as the health rules judge the live object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HealthStatus {
    /// Working as intended.
    Healthy,
    /// Paused on purpose.
    Suspended,
    /// Not healthy yet.
    Progressing,
    /// Not there.
    Missing,
    /// Failed.
    Degraded,
    /// Cannot be told.
    Unknown,
}

/// A live object's health: the status and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// The status.
    pub status: HealthStatus,
    /// Why (may be empty).
    pub message: String,
}

impl Health {
    /// A health of `status` with `message`.
    pub fn new(status: HealthStatus, message: &str) -> Self {
        Health {
            status,
            message: message.to_owned(),
        }
    }
}

/// One live object: the counterpart of a manifest, or an object tracked by the app.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Live {
    /// Its key.
    pub key: ObjectKey,
    /// Its API version.
    pub version: String,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// It has a `deletionTimestamp`.
    pub deleting: bool,
    /// Its health; `None` when no rule judges its kind (it counts as healthy).
    pub health: Option<Health>,
    /// Tracked by this application (its tracking annotation names it): such an object no
    /// longer desired is to be pruned.
    pub tracked: bool,
}
