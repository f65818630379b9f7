//! Argo CD's app-state cache in Redis, written as Argo CD's application controller writes
//! it, so that Argo CD's API server and UI read it unchanged: the resource tree
//! (`app|resources-tree|<app>`, sharded `…|<n>` by `ARGOCD_APPLICATION_TREE_SHARD_SIZE`),
//! the managed resources (`app|managed-resources|<app>`, Secret values hidden) and the
//! cluster info (`cluster|info|<server>`), each key suffixed with Argo CD's cache version
//! (`|1.8.3`) and `.gz` under gzip, each value the document's JSON (gzipped), with Argo
//! CD's expirations and the update notification its API server's watchers subscribe to.
//! The pure part — [`tree::resource_tree`], [`managed::managed_resources`],
//! [`cluster::cluster_info`], the keys and the encoding ([`encode`]) — turns what the
//! reconciler compared and cached into those documents and reads no clock and no
//! network. The [`AppStateWriter`] hands them to Redis from a task of its own: it never
//! blocks or fails its caller; while Redis is down it keeps the latest value of each key
//! (coalesced, so memory is bounded by the cache's size) and reconnects with a doubling
//! backoff. Which apps and clusters are written is the caller's choice: a replica writes
//! only those it owns.

pub mod cluster;
pub mod documents;
pub mod encode;
pub mod managed;
pub mod node_info;
mod quantity;
pub mod settings;
pub mod tree;
mod writer;

use std::sync::Arc;

use serde_json::Value;

pub use cluster::{ClusterFacts, cluster_info};
pub use documents::{
    ApplicationSummary, ApplicationTree, ClusterInfo, HealthStatus, ResourceDiff, ResourceNode,
};
pub use encode::{CACHE_VERSION, Compression, EncodeError};
pub use managed::{managed_resources, sensitive_annotations};
pub use settings::{CLUSTER_INFO_EXPIRATION, RedisSentinel, RedisSettings, RedisTls};
pub use tree::{ManagedResource, TreeInput, orphaned_nodes, resource_tree};
pub use writer::{AppStateWriter, WriterStats};

/// What the app and argocd-cm say about how its documents are shown.
#[derive(Debug, Clone, Copy, Default)]
pub struct AppShown<'a> {
    /// The app's own links (`link.argocd.argoproj.io/*` on the Application): the summary's
    /// external URLs.
    pub links: &'a [String],
    /// The Secret annotations whose values are hidden ([`managed::sensitive_annotations`]).
    pub sensitive_annotations: &'a [String],
}

/// Settings that can never work.
#[derive(Debug, thiserror::Error)]
pub enum AppStateError {
    /// `--redis` or `--sentinel` is not `HOST:PORT`.
    #[error("Redis address {address:?}: {reason}")]
    Address {
        /// The value given.
        address: String,
        /// What is wrong.
        reason: String,
    },
    /// A certificate or key file could not be read.
    #[error("{what} {path}: {source}")]
    Certificate {
        /// The flag that named it.
        what: &'static str,
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Only one of the client certificate and its key was given.
    #[error("--redis-client-certificate and --redis-client-key go together")]
    ClientCertificatePair,
    /// The Redis client refused the settings.
    #[error("Redis client settings: {0}")]
    Client(#[from] redis::RedisError),
}

/// The app-state cache of one replica: documents built and handed to the writer.
pub struct AppStateCache {
    writer: AppStateWriter,
    settings: RedisSettings,
}

impl AppStateCache {
    /// Starts the writer (see [`AppStateWriter::start`]).
    pub fn start(settings: RedisSettings) -> Result<Self, AppStateError> {
        Ok(AppStateCache {
            writer: AppStateWriter::start(settings.clone())?,
            settings,
        })
    }

    /// The settings it writes with.
    pub fn settings(&self) -> &RedisSettings {
        &self.settings
    }

    /// Writes the tree and managed resources of the app whose instance name is `app`,
    /// then publishes its update notification. Answers the tree's summary with
    /// `shown.links`, the app's own links ([`ApplicationTree::summary`]). `orphaned`: the
    /// app's orphaned nodes ([`orphaned_nodes`]).
    pub fn write_app(
        &self,
        app: &str,
        managed: &[ManagedResource],
        objects: &[Arc<Value>],
        health: &dyn Fn(&Value) -> Option<HealthStatus>,
        shown: &AppShown<'_>,
        orphaned: &[ResourceNode],
    ) -> Result<ApplicationSummary, EncodeError> {
        let s = &self.settings;
        let tree = resource_tree(&TreeInput {
            managed,
            objects,
            health,
            orphaned,
        });
        let summary = tree.summary(shown.links);
        for (i, shard) in encode::tree_shards(tree, s.tree_shard_size)
            .iter()
            .enumerate()
        {
            let key = encode::redis_key(&encode::tree_key(app, i), s.compression);
            self.writer.set(
                key,
                encode::encode(shard, s.compression)?,
                s.app_state_expiration,
            );
        }
        let diffs = managed_resources(managed, shown.sensitive_annotations);
        self.writer.set(
            encode::redis_key(&encode::managed_resources_key(app), s.compression),
            encode::encode(&diffs, s.compression)?,
            s.app_state_expiration,
        );
        self.writer.publish(encode::update_channel(app));
        Ok(summary)
    }

    /// Writes the cluster info of the cluster whose API server is `server`.
    pub fn write_cluster(&self, server: &str, facts: &ClusterFacts) -> Result<(), EncodeError> {
        let s = &self.settings;
        self.writer.set(
            encode::redis_key(&encode::cluster_info_key(server), s.compression),
            encode::encode(&cluster_info(facts), s.compression)?,
            CLUSTER_INFO_EXPIRATION,
        );
        Ok(())
    }

    /// What the writer has done so far.
    pub fn stats(&self) -> WriterStats {
        self.writer.stats()
    }
}
