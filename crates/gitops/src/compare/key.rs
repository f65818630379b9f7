//! Resource identity: group, kind, namespace and name (the API version is not part of it:
//! one object read through two versions is one object, as in Argo CD).

use std::fmt;

use serde::Serialize;
use serde_json::Value;

/// Identifies one Kubernetes object within a cluster.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ResourceKey {
    /// API group (`""` for the core group, `apps`, `batch`, …).
    pub group: String,
    /// Kind (`Deployment`).
    pub kind: String,
    /// Namespace (`""` for cluster-scoped objects).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ResourceKey {
    /// A key from its four parts.
    pub fn new(group: &str, kind: &str, namespace: &str, name: &str) -> ResourceKey {
        ResourceKey {
            group: group.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// The object this key names, as the diff normalizer matches it.
    pub fn object_ref(&self) -> fleetshard_diff::ObjectRef<'_> {
        fleetshard_diff::ObjectRef {
            group: &self.group,
            kind: &self.kind,
            namespace: &self.namespace,
            name: &self.name,
        }
    }

    /// The key of `obj`, read from `apiVersion`, `kind`, `metadata.namespace` and
    /// `metadata.name`. The error names the first field that is missing or not a string.
    pub fn of(obj: &Value) -> Result<ResourceKey, KeyError> {
        if !obj.is_object() {
            return Err(KeyError {
                field: "(the object itself: not a JSON object)",
            });
        }
        let text = |v: Option<&Value>, field: &'static str| -> Result<String, KeyError> {
            match v {
                Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
                _ => Err(KeyError { field }),
            }
        };
        let api_version = text(obj.get("apiVersion"), "apiVersion")?;
        let kind = text(obj.get("kind"), "kind")?;
        let meta = obj.get("metadata");
        let name = text(meta.and_then(|m| m.get("name")), "metadata.name")?;
        let namespace = match meta.and_then(|m| m.get("namespace")) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => {
                return Err(KeyError {
                    field: "metadata.namespace",
                });
            }
        };
        Ok(ResourceKey {
            group: group_of(&api_version).to_owned(),
            kind,
            namespace,
            name,
        })
    }

    /// Whether objects of this kind live outside namespaces, for the kinds fleetshard knows
    /// without asking the API server's discovery.
    pub fn is_cluster_scoped_kind(group: &str, kind: &str) -> bool {
        matches!(
            (group, kind),
            ("", "Namespace" | "Node" | "PersistentVolume")
                | (
                    "rbac.authorization.k8s.io",
                    "ClusterRole" | "ClusterRoleBinding"
                )
                | ("apiextensions.k8s.io", "CustomResourceDefinition")
                | (
                    "storage.k8s.io",
                    "StorageClass" | "CSIDriver" | "CSINode" | "VolumeAttachment"
                )
                | ("scheduling.k8s.io", "PriorityClass")
                | ("networking.k8s.io", "IngressClass")
                | ("node.k8s.io", "RuntimeClass")
                | (
                    "admissionregistration.k8s.io",
                    "ValidatingWebhookConfiguration"
                        | "MutatingWebhookConfiguration"
                        | "ValidatingAdmissionPolicy"
                        | "ValidatingAdmissionPolicyBinding"
                )
                | ("apiregistration.k8s.io", "APIService")
        )
    }
}

/// An object cannot be identified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("field {field} is missing or not a non-empty string")]
pub struct KeyError {
    /// The offending field (`apiVersion`, `kind`, `metadata.name`, `metadata.namespace`).
    pub field: &'static str,
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.group.is_empty() { "" } else { "." };
        if self.namespace.is_empty() {
            write!(f, "{}{group}{} {}", self.kind, self.group, self.name)
        } else {
            write!(
                f,
                "{}{group}{} {}/{}",
                self.kind, self.group, self.namespace, self.name
            )
        }
    }
}

/// The group part of an `apiVersion` (`apps/v1` → `apps`, `v1` → ``).
pub(crate) fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(group, _)| group)
}
