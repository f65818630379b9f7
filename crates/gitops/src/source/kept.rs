//! A directory read as the [`super::RepoCache`] keeps it between refreshes: each object as
//! its compact JSON text, parsed again at each use.
//!
//! A parsed object is a tree of `serde_json` maps, each a B-tree leaf of 11 slots (632
//! bytes) even for one entry: a ConfigMap of a dozen maps takes about 8 KB parsed and a
//! few hundred bytes as text. Every app's read stays cached (one per app and commit), so
//! at 10,000 apps of 3–5 objects the parsed form held about 150 MiB, a second copy of
//! what each app's memo holds once placed. Parsing a few kilobytes of JSON again at each
//! refresh (every 3 minutes per app) costs microseconds.

use std::sync::Arc;

use serde_json::Value;

use super::cache::Manifests;
use super::error::{Location, SourceError};
use super::parse::{Manifest, ObjectIdentity};

/// One object of a kept read.
struct KeptManifest {
    /// The object, as compact JSON.
    text: Box<str>,
    identity: ObjectIdentity,
    location: Location,
}

/// The objects of one read, kept compact.
pub(super) struct KeptRead {
    commit: String,
    objects: Box<[KeptManifest]>,
}

impl KeptRead {
    /// `objects` read at `commit`, kept as text.
    pub(super) fn new(commit: String, objects: Vec<Manifest>) -> Self {
        let objects = objects
            .into_iter()
            .map(|m| KeptManifest {
                text: m.object.to_string().into_boxed_str(),
                identity: m.identity,
                location: m.location,
            })
            .collect();
        KeptRead { commit, objects }
    }

    /// The manifests, parsed again (equal to those given to [`KeptRead::new`]).
    pub(super) fn manifests(&self, repo_url: &str) -> Result<Arc<Manifests>, SourceError> {
        let objects = self
            .objects
            .iter()
            .map(|m| {
                // Text this module wrote from a `Value`: it always parses.
                let object =
                    serde_json::from_str::<Value>(&m.text).map_err(|e| SourceError::Task {
                        repo: repo_url.to_owned(),
                        message: format!("a cached manifest did not parse again: {e}"),
                    })?;
                Ok(Manifest {
                    object,
                    identity: m.identity.clone(),
                    location: m.location.clone(),
                })
            })
            .collect::<Result<Vec<_>, SourceError>>()?;
        Ok(Arc::new(Manifests {
            commit: self.commit.clone(),
            objects,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_kept_read_gives_back_equal_manifests() {
        let objects = vec![
            Manifest {
                object: json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "a", "labels": {"x": "1"}},
                    "data": {"k": "v", "n": 1.5, "big": 18446744073709551615u64, "neg": -3,
                             "list": [1, "two", null, true, {"z": []}]}}),
                identity: ObjectIdentity {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    namespace: None,
                    name: "a".into(),
                },
                location: Location {
                    file: "dir/cm.yaml".into(),
                    document: 2,
                    item: Some(3),
                },
            },
            Manifest {
                object: json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": "d", "namespace": "ns", "annotations": {"é": "ü\n\"q\""}}}),
                identity: ObjectIdentity {
                    api_version: "apps/v1".into(),
                    kind: "Deployment".into(),
                    namespace: Some("ns".into()),
                    name: "d".into(),
                },
                location: Location::default(),
            },
        ];
        let kept = KeptRead::new("abc".into(), objects.clone());
        let back = kept.manifests("https://example.invalid/r.git").unwrap();
        assert_eq!(back.commit, "abc");
        assert_eq!(back.objects, objects);
    }
}
