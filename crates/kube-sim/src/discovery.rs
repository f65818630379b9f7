//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/{group}`, and the
//! `APIResourceList` of each group/version (what `kubectl` and kube-rs `Discovery::run()`
//! read), plus the aggregated discovery lists (`Accept: …;as=APIGroupDiscoveryList`) that
//! `Discovery::run_aggregated()` reads.

use serde_json::{Value, json};

use super::registry::{Registry, ResourceKind};

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-fleetshard-fake",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`.
pub fn api_versions(address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    })
}

fn group_doc(group: &str, versions: &[&str]) -> Value {
    let gv = |v: &str| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    json!({
        "name": group,
        "versions": versions.iter().map(|v| gv(v)).collect::<Vec<_>>(),
        "preferredVersion": gv(versions[0]),
    })
}

/// `/apis`.
pub fn api_group_list(reg: &Registry) -> Value {
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": reg.groups().iter().map(|(g, vs)| group_doc(g, vs)).collect::<Vec<_>>(),
    })
}

/// `/apis/{group}`, if served.
pub fn api_group(reg: &Registry, group: &str) -> Option<Value> {
    let (g, vs) = reg.groups().into_iter().find(|(g, _)| *g == group)?;
    let mut doc = group_doc(g, &vs);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

fn subresource_verbs() -> Value {
    json!(["get", "patch", "update"])
}

/// The resource entries (main and subresources) of one kind.
fn resource_entries(k: &ResourceKind) -> Vec<Value> {
    let mut out = vec![json!({
        "name": k.plural,
        "singularName": k.singular,
        "namespaced": k.namespaced,
        "kind": k.kind,
        "verbs": k.verbs(),
    })];
    if k.status {
        out.push(json!({
            "name": format!("{}/status", k.plural),
            "singularName": "",
            "namespaced": k.namespaced,
            "kind": k.kind,
            "verbs": subresource_verbs(),
        }));
    }
    if k.scale {
        out.push(json!({
            "name": format!("{}/scale", k.plural),
            "singularName": "",
            "namespaced": k.namespaced,
            "group": "autoscaling",
            "version": "v1",
            "kind": "Scale",
            "verbs": subresource_verbs(),
        }));
    }
    out
}

/// `/api/v1` or `/apis/{group}/{version}`, if served.
pub fn api_resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let kinds: Vec<&ResourceKind> = reg.in_group_version(group, version).collect();
    if kinds.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": kinds.into_iter().flat_map(resource_entries).collect::<Vec<_>>(),
    }))
}

/// Whether an Accept header asks for aggregated discovery.
pub fn wants_aggregated(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=APIGroupDiscoveryList"))
}

fn aggregated_resource(k: &ResourceKind) -> Value {
    let mut subs = Vec::new();
    if k.status {
        subs.push(json!({
            "subresource": "status",
            "responseKind": {"group": k.group, "version": k.version, "kind": k.kind},
            "verbs": subresource_verbs(),
        }));
    }
    if k.scale {
        subs.push(json!({
            "subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": subresource_verbs(),
        }));
    }
    json!({
        "resource": k.plural,
        "responseKind": {"group": k.group, "version": k.version, "kind": k.kind},
        "scope": if k.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": k.singular,
        "verbs": k.verbs(),
        "subresources": subs,
    })
}

/// The aggregated `APIGroupDiscoveryList` for the core group (`core` true, from `/api`)
/// or for every other group (from `/apis`).
pub fn aggregated(reg: &Registry, core: bool) -> Value {
    let groups: Vec<(&str, Vec<&str>)> = if core {
        vec![("", vec!["v1"])]
    } else {
        reg.groups()
    };
    let items: Vec<Value> = groups
        .into_iter()
        .map(|(g, vs)| {
            json!({
                "metadata": {"name": g},
                "versions": vs.iter().map(|v| json!({
                    "version": v,
                    "resources": reg.in_group_version(g, v).map(aggregated_resource).collect::<Vec<_>>(),
                    "freshness": "Current",
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

/// The Content-Type of an aggregated discovery answer.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
