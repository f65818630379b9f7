//! Where a desired object goes on its cluster: its kind as the cluster serves it, its
//! namespace (the manifest's, else the destination's; none for a cluster-scoped kind), and
//! the checks that refuse the whole app — an object the guard refuses, one outside a
//! namespace-scoped cluster's scope, one the project does not permit. The refresh places
//! every object of an app before it reads live state; a takeover's warm-up places them to
//! learn which kinds to watch, and watches none of a refused app.

use serde_json::Value;

use super::problem::{COMPARISON_ERROR, Problem};
use super::{AppTarget, GitOpsReconciler, guard};
use crate::compare::ResourceKey;
use crate::live::{ClusterConn, KindInfo};
use crate::source::Manifest;

/// A desired object placed on its cluster.
pub(super) struct Placed {
    /// Its key on the cluster.
    pub(super) key: ResourceKey,
    /// Its kind as the cluster serves it.
    pub(super) kind: KindInfo,
    /// The manifest with `metadata.namespace` set (or removed, cluster-scoped).
    pub(super) object: Value,
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
    /// Places `m` on the cluster of `conn`, or says why the app is refused.
    pub(super) async fn place(
        &self,
        conn: &ClusterConn,
        target: &AppTarget,
        m: &Manifest,
        dest_ns: &str,
    ) -> Result<Placed, Problem> {
        let id = &m.identity;
        if let Some(why) = guard::object_refusal(&m.object, &format!("{id} ({})", m.location)) {
            return Err(Problem::permanent(COMPARISON_ERROR, why));
        }
        let kind = conn.kind_info(&id.api_version, &id.kind).await?;
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
        Ok(Placed { key, kind, object })
    }
}
