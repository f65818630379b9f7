//! Precedence of the sources of health, as Argo CD orders them.

use std::sync::Arc;

use serde_json::json;

use super::*;

fn script(status: &str) -> String {
    format!("return {{status = \"{status}\", message = \"from a script\"}}")
}

fn over(key: &str, status: &str) -> HealthOverride {
    HealthOverride {
        key: key.into(),
        script: script(status),
        use_open_libs: false,
    }
}

fn certificate() -> Value {
    json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": {"name": "tls"}})
}

#[test]
fn a_kind_without_any_check_has_no_health() {
    let h = HealthChecks::builtin().assess(Some(&certificate()));
    assert!(!h.checked);
    assert_eq!(h.status(), None);
    assert!(!HealthChecks::builtin().has_check("cert-manager.io", "Certificate"));
}

#[test]
fn exact_key_then_wildcard_then_builtin() {
    let checks = HealthChecks::builtin().with_overrides(
        [
            over("cert-manager.io/Certificate", "Degraded"),
            over("*.io/*", "Suspended"),
            over("*/Deployment", "Healthy"),
        ],
        LuaLimits::default(),
    );
    assert_eq!(
        checks.assess(Some(&certificate())).status,
        HealthStatus::Degraded
    );
    let issuer =
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer", "metadata": {"name": "i"}});
    assert_eq!(checks.assess(Some(&issuer)).status, HealthStatus::Suspended);
    // A configured script overrides a built-in check (the Deployment would be Progressing).
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "generation": 2},
                            "spec": {"replicas": 1}, "status": {"observedGeneration": 1}});
    assert_eq!(
        checks.assess(Some(&deployment)).status,
        HealthStatus::Healthy
    );
    assert_eq!(
        HealthChecks::builtin().assess(Some(&deployment)).status,
        HealthStatus::Progressing
    );
    // An empty script is no override.
    let empty = HealthChecks::builtin().with_overrides(
        [HealthOverride {
            key: "apps/Deployment".into(),
            script: String::new(),
            use_open_libs: false,
        }],
        LuaLimits::default(),
    );
    assert_eq!(
        empty.assess(Some(&deployment)).status,
        HealthStatus::Progressing
    );
}

#[test]
fn argocd_cm_wins_over_the_directory_which_wins_over_builtin() {
    let root = std::env::temp_dir().join(format!(
        "fleetshard-health-precedence-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&root);
    for (dir, status) in [
        ("cert-manager.io/Certificate", "Progressing"),
        ("apps/Deployment", "Suspended"),
        ("_.example.io/_", "Degraded"),
    ] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
        std::fs::write(root.join(dir).join("health.lua"), script(status)).unwrap();
    }
    let dir = Arc::new(ScriptDir::load(&root, LuaLimits::default()).unwrap());
    assert_eq!(dir.len(), 3);
    let checks = HealthChecks::builtin().with_directory(dir.clone());
    assert_eq!(
        checks.assess(Some(&certificate())).status,
        HealthStatus::Progressing
    );
    let widget =
        json!({"apiVersion": "widgets.example.io/v1", "kind": "Widget", "metadata": {"name": "w"}});
    assert_eq!(checks.assess(Some(&widget)).status, HealthStatus::Degraded);
    // `_` is one path segment: a group without the suffix does not match.
    let other =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    assert!(!checks.assess(Some(&other)).checked);
    let deployment =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}});
    assert_eq!(
        checks.assess(Some(&deployment)).status,
        HealthStatus::Suspended
    );
    let configured = checks.with_overrides(
        [over("cert-manager.io/Certificate", "Healthy")],
        LuaLimits::default(),
    );
    assert_eq!(
        configured.assess(Some(&certificate())).status,
        HealthStatus::Healthy
    );
    std::fs::remove_dir_all(&root).unwrap();
    let empty =
        std::env::temp_dir().join(format!("fleetshard-health-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let e = ScriptDir::load(&empty, LuaLimits::default()).unwrap_err();
    assert!(
        e.to_string().contains("no <group>/<kind>/health.lua"),
        "{e}"
    );
    std::fs::remove_dir_all(&empty).unwrap();
}

#[test]
fn a_failing_script_is_unknown_with_its_error_and_deletion_comes_first() {
    let checks = HealthChecks::builtin().with_overrides(
        [HealthOverride {
            key: "cert-manager.io/Certificate".into(),
            script: "return obj.status.x".into(),
            use_open_libs: false,
        }],
        LuaLimits::default(),
    );
    let h = checks.assess(Some(&certificate()));
    assert_eq!(h.status, HealthStatus::Unknown);
    assert!(
        h.message
            .contains("resource.customizations.health.cert-manager.io_Certificate:1:"),
        "{}",
        h.message
    );
    let mut deleting = certificate();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-11-29T10:00:00Z");
    assert_eq!(checks.assess(Some(&deleting)).message, "Pending deletion");
    deleting["metadata"]["finalizers"] = json!([HOOK_FINALIZER]);
    assert_eq!(
        checks.assess(Some(&deleting)).status,
        HealthStatus::Unknown,
        "a hook is still assessed"
    );
}
