//! `fleetshard run`'s Redis options, named as Argo CD's application controller names
//! them: where Argo CD's app-state cache (resource trees, managed resources, cluster info)
//! is written for Argo CD's API server and UI.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use fleetshard_appstate::{Compression, RedisSentinel, RedisSettings, RedisTls};
use fleetshard_util::duration::parse_go_duration;

/// Argo CD's app-state cache in Redis (off unless `--redis` or `--sentinel` is given).
#[derive(Debug, Clone, clap::Args)]
pub struct RedisArgs {
    /// Argo CD's Redis (`HOST:PORT`, e.g. `argocd-redis:6379`): the resource tree and
    /// managed resources of every app this replica owns, and the info of every cluster
    /// it owns, are written there as Argo CD's controller writes them. The password is
    /// read from `REDIS_PASSWORD` (Argo CD's `argocd-redis` Secret), the ACL user from
    /// `REDIS_USERNAME`.
    #[arg(long, value_name = "HOST:PORT", env = "REDIS_SERVER")]
    pub redis: Option<String>,
    /// The Redis database.
    #[arg(long, value_name = "N", default_value_t = 0, env = "REDISDB")]
    pub redisdb: i64,
    /// How values are compressed: `gzip` (keys end in `.gz`) or `none`.
    #[arg(
        long,
        value_name = "gzip|none",
        default_value = "gzip",
        env = "REDIS_COMPRESSION"
    )]
    pub redis_compress: Compression,
    /// Connect to Redis over TLS.
    #[arg(long)]
    pub redis_use_tls: bool,
    /// PEM CA certificate of Redis' server certificate (default: the system's CAs).
    #[arg(long, value_name = "FILE", requires = "redis_use_tls")]
    pub redis_ca_certificate: Option<PathBuf>,
    /// PEM client certificate for Redis (with `--redis-client-key`).
    #[arg(long, value_name = "FILE", requires_all = ["redis_use_tls", "redis_client_key"])]
    pub redis_client_certificate: Option<PathBuf>,
    /// PEM key of `--redis-client-certificate`.
    #[arg(long, value_name = "FILE", requires_all = ["redis_use_tls", "redis_client_certificate"])]
    pub redis_client_key: Option<PathBuf>,
    /// DANGEROUS: do not verify Redis' certificate.
    #[arg(long, requires = "redis_use_tls")]
    pub redis_insecure_skip_tls_verify: bool,
    /// A Redis Sentinel (`HOST:PORT`; repeat for each): the master is found through them
    /// instead of `--redis`.
    #[arg(long, value_name = "HOST:PORT")]
    pub sentinel: Vec<String>,
    /// The Sentinel master's name.
    #[arg(long, value_name = "NAME", default_value = "master")]
    pub sentinelmaster: String,
    /// How long an app's tree and managed resources live in Redis unless written again.
    /// Units: `ms`, `s`, `m`, `h`.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "1h",
        env = "ARGOCD_APP_STATE_CACHE_EXPIRATION",
        value_parser = parse_go_duration
    )]
    pub app_state_cache_expiration: Duration,
}

/// Argo CD's variable: nodes per resource tree shard (0, the default: one key per tree).
const TREE_SHARD_SIZE_ENV: &str = "ARGOCD_APPLICATION_TREE_SHARD_SIZE";

impl RedisArgs {
    /// The app-state cache's settings, or `None` when it is off.
    pub fn settings(&self) -> anyhow::Result<Option<RedisSettings>> {
        let Some(address) = self
            .redis
            .clone()
            .or_else(|| (!self.sentinel.is_empty()).then(String::new))
        else {
            return Ok(None);
        };
        let mut s = RedisSettings::new(address);
        s.db = self.redisdb;
        s.compression = self.redis_compress;
        s.app_state_expiration = self.app_state_cache_expiration;
        s.username = std::env::var("REDIS_USERNAME")
            .ok()
            .filter(|v| !v.is_empty());
        s.password = std::env::var("REDIS_PASSWORD")
            .ok()
            .filter(|v| !v.is_empty());
        s.tree_shard_size = match std::env::var(TREE_SHARD_SIZE_ENV) {
            Ok(v) if !v.is_empty() => {
                let n: usize = v
                    .parse()
                    .with_context(|| format!("{TREE_SHARD_SIZE_ENV}={v:?}: not a number"))?;
                if n > 1000 {
                    bail!("{TREE_SHARD_SIZE_ENV}={v}: at most 1000 (Argo CD's bound)");
                }
                n
            }
            _ => 0,
        };
        if self.redis_use_tls {
            s.tls = Some(RedisTls {
                ca_certificate: self.redis_ca_certificate.clone(),
                client_certificate: self.redis_client_certificate.clone(),
                client_key: self.redis_client_key.clone(),
                insecure_skip_verify: self.redis_insecure_skip_tls_verify,
            });
        }
        if !self.sentinel.is_empty() {
            s.sentinel = Some(RedisSentinel {
                addresses: self.sentinel.clone(),
                master: self.sentinelmaster.clone(),
            });
        }
        Ok(Some(s))
    }
}
