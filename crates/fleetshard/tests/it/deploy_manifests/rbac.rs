//! Kubernetes' RBAC authorizer, for the Roles of a rendered overlay: enough of it to refuse
//! (as the fake API server's injected fault) every namespaced request no rule allows.

use fleetshard_testsupport::kube_api::{RequestInfo, Verb};
use serde_json::Value;

/// One role rule, as the authorizer reads it.
pub struct Rule {
    /// `apiGroups`.
    pub groups: Vec<String>,
    /// `resources` (with `resource/subresource` entries).
    pub resources: Vec<String>,
    /// `verbs`.
    pub verbs: Vec<String>,
    /// `resourceNames` (empty: any name).
    pub names: Vec<String>,
}

impl Rule {
    /// Every (group, resource, verb) the rule grants.
    pub fn triples(&self) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for g in &self.groups {
            for r in &self.resources {
                for v in &self.verbs {
                    out.push((g.clone(), r.clone(), v.clone()));
                }
            }
        }
        out
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map_or_else(Vec::new, |a| {
        a.iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    })
}

/// The rules of every Role bound to a subject, with each Role's name. Panics when a
/// binding names a Role that is not rendered exactly once (a wiring error).
pub fn granted(objects: &[Value]) -> Vec<(String, Rule)> {
    let mut out = Vec::new();
    for rb in objects.iter().filter(|o| o["kind"] == "RoleBinding") {
        let name = &rb["roleRef"]["name"];
        let roles: Vec<&Value> = objects
            .iter()
            .filter(|o| o["kind"] == "Role" && o["metadata"]["name"] == *name)
            .collect();
        let [role] = roles.as_slice() else {
            panic!("RoleBinding to {name}: {} such Roles", roles.len());
        };
        for r in role["rules"].as_array().unwrap() {
            out.push((
                role["metadata"]["name"].as_str().unwrap().to_owned(),
                Rule {
                    groups: strings(&r["apiGroups"]),
                    resources: strings(&r["resources"]),
                    verbs: strings(&r["verbs"]),
                    names: strings(&r["resourceNames"]),
                },
            ));
        }
    }
    out
}

/// The verb as RBAC rules spell it (`discovery` for discovery).
pub fn verb_name(v: Verb) -> &'static str {
    v.rbac_name().unwrap_or("discovery")
}

/// Kubernetes RBAC for a namespaced request (or one for the namespace's own object): some
/// rule matches group, resource, verb and, when it lists resourceNames, the request's name
/// (create and plain lists have none).
pub fn allows(rules: &[(String, Rule)], namespace: &str, r: &RequestInfo) -> bool {
    let Some(verb) = r.verb else { return false };
    if verb == Verb::Discovery {
        return true; // every authenticated user may (system:discovery)
    }
    let resource = match &r.subresource {
        Some(s) => format!("{}/{s}", r.resource),
        None => r.resource.clone(),
    };
    // Kubernetes' request info puts a namespace's own object (`/api/v1/namespaces/N`) in
    // namespace N, so a Role there can grant reading it.
    let request_namespace = match (&r.namespace, r.group.as_str(), r.resource.as_str()) {
        (None, "", "namespaces") => r.name.as_deref(),
        (ns, _, _) => ns.as_deref(),
    };
    request_namespace == Some(namespace)
        && rules.iter().any(|(_, rule)| {
            rule.groups.contains(&r.group)
                && rule.resources.contains(&resource)
                && rule.verbs.iter().any(|v| v == verb_name(verb))
                && (rule.names.is_empty()
                    || r.name.as_ref().is_some_and(|n| rule.names.contains(n)))
        })
}
