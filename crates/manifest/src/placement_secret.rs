//! A cluster Secret item read straight from the text into its cluster, without a `Value`
//! of the whole item: what [`crate::placement_app`] does for Applications.
//!
//! The Secret's fields are read borrowed from the text where it allows
//! ([`TypedSecret`]: `kind`, `metadata.{name,namespace,uid,labels,annotations}`, `data`,
//! `stringData`; everything else skipped), then converted by the generic path's own
//! conversion (`secret::convert`) in its strict mode: any warning or error it would
//! report (not a cluster Secret, a missing or empty server, bad base64, a shard that is
//! not an integer, a missing uid, an unreadable or unsupported `config`, …) makes the
//! item unusual, and the caller converts it from its value as before, so that every
//! warning and error stays the generic path's. A field of another shape (a label that is
//! not a string, `data` that is not a mapping) and a duplicate key are unusual too.
//!
//! Only plain cluster Secrets are typed: a `kind` other than the string `Secret`, or a
//! `argocd.argoproj.io/secret-type` label other than `cluster` (a repository Secret, read
//! by `repository.rs` where the input accepts them) goes to the generic path.
//!
//! No credential is ever kept in a message or a `Debug`: [`TypedSecret`]'s `Debug` shows
//! the keys of `data` and `stringData`, never their values.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{MapAccess, Visitor};

use crate::ClusterSecret;
use crate::secret::{SECRET_TYPE_LABEL, SecretFields, Strict, UnreadableConfig, convert};

/// The parts of a Secret item that the cluster conversion reads.
#[derive(Deserialize)]
pub(crate) struct TypedSecret<'a> {
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    metadata: Option<Meta<'a>>,
    #[serde(borrow, default)]
    data: Option<StrMap<'a>>,
    #[serde(borrow, default, rename = "stringData")]
    string_data: Option<StrMap<'a>>,
}

#[derive(Debug, Deserialize)]
struct Meta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    /// Read only to check its shape (the generic read wants a string).
    #[serde(borrow, default)]
    #[allow(dead_code, reason = "read for its shape only")]
    namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uid: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    labels: Option<StrMap<'a>>,
    #[serde(borrow, default)]
    annotations: Option<StrMap<'a>>,
}

impl fmt::Debug for TypedSecret<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedSecret")
            .field("kind", &self.kind)
            .field("metadata", &self.metadata)
            .field("data (keys)", &self.data.as_ref().map(StrMap::keys))
            .field(
                "stringData (keys)",
                &self.string_data.as_ref().map(StrMap::keys),
            )
            .finish()
    }
}

impl TypedSecret<'_> {
    /// The cluster and its credentials, or `None` when the item must go through the
    /// generic conversion.
    pub(crate) fn cluster(&self) -> Option<ClusterSecret> {
        if self.kind.as_deref() != Some("Secret") {
            return None;
        }
        let labels = self.metadata.as_ref()?.labels.as_ref()?;
        if labels.get(SECRET_TYPE_LABEL) != Some("cluster") {
            return None;
        }
        // Strict: a Secret it would skip with a warning is unusual too, so `Skip` and
        // `Error` answer the same here.
        convert(self, &mut Strict, UnreadableConfig::Skip).ok()?
    }
}

impl SecretFields for TypedSecret<'_> {
    fn name(&self) -> Option<&str> {
        self.metadata.as_ref()?.name.as_deref()
    }
    fn uid(&self) -> Option<&str> {
        self.metadata.as_ref()?.uid.as_deref()
    }
    fn labels(&self) -> BTreeMap<String, String> {
        let labels = self.metadata.as_ref().and_then(|m| m.labels.as_ref());
        labels.map(StrMap::to_map).unwrap_or_default()
    }
    fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata.as_ref()?.annotations.as_ref()?.get(key)
    }
    fn string_data(&self, key: &str) -> Option<&str> {
        self.string_data.as_ref()?.get(key)
    }
    fn data(&self, key: &str) -> Option<&str> {
        self.data.as_ref()?.get(key)
    }
}

/// A mapping of strings to strings, in the order read. A key read twice (JSON; the YAML
/// fast path declines it) keeps its last value, as a `Value` and a map keep it.
/// Its `Debug` shows the values: it is only ever shown as [`StrMap::keys`] in a Secret
/// (`metadata`'s labels and annotations hold no credential).
#[derive(Debug)]
struct StrMap<'a>(Vec<(Cow<'a, str>, Cow<'a, str>)>);

impl StrMap<'_> {
    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(k, _)| k.as_ref()).collect()
    }

    fn get(&self, key: &str) -> Option<&str> {
        let found = self.0.iter().rev().find(|(k, _)| k == key);
        found.map(|(_, v)| v.as_ref())
    }

    fn to_map(&self) -> BTreeMap<String, String> {
        let pairs = self.0.iter();
        pairs
            .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
            .collect()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for StrMap<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_map(StrMapVisitor(std::marker::PhantomData))
    }
}

struct StrMapVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for StrMapVisitor<'a> {
    type Value = StrMap<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping of strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrMap<'a>, A::Error> {
        let mut pairs = Vec::new();
        while let Some((k, v)) = map.next_entry::<Str<'a>, Str<'a>>()? {
            pairs.push((k.0, v.0));
        }
        Ok(StrMap(pairs))
    }
}

/// A string, borrowed from the text when it has no escape.
struct Str<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_str(StrVisitor(std::marker::PhantomData))
    }
}

struct StrVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for StrVisitor<'a> {
    type Value = Str<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, s: &'de str) -> Result<Str<'a>, E> {
        Ok(Str(Cow::Borrowed(s)))
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Str<'a>, E> {
        Ok(Str(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Str<'a>, E> {
        Ok(Str(Cow::Owned(s)))
    }
}
