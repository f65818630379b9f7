//! An Application item read straight from the text into what placement needs, without a
//! `Value` of the whole item.
//!
//! When a loader drops the GitOps specs (`plan`, `status`: [`Accept::specs`] false), an
//! Application is only its [`App`]: `metadata.{name,namespace}`, `spec.project` and
//! `spec.destination.{server,name,namespace}`. Everything else is skipped
//! ([`IgnoredAny`]), and strings are borrowed from the text where it allows.
//!
//! This is a fast path only: it answers an [`App`] when the generic conversion
//! (`application::to_app` on the item's value) would answer the same app with no warning,
//! and `None` on anything unusual, so that the caller converts that item as before and
//! every warning and error stays the generic path's. Unusual here is: a `kind` other than
//! the string `Application`, a missing or empty name, `spec.sources` (it may warn), any
//! field of the wrong shape — among them `metadata.labels` or `metadata.annotations`
//! values that are not strings, which the generic read refuses — and a duplicate key.
//!
//! [`Accept::specs`]: crate::document::Accept

use std::borrow::Cow;
use std::fmt;

use fleetshard_core::{App, Destination};
use serde::Deserialize;
use serde::de::{IgnoredAny, MapAccess, Visitor};

/// The parts of an Application item that placement reads.
#[derive(Deserialize)]
pub(crate) struct PlacementApp<'a> {
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    metadata: Option<Meta<'a>>,
    #[serde(borrow, default)]
    spec: Option<Spec<'a>>,
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    namespace: Option<Cow<'a, str>>,
    /// Read only to check its shape (the generic read wants a string).
    #[serde(borrow, default)]
    #[allow(dead_code, reason = "read for its shape only")]
    uid: Option<Cow<'a, str>>,
    #[serde(default)]
    labels: Option<StringMap>,
    #[serde(default)]
    annotations: Option<StringMap>,
}

#[derive(Deserialize)]
struct Spec<'a> {
    #[serde(borrow, default)]
    project: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    destination: Option<Dest<'a>>,
    #[serde(default)]
    sources: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Dest<'a> {
    #[serde(borrow, default)]
    server: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    namespace: Option<Cow<'a, str>>,
}

impl PlacementApp<'_> {
    /// The app, or `None` when the item must go through the generic conversion.
    pub(crate) fn placement(self) -> Option<App> {
        if self.kind.as_deref() != Some("Application") {
            return None;
        }
        let meta = self.metadata?;
        // Only their shape matters here.
        let _ = (meta.labels, meta.annotations);
        let name = meta.name.filter(|n| !n.is_empty())?;
        let (project, dest) = match self.spec {
            Some(spec) if spec.sources.is_some() => return None,
            Some(spec) => (spec.project, spec.destination),
            None => (None, None),
        };
        let owned = |s: Option<Cow<'_, str>>| s.map(Cow::into_owned);
        let dest = dest.unwrap_or(Dest {
            server: None,
            name: None,
            namespace: None,
        });
        Some(App {
            namespace: owned(meta.namespace).unwrap_or_default(),
            name: name.into_owned(),
            project: owned(project).unwrap_or_default(),
            destination: Destination {
                server: owned(dest.server),
                name: owned(dest.name),
                namespace: owned(dest.namespace),
            },
        })
    }
}

/// A mapping of strings to strings, checked and not kept.
struct StringMap;

impl<'de> Deserialize<'de> for StringMap {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_map(StringMap)
    }
}

impl<'de> Visitor<'de> for StringMap {
    type Value = StringMap;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping of strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StringMap, A::Error> {
        while map.next_entry::<AnyString, AnyString>()?.is_some() {}
        Ok(StringMap)
    }
}

/// Any string, borrowed or not, not kept.
struct AnyString;

impl<'de> Deserialize<'de> for AnyString {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_str(AnyString)
    }
}

impl Visitor<'_> for AnyString {
    type Value = AnyString;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<AnyString, E> {
        Ok(AnyString)
    }
}
