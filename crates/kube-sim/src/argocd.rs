//! Argo CD's CustomResourceDefinitions, for fakes that stand in for an Argo CD control
//! plane: Application and AppProject with a structural schema written from the facts of
//! Argo CD's own CRDs (field names, types, required lists, date-time formats; trimmed
//! where fleetshard reads nothing, see the files under `crds/`). Installed with
//! [`FakeApiServer::install_argocd_crds`], every write of an Application or AppProject —
//! the statuses fleetshard writes included — is pruned and validated as Argo CD's CRD
//! makes a real API server do.

use serde_json::Value;

use super::FakeApiServer;
use super::status::ApiError;

/// Argo CD's Application CRD (`applications.argoproj.io`), as YAML.
pub const APPLICATION_CRD_YAML: &str = include_str!("../crds/argocd-application.yaml");

/// Argo CD's AppProject CRD (`appprojects.argoproj.io`), as YAML.
pub const APPPROJECT_CRD_YAML: &str = include_str!("../crds/argocd-appproject.yaml");

/// Both CRDs as JSON objects.
pub fn argocd_crds() -> Result<Vec<Value>, ApiError> {
    [APPLICATION_CRD_YAML, APPPROJECT_CRD_YAML]
        .into_iter()
        .map(|yaml| {
            serde_saphyr::from_str::<Value>(yaml)
                .map_err(|e| ApiError::internal(format!("Argo CD CRD does not parse: {e}")))
        })
        .collect()
}

impl FakeApiServer {
    /// Installs Argo CD's Application and AppProject CRDs ([`argocd_crds`]): from then on,
    /// Applications and AppProjects written over HTTP are pruned and validated against
    /// their schema (AppProjects are served from then on; Applications are served in any
    /// case).
    pub fn install_argocd_crds(&self) -> Result<(), ApiError> {
        for crd in argocd_crds()? {
            self.insert(crd)?;
        }
        Ok(())
    }
}
