//! The resource registry: which kinds the fake serves, under which paths, with which
//! subresources. Adding a kind is one [`ResourceKind`] line in [`DEFAULT_RESOURCES`] (or in
//! the list given to [`crate::FakeApiServer::start_with`]).

/// One served resource (a kind under a group/version), described as discovery describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceKind {
    /// API group; "" for the core group.
    pub group: &'static str,
    /// API version within the group (e.g. "v1").
    pub version: &'static str,
    /// Kind (e.g. "ConfigMap").
    pub kind: &'static str,
    /// Plural resource name used in paths (e.g. "configmaps").
    pub plural: &'static str,
    /// Singular resource name (e.g. "configmap").
    pub singular: &'static str,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Whether the kind has a `status` subresource (the main resource then ignores status
    /// changes, and the subresource changes only status).
    pub status: bool,
    /// Whether the kind has a `scale` subresource mapped onto `spec.replicas`.
    pub scale: bool,
    /// Whether DELETE answers with the deleted object (custom resources, pods) rather
    /// than a success `Status` (most built-in kinds).
    pub delete_returns_object: bool,
    /// Whether a PUT to a missing object creates it (the real strategy's
    /// `AllowCreateOnUpdate`: true for Leases, false for most kinds).
    pub create_on_update: bool,
}

impl ResourceKind {
    /// A namespaced kind without subresources; chain the builders below for the rest.
    pub const fn namespaced(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        plural: &'static str,
        singular: &'static str,
    ) -> Self {
        Self {
            group,
            version,
            kind,
            plural,
            singular,
            namespaced: true,
            status: false,
            scale: false,
            delete_returns_object: false,
            create_on_update: false,
        }
    }

    /// A cluster-scoped kind without subresources.
    pub const fn cluster(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        plural: &'static str,
        singular: &'static str,
    ) -> Self {
        let mut k = Self::namespaced(group, version, kind, plural, singular);
        k.namespaced = false;
        k
    }

    /// With a `status` subresource.
    pub const fn with_status(mut self) -> Self {
        self.status = true;
        self
    }

    /// With a `scale` subresource (onto `spec.replicas`).
    pub const fn with_scale(mut self) -> Self {
        self.scale = true;
        self
    }

    /// DELETE returns the deleted object instead of a `Status`.
    pub const fn returning_deleted(mut self) -> Self {
        self.delete_returns_object = true;
        self
    }

    /// A PUT to a missing object creates it (as for real Leases).
    pub const fn created_by_update(mut self) -> Self {
        self.create_on_update = true;
        self
    }

