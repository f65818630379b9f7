//! The repo-server's answer, checked: every manifest one JSON object.

use serde_json::{Map, Value};

use crate::proto::ManifestResponse;

/// What one `GenerateManifest` call rendered.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rendered {
    /// The objects, in the order the repo-server listed them (already carrying the
    /// tracking label or annotation the request asked for). Empty for a `ref`-only source.
    pub manifests: Vec<Map<String, Value>>,
    /// The resolved revision (a commit SHA, or a chart version): `status.sync.revision`.
    pub revision: String,
    /// `Helm`, `Kustomize`, `Directory` or `Plugin`: `status.sourceType`.
    pub source_type: String,
    /// The namespace the repo-server rendered for.
    pub namespace: String,
    /// The server field of the response (Argo CD leaves it empty).
    pub server: String,
    /// The commands the repo-server ran (Argo CD 2.10 and later; empty before).
    pub commands: Vec<String>,
}

/// Checks `response`: `Err` names the first manifest that is not one JSON object.
pub(crate) fn parse(response: ManifestResponse) -> Result<Rendered, String> {
    let manifests = response
        .manifests
        .iter()
        .enumerate()
        .map(|(i, text)| match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(other) => Err(format!(
                "manifest {i} is {}, not a JSON object",
                crate::json::kind(&other)
            )),
            Err(e) => Err(format!("manifest {i} is not JSON: {e}")),
        })
        .collect::<Result<_, _>>()?;
    Ok(Rendered {
        manifests,
        revision: response.revision,
        source_type: response.source_type,
        namespace: response.namespace,
        server: response.server,
        commands: response.commands,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_manifest_must_be_an_object() {
        let ok = ManifestResponse {
            manifests: vec![r#"{"kind":"ConfigMap"}"#.into()],
            revision: "abc".into(),
            source_type: "Helm".into(),
            ..ManifestResponse::default()
        };
        let r = parse(ok).unwrap();
        assert_eq!(r.manifests[0]["kind"], "ConfigMap");
        assert_eq!(
            (r.revision.as_str(), r.source_type.as_str()),
            ("abc", "Helm")
        );
        for (bad, want) in [
            ("[1]", "manifest 1 is an array"),
            ("{", "manifest 1 is not JSON"),
        ] {
            let response = ManifestResponse {
                manifests: vec!["{}".into(), bad.into()],
                ..ManifestResponse::default()
            };
            let err = parse(response).unwrap_err();
            assert!(err.starts_with(want), "{err}");
        }
    }
}
