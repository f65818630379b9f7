//! Argo CD's own health scripts against Argo CD's own test cases, from a checkout outside
//! this repository (they are Argo CD's, Apache-2.0, and not copied here): set
//! `FLEETSHARD_ARGOCD_CUSTOMIZATIONS` to its `resource_customizations` directory. Without
//! it the test says so and checks nothing.
//!
//! Every `<group>/<kind>/health_test.yaml` lists inputs and the status and message Argo CD
//! (gopher-lua) gives them; each is assessed here through [`ScriptDir`], as `fleetshard
//! health check --customizations DIR` and the reconciler assess objects.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fleetshard_health::{Health, HealthChecks, HealthStatus, LuaLimits, ScriptDir};
use serde_json::Value;

/// Where the checkout's `resource_customizations` is.
const ENV: &str = "FLEETSHARD_ARGOCD_CUSTOMIZATIONS";

fn test_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.file_name().is_some_and(|n| n == "health_test.yaml") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn yaml(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_saphyr::from_str(&text).map_err(|e| {
        let first = e.to_string();
        format!(
            "{}: {}",
            path.display(),
            first.lines().next().unwrap_or_default()
        )
    })
}

#[test]
fn argo_cd_scripts_give_argo_cd_verdicts() {
    let Some(root) = std::env::var_os(ENV).map(PathBuf::from) else {
        eprintln!("{ENV} is not set: Argo CD's health_test.yaml cases not run");
        return;
    };
    let dir = Arc::new(ScriptDir::load(&root, LuaLimits::default()).expect("the scripts load"));
    let checks = HealthChecks::builtin().with_directory(dir);
    let (mut cases, mut mismatches, mut unreadable) = (0, Vec::new(), Vec::new());
    for file in test_files(&root) {
        let base = file.parent().unwrap();
        let tests = yaml(&file).unwrap_or_else(|e| panic!("{e}"));
        for case in tests["tests"].as_array().into_iter().flatten() {
            // Argo CD reads these files with Go's JSON decoding: keys match in any case.
            let input = case.as_object().and_then(|m| {
                m.iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("inputPath"))
                    .and_then(|(_, v)| v.as_str())
            });
            let Some(input) = input else {
                panic!("{}: a case without inputPath", file.display());
            };
            let input = base.join(input);
            // go-yaml reads some inputs serde-saphyr refuses (continuation lines of a quoted
            // scalar at the parent's indentation): counted apart, not judged.
            let obj = match yaml(&input) {
                Ok(obj) => obj,
                Err(e) => {
                    unreadable.push(e);
                    continue;
                }
            };
            let expected_status = case["healthStatus"]["status"].as_str().unwrap_or("");
            let expected_message = case["healthStatus"]["message"].as_str().unwrap_or("");
            // Argo CD's test harness runs the script alone: an object being deleted is
            // judged by its script there (the controller says "Pending deletion" first).
            let group = obj["apiVersion"].as_str().unwrap_or("");
            let group = group.rsplit_once('/').map_or("", |(g, _)| g);
            let kind = obj["kind"].as_str().unwrap_or("");
            let got = match checks.script_for(group, kind) {
                Some(script) => match script.run(&obj) {
                    Ok(Some(h)) => h,
                    Ok(None) => Health::none(""),
                    Err(e) => Health::new(HealthStatus::Unknown, e),
                },
                None => checks.assess(Some(&obj)),
            };
            let status = got.status().map(|s| s.to_string()).unwrap_or_default();
            cases += 1;
            let message_ok =
                got.message == expected_message || (!got.checked && expected_message.is_empty());
            if status != expected_status || !message_ok {
                mismatches.push(format!(
                    "{}: expected {expected_status:?} {expected_message:?}, got {status:?} {:?}",
                    input.strip_prefix(&root).unwrap_or(&input).display(),
                    got.message
                ));
            }
        }
    }
    eprintln!(
        "{cases} cases, {} mismatches, {} inputs unreadable here:\n{}",
        mismatches.len(),
        unreadable.len(),
        unreadable.join("\n")
    );
    assert!(cases > 0, "no health_test.yaml under {}", root.display());
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
