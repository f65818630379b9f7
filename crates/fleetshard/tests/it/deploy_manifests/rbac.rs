//! Kubernetes' RBAC authorizer, for the Roles of a rendered overlay: enough of it to refuse
//! (as the fake API server's injected fault) every namespaced request no rule allows. A
//! Role's rules apply in the namespace of the RoleBinding that grants them (an overlay may
//! grant Roles in more than one namespace: the fenced store's is its own).

use fleetshard_testsupport::kube_api::{RequestInfo, Verb};
use serde_json::Value;

/// One role rule, as the authorizer reads it.
pub struct Rule {
    /// The namespace the rule applies in: its RoleBinding's (and its Role's).
    pub namespace: String,
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
/// binding names a Role that is not rendered exactly once in the binding's namespace (a
/// wiring error), and on ClusterRoles and ClusterRoleBindings, which no overlay has and
/// this authorizer does not model.
pub fn granted(objects: &[Value]) -> Vec<(String, Rule)> {
    let mut out = Vec::new();
    for o in objects {
        assert!(
            o["kind"] != "ClusterRole" && o["kind"] != "ClusterRoleBinding",
            "{}: cluster-wide RBAC is not modelled (nor wanted)",
            o["metadata"]["name"]
        );
    }
    for rb in objects.iter().filter(|o| o["kind"] == "RoleBinding") {
        let name = &rb["roleRef"]["name"];
        let namespace = rb["metadata"]["namespace"]
            .as_str()
            .unwrap_or_else(|| panic!("RoleBinding {name} has no namespace"));
        let roles: Vec<&Value> = objects
            .iter()
            .filter(|o| {
                o["kind"] == "Role"
                    && o["metadata"]["name"] == *name
                    && o["metadata"]["namespace"] == namespace
            })
            .collect();
        let [role] = roles.as_slice() else {
            panic!(
                "RoleBinding {namespace}/{name}: {} such Roles in its namespace",
                roles.len()
            );
        };
        for r in role["rules"].as_array().unwrap() {
            out.push((
                role["metadata"]["name"].as_str().unwrap().to_owned(),
                Rule {
                    namespace: namespace.to_owned(),
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
/// rule of the request's namespace matches group, resource, verb and, when it lists
/// resourceNames, the request's name (create and plain lists have none).
pub fn allows(rules: &[(String, Rule)], r: &RequestInfo) -> bool {
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
    rules.iter().any(|(_, rule)| {
        request_namespace == Some(rule.namespace.as_str())
            && rule.groups.contains(&r.group)
            && rule.resources.contains(&resource)
            && rule.verbs.iter().any(|v| v == verb_name(verb))
            && (rule.names.is_empty() || r.name.as_ref().is_some_and(|n| rule.names.contains(n)))
    })
}
