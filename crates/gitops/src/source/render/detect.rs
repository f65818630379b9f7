//! Which tool renders a source, as Argo CD's repo-server decides
//! (`GetAppSourceType`, `discovery.AppType`).

use serde_json::Value;

/// How a source is rendered, named as Argo CD names it in `status.sourceType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceType {
    /// Plain YAML/JSON manifests and Jsonnet files.
    Directory,
    /// A Kustomize overlay.
    Kustomize,
    /// A Helm chart.
    Helm,
    /// A config management plugin.
    Plugin,
}

impl SourceType {
    /// Argo CD's name (`status.sourceType`).
    pub fn as_str(self) -> &'static str {
        match self {
            SourceType::Directory => "Directory",
            SourceType::Kustomize => "Kustomize",
            SourceType::Helm => "Helm",
            SourceType::Plugin => "Plugin",
        }
    }
}

impl std::fmt::Display for SourceType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The type the source names itself: each of `kustomize`, `helm`, `directory` and
/// `plugin` present (even `{}`: Argo CD's controller sends a set but empty option
/// object, and its repo-server counts it) names one; none is `None`; more than one is an
/// error, as Argo CD's ("multiple application sources defined").
pub(crate) fn explicit(raw: &Value) -> Result<Option<SourceType>, String> {
    let named: Vec<SourceType> = [
        ("kustomize", SourceType::Kustomize),
        ("helm", SourceType::Helm),
        ("directory", SourceType::Directory),
        ("plugin", SourceType::Plugin),
    ]
    .into_iter()
    .filter(|(field, _)| raw.get(field).is_some_and(|v| !v.is_null()))
    .map(|(_, t)| t)
    .collect();
    match named.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        many => Err(format!(
            "multiple application sources defined: {}",
            many.iter()
                .map(|t| t.as_str())
                .collect::<Vec<_>>()
                .join(",")
        )),
    }
}

/// The type Argo CD discovers from the names of the files at the top of the app's path,
/// visited in byte order with the last match winning: a Kustomize file name
/// (`kustomization.yaml`, `kustomization.yml`, `Kustomization`) is Kustomize, a name
/// ending in `Chart.yaml` is Helm; none is a directory.
pub(crate) fn discover<'a>(names: impl Iterator<Item = &'a str>) -> SourceType {
    let mut names: Vec<&str> = names.collect();
    names.sort_unstable();
    let mut found = SourceType::Directory;
    for name in names {
        if name.ends_with("Chart.yaml") {
            found = SourceType::Helm;
        }
        if matches!(
            name,
            "kustomization.yaml" | "kustomization.yml" | "Kustomization"
        ) {
            found = SourceType::Kustomize;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_explicit_type_wins_and_two_are_an_error() {
        assert_eq!(explicit(&json!({"repoURL": "r"})), Ok(None));
        assert_eq!(explicit(&Value::Null), Ok(None));
        assert_eq!(
            explicit(&json!({"kustomize": {}, "helm": null})),
            Ok(Some(SourceType::Kustomize))
        );
        assert_eq!(
            explicit(&json!({"helm": {}, "directory": {"recurse": true}})),
            Err("multiple application sources defined: Helm,Directory".to_owned())
        );
    }

    #[test]
    fn discovery_follows_argo_cd() {
        assert_eq!(discover(["a.yaml"].into_iter()), SourceType::Directory);
        assert_eq!(
            discover(["Chart.yaml", "values.yaml"].into_iter()),
            SourceType::Helm
        );
        assert_eq!(discover(["myChart.yaml"].into_iter()), SourceType::Helm);
        assert_eq!(
            discover(["kustomization.yml", "Chart.yaml"].into_iter()),
            SourceType::Kustomize
        );
        // Byte order: "values-Chart.yaml" comes after "kustomization.yaml" and wins.
        assert_eq!(
            discover(["values-Chart.yaml", "kustomization.yaml"].into_iter()),
            SourceType::Helm
        );
    }
}
