//! Which namespace the store is (the store is the store): a namespace deleted and created
//! again under the same name is another namespace — a new `metadata.uid`, none of the
//! fleet's records — so its uid is recorded at first contact, and another uid (or no
//! namespace) is [`StoreError::Replaced`]. One GET of the namespace per check; the store
//! guard checks at most once per second.
//!
//! RBAC: `get` on `namespaces` in a Role of the namespace itself (Kubernetes authorizes a
//! request for namespace N's own object as a request in namespace N). Without it the check
//! fails with 403, which is logged once; operations go on, unguarded against re-creation.

use std::sync::atomic::Ordering;

use fleetshard_coord::store::{Store as _, StoreError, StoreIdentity};
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;

use crate::KubeStore;
use crate::errors::call;

impl KubeStore {
    /// The namespace's uid now: `Ok(None)` if there is no such namespace.
    async fn namespace_uid(&self) -> Result<Option<String>, StoreError> {
        let ctx = self.ctx().await?;
        let api: Api<Namespace> = Api::all(ctx.client.clone());
        let ns = &ctx.namespace;
        let got = call(
            || format!("get Namespace {ns}"),
            self.inner.options.call_timeout,
            api.get_opt(ns),
        )
        .await;
        match got {
            Ok(found) => Ok(found.and_then(|n| n.metadata.uid)),
            Err(e) => {
                if e.code() == Some(403) && !self.inner.uid_refused.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        store = %self.describe(),
                        "{e}: grant `get` on `namespaces` in this namespace's Role, or a \
                         namespace deleted and re-created under a running replica goes unnoticed"
                    );
                }
                Err(e.into_store(&format!("namespace {ns}")))
            }
        }
    }

    /// Records the namespace's uid at first contact; afterwards `Replaced` when the
    /// namespace is gone or has another uid.
    pub(crate) async fn identity(&self) -> Result<StoreIdentity, StoreError> {
        let now = self.namespace_uid().await?;
        let ns = &self.ctx().await?.namespace;
        let mut recorded = self.inner.uid.lock().unwrap_or_else(|e| e.into_inner());
        let shown = |uid: &str| format!("{}: namespace {ns} (uid {uid})", self.describe());
        match (recorded.as_deref(), now) {
            (None, Some(uid)) => {
                let identity = shown(&uid);
                *recorded = Some(uid);
                Ok(StoreIdentity::Recorded(identity))
            }
            (None, None) => Err(StoreError::Backend(format!(
                "{}: namespace {ns} does not exist",
                self.describe()
            ))),
            (Some(first), Some(uid)) if first == uid => Ok(StoreIdentity::Recorded(shown(&uid))),
            (Some(first), Some(uid)) => Err(StoreError::Replaced {
                what: format!(
                    "{}: namespace {ns} was deleted and created again (uid {uid}, not {first} \
                     as this process found it first)",
                    self.describe()
                ),
            }),
            (Some(first), None) => Err(StoreError::Replaced {
                what: format!(
                    "{}: namespace {ns} (uid {first}) was deleted",
                    self.describe()
                ),
            }),
        }
    }
}
