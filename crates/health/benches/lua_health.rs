//! Measures Lua health checks per resource: cold (a new interpreter started and the script
//! compiled, as the first call of a script on a replica, or of a script changed in
//! argocd-cm) and warm (a compiled script's pooled interpreter, every later call), for a
//! small script (argocd-cm's documented Certificate check) and a larger one (a Rollout-like
//! check walking conditions and replicas with string functions); and the built-in
//! Deployment check beside them.
//!
//! Run: `cargo bench -p fleetshard-health --bench lua_health -- [CALLS]` (20,000 warm calls
//! each unless told; cold is measured over CALLS / 20 fresh scripts).

#![allow(
    clippy::disallowed_types,
    reason = "a measurement harness reads the wall clock"
)]

use std::time::Instant;

use fleetshard_health::{HealthChecks, LuaLimits, LuaScript};
use serde_json::{Value, json};

const CERTIFICATE: &str = r#"
hs = {}
if obj.status ~= nil then
  if obj.status.conditions ~= nil then
    for i, condition in ipairs(obj.status.conditions) do
      if condition.type == "Ready" and condition.status == "False" then
        hs.status = "Degraded"
        hs.message = condition.message
        return hs
      end
      if condition.type == "Ready" and condition.status == "True" then
        hs.status = "Healthy"
        hs.message = condition.message
        return hs
      end
    end
  end
end
hs.status = "Progressing"
hs.message = "Waiting for certificate"
return hs
"#;

const ROLLOUT_LIKE: &str = r#"
local hs = {}
local function condition(kind)
  if obj.status == nil or obj.status.conditions == nil then return nil end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == kind then return c end
  end
  return nil
end
if obj.metadata.generation ~= nil and obj.status ~= nil and obj.status.observedGeneration ~= nil
   and tonumber(obj.status.observedGeneration) < obj.metadata.generation then
  return {status = "Progressing", message = "Waiting for rollout spec update to be observed"}
end
local invalid = condition("InvalidSpec")
if invalid ~= nil then return {status = "Degraded", message = invalid.message} end
local progressing = condition("Progressing")
if progressing ~= nil and string.find(progressing.reason or "", "Aborted") then
  return {status = "Degraded", message = progressing.message}
end
local replicas = obj.spec.replicas or 1
local updated = obj.status.updatedReplicas or 0
local available = obj.status.availableReplicas or 0
if updated < replicas then
  return {status = "Progressing", message = string.format("Waiting for roll out to finish: %d out of %d new replicas have been updated...", updated, replicas)}
end
if available < updated then
  return {status = "Progressing", message = string.format("Waiting for roll out to finish: %d of %d updated replicas are available...", available, updated)}
end
hs.status = "Healthy"
hs.message = ""
return hs
"#;

fn certificate() -> Value {
    json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "tls", "namespace": "web", "generation": 3,
            "annotations": {"cert-manager.io/issuer-name": "letsencrypt"}, "labels": {"app": "web"}},
        "spec": {"secretName": "tls", "dnsNames": ["example.com", "www.example.com"],
            "issuerRef": {"name": "letsencrypt", "kind": "ClusterIssuer"}},
        "status": {"notAfter": "2027-01-01T00:00:00Z", "revision": 4,
            "conditions": [{"type": "Issuing", "status": "False", "reason": "Done"},
                           {"type": "Ready", "status": "True", "reason": "Ready",
                            "message": "Certificate is up to date and has not expired"}]}})
}

fn rollout() -> Value {
    json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "web", "namespace": "web", "generation": 7},
        "spec": {"replicas": 5, "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}]}},
            "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}}},
        "status": {"observedGeneration": "7", "replicas": 5, "updatedReplicas": 5,
            "availableReplicas": 5, "readyReplicas": 5,
            "conditions": [{"type": "Available", "status": "True", "reason": "AvailableReason"},
                           {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                            "message": "ReplicaSet web-6c7 has successfully progressed."}]}})
}

fn deployment() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "web", "generation": 4},
        "spec": {"replicas": 3},
        "status": {"observedGeneration": 4, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}})
}

/// Microseconds per call of `f` over `n` calls.
fn per_call(n: usize, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        f();
    }
    start.elapsed().as_secs_f64() * 1e6 / n as f64
}

fn main() {
    let calls: usize = std::env::args()
        .filter(|a| a != "--bench")
        .nth(1)
        .map(|a| a.parse().expect("CALLS is a number"))
        .unwrap_or(20_000);
    let limits = LuaLimits::default();
    println!("calls per figure: {calls} warm, {} cold", calls / 20);
    for (name, source, obj) in [
        (
            "Certificate (argocd-cm example)",
            CERTIFICATE,
            certificate(),
        ),
        (
            "Rollout-like (conditions, string functions)",
            ROLLOUT_LIKE,
            rollout(),
        ),
    ] {
        let cold = per_call(calls / 20, || {
            let script = LuaScript::new("bench", source, true, limits);
            assert!(script.run(&obj).expect("runs").is_some());
        });
        let script = LuaScript::new("bench", source, true, limits);
        script.run(&obj).expect("compiles");
        let warm = per_call(calls, || {
            assert!(script.run(&obj).expect("runs").is_some());
        });
        println!("{name}: cold {cold:.1} µs/resource, warm {warm:.1} µs/resource");
    }
    let builtin = HealthChecks::builtin();
    let obj = deployment();
    let native = per_call(calls, || {
        assert!(builtin.assess(Some(&obj)).checked);
    });
    println!("built-in Deployment check: {native:.2} µs/resource");
}
