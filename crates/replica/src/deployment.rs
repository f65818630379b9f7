//! The shard count Argo CD uses: `spec.replicas` of the application controller's
//! Deployment (`ARGOCD_APPLICATION_CONTROLLER_NAME`, default `argocd-application-controller`),
//! read once or kept current by a watcher. A source for a shard-count policy, read through
//! the Kubernetes store's client; it lives with the assembly, not in the store backend
//! (which only moves bytes).

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The environment variable Argo CD reads the controller Deployment's name from (the
/// binary reads it; this crate takes the name as an argument).
pub const ARGOCD_CONTROLLER_NAME_ENV: &str = "ARGOCD_APPLICATION_CONTROLLER_NAME";
/// The Deployment name Argo CD uses when the variable is unset.
pub const DEFAULT_CONTROLLER_NAME: &str = "argocd-application-controller";

/// The Deployment whose `spec.replicas` is the shard count: its name, and its namespace
/// (`None`: the `kubernetes://` store's). A fenced store has a namespace of its own
/// (`deploy/overlays/fenced/store`) while the replicas' Deployment lives in the
/// controller's namespace, so the two may differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentRef {
    /// The namespace; `None`: the store's.
    pub namespace: Option<String>,
    /// The Deployment's name.
    pub name: String,
}

impl std::fmt::Display for DeploymentRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// Why the replica count could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReplicasError {
    /// The API server did not answer in time, could not be reached, or failed (5xx).
    #[error("reading Deployment {name}: API server unavailable: {reason}")]
    Unavailable {
        /// The Deployment.
        name: String,
        /// What happened.
        reason: String,
    },
    /// The API server refused the read (403: missing RBAC, …).
    #[error("reading Deployment {name}: {reason}")]
    Refused {
        /// The Deployment.
        name: String,
        /// What the server said.
        reason: String,
    },
    /// `spec.replicas` is negative, which no replica count can be.
    #[error("Deployment {name}: spec.replicas is {value}; a replica count cannot be negative")]
    Negative {
        /// The Deployment.
        name: String,
        /// The value found.
        value: i32,
    },
}

/// Reads the replica count of one Deployment.
#[derive(Clone)]
pub struct DeploymentReplicas {
    api: Api<Deployment>,
    name: String,
    timeout: Duration,
}

impl std::fmt::Debug for DeploymentReplicas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentReplicas")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// `spec.replicas`, with Kubernetes' default of 1 when unset.
fn replicas_of(d: &Deployment, name: &str) -> Result<u32, ReplicasError> {
    let value = d.spec.replicas.unwrap_or(1);
    u32::try_from(value).map_err(|_| ReplicasError::Negative {
        name: name.to_owned(),
        value,
    })
}

impl DeploymentReplicas {
    /// The Deployment `name` in `namespace`; each read is bounded by `timeout`.
    pub fn new(client: kube::Client, namespace: &str, name: &str, timeout: Duration) -> Self {
        DeploymentReplicas {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            timeout,
        }
    }

    /// The Deployment's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The replica count now; `None` when there is no such Deployment.
    pub async fn get(&self) -> Result<Option<u32>, ReplicasError> {
        let name = &self.name;
        let unavailable = |reason: String| ReplicasError::Unavailable {
            name: name.clone(),
            reason,
        };
        let found = match tokio::time::timeout(self.timeout, self.api.get_opt(name)).await {
            Ok(Ok(found)) => found,
            Ok(Err(kube::Error::Api(status))) if status.code < 500 && status.code != 429 => {
                return Err(ReplicasError::Refused {
                    name: name.clone(),
                    reason: format!(
                        "get Deployment {name}: {} ({})",
                        status.message, status.code
                    ),
                });
            }
            Ok(Err(e)) => return Err(unavailable(format!("get Deployment {name}: {e}"))),
            Err(_) => {
                return Err(unavailable(format!(
                    "get Deployment {name}: no answer within {:?}",
                    self.timeout
                )));
            }
        };
        found.map(|d| replicas_of(&d, name)).transpose()
    }

    /// Reads the count once, then keeps a receiver current with a watcher (which re-lists
    /// after errors, with kube's default backoff) until the returned [`ReplicasWatch`] is
    /// dropped. `None` means the Deployment does not exist (or was deleted); a negative
    /// count is logged and ignored (the last good value stays).
    pub async fn watch(self) -> Result<ReplicasWatch, ReplicasError> {
        let (tx, rx) = watch::channel(self.get().await?);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        let name = self.name.clone();
        let task = tokio::spawn(async move {
            let events = watcher::watcher(self.api, config).default_backoff();
            futures::pin_mut!(events);
            // Whether the current (re-)list found the Deployment.
            let mut listed = false;
            while let Some(event) = events.next().await {
                let update = match event {
                    Ok(Event::Init) => {
                        listed = false;
                        continue;
                    }
                    Ok(Event::InitApply(d)) => {
                        listed = true;
                        replicas_of(&d, &name).map(Some)
                    }
                    Ok(Event::InitDone) if listed => continue,
                    Ok(Event::InitDone) | Ok(Event::Delete(_)) => Ok(None),
                    Ok(Event::Apply(d)) => replicas_of(&d, &name).map(Some),
                    Err(e) => {
                        tracing::warn!(deployment = %name, error = %e, "watching the replica count");
                        continue;
                    }
                };
                match update {
                    Ok(n) => {
                        tx.send_if_modified(|v| std::mem::replace(v, n) != n);
                    }
                    Err(e) => tracing::warn!(error = %e, "ignoring the replica count"),
                }
            }
        });
        Ok(ReplicasWatch { rx, task })
    }
}

/// A replica count kept current in the background; dropping it stops the watcher.
#[derive(Debug)]
pub struct ReplicasWatch {
    rx: watch::Receiver<Option<u32>>,
    task: JoinHandle<()>,
}

impl ReplicasWatch {
    /// A receiver of the count (`None`: no such Deployment). Every clone sees each change.
    pub fn receiver(&self) -> watch::Receiver<Option<u32>> {
        self.rx.clone()
    }

    /// The count now.
    pub fn current(&self) -> Option<u32> {
        *self.rx.borrow()
    }
}

impl Drop for ReplicasWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
