//! Writers: the inverse of the loaders, for the fleet generator, examples and tests.
//!
//! Each writer's output reads back as the same model with the matching loader, for every
//! model the loaders can produce (see the round-trip property tests).

use std::collections::{BTreeMap, HashSet};

use fleetshard_core::{App, Cluster};
use serde::Serialize;

use crate::{AppSpec, FleetFile, application, native, secret, spec_key};

/// A `kind: List`, as `kubectl get … -o yaml` prints several objects.
#[derive(Serialize)]
struct List<T> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    metadata: ListMeta,
    items: Vec<T>,
}

#[derive(Serialize)]
struct ListMeta {
    #[serde(rename = "resourceVersion")]
    resource_version: &'static str,
}

fn list<T>(items: Vec<T>) -> List<T> {
    List {
        api_version: "v1",
        kind: "List",
        metadata: ListMeta {
            resource_version: "",
        },
        items,
    }
}

/// Serialises plain data (strings, integers, booleans, string-keyed maps): the YAML
/// serializer only fails on shapes YAML cannot express, which these types never have.
fn yaml<T: Serialize>(value: &T) -> String {
    serde_saphyr::to_string(value).expect("plain data always serialises to YAML")
}

/// The native fleet file for `file`, as YAML.
pub fn to_fleet_yaml(file: &FleetFile) -> String {
    yaml(&native::from_model(file))
}

/// The native fleet file for `file`, as pretty-printed JSON.
pub fn to_fleet_json(file: &FleetFile) -> String {
    let mut out = serde_json::to_string_pretty(&native::from_model(file))
        .expect("plain data always serialises to JSON");
    out.push('\n');
    out
}

/// The clusters as an Argo CD cluster Secret `List` (YAML), as
/// `kubectl get secret -n argocd -l argocd.argoproj.io/secret-type=cluster -o yaml` prints it:
/// Secrets `cluster-<name>` in namespace `argocd` with the cluster id as `metadata.uid`
/// and values base64-encoded in `data`.
pub fn to_secret_list_yaml(clusters: &[Cluster]) -> String {
    let mut used = HashSet::new();
    let items = clusters
        .iter()
        .map(|c| {
            // Names must be unique in a namespace; clusters whose names sanitise alike get
            // a numeric suffix.
            let base = secret::secret_name(c);
            let mut name = base.clone();
            let mut n = 1;
            while !used.insert(name.clone()) {
                n += 1;
                name = format!("{base}-{n}");
            }
            secret::to_secret(c, name)
        })
        .collect();
    yaml(&list(items))
}

/// The applications as an Application `List` (YAML), as `kubectl get applications -A -o yaml`
/// prints it, each with its GitOps spec from `specs` (keyed by [`spec_key`]; an application
/// without one gets no source and no sync policy). A spec's `sync_request` is not written:
/// an operation is not part of a definition.
pub fn to_application_list_yaml(
    apps: &[App],
    specs: &BTreeMap<(String, String), AppSpec>,
) -> String {
    yaml(&list(
        apps.iter()
            .map(|a| application::to_application(a, specs.get(&spec_key(a))))
            .collect(),
    ))
}
