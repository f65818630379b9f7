//! What a comparison of desired and live objects leaves out, as Argo CD's `ignoreDifferences`
//! and diff normalizers say.
//!
//! **Contract.** A [`Normalizer`] is built once per application from its
//! `spec.ignoreDifferences` and argocd-cm's resource customizations
//! ([`Normalizer::new`]: a jq expression that does not compile is an error naming it). For
//! one object it removes, from the desired and the live object alike
//! ([`Normalizer::normalize_pair`]):
//!
//! - every RFC 6901 JSON pointer of a matching rule (a path that is not there is skipped);
//! - every jq path expression of a matching rule, run as Argo CD runs it (`del(EXPR)` on
//!   the whole object, which must give exactly one value; otherwise the expression is
//!   skipped), through jaq, within a bound on its work;
//! - every field the live object's `metadata.managedFields` give to a manager a matching
//!   rule trusts (`managedFieldsManagers`): those fields are the other manager's to set;
//! - with `ignoreAggregatedRoles`, the `rules` of a ClusterRole that has an
//!   `aggregationRule` (the controller fills them).
//!
//! A rule matches an object by group and kind (globs, as Argo CD's), and name and namespace
//! when it gives them; argocd-cm's rules (`resource.customizations.ignoreDifferences.<gk>`
//! and `.all`) match by group and kind only. [`Normalizer::respect`] gives, for a sync with
//! `RespectIgnoreDifferences=true`, the desired object with the ignored fields set to their
//! live values (Argo CD's merge of what the normalizer removes from the live object: lists
//! are taken whole). [`Normalizer::known_fields`] gives the fields argocd-cm's
//! `knownTypeFields` declare to hold a core type. [`remove_webhook_mutations`] takes what
//! mutating admission webhooks added out of a server-side apply dry run's answer (a
//! server-side diff's predicted live object), by `managedFields` ownership. [`FieldSet`] is the one reader of `metadata.managedFields`, also used
//! by the comparison to know which fields its own manager applied. Pure: no I/O, no clock.

mod jq;
mod known;
mod managed;
mod merge;
mod pointer;
mod webhook;

use std::collections::BTreeMap;

use fleetshard_manifest::customizations::{
    CompareOptions, IgnoreDifference, IgnoreRules, ResourceOverride,
};
use fleetshard_manifest::glob::Glob;
use serde_json::Value;

pub use jq::JqExpression;
pub use known::KnownField;
pub use managed::{FieldSet, ManagedEntry};
pub use webhook::{PredictionError, remove_webhook_mutations};

/// Why a normalizer could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiffError {
    /// A jq path expression does not parse or compile.
    #[error("{origin}: jq path expression {expression:?}: {message}")]
    Jq {
        /// Where the rule comes from (`spec.ignoreDifferences[0]`, an argocd-cm key).
        origin: String,
        /// The expression.
        expression: String,
        /// What is wrong.
        message: String,
    },
}

/// Which object: its group, kind, namespace (empty when cluster-scoped) and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectRef<'a> {
    /// API group (`""` for the core group).
    pub group: &'a str,
    /// Kind.
    pub kind: &'a str,
    /// Namespace.
    pub namespace: &'a str,
    /// Name.
    pub name: &'a str,
}

/// One rule, compiled.
#[derive(Debug)]
struct Rule {
    group: Glob,
    kind: Glob,
    name: String,
    namespace: String,
    pointers: Vec<String>,
    jq: Vec<JqExpression>,
    managers: Vec<String>,
}

