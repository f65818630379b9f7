//! What a destination tells about itself for rendering: its server version and every
//! API version and kind it serves (Helm's `--kube-version` and `--api-versions`, the
//! repo-server's `kubeVersion` and `apiVersions`). Asked once per connection and kept for
//! [`VERSIONS_TTL`], as Argo CD's cluster cache keeps its API resources between
//! refreshes; a CRD installed meanwhile shows after at most that long. The same discovery
//! lists the namespaced kinds that can be listed and watched, the kinds looked at for
//! orphaned resources (`orphans.rs`).

use std::sync::Arc;
use std::time::Duration;

use kube::discovery::{Discovery, Scope, verbs};
use tokio::time::Instant;

use super::{ClusterConn, KindInfo, LiveError, with_causes};

/// How long one discovery of a destination's versions is used.
pub const VERSIONS_TTL: Duration = Duration::from_secs(300);

/// A destination's server version and served API versions, as renderers take them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServedVersions {
    /// The server's `gitVersion` (`/version`), e.g. `v1.31.2`.
    pub git_version: String,
    /// Every served `group/version` and `group/version/Kind`, sorted (Argo CD's
    /// `APIResourcesToStrings`); made once per discovery, not per render.
    pub api_versions: Vec<String>,
    /// The namespaced kinds that can be listed and watched, each at its group's preferred
    /// version, sorted by group and kind.
    pub namespaced_kinds: Vec<KindInfo>,
}

/// The last discovery and when it was made.
pub(crate) type VersionsSlot = tokio::sync::Mutex<Option<(Instant, Arc<ServedVersions>)>>;

impl ClusterConn {
    /// The destination's version and served kinds, from a discovery at most
    /// [`VERSIONS_TTL`] old (one discovery at a time per cluster).
    pub async fn served_versions(&self) -> Result<Arc<ServedVersions>, LiveError> {
        let mut slot = self.versions.lock().await;
        if let Some((at, versions)) = slot.as_ref()
            && at.elapsed() < VERSIONS_TTL
        {
            return Ok(versions.clone());
        }
        let timeout = self.options.call_timeout;
        let version = tokio::time::timeout(timeout, self.client.apiserver_version())
            .await
            .map_err(|_| self.unreachable("version: no answer in time"))?
            .map_err(|e| self.unreachable(format!("version: {}", with_causes(&e))))?;
        let discovery = tokio::time::timeout(timeout, Discovery::new(self.client.clone()).run())
            .await
            .map_err(|_| self.unreachable("discovery: no answer in time"))?
            .map_err(|e| self.unreachable(format!("discovery: {}", with_causes(&e))))?;
        let mut kinds = Vec::new();
        let mut namespaced_kinds = Vec::new();
        for group in discovery.groups() {
            for (resource, caps) in group.recommended_resources() {
                let watchable =
                    caps.supports_operation(verbs::LIST) && caps.supports_operation(verbs::WATCH);
                if caps.scope == Scope::Namespaced && watchable {
                    namespaced_kinds.push(KindInfo {
                        resource,
                        namespaced: true,
                    });
                }
            }
            for version in group.versions() {
                for (resource, _) in group.versioned_resources(version) {
                    kinds.push((resource.group, resource.version, resource.kind));
                }
            }
        }
        self.heard_now();
        self.observed.saw_version(&version.git_version);
        let api_versions = fleetshard_reposerver::api_version_strings(
            kinds
                .iter()
                .map(|(g, v, k)| (g.as_str(), v.as_str(), k.as_str())),
        );
        let versions = Arc::new(ServedVersions {
            git_version: version.git_version,
            api_versions,
            namespaced_kinds: {
                namespaced_kinds.sort_by(|a, b| {
                    (&a.resource.group, &a.resource.kind)
                        .cmp(&(&b.resource.group, &b.resource.kind))
                });
                namespaced_kinds
            },
        });
        *slot = Some((Instant::now(), versions.clone()));
        Ok(versions)
    }
}
