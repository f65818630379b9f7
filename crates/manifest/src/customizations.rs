//! Argo CD's resource customizations in `argocd-cm`, read as Argo CD's settings manager
//! reads them, and an Application's `spec.ignoreDifferences`.
//!
//! - `resource.customizations`: a YAML map from `group/Kind` (`Kind` for the core group,
//!   wildcards allowed: `*.crossplane.io/*`) to `health.lua`, `health.lua.useOpenLibs`,
//!   `actions`, `ignoreDifferences` and `ignoreResourceUpdates` (each a YAML text of its
//!   own, as Argo CD writes them) and `knownTypeFields`;
//! - the split keys `resource.customizations.<type>.<group>_<kind>` (or `.<Kind>`, or
//!   `.all` for every kind), whose value replaces that field of the map's entry: `health`,
//!   `useOpenLibs` (`true`/`false` as Go's `ParseBool` reads them), `actions`,
//!   `ignoreDifferences`, `ignoreResourceUpdates` (YAML) and `knownTypeFields` (a YAML list);
//! - `resource.compareoptions` (YAML: `ignoreAggregatedRoles`, `ignoreResourceStatusField`
//!   — `all` (the default), `crd`, `none`/`off`/`false` —, and
//!   `ignoreDifferencesOnResourceUpdates`, default true);
//! - `resource.ignoreResourceUpdatesEnabled` (default true);
//! - `resource.exclusions` and `resource.inclusions` (YAML lists, [`ResourceFilter`]).
//!
//! A value Argo CD refuses (YAML that does not read, an unknown customization type, a key
//! with more than one `_`) is an error naming the key: Argo CD then fails every comparison.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The argocd-cm key of the YAML map of customizations.
pub const CUSTOMIZATIONS_KEY: &str = "resource.customizations";

/// The argocd-cm key of the compare options.
pub const COMPARE_OPTIONS_KEY: &str = "resource.compareoptions";

/// The argocd-cm key that turns `ignoreResourceUpdates` off.
pub const IGNORE_RESOURCE_UPDATES_ENABLED_KEY: &str = "resource.ignoreResourceUpdatesEnabled";

/// What to leave out of a comparison (`ignoreDifferences`) or of the changes that queue a
/// refresh (`ignoreResourceUpdates`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IgnoreRules {
    /// RFC 6901 JSON pointers (`/spec/replicas`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub json_pointers: Vec<String>,
    /// jq path expressions (`.spec.template.spec.containers[].image`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jq_path_expressions: Vec<String>,
    /// Field managers whose fields of the live object win over Git's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_fields_managers: Vec<String>,
}

impl IgnoreRules {
    /// Whether nothing is ignored.
    pub fn is_empty(&self) -> bool {
        self.json_pointers.is_empty()
            && self.jq_path_expressions.is_empty()
            && self.managed_fields_managers.is_empty()
    }
}

/// One entry of an Application's `spec.ignoreDifferences`: rules for the objects it names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IgnoreDifference {
    /// The objects' group (a glob; empty: the core group).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Their kind (a glob).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Their name (empty: any).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Their namespace (empty: any).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// What to ignore in them.
    #[serde(flatten)]
    pub rules: IgnoreRules,
}

/// A `knownTypeFields` entry: a field of a custom resource that holds a Kubernetes type.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct KnownTypeField {
    /// The field's path (`spec.template.spec`).
    #[serde(default)]
    pub field: String,
    /// The Kubernetes type (`core/v1/PodSpec`).
    #[serde(default, rename = "type")]
    pub type_name: String,
}

/// One group/kind's customization.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceOverride {
    /// `health.lua`: the health script.
    pub health_lua: String,
    /// `useOpenLibs` (`health.lua.useOpenLibs` in the YAML map): the health script may use
    /// the standard libraries.
    pub use_open_libs: bool,
    /// `actions` (resource actions: read, not run by fleetshard).
    pub actions: String,
    /// `ignoreDifferences`.
    pub ignore_differences: IgnoreRules,
    /// `ignoreResourceUpdates`.
    pub ignore_resource_updates: IgnoreRules,
    /// `knownTypeFields`.
    pub known_type_fields: Vec<KnownTypeField>,
}