impl Rule {
    fn new(
        origin: &str,
        group: &str,
        kind: &str,
        name: &str,
        namespace: &str,
        rules: &IgnoreRules,
    ) -> Result<Rule, DiffError> {
        let jq = rules
            .jq_path_expressions
            .iter()
            .map(|e| {
                JqExpression::compile(e).map_err(|message| DiffError::Jq {
                    origin: origin.to_owned(),
                    expression: e.clone(),
                    message,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Rule {
            group: Glob::new(group),
            kind: Glob::new(kind),
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            pointers: rules.json_pointers.clone(),
            jq,
            managers: rules.managed_fields_managers.clone(),
        })
    }

    fn matches(&self, obj: ObjectRef<'_>) -> bool {
        self.group.is_match(obj.group)
            && self.kind.is_match(obj.kind)
            && (self.name.is_empty() || self.name == obj.name)
            && (self.namespace.is_empty() || self.namespace == obj.namespace)
    }
}

/// What one application's comparison leaves out (see the crate's documentation).
#[derive(Debug, Default)]
pub struct Normalizer {
    rules: Vec<Rule>,
    ignore_aggregated_roles: bool,
    known: known::KnownTypes,
}

impl Normalizer {
    /// The normalizer of an application with `ignore` (its `spec.ignoreDifferences`) under
    /// argocd-cm's `overrides` (by `group/Kind`, `Kind`, wildcards, `*/*`) and `compare`.
    pub fn new(
        ignore: &[IgnoreDifference],
        overrides: &BTreeMap<String, ResourceOverride>,
        compare: &CompareOptions,
    ) -> Result<Normalizer, DiffError> {
        let mut rules = Vec::new();
        for (key, o) in overrides {
            if o.ignore_differences.is_empty() {
                continue;
            }
            let (group, kind) = key.split_once('/').unwrap_or(("", key));
            let origin = format!("argocd-cm resource.customizations ({key}) ignoreDifferences");
            rules.push(Rule::new(
                &origin,
                group,
                kind,
                "",
                "",
                &o.ignore_differences,
            )?);
        }
        for (i, d) in ignore.iter().enumerate() {
            let origin = format!("spec.ignoreDifferences[{i}]");
            rules.push(Rule::new(
                &origin,
                &d.group,
                &d.kind,
                &d.name,
                &d.namespace,
                &d.rules,
            )?);
        }
        Ok(Normalizer {
            rules,
            ignore_aggregated_roles: compare.ignore_aggregated_roles,
            known: known::KnownTypes::new(overrides),
        })
    }

    /// The normalizer Argo CD's live cache compares a tracked object's versions with, to
    /// tell whether a change may skip its application's refresh: argocd-cm's
    /// `ignoreResourceUpdates` of each override (plus its `ignoreDifferences` when
    /// `ignoreDifferencesOnResourceUpdates` is true, Argo CD's default), and for every kind
    /// `metadata.resourceVersion`, `metadata.generation` and `metadata.managedFields`. Only
    /// paths count here: `managedFieldsManagers` and `ignoreAggregatedRoles` do not (Argo
    /// CD's ignore normalizer reads neither).
    pub fn for_resource_updates(
        overrides: &BTreeMap<String, ResourceOverride>,
        compare: &CompareOptions,
    ) -> Result<Normalizer, DiffError> {
        let mut rules = Vec::new();
        for (key, o) in overrides {
            let mut paths = o.ignore_resource_updates.clone();
            if compare.ignore_differences_on_resource_updates {
                paths
                    .json_pointers
                    .extend(o.ignore_differences.json_pointers.iter().cloned());
                paths
                    .jq_path_expressions
                    .extend(o.ignore_differences.jq_path_expressions.iter().cloned());
            }
            paths.managed_fields_managers.clear();
            if paths.is_empty() {
                continue;
            }
            let (group, kind) = key.split_once('/').unwrap_or(("", key));
            let origin = format!("argocd-cm resource.customizations ({key}) ignoreResourceUpdates");
            rules.push(Rule::new(&origin, group, kind, "", "", &paths)?);
        }
        let always = IgnoreRules {
            json_pointers: ["resourceVersion", "generation", "managedFields"]
                .map(|f| format!("/metadata/{f}"))
                .to_vec(),
            ..IgnoreRules::default()
        };
        rules.push(Rule::new("resource updates", "*", "*", "", "", &always)?);
        Ok(Normalizer {
            rules,
            ignore_aggregated_roles: false,
            known: known::KnownTypes::default(),
        })
    }

    /// `value` (a live object) without what `obj`'s rules leave out of it.
    pub fn normalized(&self, obj: ObjectRef<'_>, value: &Value) -> Value {
        let managed = managed_fields(value);
        let mut out = value.clone();
        self.normalize(obj, &mut out, &managed);
        out
    }

    /// The fields of `group`/`kind` that hold a core Kubernetes type (argocd-cm's
    /// `knownTypeFields`, and Argo CD's built-in Rollout entry): the comparison treats them
    /// as it treats that type in a core kind.
    pub fn known_fields(&self, group: &str, kind: &str) -> &[KnownField] {
        self.known.of(group, kind)
    }

    /// Whether it leaves nothing out of any object.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && !self.ignore_aggregated_roles
    }

    /// The field managers whose fields win for some object (every rule's
    /// `managedFieldsManagers`): the live cache must keep their `managedFields` entries.
    pub fn trusted_managers(&self) -> impl Iterator<Item = &str> {
        self.rules
            .iter()
            .flat_map(|r| r.managers.iter().map(String::as_str))
    }

    /// Whether anything is left out of `obj`.
    pub fn applies_to(&self, obj: ObjectRef<'_>) -> bool {
        self.aggregated(obj) || self.rules.iter().any(|r| r.matches(obj))
    }

    fn aggregated(&self, obj: ObjectRef<'_>) -> bool {
        self.ignore_aggregated_roles
            && obj.group == "rbac.authorization.k8s.io"
            && obj.kind == "ClusterRole"
    }

    /// `value` without what the paths of `obj`'s rules (pointers, jq expressions) and the
    /// aggregated-roles option leave out.
    fn normalize_paths(&self, obj: ObjectRef<'_>, value: &mut Value) {
        for rule in self.rules.iter().filter(|r| r.matches(obj)) {
            for p in &rule.pointers {
                pointer::remove(value, p);
            }
            for e in &rule.jq {
                if let Some(out) = e.delete(value) {
                    *value = out;
                }
            }
        }
        if self.aggregated(obj)
            && value.get("aggregationRule").is_some_and(|r| !r.is_null())
            && let Some(map) = value.as_object_mut()
        {
            map.remove("rules");
        }
    }

    /// `value` without the fields `managed_fields` (the live object's
    /// `metadata.managedFields`) gives to the managers `obj`'s rules trust.
    fn normalize_managers(&self, obj: ObjectRef<'_>, value: &mut Value, managed_fields: &Value) {
        for rule in self.rules.iter().filter(|r| r.matches(obj)) {
            if !rule.managers.is_empty() {
                managed::remove_owned(value, managed_fields, &rule.managers);
            }
        }
    }

    fn normalize(&self, obj: ObjectRef<'_>, value: &mut Value, managed_fields: &Value) {
        self.normalize_paths(obj, value);
        self.normalize_managers(obj, value, managed_fields);
    }

    /// The desired and live objects of `obj`, each without what is left out of it; `None`
    /// when nothing is (the objects compare as they are).
    pub fn normalize_pair(
        &self,
        obj: ObjectRef<'_>,
        desired: &Value,
        live: &Value,
    ) -> Option<(Value, Value)> {
        if !self.applies_to(obj) {
            return None;
        }
        let managed = managed_fields(live);
        let (mut d, mut l) = (desired.clone(), live.clone());
        self.normalize(obj, &mut d, &managed);
        self.normalize(obj, &mut l, &managed);
        Some((d, l))
    }

    /// The desired object to apply under `RespectIgnoreDifferences=true`: `desired` with
    /// every field left out of `live` set to its live value (lists whole), as Argo CD
    /// merges what its normalizer removes from the live object into the target. Of the
    /// trusted managers' fields only those `desired` sets are carried (Argo CD removes only
    /// the fields both sides have).
    pub fn respect(&self, obj: ObjectRef<'_>, desired: &Value, live: &Value) -> Value {
        let mut out = desired.clone();
        if !self.applies_to(obj) {
            return out;
        }
        let mut by_paths = live.clone();
        self.normalize_paths(obj, &mut by_paths);
        if let Some(patch) = merge::diff(&by_paths, live) {
            merge::apply(&mut out, &patch);
        }
        let managed = managed_fields(live);
        let mut by_managers = live.clone();
        self.normalize_managers(obj, &mut by_managers, &managed);
        if let Some(patch) =
            merge::diff(&by_managers, live).and_then(|p| merge::restrict(&p, desired))
        {
            merge::apply(&mut out, &patch);
        }
        out
    }
}

/// A live object's `metadata.managedFields` (null when it has none).
fn managed_fields(live: &Value) -> Value {
    live.pointer("/metadata/managedFields")
        .cloned()
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests;
