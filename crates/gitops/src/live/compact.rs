//! A cached live object kept compact: its JSON text, parsed again when an app's refresh
//! (or a scan for orphans) reads it, with what the cache itself decides from kept beside
//! it — the resourceVersion, the instance names it is indexed under.
//!
//! A parsed object is a tree of `serde_json` maps, each a B-tree leaf of 11 slots (632
//! bytes) even for one entry: a slimmed ConfigMap of six maps took about 6 KiB parsed and
//! a few hundred bytes as text. At 1,000 clusters × 10,000 apps a replica caches about
//! 45,000 objects, 265 MiB as trees. Parsing a kilobyte of JSON again costs a few
//! microseconds per object read (`benches/takeover_warmup.rs` measures it on a takeover).

use std::sync::Arc;

use serde_json::Value;

/// An object's resourceVersion as the cache compares it: numeric when it is a canonical
/// decimal (every etcd-backed API server's), else its text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Version {
    Missing,
    Number(u64),
    Text(Box<str>),
}

impl Version {
    fn of(value: &Value) -> Self {
        match value
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
        {
            None => Version::Missing,
            Some(s) => match s.parse::<u64>() {
                Ok(n) if n.to_string() == s => Version::Number(n),
                _ => Version::Text(s.into()),
            },
        }
    }

    /// The version as a number, when it parses as one.
    fn number(&self) -> Option<u64> {
        match self {
            Version::Missing => None,
            Version::Number(n) => Some(*n),
            Version::Text(s) => s.parse().ok(),
        }
    }
}

/// One cached object: its compact JSON text (or its tree, for the kinds the resource
/// tree scans: [`Form`]) and what the cache indexes it by.
#[derive(Debug, Clone)]
pub(crate) struct Compact {
    form: Form,
    /// It names an owner (`metadata.ownerReferences`): a resource tree's node may be its
    /// parent.
    owned: bool,
    version: Version,
    /// The instance names it could be tracked under (`compare::candidate_apps`).
    apps: Box<[Box<str>]>,
}

/// How an object is kept: as compact JSON text, parsed at each read (an app's refresh
/// reads its own objects); or parsed once, for the kinds the app-state cache's resource
/// tree scans whole at every app's write (`live::TREE_KINDS`: Pods, ReplicaSets,
/// EndpointSlices, Nodes), where a parse of every object per write would cost far more
/// than the memory saved.
#[derive(Debug, Clone)]
enum Form {
    Text(Arc<str>),
    Parsed(Arc<Value>),
}

/// A cached object taken out from under the cache's lock, to be read outside it.
pub(crate) struct Shared(Form);

impl Shared {
    /// The object (parsed now if it was kept as text).
    pub(crate) fn value(self) -> Arc<Value> {
        match self.0 {
            Form::Text(text) => Arc::new(parse(&text)),
            Form::Parsed(value) => value,
        }
    }
}

impl Compact {
    /// `value` kept parsed when `parsed` ([`Form`]), else as text.
    pub(crate) fn keep(value: Value, label_key: &str, parsed: bool) -> Self {
        if parsed {
            Compact::parsed(value, label_key)
        } else {
            Compact::new(&value, label_key)
        }
    }

    /// `value` kept compact; `label_key` is the instance label's key.
    pub(crate) fn new(value: &Value, label_key: &str) -> Self {
        Compact {
            form: Form::Text(Arc::from(value.to_string())),
            owned: names_an_owner(value),
            version: Version::of(value),
            apps: crate::compare::candidate_apps(value, label_key)
                .into_iter()
                .map(String::into_boxed_str)
                .collect(),
        }
    }

    /// `value` kept parsed (see [`Form`]).
    pub(crate) fn parsed(value: Value, label_key: &str) -> Self {
        Compact {
            owned: names_an_owner(&value),
            version: Version::of(&value),
            apps: crate::compare::candidate_apps(&value, label_key)
                .into_iter()
                .map(String::into_boxed_str)
                .collect(),
            form: Form::Parsed(Arc::new(value)),
        }
    }

    /// The instance names the object could be tracked under.
    pub(crate) fn apps(&self) -> impl Iterator<Item = &str> {
        self.apps.iter().map(|a| &**a)
    }

    /// Whether both have the same resourceVersion (or neither has one).
    pub(crate) fn same_version(&self, other: &Compact) -> bool {
        self.version == other.version
    }

    /// Whether `self` is a later version than `other`, both versions numeric (see
    /// `cache::Objects::insert_if_newer`).
    pub(crate) fn newer_than(&self, other: &Compact) -> bool {
        matches!(
            (self.version.number(), other.version.number()),
            (Some(a), Some(b)) if a > b
        )
    }

