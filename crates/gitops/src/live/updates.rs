//! Which live changes do not refresh their application, as Argo CD's live cache decides
//! it (`resource.ignoreResourceUpdatesEnabled`, on by default): a new version of a tracked
//! object whose fields, less argocd-cm's `ignoreResourceUpdates` paths (and its
//! `ignoreDifferences` paths under `ignoreDifferencesOnResourceUpdates`, Argo CD's
//! default) and `metadata.resourceVersion`, `generation` and `managedFields`, equal the
//! cached version's, and whose health status is the same, is stored without telling the
//! listener. Everything else (a new object, a deletion, any other field, a health change)
//! is told. Until the reconciler installs a filter ([`ClusterConn::set_update_filter`]),
//! every change is told.
//!
//! [`ClusterConn::set_update_filter`]: super::ClusterConn::set_update_filter

use std::sync::{Arc, Mutex};

use fleetshard_diff::{DiffError, Normalizer, ObjectRef};
use fleetshard_health::HealthChecks;
use fleetshard_manifest::customizations::ResourceCustomizations;
use serde_json::Value;

/// What decides whether a live change may skip its application's refresh.
#[derive(Debug)]
pub struct UpdateFilter {
    normalizer: Normalizer,
    health: HealthChecks,
}

/// The filter a cluster's caches apply, shared by them and their watch tasks; `None`: every
/// change is told.
pub(crate) type SharedUpdateFilter = Arc<Mutex<Option<Arc<UpdateFilter>>>>;

impl UpdateFilter {
    /// The filter of argocd-cm's `customizations`, health assessed by `health`; `None` when
    /// `resource.ignoreResourceUpdatesEnabled` is false. `Err` names a jq expression that
    /// does not compile.
    pub fn new(
        customizations: &ResourceCustomizations,
        health: HealthChecks,
    ) -> Result<Option<UpdateFilter>, DiffError> {
        if !customizations.ignore_resource_updates_enabled {
            return Ok(None);
        }
        let normalizer =
            Normalizer::for_resource_updates(&customizations.overrides, &customizations.compare)?;
        Ok(Some(UpdateFilter { normalizer, health }))
    }

    /// Whether the change of an object of `group` from `old` to `new` is one that does not
    /// refresh its application.
    pub fn ignores(&self, group: &str, old: &Value, new: &Value) -> bool {
        fn text<'v>(v: &'v Value, pointer: &str) -> &'v str {
            v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
        }
        let obj = ObjectRef {
            group,
            kind: text(new, "/kind"),
            namespace: text(new, "/metadata/namespace"),
            name: text(new, "/metadata/name"),
        };
        self.normalizer.normalized(obj, old) == self.normalizer.normalized(obj, new)
            && self.health.assess(Some(old)).status() == self.health.assess(Some(new)).status()
    }
}
