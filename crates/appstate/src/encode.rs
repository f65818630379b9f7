//! Keys and values as Argo CD's cache stores them in Redis.
//!
//! - A key is `<name>|<cache version>` (Argo CD's `common.CacheVersion`, [`CACHE_VERSION`]),
//!   then `.gz` under gzip compression: `app|resources-tree|guestbook|1.8.3.gz`.
//! - A value is the document's JSON followed by a newline (Go's `json.Encoder`), gzipped
//!   under gzip compression.
//! - A tree of more nodes than `ARGOCD_APPLICATION_TREE_SHARD_SIZE` (0: never) is split:
//!   shard 0 under the tree's own key with `shardsCount`, shard `n` under `…|<n>`.
//! - After an app's documents are written, an empty message is published on the channel
//!   `app|managed-resources|<app>|1.8.3` (no `.gz`): the API server's resource tree
//!   watchers subscribe to it.

use std::io::Write;

use flate2::Compression as Level;
use flate2::write::GzEncoder;
use serde::Serialize;

use crate::documents::ApplicationTree;

/// Argo CD's cache version, the suffix of every key.
pub const CACHE_VERSION: &str = "1.8.3";

/// How values are compressed (Argo CD's `--redis-compress`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Compression {
    /// gzip (Argo CD's default); keys end in `.gz`.
    #[default]
    Gzip,
    /// Plain JSON.
    None,
}

impl std::str::FromStr for Compression {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "gzip" => Ok(Compression::Gzip),
            "none" => Ok(Compression::None),
            other => Err(format!(
                "unknown compression type {other:?} (expected gzip or none)"
            )),
        }
    }
}

/// `app|resources-tree|<app>`, or `…|<shard>` for a shard after the first.
pub fn tree_key(app: &str, shard: usize) -> String {
    if shard == 0 {
        format!("app|resources-tree|{app}")
    } else {
        format!("app|resources-tree|{app}|{shard}")
    }
}

/// `app|managed-resources|<app>`.
pub fn managed_resources_key(app: &str) -> String {
    format!("app|managed-resources|{app}")
}

/// `cluster|info|<server>`.
pub fn cluster_info_key(server: &str) -> String {
    format!("cluster|info|{server}")
}

/// The Redis key of `name`: the cache version, and `.gz` under gzip.
pub fn redis_key(name: &str, compression: Compression) -> String {
    match compression {
        Compression::Gzip => format!("{name}|{CACHE_VERSION}.gz"),
        Compression::None => format!("{name}|{CACHE_VERSION}"),
    }
}

/// The channel told that `app`'s tree and managed resources changed.
pub fn update_channel(app: &str) -> String {
    format!("{}|{CACHE_VERSION}", managed_resources_key(app))
}

/// `doc` as Argo CD stores it.
pub fn encode<T: Serialize>(doc: &T, compression: Compression) -> Result<Vec<u8>, EncodeError> {
    let mut json = serde_json::to_vec(doc).map_err(EncodeError::Json)?;
    json.push(b'\n');
    match compression {
        Compression::None => Ok(json),
        Compression::Gzip => {
            let mut gz = GzEncoder::new(Vec::with_capacity(json.len() / 4), Level::default());
            gz.write_all(&json).map_err(EncodeError::Gzip)?;
            gz.finish().map_err(EncodeError::Gzip)
        }
    }
}

/// A document that could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// JSON serialization failed.
    #[error("encoding the document as JSON: {0}")]
    Json(serde_json::Error),
    /// gzip failed.
    #[error("gzip of the document: {0}")]
    Gzip(std::io::Error),
}

/// `tree` split as Argo CD splits it: nodes, then orphaned nodes, then hosts, `size` items
/// a shard; the first shard carries `shardsCount`. `size` 0: one shard, as it is.
pub fn tree_shards(tree: ApplicationTree, size: usize) -> Vec<ApplicationTree> {
    if size == 0 {
        return vec![tree];
    }
    enum Item {
        Node(crate::documents::ResourceNode),
        Orphan(crate::documents::ResourceNode),
        Host(crate::documents::HostInfo),
    }
    let items: Vec<Item> = tree
        .nodes
        .into_iter()
        .map(Item::Node)
        .chain(tree.orphaned_nodes.into_iter().map(Item::Orphan))
        .chain(tree.hosts.into_iter().map(Item::Host))
        .collect();
    let mut shards: Vec<ApplicationTree> = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        if i % size == 0 {
            shards.push(ApplicationTree::default());
        }
        let shard = shards.last_mut().expect("pushed above");
        match item {
            Item::Node(n) => shard.nodes.push(n),
            Item::Orphan(n) => shard.orphaned_nodes.push(n),
            Item::Host(h) => shard.hosts.push(h),
        }
    }
    let count = shards.len() as i64;
    match shards.first_mut() {
        Some(first) => first.shards_count = count,
        None => shards.push(ApplicationTree::default()),
    }
    shards
}