    /// `apiVersion` as written in objects: "v1" or "group/version".
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The path prefix of this group/version: `/api/v1` or `/apis/{group}/{version}`.
    pub fn group_version_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }

    /// The verbs discovery advertises for the main resource.
    pub fn verbs(&self) -> &'static [&'static str] {
        &[
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

/// Every kind fleetshard reads or writes, and the common kinds a GitOps reconciler
/// applies: core/v1, apps/v1, batch/v1, networking.k8s.io/v1, policy/v1, autoscaling/v2,
/// rbac.authorization.k8s.io/v1 and apiextensions.k8s.io/v1 (a CustomResourceDefinition
/// written to the server makes its custom resource servable, see `crd.rs`).
pub const DEFAULT_RESOURCES: &[ResourceKind] = &[
    ResourceKind::namespaced("", "v1", "ConfigMap", "configmaps", "configmap"),
    ResourceKind::namespaced("", "v1", "Secret", "secrets", "secret"),
    ResourceKind::namespaced(
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        "serviceaccount",
    ),
    ResourceKind::namespaced("", "v1", "Endpoints", "endpoints", "endpoints"),
    // core/v1 Events, as controllers record them (Argo CD's on its Applications).
    ResourceKind::namespaced("", "v1", "Event", "events", "event"),
    ResourceKind::namespaced("", "v1", "LimitRange", "limitranges", "limitrange"),
    ResourceKind::namespaced("", "v1", "ResourceQuota", "resourcequotas", "resourcequota")
        .with_status(),
    ResourceKind::cluster(
        "",
        "v1",
        "PersistentVolume",
        "persistentvolumes",
        "persistentvolume",
    )
    .with_status(),
    ResourceKind::cluster("", "v1", "Namespace", "namespaces", "namespace").with_status(),
    ResourceKind::namespaced("", "v1", "Pod", "pods", "pod")
        .with_status()
        .returning_deleted(),
    ResourceKind::namespaced("", "v1", "Service", "services", "service").with_status(),
    ResourceKind::namespaced(
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
    )
    .with_status(),
    ResourceKind::namespaced("apps", "v1", "Deployment", "deployments", "deployment")
        .with_status()
        .with_scale(),
    ResourceKind::namespaced("apps", "v1", "StatefulSet", "statefulsets", "statefulset")
        .with_status()
        .with_scale(),
    ResourceKind::namespaced("apps", "v1", "DaemonSet", "daemonsets", "daemonset").with_status(),
    ResourceKind::namespaced("apps", "v1", "ReplicaSet", "replicasets", "replicaset")
        .with_status()
        .with_scale(),
    // A real API server creates a missing Lease on PUT, whatever resourceVersion the body
    // carries: compare-and-swap on a Lease that may have been deleted needs a patch.
    ResourceKind::namespaced("coordination.k8s.io", "v1", "Lease", "leases", "lease")
        .created_by_update(),
    ResourceKind::namespaced("batch", "v1", "Job", "jobs", "job").with_status(),
    ResourceKind::namespaced("batch", "v1", "CronJob", "cronjobs", "cronjob").with_status(),
    ResourceKind::namespaced("networking.k8s.io", "v1", "Ingress", "ingresses", "ingress")
        .with_status(),
    ResourceKind::namespaced(
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        "networkpolicy",
    ),
    ResourceKind::cluster(
        "networking.k8s.io",
        "v1",
        "IngressClass",
        "ingressclasses",
        "ingressclass",
    ),
    ResourceKind::namespaced(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        "poddisruptionbudget",
    )
    .with_status(),
    ResourceKind::namespaced(
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
    )
    .with_status(),
    ResourceKind::namespaced("rbac.authorization.k8s.io", "v1", "Role", "roles", "role"),
    ResourceKind::namespaced(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        "rolebinding",
    ),
    ResourceKind::cluster(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        "clusterrole",
    ),
    ResourceKind::cluster(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        "clusterrolebinding",
    ),
    ResourceKind::cluster(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        "customresourcedefinition",
    )
    .with_status(),
    ResourceKind::namespaced(
        "argoproj.io",
        "v1alpha1",
        "Application",
        "applications",
        "application",
    )
    // Argo CD's CRD declares no subresources: status is a plain field of the object.
    .returning_deleted(),
    // Installed with Argo CD beside Applications (the controller watches both).
    ResourceKind::namespaced(
        "argoproj.io",
        "v1alpha1",
        "AppProject",
        "appprojects",
        "appproject",
    )
    .returning_deleted(),
];

/// The served kinds, with lookups by path and by apiVersion/kind. Immutable: the server
/// swaps in a new one when a CustomResourceDefinition changes what it serves.
#[derive(Debug, Clone)]
pub struct Registry {
    kinds: Vec<ResourceKind>,
}

impl Registry {
    /// A registry serving exactly `kinds`.
    pub fn new(kinds: &[ResourceKind]) -> Self {
        Self {
            kinds: kinds.to_vec(),
        }
    }

    /// The registry serving `base` and then those of `extra` whose group, version and
    /// plural `base` does not already serve (a built-in kind wins over a CRD's).
    pub fn with_extra(base: &[ResourceKind], extra: &[ResourceKind]) -> Self {
        let mut kinds = base.to_vec();
        for k in extra {
            if !kinds
                .iter()
                .any(|b| (b.group, b.version, b.plural) == (k.group, k.version, k.plural))
            {
                kinds.push(*k);
            }
        }
        Self { kinds }
    }

    /// All served kinds, in registration order.
    pub fn kinds(&self) -> &[ResourceKind] {
        &self.kinds
    }

    /// The kind served at `group`/`version`/`plural`.
    pub fn by_plural(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceKind> {
        self.kinds
            .iter()
            .find(|k| k.group == group && k.version == version && k.plural == plural)
    }

    /// The kind with this `apiVersion` ("v1", "apps/v1") and `kind`.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&ResourceKind> {
        let (group, version) = split_api_version(api_version);
        self.kinds
            .iter()
            .find(|k| k.group == group && k.version == version && k.kind == kind)
    }

    /// The groups (other than core) in registration order, each with its versions.
    pub fn groups(&self) -> Vec<(&'static str, Vec<&'static str>)> {
        let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
        for k in self.kinds.iter().filter(|k| !k.group.is_empty()) {
            match out.iter_mut().find(|(g, _)| *g == k.group) {
                Some((_, versions)) if !versions.contains(&k.version) => versions.push(k.version),
                Some(_) => {}
                None => out.push((k.group, vec![k.version])),
            }
        }
        out
    }

    /// The kinds of one group/version.
    pub fn in_group_version<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
    ) -> impl Iterator<Item = &'a ResourceKind> + 'a {
        self.kinds
            .iter()
            .filter(move |k| k.group == group && k.version == version)
    }
}

/// Splits "group/version" (or "v1" for core) into (group, version).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}
