//! Helm charts in Git, only through a `helm` executable (`helm template`): fleetshard
//! does not reimplement Helm. Without one, the app gets a condition saying what is needed.
//!
//! The arguments are Argo CD's: the release name (`helm.releaseName`, else the app's
//! instance name), `--namespace` (`helm.namespace`, else the destination namespace),
//! `--kube-version` (the source's, else the destination's when known), each parameter
//! (`--set`, or `--set-string` with `forceString`; unescaped commas escaped), each value
//! file (`--values`, a repository path relative to the chart; one
//! outside the repository or a URL is refused; a missing one skipped only with
//! `ignoreMissingValueFiles`), the inline values (`valuesObject`, else `values`) as one
//! more file, `--api-versions` (the source's, else the destination's), `--include-crds`
//! unless `skipCrds`, and `--skip-tests` with `skipTests`.

use std::ffi::OsString;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::super::error::SourceError;
use super::super::parse::Manifest;
use super::kustomize::inside;
use super::process::{Tools, arg};
use super::{Job, SourceType};

/// `spec.source.helm`, the fields rendered here (the others are refused by
/// `fleetshard_manifest::implemented`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Options {
    release_name: String,
    namespace: String,
    value_files: Vec<String>,
    ignore_missing_value_files: bool,
    values: String,
    values_object: Option<Value>,
    parameters: Vec<Parameter>,
    skip_crds: bool,
    skip_tests: bool,
    kube_version: String,
    api_versions: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Parameter {
    name: String,
    value: String,
    force_string: bool,
}

/// The message of a Helm source that cannot be rendered here.
pub(crate) const NO_HELM: &str = "Helm needs Argo CD's repo-server (--repo-server) or a helm \
     executable on PATH; nothing is applied or pruned";

/// Renders the chart at `job.path` of the tree copied at `root`.
pub(crate) async fn template(
    job: &Job,
    root: &Path,
    tools: &Tools,
) -> Result<Vec<Manifest>, SourceError> {
    let fail = |message: String| job.error(SourceType::Helm, message);
    let Some(helm) = tools.find("helm") else {
        return Err(fail(NO_HELM.to_owned()));
    };
    let o: Options = match job.raw.get("helm") {
        Some(v) if !v.is_null() => {
            serde_json::from_value(v.clone()).map_err(|e| fail(format!("spec.source.helm: {e}")))?
        }
        _ => Options::default(),
    };
    let chart = job.path.iter().fold(root.to_path_buf(), |p, c| p.join(c));
    let release = if o.release_name.is_empty() {
        job.app_name.clone()
    } else {
        o.release_name.clone()
    };
    let namespace = if o.namespace.is_empty() {
        job.namespace.clone()
    } else {
        o.namespace.clone()
    };
    let mut args: Vec<OsString> = vec![
        arg("template"),
        arg("."),
        arg("--name-template"),
        arg(release),
        arg("--namespace"),
        arg(namespace),
    ];
    let kube_version = Some(o.kube_version.clone())
        .filter(|v| !v.is_empty())
        .or_else(|| job.kube_version.clone());
    if let Some(v) = kube_version {
        args.extend([arg("--kube-version"), arg(v)]);
    }
    // Parameters by name, the last of a name winning (Argo CD keeps them in a map).
    let mut sets: Vec<&Parameter> = Vec::new();
    for p in &o.parameters {
        sets.retain(|q| q.name != p.name);
        sets.push(p);
    }
    for force_string in [false, true] {
        for p in sets.iter().filter(|p| p.force_string == force_string) {
            let flag = if force_string {
                "--set-string"
            } else {
                "--set"
            };
            args.extend([
                arg(flag),
                arg(format!("{}={}", p.name, escape_commas(&p.value))),
            ]);
        }
    }
    for file in &o.value_files {
        if file.contains("://") {
            return Err(fail(format!(
                "helm.valueFiles {file:?}: value files from URLs are not fetched by fleetshard"
            )));
        }
        let Some(path) = inside(root, &chart, file) else {
            return Err(fail(format!(
                "helm.valueFiles {file:?} is outside the repository"
            )));
        };
        if !path.is_file() {
            if o.ignore_missing_value_files {
                continue;
            }
            return Err(fail(format!(
                "helm.valueFiles {file:?}: no such file in the repository"
            )));
        }
        args.extend([arg("--values"), path.into_os_string()]);
    }
    let inline = match &o.values_object {
        Some(v) if !v.is_null() => Some(serde_json::to_string(v).map_err(|e| fail(e.to_string()))?),
        _ => Some(o.values.clone()).filter(|v| !v.trim().is_empty()),
    };
    if let Some(values) = inline {
        let file = root
            .parent()
            .unwrap_or(root)
            .join("fleetshard-inline-values.yaml");
        std::fs::write(&file, values)
            .map_err(|e| fail(format!("cannot write the inline values: {e}")))?;
        args.extend([arg("--values"), file.into_os_string()]);
    }
    let api_versions = if o.api_versions.is_empty() {
        &job.api_versions
    } else {
        &o.api_versions
    };
    for v in api_versions {
        args.extend([arg("--api-versions"), arg(v)]);
    }
    if !o.skip_crds {
        args.push(arg("--include-crds"));
    }
    if o.skip_tests {
        args.push(arg("--skip-tests"));
    }
    let out = tools
        .run(&helm, &args, &chart, job.limits.max_manifest_bytes)
        .await
        .map_err(fail)?;
    job.parse_output(&format!("{} (helm template)", job.path.join("/")), &out)
}

/// A `--set` value with each comma not already escaped escaped (Helm splits on them),
/// unless the value is a `{…}` list, as Argo CD does.
fn escape_commas(value: &str) -> String {
    if value.starts_with('{') && value.ends_with('}') {
        return value.to_owned();
    }
    let mut out = String::with_capacity(value.len());
    let mut previous = None;
    for c in value.chars() {
        if c == ',' && previous != Some('\\') {
            out.push('\\');
        }
        out.push(c);
        previous = Some(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape_commas;

    #[test]
    fn commas_are_escaped_as_argo_cd_escapes_them() {
        assert_eq!(escape_commas("a,b\\,c"), "a\\,b\\,c");
        assert_eq!(escape_commas("{a,b}"), "{a,b}");
    }
}