/// An entry of the YAML map as written: `ignoreDifferences` and `ignoreResourceUpdates`
/// are YAML texts of their own, as in Argo CD's type.
#[derive(Debug, Default, Deserialize)]
struct RawOverride {
    #[serde(default, rename = "health.lua")]
    health_lua: String,
    #[serde(default, rename = "health.lua.useOpenLibs")]
    use_open_libs: bool,
    #[serde(default)]
    actions: String,
    #[serde(default, rename = "ignoreDifferences")]
    ignore_differences: String,
    #[serde(default, rename = "ignoreResourceUpdates")]
    ignore_resource_updates: String,
    #[serde(default, rename = "knownTypeFields")]
    known_type_fields: Vec<KnownTypeField>,
}

/// `resource.compareoptions`' `ignoreResourceStatusField`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IgnoreStatus {
    /// `status` of every object is ignored (Argo CD's default, and what an unknown value
    /// means).
    #[default]
    All,
    /// Only CustomResourceDefinitions' `status`.
    Crd,
    /// No object's `status` is ignored (`none`, `off`, `false`).
    None,
}

/// `resource.compareoptions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompareOptions {
    /// `ignoreAggregatedRoles`: a ClusterRole with an `aggregationRule` compares without
    /// its `rules` (the controller fills them).
    pub ignore_aggregated_roles: bool,
    /// `ignoreResourceStatusField`.
    pub ignore_resource_status_field: IgnoreStatus,
    /// `ignoreDifferencesOnResourceUpdates`: a live change only in ignored fields queues
    /// no refresh.
    pub ignore_differences_on_resource_updates: bool,
}

impl Default for CompareOptions {
    /// Argo CD's defaults.
    fn default() -> Self {
        CompareOptions {
            ignore_aggregated_roles: false,
            ignore_resource_status_field: IgnoreStatus::All,
            ignore_differences_on_resource_updates: true,
        }
    }
}

/// Everything argocd-cm says about comparison and health.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceCustomizations {
    /// `resource.exclusions` / `resource.inclusions` with Argo CD's core exclusions.
    pub resource_filter: ResourceFilter,
    /// By key: `group/Kind`, `Kind` (core group), a wildcard, or `*/*` (`.all`).
    pub overrides: BTreeMap<String, ResourceOverride>,
    /// `resource.compareoptions`.
    pub compare: CompareOptions,
    /// `resource.ignoreResourceUpdatesEnabled`.
    pub ignore_resource_updates_enabled: bool,
}

