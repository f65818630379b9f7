//! The structural comparison of one desired object with its live counterpart.
//!
//! The walk goes over the *desired* object: every field it sets must be present and equal
//! in the live object (with the normalisation of [`super`]); fields only the live object
//! has count only when our records say we applied them ([`super::owned`]). Lists are
//! matched element by element on their merge key where Kubernetes has one, else by
//! position.

use serde_json::{Map, Value};

use fleetshard_diff::KnownField;

use super::defaults::default_for;
use super::known;
use super::owned::{LAST_APPLIED, Owned};
use super::quantity::quantities_equal;
use super::tracking::{INSTALLATION_ID_ANNOTATION, TRACKING_ANNOTATION};
use super::{Difference, DifferenceKind};

/// Metadata the API server writes; never compared, even when a manifest carries it
/// (generated manifests often have `creationTimestamp: null`).
const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Annotations written by tools rather than by the manifest's author.
const TOOL_ANNOTATIONS: &[&str] = &[
    LAST_APPLIED,
    TRACKING_ANNOTATION,
    INSTALLATION_ID_ANNOTATION,
    "deployment.kubernetes.io/revision",
];

/// One step of a path: a map field, a keyed list element, or a list position.
#[derive(Debug, Clone)]
enum Seg {
    Field(String),
    Key(String),
    Index(usize),
}

/// Walks one pair of objects and collects their differences.
pub(crate) struct Walker<'k> {
    kind: &'k str,
    /// The kind's fields that hold a core type (argocd-cm's `knownTypeFields`).
    known: &'k [KnownField],
    path: Vec<Seg>,
    diffs: Vec<Difference>,
}

