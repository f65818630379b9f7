//! The settings every request carries, read from `argocd-cm` as Argo CD's settings
//! manager reads them: enabled source types, Kustomize and Helm options, and how objects
//! are tracked (the method, the instance label key, the installation id).

use std::collections::BTreeMap;

use crate::error::RequestError;
use crate::proto::{HelmOptions, KustomizeOptions, KustomizeVersion};

/// Argo CD's default instance label key (`application.instanceLabelKey`).
pub const DEFAULT_APP_LABEL_KEY: &str = "app.kubernetes.io/instance";

/// How objects are stamped as an app's, and recognised as such
/// (`application.resourceTrackingMethod`). The repo-server stamps every object it renders,
/// so the request names the method the controller compares with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrackingMethod {
    /// The instance label (`application.instanceLabelKey`) only: Argo CD's default before
    /// 3.0.
    Label,
    /// The `argocd.argoproj.io/tracking-id` annotation: Argo CD's default since 3.0.
    #[default]
    Annotation,
    /// The annotation tracks; the label is written too.
    AnnotationAndLabel,
}

impl TrackingMethod {
    /// The value sent (`trackingMethod`), as argocd-cm spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            TrackingMethod::Label => "label",
            TrackingMethod::Annotation => "annotation",
            TrackingMethod::AnnotationAndLabel => "annotation+label",
        }
    }

    /// argocd-cm's value: `label`, `annotation+label`; anything else (`annotation`, empty,
    /// absent, unknown) is annotation tracking, as Argo CD's controller reads it.
    pub fn parse(value: Option<&str>) -> Self {
        match value {
            Some("label") => TrackingMethod::Label,
            Some("annotation+label") => TrackingMethod::AnnotationAndLabel,
            _ => TrackingMethod::Annotation,
        }
    }
}

/// How one Argo CD instance tracks the objects of its apps: argocd-cm's
/// `application.resourceTrackingMethod`, `application.instanceLabelKey` and
/// `installationID`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackingSettings {
    /// `application.resourceTrackingMethod`.
    pub method: TrackingMethod,
    /// `application.instanceLabelKey` ([`DEFAULT_APP_LABEL_KEY`] when absent or empty).
    pub label_key: String,
    /// `installationID` (empty: none): stamped on every object as
    /// `argocd.argoproj.io/installation-id`, and an object stamped with another id is not
    /// this instance's.
    pub installation_id: String,
}

impl Default for TrackingSettings {
    /// Argo CD's defaults: annotation tracking, the default label key, no installation id.
    fn default() -> Self {
        TrackingSettings::from_argocd_cm(&BTreeMap::new())
    }
}

impl TrackingSettings {
    /// Reads `argocd-cm`'s `data`.
    pub fn from_argocd_cm(data: &BTreeMap<String, String>) -> Self {
        TrackingSettings {
            method: TrackingMethod::parse(
                data.get("application.resourceTrackingMethod")
                    .map(String::as_str),
            ),
            label_key: data
                .get("application.instanceLabelKey")
                .filter(|k| !k.is_empty())
                .map_or_else(|| DEFAULT_APP_LABEL_KEY.to_owned(), String::clone),
            installation_id: data.get("installationID").cloned().unwrap_or_default(),
        }
    }
}

/// Settings from `argocd-cm` that every request of an Argo CD instance carries.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderSettings {
    /// `enabledSourceTypes`: `Helm`, `Kustomize`, `Directory` (from `helm.enable`,
    /// `kustomize.enable`, `jsonnet.enable`; true unless set to something else than
    /// `"true"`) and `Plugin` (always true).
    pub enabled_source_types: BTreeMap<String, bool>,
    /// `kustomizeOptions`: `kustomize.buildOptions`, and the named versions of
    /// `kustomize.path.<name>` / `kustomize.version.<name>` with their
    /// `kustomize.buildOptions.<name>` (sorted by name).
    pub kustomize_options: KustomizeOptions,
    /// `helmOptions.valuesFileSchemes`: `helm.valuesFileSchemes` split on commas;
    /// `https`, `http` when the key is absent.
    pub helm_values_file_schemes: Vec<String>,
    /// The tracking method, the instance label key and the installation id (the
    /// repo-server stamps every object it renders with them).
    pub tracking: TrackingSettings,
}

impl Default for RenderSettings {
    /// Argo CD's defaults, as with an empty `argocd-cm`.
    fn default() -> Self {
        RenderSettings::from_argocd_cm(&BTreeMap::new())
            .expect("an empty argocd-cm has no duplicate Kustomize version")
    }
}

