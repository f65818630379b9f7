//! Where a desired object goes on its cluster: its kind as the cluster serves it, its
//! namespace (the manifest's, else the destination's; none for a cluster-scoped kind), and
//! the checks that refuse the whole app — an object the guard refuses, one outside a
//! namespace-scoped cluster's scope, one the project does not permit. The refresh places
//! every object of an app before it reads live state; a takeover's warm-up places them to
//! learn which kinds to watch, and watches none of a refused app.
//!
//! A kind the cluster does not serve yet, defined by a CustomResourceDefinition of the same
//! app, is placed from that definition (its group, served version, plural and scope) and
//! marked unserved: the sync creates the CRD first and skips the object's dry run, as Argo
//! CD does. Only a hook may have `generateName` instead of a name (the sync names it).

use kube::api::ApiResource;
use serde_json::Value;

use super::problem::{COMPARISON_ERROR, Problem};
use super::{AppTarget, GitOpsReconciler, guard};
use crate::compare::ResourceKey;
use crate::live::{ClusterConn, KindInfo, LiveError};
use crate::source::Manifest;

/// A desired object placed on its cluster.
pub(super) struct Placed {
    /// Its key on the cluster (an empty name: a hook to be named by the sync).
    pub(super) key: ResourceKey,
    /// Its kind as the cluster serves it (or as a CRD of the app defines it).
    pub(super) kind: KindInfo,
    /// The manifest with `metadata.namespace` set (or removed, cluster-scoped).
    pub(super) object: Value,
    /// The cluster serves its kind now (false: a CRD of this app defines it).
    pub(super) served: bool,
}

/// The kinds the CustomResourceDefinitions among `manifests` define.
pub(super) fn defined_kinds(manifests: &[Manifest]) -> Vec<KindInfo> {
    manifests
        .iter()
        .filter(|m| {
            m.identity.group() == "apiextensions.k8s.io"
                && m.identity.kind == "CustomResourceDefinition"
        })
        .filter_map(|m| crd_kind(&m.object))
        .collect()
}

/// The kind a CRD manifest defines, at its first served version.
pub(super) fn crd_kind(crd: &Value) -> Option<KindInfo> {
    let spec = crd.get("spec")?;
    let group = spec.get("group")?.as_str()?;
    let names = spec.get("names")?;
    let kind = names.get("kind")?.as_str()?;
    let plural = names.get("plural")?.as_str()?;
    let version = spec
        .get("versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("served").and_then(Value::as_bool) != Some(false))?
        .get("name")?
        .as_str()?;
    Some(KindInfo {
        resource: ApiResource {
            group: group.to_owned(),
            version: version.to_owned(),
            api_version: format!("{group}/{version}"),
            kind: kind.to_owned(),
            plural: plural.to_owned(),
        },
        namespaced: spec.get("scope").and_then(Value::as_str) != Some("Cluster"),
    })
}

/// The app's destination namespace ("default" when unset).
pub(super) fn destination_namespace(target: &AppTarget) -> String {
    target
        .app
        .destination
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_owned())
}

impl GitOpsReconciler {
    /// Places `m` on the cluster of `conn` (`defined`: the kinds the app's own CRDs
    /// define), or says why the app is refused.
    pub(super) async fn place(
        &self,
        conn: &ClusterConn,
        target: &AppTarget,
        m: &Manifest,
        dest_ns: &str,
        defined: &[KindInfo],
    ) -> Result<Placed, Problem> {
        let id = &m.identity;
        let what = format!("{id} ({})", m.location);
        if let Some(why) = guard::object_refusal(&m.object, &what) {
            return Err(Problem::permanent(COMPARISON_ERROR, why));
        }
        let annotations = guard::annotation_map(&m.object);
        if id.name.is_empty() && !fleetshard_sync::is_hook(&annotations) {
            return Err(Problem::permanent(
                COMPARISON_ERROR,
                format!(
                    "{what}: no metadata.name (generateName names only hooks); nothing is synced"
                ),
            ));
        }
        let (kind, served) = match conn.kind_info(&id.api_version, &id.kind).await {
            Ok(kind) => (kind, true),
            Err(e @ LiveError::UnknownKind { .. }) => {
                let own = defined.iter().find(|k| {
                    k.resource.api_version == id.api_version && k.resource.kind == id.kind
                });
                match own {
                    Some(k) => (k.clone(), false),
                    None => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        };
        let mut object = m.object.clone();
        let namespace = if kind.namespaced {
            id.namespace.clone().unwrap_or_else(|| dest_ns.to_owned())
        } else {
            String::new()
        };
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            if kind.namespaced {
                meta.insert("namespace".into(), Value::String(namespace.clone()));
            } else {
                meta.remove("namespace");
            }
        }
        // Outside a namespace-scoped cluster's namespaces: the whole app is refused.
        conn.check_managed(&id.kind, &namespace, &id.name)?;
        let key = ResourceKey::new(id.group(), &id.kind, &namespace, &id.name);
        // Its kind, and its own namespace, against the project (a manifest's namespace
        // does not escape it; Argo CD's control plane is not written).
        self.check_resource(target, &key)?;
        Ok(Placed {
            key,
            kind,
            object,
            served,
        })
    }
}

/// The condition an object the app's manifests define more than once shows (Argo CD's).
pub const REPEATED_RESOURCE_WARNING: &str = "RepeatedResourceWarning";

/// Keeps, of the placed objects that share a key (group, kind, namespace as placed, name),
/// the last one in the manifests' order (across sources: the later source's), as Argo CD
/// does; answers one Argo CD message per repeated key, sorted. Hooks named only by
/// `generateName` are never repeats.
pub(super) fn keep_last<T>(placed: &mut Vec<T>, key: impl Fn(&T) -> &ResourceKey) -> Vec<String> {
    let mut count: std::collections::HashMap<ResourceKey, usize> = Default::default();
    for p in placed.iter().filter(|p| !key(p).name.is_empty()) {
        *count.entry(key(p).clone()).or_default() += 1;
    }
    let mut seen: std::collections::HashMap<ResourceKey, usize> = Default::default();
    placed.retain(|p| {
        let k = key(p);
        let Some(&n) = count.get(k).filter(|n| **n > 1) else {
            return true;
        };
        let s = seen.entry(k.clone()).or_default();
        *s += 1;
        *s == n
    });
    let mut messages: Vec<String> = count
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(k, n)| {
            format!(
                "Resource {}/{}/{}/{} appeared {n} times among application resources.",
                k.group, k.kind, k.namespace, k.name
            )
        })
        .collect();
    messages.sort();
    messages
}

#[cfg(test)]
mod repeated_tests {
    use super::keep_last;
    use crate::compare::ResourceKey;

    #[test]
    fn the_last_of_repeated_objects_wins_and_each_key_is_named_once() {
        let key = |name: &str| ResourceKey::new("apps", "Deployment", "shop", name);
        let mut placed = vec![
            (key("web"), 1),
            (key("db"), 2),
            (key("web"), 3),
            (key(""), 4),
            (key(""), 5),
            (key("web"), 6),
        ];
        let messages = keep_last(&mut placed, |p| &p.0);
        let kept: Vec<i32> = placed.iter().map(|p| p.1).collect();
        assert_eq!(kept, [2, 4, 5, 6]);
        assert_eq!(
            messages,
            ["Resource apps/Deployment/shop/web appeared 3 times among application resources."]
        );
    }
}
