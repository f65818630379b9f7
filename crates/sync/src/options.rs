//! How one operation runs: the request (prune, dry run, force, hooks, the objects chosen),
//! the sync options in force (the app's `syncPolicy.syncOptions` for an automated sync, the
//! request's `operation.sync.syncOptions` otherwise), and what the engine cannot know by
//! itself (the destination namespace, the revision, when the operation started).

use std::collections::BTreeMap;

use crate::object::ObjectKey;

/// A list of sync options, `Name=value` each, as the Application spells them. Options are
/// matched exactly, as Argo CD's `HasOption` matches them (no trimming).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncOptions(pub Vec<String>);

impl SyncOptions {
    /// Whether `option` (`Name=value`) is set.
    pub fn has(&self, option: &str) -> bool {
        self.0.iter().any(|o| o == option)
    }

    /// The value of option `name` (the first `name=…`).
    pub fn value(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find_map(|o| o.strip_prefix(name)?.strip_prefix('='))
    }

    /// The propagation of prune deletes: `PrunePropagationPolicy=background|orphan`, else
    /// foreground (Argo CD's default).
    pub fn prune_propagation(&self) -> Propagation {
        if self.has("PrunePropagationPolicy=background") {
            Propagation::Background
        } else if self.has("PrunePropagationPolicy=orphan") {
            Propagation::Orphan
        } else {
            Propagation::Foreground
        }
    }
}

/// A delete's propagation policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Propagation {
    /// Dependents first, then the object (Argo CD's default for prunes).
    Foreground,
    /// The object now, dependents by the garbage collector.
    Background,
    /// Dependents are left.
    Orphan,
}

impl Propagation {
    /// Kubernetes' spelling (`DeleteOptions.propagationPolicy`).
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Foreground => "Foreground",
            Propagation::Background => "Background",
            Propagation::Orphan => "Orphan",
        }
    }
}

/// `CreateNamespace=true`: the destination namespace, created when missing, with the
/// app's `managedNamespaceMetadata` (then applied to an existing namespace too).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NamespaceCreation {
    /// `managedNamespaceMetadata`, when set: labels and annotations the namespace gets.
    pub managed: Option<ManagedMetadata>,
    /// The live namespace, when it exists (with its annotations and health).
    pub live: Option<crate::object::Live>,
}

/// `syncPolicy.managedNamespaceMetadata`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ManagedMetadata {
    /// `labels`.
    pub labels: BTreeMap<String, String>,
    /// `annotations`.
    pub annotations: BTreeMap<String, String>,
}

/// The request's choice of objects (selective sync, `operation.sync.resources`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    /// API group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace (empty: any).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl Selected {
    /// Whether this entry names `key` (group, kind and name equal; the namespace too
    /// unless left empty).
    pub fn names(&self, key: &ObjectKey) -> bool {
        self.group == key.group
            && self.kind == key.kind
            && self.name == key.name
            && (self.namespace.is_empty() || self.namespace == key.namespace)
    }
}

/// Everything about one operation the engine reads besides the objects.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settings {
    /// The destination namespace (objects without one were placed there; the namespace
    /// `CreateNamespace=true` creates).
    pub namespace: String,
    /// The revision synced (its first seven characters name generated hooks).
    pub revision: String,
    /// When the operation started, in Unix seconds (names generated hooks).
    pub started_at_unix: i64,
    /// This attempt of the operation (its start and retry count): written on every hook
    /// created, so that a new owner tells the hooks of this attempt from older ones.
    pub attempt: String,
    /// Delete what is to be pruned.
    pub prune: bool,
    /// Validate only: every write is a dry run.
    pub dry_run: bool,
    /// `syncStrategy.{apply,hook}.force`: a failed apply deletes and re-creates.
    pub force: bool,
    /// Run no hooks: `syncStrategy.apply`, or a selective sync.
    pub skip_hooks: bool,
    /// Selective sync: only these objects (`None`: all).
    pub selection: Option<Vec<Selected>>,
    /// The sync options in force.
    pub options: SyncOptions,
    /// A prune or delete waiting for confirmation was confirmed (`deletion-approved`).
    pub prune_confirmed: bool,
    /// `CreateNamespace=true`, with what it needs.
    pub namespace_creation: Option<NamespaceCreation>,
}

impl Settings {
    /// Whether the request chose `key` (always, without a selection).
    pub fn selects(&self, key: &ObjectKey) -> bool {
        self.selection
            .as_ref()
            .is_none_or(|list| list.iter().any(|s| s.names(key)))
    }
}