impl<'k> Walker<'k> {
    /// A walker for objects of `kind` whose `known` fields hold core types.
    pub(crate) fn new(kind: &'k str, known: &'k [KnownField]) -> Walker<'k> {
        Walker {
            kind,
            known,
            path: Vec::new(),
            diffs: Vec::new(),
        }
    }

    /// Compares the whole objects and returns the differences found.
    pub(crate) fn run(
        mut self,
        desired: &Value,
        live: &Value,
        owned: Owned<'_>,
    ) -> Vec<Difference> {
        self.compare(desired, live, owned);
        self.diffs
    }

    fn compare(&mut self, desired: &Value, live: &Value, owned: Owned<'_>) {
        match (desired, live) {
            (Value::Object(d), Value::Object(l)) => self.compare_maps(d, l, owned),
            (Value::Array(d), Value::Array(l)) => self.compare_lists(d, l, owned),
            (d, l) if self.leaf_equal(d, l) => {}
            (d, l) => self.record(DifferenceKind::Changed, Some(d), Some(l)),
        }
    }

    fn compare_maps(
        &mut self,
        desired: &Map<String, Value>,
        live: &Map<String, Value>,
        owned: Owned<'_>,
    ) {
        for (name, d) in desired {
            if d.is_null() || self.ignored(name) {
                continue;
            }
            self.path.push(Seg::Field(name.clone()));
            match live.get(name).filter(|l| !l.is_null()) {
                Some(l) => self.compare(d, l, owned.field(name)),
                None if is_empty_like(d) || self.is_default(desired, d) => {}
                None => self.record(DifferenceKind::MissingInLive, Some(d), None),
            }
            self.path.pop();
        }
        for (name, l) in live {
            let in_desired = desired.get(name).is_some_and(|d| !d.is_null());
            if in_desired || self.ignored(name) || !owned.owns_field(name) {
                continue;
            }
            self.path.push(Seg::Field(name.clone()));
            if !is_empty_like(l) && !self.is_default(live, l) {
                // Descend: of a map or keyed list we applied, only what we applied counts
                // (`metadata.annotations` may hold nothing of ours but the tracking id).
                match l {
                    Value::Object(l) => self.compare_maps(&Map::new(), l, owned.field(name)),
                    Value::Array(l) if merge_key(name, &[], l).is_some() => {
                        self.compare_lists(&[], l, owned.field(name))
                    }
                    _ => self.record(DifferenceKind::ExtraInLive, None, Some(l)),
                }
            }
            self.path.pop();
        }
    }

    fn compare_lists(&mut self, desired: &[Value], live: &[Value], owned: Owned<'_>) {
        let field = match self.path.last() {
            Some(Seg::Field(f)) => f.as_str(),
            _ => "",
        };
        if field == "finalizers" {
            return self.compare_sets(desired, live, owned);
        }
        let Some(key) = merge_key(field, desired, live) else {
            if desired.len() != live.len() {
                return self.record(
                    DifferenceKind::Changed,
                    Some(&Value::from(desired)),
                    Some(&Value::from(live)),
                );
            }
            for (i, (d, l)) in desired.iter().zip(live).enumerate() {
                self.path.push(Seg::Index(i));
                self.compare(d, l, owned.index(i));
                self.path.pop();
            }
            return;
        };
        let mut matched = vec![false; live.len()];
        for d in desired {
            let wanted = &d[key];
            self.path
                .push(Seg::Key(format!("{key}={}", show_key(wanted))));
            match live.iter().position(|l| &l[key] == wanted) {
                Some(i) => {
                    matched[i] = true;
                    self.compare(d, &live[i], owned.element(key, &live[i]));
                }
                None => self.record(DifferenceKind::MissingInLive, Some(d), None),
            }
            self.path.pop();
        }
        for (l, _) in live.iter().zip(matched).filter(|(_, m)| !m) {
            if owned.owns_element(key, l) {
                self.path
                    .push(Seg::Key(format!("{key}={}", show_key(&l[key]))));
                self.record(DifferenceKind::ExtraInLive, None, Some(l));
                self.path.pop();
            }
        }
    }

    /// Lists of distinct values (`finalizers`): each desired value must be there; a live
    /// value only counts if we applied it (the API server and controllers add their own).
    fn compare_sets(&mut self, desired: &[Value], live: &[Value], owned: Owned<'_>) {
        let missing: Vec<&Value> = desired.iter().filter(|d| !live.contains(d)).collect();
        let extra: Vec<&Value> = live
            .iter()
            .filter(|l| !desired.contains(l) && owned.owns_value(l))
            .collect();
        if !missing.is_empty() || !extra.is_empty() {
            self.record(
                DifferenceKind::Changed,
                Some(&Value::from(desired)),
                Some(&Value::from(live)),
            );
        }
    }

    /// Whether `name` (a field of the map at the current path) is never compared.
    fn ignored(&self, name: &str) -> bool {
        match self.path.as_slice() {
            [] => matches!(name, "status" | "apiVersion" | "kind"),
            // The name and namespace are the key, already matched (a manifest may leave the
            // namespace to the destination).
            [Seg::Field(m)] if m == "metadata" => {
                SERVER_METADATA.contains(&name) || matches!(name, "name" | "namespace")
            }
            [Seg::Field(m), Seg::Field(a)] if m == "metadata" && a == "annotations" => {
                TOOL_ANNOTATIONS.contains(&name)
            }
            _ => false,
        }
    }

    /// Whether `value` (at the current path, held by `parent`) is the field's default.
    fn is_default(&self, parent: &Map<String, Value>, value: &Value) -> bool {
        let pattern = self.pattern();
        let Some(default) = default_for(self.kind, &pattern, parent) else {
            return false;
        };
        let mut probe = Walker {
            kind: self.kind,
            known: self.known,
            path: self.path.clone(),
            diffs: Vec::new(),
        };
        probe.compare(value, &default, Owned::default());
        probe.compare(&default, value, Owned::default());
        probe.diffs.is_empty()
    }

    fn leaf_equal(&self, desired: &Value, live: &Value) -> bool {
        if desired == live {
            return true;
        }
        if let (Value::Number(d), Value::Number(l)) = (desired, live) {
            let exact = match (d.as_i64(), l.as_i64(), d.as_u64(), l.as_u64()) {
                (Some(a), Some(b), _, _) => Some(a == b),
                (_, _, Some(a), Some(b)) => Some(a == b),
                _ => None,
            };
            if let Some(equal) = exact {
                return equal;
            }
            if d.as_f64() == l.as_f64() {
                return true;
            }
        }
        self.at_quantity() && quantities_equal(desired, live)
    }

    /// Whether the current path holds a resource quantity (container and PVC
    /// `resources.limits/requests.*`, ResourceQuota `spec.hard.*`, PV `spec.capacity.*`;
    /// in a custom resource, a known-type field declared a `core/Quantity`, or one of those
    /// paths inside a field declared a core type).
    fn at_quantity(&self) -> bool {
        let mut p = self.pattern();
        match known::as_core(self.known, &p) {
            Some(known::Core::Quantity) => return true,
            Some(known::Core::In(pattern)) => p = pattern,
            None => {}
        }
        matches!(
            p.as_slice(),
            [.., "resources", "limits" | "requests", _]
                | ["spec", "hard", _]
                | ["spec", "capacity", _]
        )
    }

    /// The current path with list elements as `*`, for the defaults table.
    fn pattern(&self) -> Vec<&str> {
        self.path
            .iter()
            .map(|s| match s {
                Seg::Field(f) => f.as_str(),
                Seg::Key(_) | Seg::Index(_) => "*",
            })
            .collect()
    }

    fn record(&mut self, kind: DifferenceKind, desired: Option<&Value>, live: Option<&Value>) {
        self.diffs.push(Difference {
            path: show_path(&self.path),
            kind,
            desired: desired.cloned(),
            live: live.cloned(),
        });
    }
}

/// Values Go's `omitempty` drops when the API server writes the object back: a manifest
/// field holding one of them matches a live object without the field.
fn is_empty_like(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// The merge key of list `field`, if every element on both sides has it and it is unique
/// on each side; `None` means the list is compared by position.
fn merge_key(field: &str, desired: &[Value], live: &[Value]) -> Option<&'static str> {
    let has = |key: &str| {
        desired
            .iter()
            .chain(live)
            .all(|e| e.get(key).is_some_and(|k| !k.is_null()))
    };
    let key = match field {
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        "conditions" => "type",
        "ports" if has("containerPort") => "containerPort",
        "ports" if has("port") => "port",
        _ => "name",
    };
    if !has(key) {
        return None;
    }
    let unique = |side: &[Value]| {
        side.iter()
            .enumerate()
            .all(|(i, e)| side[..i].iter().all(|f| f[key] != e[key]))
    };
    (unique(desired) && unique(live)).then_some(key)
}

fn show_key(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `spec.template.spec.containers[name=web].image`; a field name that is not a plain
/// identifier is quoted: `metadata.labels["app.kubernetes.io/name"]`.
fn show_path(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Field(f)
                if !f.is_empty()
                    && f.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
            {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(f);
            }
            Seg::Field(f) => out.push_str(&format!("[{}]", Value::from(f.as_str()))),
            Seg::Key(k) => out.push_str(&format!("[{k}]")),
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}