/// A customization argocd-cm cannot give.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("argocd-cm {key}: {message}")]
pub struct CustomizationError {
    /// The argocd-cm key.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl ResourceCustomizations {
    /// Reads argocd-cm's `data`.
    pub fn from_argocd_cm(data: &BTreeMap<String, String>) -> Result<Self, CustomizationError> {
        let err = |key: &str, message: String| CustomizationError {
            key: key.to_owned(),
            message,
        };
        let rules = |key: &str, text: &str| -> Result<IgnoreRules, CustomizationError> {
            if text.trim().is_empty() {
                return Ok(IgnoreRules::default());
            }
            serde_saphyr::from_str(text).map_err(|e| err(key, first_line(&e.to_string())))
        };
        let raw: BTreeMap<String, RawOverride> = match data.get(CUSTOMIZATIONS_KEY) {
            Some(text) if !text.trim().is_empty() => serde_saphyr::from_str(text)
                .map_err(|e| err(CUSTOMIZATIONS_KEY, first_line(&e.to_string())))?,
            _ => BTreeMap::new(),
        };
        let mut overrides = BTreeMap::new();
        for (gk, r) in raw {
            let key = format!("{CUSTOMIZATIONS_KEY} ({gk})");
            overrides.insert(
                gk,
                ResourceOverride {
                    health_lua: r.health_lua,
                    use_open_libs: r.use_open_libs,
                    actions: r.actions,
                    ignore_differences: rules(&key, &r.ignore_differences)?,
                    ignore_resource_updates: rules(&key, &r.ignore_resource_updates)?,
                    known_type_fields: r.known_type_fields,
                },
            );
        }
        let prefix = format!("{CUSTOMIZATIONS_KEY}.");
        for (key, value) in data {
            let Some(rest) = key.strip_prefix(&prefix) else {
                continue;
            };
            let Some((kind, group_kind)) = rest.split_once('.') else {
                continue;
            };
            let target = match group_kind {
                "all" => "*/*".to_owned(),
                gk => match gk.split('_').collect::<Vec<_>>().as_slice() {
                    [group, kind] => format!("{group}/{kind}"),
                    [kind] if !kind.is_empty() => (*kind).to_owned(),
                    _ => {
                        return Err(err(
                            key,
                            "expected resource.customizations.<type>.<group>_<kind> or \
                             .<kind>"
                                .to_owned(),
                        ));
                    }
                },
            };
            let entry = overrides.entry(target).or_default();
            match kind {
                "health" => entry.health_lua.clone_from(value),
                "useOpenLibs" => {
                    entry.use_open_libs = parse_go_bool(value)
                        .ok_or_else(|| err(key, format!("{value:?} is not a boolean")))?;
                }
                "actions" => entry.actions.clone_from(value),
                "ignoreDifferences" => entry.ignore_differences = rules(key, value)?,
                "ignoreResourceUpdates" => entry.ignore_resource_updates = rules(key, value)?,
                "knownTypeFields" => {
                    entry.known_type_fields = if value.trim().is_empty() {
                        Vec::new()
                    } else {
                        serde_saphyr::from_str(value)
                            .map_err(|e| err(key, first_line(&e.to_string())))?
                    };
                }
                other => {
                    return Err(err(
                        key,
                        format!("resource customization type {other:?} is not supported"),
                    ));
                }
            }
        }
        let mut compare = CompareOptions::default();
        if let Some(text) = data
            .get(COMPARE_OPTIONS_KEY)
            .filter(|t| !t.trim().is_empty())
        {
            #[derive(Deserialize)]
            #[serde(rename_all = "camelCase")]
            struct Raw {
                ignore_aggregated_roles: Option<bool>,
                ignore_resource_status_field: Option<serde_json::Value>,
                ignore_differences_on_resource_updates: Option<bool>,
            }
            let raw: Raw = serde_saphyr::from_str(text)
                .map_err(|e| err(COMPARE_OPTIONS_KEY, first_line(&e.to_string())))?;
            if let Some(v) = raw.ignore_aggregated_roles {
                compare.ignore_aggregated_roles = v;
            }
            if let Some(v) = raw.ignore_differences_on_resource_updates {
                compare.ignore_differences_on_resource_updates = v;
            }
            compare.ignore_resource_status_field = match raw.ignore_resource_status_field {
                // YAML's `off` and `false` read as booleans: Argo CD takes them as `none`.
                Some(serde_json::Value::Bool(false)) => IgnoreStatus::None,
                Some(serde_json::Value::String(s)) => match s.as_str() {
                    "crd" => IgnoreStatus::Crd,
                    "none" | "off" | "false" => IgnoreStatus::None,
                    _ => IgnoreStatus::All,
                },
                _ => IgnoreStatus::All,
            };
        }
        let ignore_resource_updates_enabled = match data
            .get(IGNORE_RESOURCE_UPDATES_ENABLED_KEY)
            .filter(|v| !v.is_empty())
        {
            None => true,
            Some(v) => parse_go_bool(v).ok_or_else(|| {
                err(
                    IGNORE_RESOURCE_UPDATES_ENABLED_KEY,
                    format!("{v:?} is not a boolean"),
                )
            })?,
        };
        Ok(ResourceCustomizations {
            resource_filter: ResourceFilter::from_argocd_cm(data)?,
            overrides,
            compare,
            ignore_resource_updates_enabled,
        })
    }

    /// Whether argocd-cm's `data` has any key read here (an argocd-cm without them reads
    /// as the defaults).
    pub fn keys_in(data: &BTreeMap<String, String>) -> impl Iterator<Item = (&String, &String)> {
        data.iter().filter(|(k, _)| {
            k.starts_with(CUSTOMIZATIONS_KEY)
                || *k == COMPARE_OPTIONS_KEY
                || *k == IGNORE_RESOURCE_UPDATES_ENABLED_KEY
                || *k == EXCLUSIONS_KEY
                || *k == INCLUSIONS_KEY
        })
    }
}

use fleetshard_util::boolean::parse_go_bool;

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_owned()
}

mod filter;

pub use filter::{EXCLUSIONS_KEY, FilteredResource, INCLUSIONS_KEY, ResourceFilter};

#[cfg(test)]
mod tests;