impl RenderSettings {
    /// Reads `argocd-cm`'s `data`. Fails, as Argo CD does, when a Kustomize version is
    /// named twice (`kustomize.path.v5` and `kustomize.version.v5`).
    pub fn from_argocd_cm(data: &BTreeMap<String, String>) -> Result<Self, RequestError> {
        let mut enabled = BTreeMap::new();
        for (source_type, key) in [
            ("Kustomize", "kustomize.enable"),
            ("Helm", "helm.enable"),
            ("Directory", "jsonnet.enable"),
        ] {
            let on = match data.get(key) {
                Some(v) if !v.is_empty() => v == "true",
                _ => true,
            };
            enabled.insert(source_type.to_owned(), on);
        }
        enabled.insert("Plugin".to_owned(), true);

        let mut versions: BTreeMap<&str, KustomizeVersion> = BTreeMap::new();
        for (key, path) in data {
            let name = key
                .strip_prefix("kustomize.version.")
                .or_else(|| key.strip_prefix("kustomize.path."));
            if let Some(name) = name {
                let version = KustomizeVersion {
                    name: name.to_owned(),
                    path: path.clone(),
                    build_options: data
                        .get(&format!("kustomize.buildOptions.{name}"))
                        .cloned()
                        .unwrap_or_default(),
                };
                if versions.insert(name, version).is_some() {
                    return Err(RequestError::Invalid {
                        path: format!("argocd-cm {key}"),
                        message: format!("Kustomize version {name:?} is named twice"),
                    });
                }
            }
        }
        let helm_values_file_schemes = match data.get("helm.valuesFileSchemes") {
            Some(v) => v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            None => vec!["https".to_owned(), "http".to_owned()],
        };
        Ok(RenderSettings {
            enabled_source_types: enabled,
            kustomize_options: KustomizeOptions {
                build_options: data
                    .get("kustomize.buildOptions")
                    .cloned()
                    .unwrap_or_default(),
                binary_path: String::new(),
                versions: versions.into_values().collect(),
            },
            helm_values_file_schemes,
            tracking: TrackingSettings::from_argocd_cm(data),
        })
    }

    /// Whether argocd-cm leaves the source type named `source_type` (`Kustomize`, `Helm`,
    /// `Directory`, `Plugin`) on; a type it does not name is on.
    pub fn is_enabled(&self, source_type: &str) -> bool {
        self.enabled_source_types
            .get(source_type)
            .copied()
            .unwrap_or(true)
    }

    /// `helmOptions` as sent.
    pub(crate) fn helm_options(&self) -> HelmOptions {
        HelmOptions {
            values_file_schemes: self.helm_values_file_schemes.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_are_argo_cds() {
        let s = RenderSettings::default();
        let on: Vec<_> = s
            .enabled_source_types
            .iter()
            .filter(|(_, on)| **on)
            .collect();
        assert_eq!(on.len(), 4);
        assert_eq!(s.helm_values_file_schemes, ["https", "http"]);
        assert_eq!(s.kustomize_options, KustomizeOptions::default());
        assert_eq!(s.tracking.label_key, DEFAULT_APP_LABEL_KEY);
        assert_eq!(s.tracking.method, TrackingMethod::Annotation);
        assert!(s.is_enabled("Kustomize") && s.is_enabled("Helm"));
    }

    #[test]
    fn argocd_cm_is_read() {
        let s = RenderSettings::from_argocd_cm(&cm(&[
            ("helm.enable", "false"),
            ("jsonnet.enable", ""),
            ("helm.valuesFileSchemes", " https , s3,"),
            ("kustomize.buildOptions", "--enable-helm"),
            ("kustomize.path.v5", "/tools/kustomize5"),
            (
                "kustomize.buildOptions.v5",
                "--load-restrictor LoadRestrictionsNone",
            ),
            ("installationID", "prod-1"),
            ("application.instanceLabelKey", "example.com/instance"),
        ]))
        .unwrap();
        assert!(!s.enabled_source_types["Helm"]);
        assert!(!s.is_enabled("Helm") && s.is_enabled("Kustomize"));
        assert_eq!(s.tracking.label_key, "example.com/instance");
        assert_eq!(s.tracking.installation_id, "prod-1");
        assert!(s.enabled_source_types["Directory"]);
        assert_eq!(s.helm_values_file_schemes, ["https", "s3"]);
        assert_eq!(s.kustomize_options.build_options, "--enable-helm");
        assert_eq!(
            s.kustomize_options.versions,
            [KustomizeVersion {
                name: "v5".into(),
                path: "/tools/kustomize5".into(),
                build_options: "--load-restrictor LoadRestrictionsNone".into(),
            }]
        );
        assert_eq!(s.tracking.installation_id, "prod-1");
        let twice = cm(&[("kustomize.path.v5", "/a"), ("kustomize.version.v5", "/b")]);
        assert!(RenderSettings::from_argocd_cm(&twice).is_err());
    }
}

#[cfg(test)]
mod tracking_tests {
    use super::*;

    #[test]
    fn the_tracking_method_is_read_as_argo_cd_reads_it() {
        let read = |v: Option<&str>| {
            let mut data = BTreeMap::new();
            if let Some(v) = v {
                data.insert(
                    "application.resourceTrackingMethod".to_owned(),
                    v.to_owned(),
                );
            }
            TrackingSettings::from_argocd_cm(&data).method
        };
        assert_eq!(read(None), TrackingMethod::Annotation);
        assert_eq!(read(Some("")), TrackingMethod::Annotation);
        assert_eq!(read(Some("annotation")), TrackingMethod::Annotation);
        assert_eq!(read(Some("label")), TrackingMethod::Label);
        assert_eq!(
            read(Some("annotation+label")),
            TrackingMethod::AnnotationAndLabel
        );
        assert_eq!(read(Some("Label")), TrackingMethod::Annotation);
    }
}