    /// Whether the resource tree reads the object whole: kept parsed, or naming an owner.
    pub(crate) fn in_tree(&self) -> bool {
        self.owned || matches!(self.form, Form::Parsed(_))
    }

    /// The object, shared, to be read with [`Shared::value`] outside the cache's lock.
    pub(crate) fn shared(&self) -> Shared {
        Shared(self.form.clone())
    }

    /// The object (parsed again if kept as text).
    pub(crate) fn value(&self) -> std::borrow::Cow<'_, Value> {
        match &self.form {
            Form::Text(text) => std::borrow::Cow::Owned(parse(text)),
            Form::Parsed(value) => std::borrow::Cow::Borrowed(value),
        }
    }

    /// The heap this entry's own allocations take: the shared text (or tree) with its two
    /// counts, a textual version, the instance names and their slice.
    pub(crate) fn heap_bytes(&self) -> u64 {
        let version = match &self.version {
            Version::Text(s) => s.len(),
            Version::Missing | Version::Number(_) => 0,
        };
        let apps: usize = self
            .apps
            .iter()
            .map(|a| a.len() + size_of::<Box<str>>())
            .sum();
        let form = match &self.form {
            Form::Text(text) => u64::try_from(text.len()).unwrap_or(u64::MAX),
            Form::Parsed(value) => size_of::<Value>() as u64 + super::footprint::value_heap(value),
        };
        (16 + form).saturating_add(u64::try_from(version + apps).unwrap_or(u64::MAX))
    }
}

fn names_an_owner(value: &Value) -> bool {
    value
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|o| !o.is_empty())
}

/// Parses text a [`Compact`] kept. It was written from a `Value` and always parses; were
/// it not to, the reader sees `null`, which no comparison takes for a live object.
pub(crate) fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(rv: Option<&str>) -> Value {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "ns",
                "annotations": {crate::compare::TRACKING_ANNOTATION: "app1:/ConfigMap:ns/a"},
                "labels": {crate::compare::DEFAULT_APP_LABEL_KEY: "legacy"}},
            "data": {"n": 1.5, "big": u64::MAX, "neg": -3, "s": "x\"y\n"}});
        if let Some(rv) = rv {
            v["metadata"]["resourceVersion"] = json!(rv);
        }
        v
    }

    #[test]
    fn a_kept_object_parses_back_equal_with_its_apps() {
        let v = object(Some("42"));
        let c = Compact::new(&v, crate::compare::DEFAULT_APP_LABEL_KEY);
        assert_eq!(*c.value(), v);
        assert_eq!(*c.shared().value(), v);
        let p = Compact::parsed(v.clone(), crate::compare::DEFAULT_APP_LABEL_KEY);
        assert_eq!(*p.value(), v);
        assert_eq!(*p.shared().value(), v);
        assert_eq!(p.apps().collect::<Vec<_>>(), ["app1", "legacy"]);
        assert!(p.same_version(&c));
        assert_eq!(c.apps().collect::<Vec<_>>(), ["app1", "legacy"]);
    }

    #[test]
    fn the_tree_reads_whole_what_is_kept_parsed_or_names_an_owner() {
        let label = crate::compare::DEFAULT_APP_LABEL_KEY;
        let mut owned = object(Some("1"));
        owned["metadata"]["ownerReferences"] = json!([{"kind": "Deployment", "uid": "u1"}]);
        assert!(Compact::new(&owned, label).in_tree());
        assert!(!Compact::new(&object(Some("1")), label).in_tree());
        assert!(Compact::keep(object(Some("1")), label, true).in_tree());
        owned["metadata"]["ownerReferences"] = json!([]);
        assert!(
            !Compact::keep(owned, label, false).in_tree(),
            "no owner named"
        );
    }

    #[test]
    fn versions_compare_as_the_cache_did() {
        let c = |rv| Compact::new(&object(rv), "none");
        assert!(c(Some("10")).newer_than(&c(Some("9"))));
        assert!(!c(Some("9")).newer_than(&c(Some("10"))));
        // Non-canonical or textual versions: a number when it parses, else never newer.
        assert!(c(Some("011")).newer_than(&c(Some("10"))));
        assert!(!c(Some("b")).newer_than(&c(Some("a"))));
        assert!(!c(None).newer_than(&c(Some("1"))));
        assert!(c(Some("7")).same_version(&c(Some("7"))));
        assert!(c(Some("x")).same_version(&c(Some("x"))));
        assert!(c(None).same_version(&c(None)));
        assert!(!c(Some("07")).same_version(&c(Some("7"))));
        assert!(!c(None).same_version(&c(Some("7"))));
    }
}
