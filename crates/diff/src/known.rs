//! argocd-cm's `resource.customizations.knownTypeFields.<group_kind>`: fields of a custom
//! resource that hold a core Kubernetes type, as Argo CD's known-types normalizer reads
//! them (a dotted path; a list met along it stands for each of its elements), plus Argo
//! CD's one built-in entry: an `argoproj.io/Rollout`'s `spec.template.spec` is a
//! `core/v1/PodSpec` unless argocd-cm configures that kind.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use fleetshard_manifest::customizations::ResourceOverride;

/// A field of a custom resource's kind that holds a core Kubernetes type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownField {
    /// The field's path, one map field a segment (lists along it are not named).
    pub path: Vec<String>,
    /// The type's name as Argo CD spells it (`core/v1/PodSpec`, `core/Quantity`).
    pub type_name: String,
}

/// The known-type fields of each group and kind.
#[derive(Debug, Default)]
pub(crate) struct KnownTypes {
    by_kind: BTreeMap<(String, String), Vec<KnownField>>,
}

static ROLLOUT: LazyLock<Vec<KnownField>> = LazyLock::new(|| {
    vec![KnownField {
        path: ["spec", "template", "spec"].map(str::to_owned).to_vec(),
        type_name: "core/v1/PodSpec".to_owned(),
    }]
});

impl KnownTypes {
    /// The fields argocd-cm's `overrides` declare, by exact `group/Kind` (or `Kind` for the
    /// core group); a wildcard key names no kind here, as in Argo CD.
    pub(crate) fn new(overrides: &BTreeMap<String, ResourceOverride>) -> KnownTypes {
        let mut by_kind: BTreeMap<(String, String), Vec<KnownField>> = BTreeMap::new();
        for (key, o) in overrides {
            let (group, kind) = key.split_once('/').unwrap_or(("", key));
            for f in &o.known_type_fields {
                by_kind
                    .entry((group.to_owned(), kind.to_owned()))
                    .or_default()
                    .push(KnownField {
                        path: f.field.split('.').map(str::to_owned).collect(),
                        type_name: f.type_name.clone(),
                    });
            }
        }
        KnownTypes { by_kind }
    }

    /// The known-type fields of `group`/`kind`.
    pub(crate) fn of(&self, group: &str, kind: &str) -> &[KnownField] {
        match self.by_kind.get(&(group.to_owned(), kind.to_owned())) {
            Some(fields) => fields,
            None if group == "argoproj.io" && kind == "Rollout" => &ROLLOUT,
            None => &[],
        }
    }
}
