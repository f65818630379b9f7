//! How to reach Redis and what to write there: Argo CD's controller flags
//! (`--redis`, `--redisdb`, `--redis-compress`, `REDIS_USERNAME`/`REDIS_PASSWORD`, the TLS
//! flags, `--sentinel`/`--sentinelmaster`, `--app-state-cache-expiration`,
//! `ARGOCD_APPLICATION_TREE_SHARD_SIZE`) as one validated value.

use std::path::PathBuf;
use std::time::Duration;

use crate::encode::Compression;

/// Argo CD's cluster info expiration (10 minutes).
pub const CLUSTER_INFO_EXPIRATION: Duration = Duration::from_secs(600);

/// Argo CD's default `--app-state-cache-expiration` (1 hour).
pub const DEFAULT_APP_STATE_EXPIRATION: Duration = Duration::from_secs(3600);

/// TLS to Redis (`--redis-use-tls` and the certificate flags).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedisTls {
    /// The CA that signed the server's certificate (`--redis-ca-certificate`); `None`: the
    /// system's CAs.
    pub ca_certificate: Option<PathBuf>,
    /// The client certificate (`--redis-client-certificate`), PEM.
    pub client_certificate: Option<PathBuf>,
    /// Its key (`--redis-client-key`), PEM.
    pub client_key: Option<PathBuf>,
    /// Do not verify the server's certificate (`--redis-insecure-skip-tls-verify`).
    pub insecure_skip_verify: bool,
}

/// Redis Sentinel (`--sentinel`, `--sentinelmaster`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisSentinel {
    /// `HOST:PORT` of each sentinel.
    pub addresses: Vec<String>,
    /// The master's name (Argo CD's default `master`).
    pub master: String,
}

/// Where and how the app-state cache is written.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisSettings {
    /// `HOST:PORT` (unused with Sentinel).
    pub address: String,
    /// The database number (`--redisdb`).
    pub db: i64,
    /// `REDIS_USERNAME` (ACL user).
    pub username: Option<String>,
    /// `REDIS_PASSWORD` (Argo CD's `argocd-redis` Secret). Never printed.
    pub password: Option<String>,
    /// TLS, when `--redis-use-tls`.
    pub tls: Option<RedisTls>,
    /// Sentinel, when `--sentinel` is given.
    pub sentinel: Option<RedisSentinel>,
    /// gzip or none (`--redis-compress`).
    pub compression: Compression,
    /// How long app state lives (`--app-state-cache-expiration`, 1 hour).
    pub app_state_expiration: Duration,
    /// Nodes per tree shard (`ARGOCD_APPLICATION_TREE_SHARD_SIZE`; 0: no sharding).
    pub tree_shard_size: usize,
    /// The first reconnection delay; doubles up to [`RedisSettings::max_backoff`].
    pub backoff: Duration,
    /// The longest reconnection delay.
    pub max_backoff: Duration,
    /// Bound of one connection attempt and of one batch of writes.
    pub timeout: Duration,
}

impl std::fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSettings")
            .field("address", &self.address)
            .field("db", &self.db)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<hidden>"))
            .field("tls", &self.tls)
            .field("sentinel", &self.sentinel)
            .field("compression", &self.compression)
            .field("app_state_expiration", &self.app_state_expiration)
            .field("tree_shard_size", &self.tree_shard_size)
            .finish_non_exhaustive()
    }
}

impl RedisSettings {
    /// Argo CD's defaults for a Redis at `address`.
    pub fn new(address: impl Into<String>) -> Self {
        RedisSettings {
            address: address.into(),
            db: 0,
            username: None,
            password: None,
            tls: None,
            sentinel: None,
            compression: Compression::Gzip,
            app_state_expiration: DEFAULT_APP_STATE_EXPIRATION,
            tree_shard_size: 0,
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
            timeout: Duration::from_secs(5),
        }
    }
}

/// `HOST:PORT` split; the error names the flag's value.
pub(crate) fn host_port(address: &str) -> Result<(String, u16), crate::AppStateError> {
    let bad = |reason: &str| crate::AppStateError::Address {
        address: address.to_owned(),
        reason: reason.to_owned(),
    };
    let (host, port) = address
        .rsplit_once(':')
        .ok_or_else(|| bad("expected HOST:PORT"))?;
    let port = port
        .parse::<u16>()
        .map_err(|_| bad("the port is not a number"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad("the host is empty"));
    }
    Ok((host.to_owned(), port))
}
