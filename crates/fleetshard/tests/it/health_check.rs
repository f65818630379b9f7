//! `fleetshard health check`, a contract of automated checks: its flags, its JSON output
//! (one `{"file", "status", "message"}` per input, in order, `status` null when no check
//! applies) and its errors.

use std::path::Path;

use serde_json::{Value, json};

use super::support::replicas::fleetshard;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

const WIDGET_HEALTH: &str = r#"
if obj.status ~= nil and obj.status.ready then
  return {status = "Healthy", message = "ready"}
end
return {status = "Degraded", message = "not ready: " .. tostring(obj.metadata.name)}
"#;

#[test]
fn json_output_lists_every_file_in_order_with_the_reconcilers_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let scripts = root.join("customizations");
    write(&scripts, "_.example.io/Widget/health.lua", WIDGET_HEALTH);
    let deployment = write(
        root,
        "deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  generation: 2\nspec:\n  replicas: 3\nstatus:\n  observedGeneration: 1\n",
    );
    let config_map = write(
        root,
        "cm.json",
        r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}"#,
    );
    let widget = write(
        root,
        "widget.yaml",
        "---\napiVersion: shop.example.io/v1\nkind: Widget\nmetadata:\n  name: w1\n",
    );
    let out = fleetshard()
        .args(["health", "check", "--output", "json", "--customizations"])
        .arg(&scripts)
        .args([&widget, &deployment, &config_map])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v,
        json!([
            {"file": widget, "status": "Degraded", "message": "not ready: w1"},
            {"file": deployment, "status": "Progressing",
             "message": "Waiting for rollout to finish: observed deployment generation less than desired generation"},
            {"file": config_map, "status": null, "message": "no health check for v1 ConfigMap"},
        ])
    );
    // Without the directory the Widget has no check.
    let out = fleetshard()
        .args(["health", "check", "--output", "json", &widget])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["status"], Value::Null);
    // Text output: one line per file.
    let out = fleetshard()
        .args(["health", "check", &deployment, &config_map])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(
        text.starts_with(&format!("{deployment}: Progressing: ")),
        "{text}"
    );
}

#[test]
fn bad_input_fails_naming_the_file_before_printing() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(
        dir.path(),
        "ok.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n",
    );
    let two = write(
        dir.path(),
        "two.yaml",
        "apiVersion: v1\nkind: Pod\n---\napiVersion: v1\nkind: Pod\n",
    );
    let list = write(dir.path(), "list.json", "[1, 2]");
    for (bad, fragment) in [(&two, "2 documents"), (&list, "not a Kubernetes object")] {
        let out = fleetshard()
            .args(["health", "check", &good, bad])
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(out.stdout.is_empty(), "nothing printed");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(bad.as_str()) && err.contains(fragment),
            "{err}"
        );
    }
    let out = fleetshard()
        .args(["health", "check", "--customizations"])
        .arg(dir.path())
        .arg(&good)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--customizations"));
}
