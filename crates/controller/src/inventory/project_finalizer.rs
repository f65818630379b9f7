//! Removing Argo CD's finalizer from an AppProject being deleted, through the Kubernetes
//! API: read the project, drop [`PROJECT_FINALIZER`] from `metadata.finalizers`, and replace
//! the object at the resourceVersion read (a concurrent change is a conflict, and the
//! project queue retries). RBAC: `get` and `update` on `appprojects` in Argo CD's namespace.

use fleetshard_manifest::PROJECT_FINALIZER;
use futures::future::BoxFuture;
use kube::api::{Api, DynamicObject, PostParams};

use super::app_project_resource;
use crate::project::ProjectFinalizer;

/// A [`ProjectFinalizer`] over a Kubernetes client, for the AppProjects of one namespace.
#[derive(Clone)]
pub struct KubernetesProjectFinalizer {
    api: Api<DynamicObject>,
}

impl std::fmt::Debug for KubernetesProjectFinalizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesProjectFinalizer")
            .finish_non_exhaustive()
    }
}

impl KubernetesProjectFinalizer {
    /// Removes finalizers of the AppProjects in `namespace` (Argo CD's).
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        KubernetesProjectFinalizer {
            api: Api::namespaced_with(client, namespace, &app_project_resource()),
        }
    }
}

impl ProjectFinalizer for KubernetesProjectFinalizer {
    fn release(&self, name: &str) -> BoxFuture<'static, Result<(), String>> {
        let api = self.api.clone();
        let name = name.to_owned();
        Box::pin(async move {
            let mut project = match api.get_opt(&name).await {
                Ok(Some(p)) => p,
                // Gone already: nothing holds it.
                Ok(None) => return Ok(()),
                Err(e) => return Err(format!("reading AppProject {name}: {e}")),
            };
            let Some(finalizers) = project.metadata.finalizers.as_mut() else {
                return Ok(());
            };
            let before = finalizers.len();
            finalizers.retain(|f| f != PROJECT_FINALIZER);
            if finalizers.len() == before {
                return Ok(());
            }
            api.replace(&name, &PostParams::default(), &project)
                .await
                .map(|_| ())
                .map_err(|e| format!("removing the finalizer of AppProject {name}: {e}"))
        })
    }
}
