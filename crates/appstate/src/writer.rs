//! The writer: documents handed to it are written to Redis by a task of its own, so that
//! no reconciliation ever waits for Redis or fails because of it.
//!
//! Writes are **coalesced to the latest per key**: a value handed over while an earlier
//! one of the same key is still unwritten replaces it (counted as superseded), so while
//! Redis is down the writer holds at most one value per key — the app-state cache's
//! size — and writes only those once Redis is back. A batch that fails is put back
//! under every key no newer value has taken meanwhile, the connection is dropped, and
//! the writer reconnects after a delay that doubles from [`RedisSettings::backoff`] to
//! [`RedisSettings::max_backoff`]. The update notifications of a batch are published
//! after its values, in the same pipeline.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use fleetshard_util::backoff::Backoff;
use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, Client, ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo,
};
use tokio::sync::Notify;

use crate::AppStateError;
use crate::settings::{RedisSettings, host_port};

/// One key's pending write.
#[derive(Debug, Clone)]
enum Write {
    Set { value: Vec<u8>, ttl: Duration },
    Delete,
}

#[derive(Debug, Default)]
struct Pending {
    writes: HashMap<String, Write>,
    channels: BTreeSet<String>,
}

#[derive(Debug, Default)]
struct Counters {
    written: AtomicU64,
    superseded: AtomicU64,
    failed_batches: AtomicU64,
    connected: AtomicBool,
}

struct Shared {
    pending: Mutex<Pending>,
    wake: Notify,
    counters: Counters,
    closed: AtomicBool,
}

impl Shared {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        // Every critical section leaves the maps consistent: a poisoned lock is usable.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What the writer has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Keys written or deleted.
    pub written: u64,
    /// Values replaced by a newer one of their key before they were written (handed
    /// over, or put back after a failed batch): every value is written or superseded.
    pub superseded: u64,
    /// Batches that failed (each followed by a reconnection).
    pub failed_batches: u64,
    /// Keys waiting to be written.
    pub pending: usize,
    /// Whether a connection is up.
    pub connected: bool,
}

/// Writes to Redis in the background (see the module's documentation). Dropping it ends
/// its task once the task next wakes.
pub struct AppStateWriter {
    shared: Arc<Shared>,
}

impl AppStateWriter {
    /// Starts the writer's task on the current tokio runtime. Only settings that can
    /// never work fail here (an address that does not parse, a certificate file that
    /// cannot be read); Redis being down does not.
    pub fn start(settings: RedisSettings) -> Result<Self, AppStateError> {
        let connector = Connector::new(&settings)?;
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending::default()),
            wake: Notify::new(),
            counters: Counters::default(),
            closed: AtomicBool::new(false),
        });
        tokio::spawn(run(shared.clone(), connector, settings));
        Ok(AppStateWriter { shared })
    }

    /// Sets `key` to `value`, expiring after `ttl`, replacing any unwritten value of it.
    pub fn set(&self, key: String, value: Vec<u8>, ttl: Duration) {
        self.put(key, Write::Set { value, ttl });
    }

    /// Deletes `key`, replacing any unwritten value of it.
    pub fn delete(&self, key: String) {
        self.put(key, Write::Delete);
    }

    /// Publishes an empty message on `channel` after the values handed over before it.
    pub fn publish(&self, channel: String) {
        self.shared.pending().channels.insert(channel);
        self.shared.wake.notify_one();
    }

    fn put(&self, key: String, write: Write) {
        if self.shared.pending().writes.insert(key, write).is_some() {
            self.shared
                .counters
                .superseded
                .fetch_add(1, Ordering::Relaxed);
        }
        self.shared.wake.notify_one();
    }

    /// What the writer has done so far.
    pub fn stats(&self) -> WriterStats {
        let c = &self.shared.counters;
        WriterStats {
            written: c.written.load(Ordering::Relaxed),
            superseded: c.superseded.load(Ordering::Relaxed),
            failed_batches: c.failed_batches.load(Ordering::Relaxed),
            pending: self.shared.pending().writes.len(),
            connected: c.connected.load(Ordering::Relaxed),
        }
    }
}

impl Drop for AppStateWriter {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Relaxed);
        self.shared.wake.notify_one();
    }
}

/// How connections are made (built once from the settings).
enum Connector {
    Direct(Box<Client>),
    Sentinel(Box<tokio::sync::Mutex<redis::sentinel::SentinelClient>>),
}

impl Connector {
    fn new(s: &RedisSettings) -> Result<Self, AppStateError> {
        let mut node = RedisConnectionInfo::default().set_db(s.db);
        if let Some(user) = &s.username {
            node = node.set_username(user);
        }
        if let Some(password) = &s.password {
            node = node.set_password(password);
        }
        let certs = s.tls.as_ref().map(read_certificates).transpose()?;
        let insecure = s.tls.as_ref().is_some_and(|t| t.insecure_skip_verify);
        if let Some(sentinel) = &s.sentinel {
            let mut info = redis::sentinel::SentinelNodeConnectionInfo::default()
                .set_redis_connection_info(node);
            if s.tls.is_some() {
                info = info.set_tls_mode(if insecure {
                    redis::TlsMode::Insecure
                } else {
                    redis::TlsMode::Secure
                });
            }
            let mut sentinels = Vec::new();
            for a in &sentinel.addresses {
                let (host, port) = host_port(a)?;
                sentinels.push(ConnectionAddr::Tcp(host, port).into_connection_info()?);
            }
            let client = redis::sentinel::SentinelClient::build(
                sentinels,
                sentinel.master.clone(),
                Some(info),
                redis::sentinel::SentinelServerType::Master,
            )?;
            return Ok(Connector::Sentinel(Box::new(tokio::sync::Mutex::new(
                client,
            ))));
        }
        let (host, port) = host_port(&s.address)?;
        let addr = if s.tls.is_some() {
            ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                tls_params: None,
            }
        } else {
            ConnectionAddr::Tcp(host, port)
        };
        let info = addr.into_connection_info()?.set_redis_settings(node);
        let client = match certs {
            Some(certs) => Client::build_with_tls(info, certs)?,
            None => Client::open(info)?,
        };
        Ok(Connector::Direct(Box::new(client)))
    }

    async fn connect(&self, timeout: Duration) -> Result<MultiplexedConnection, String> {
        let attempt = async {
            match self {
                Connector::Direct(client) => {
                    let config = AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(timeout))
                        .set_response_timeout(Some(timeout));
                    client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await
                }
                Connector::Sentinel(client) => client.lock().await.get_async_connection().await,
            }
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no connection within {timeout:?}")),
        }
    }
}

fn read_certificates(
    tls: &crate::settings::RedisTls,
) -> Result<redis::TlsCertificates, AppStateError> {
    let read = |p: &std::path::PathBuf, what: &'static str| {
        std::fs::read(p).map_err(|source| AppStateError::Certificate {
            what,
            path: p.display().to_string(),
            source,
        })
    };
    let client_tls = match (&tls.client_certificate, &tls.client_key) {
        (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
            client_cert: read(cert, "--redis-client-certificate")?,
            client_key: read(key, "--redis-client-key")?,
        }),
        (None, None) => None,
        _ => return Err(AppStateError::ClientCertificatePair),
    };
    let root_cert = tls
        .ca_certificate
        .as_ref()
        .map(|p| read(p, "--redis-ca-certificate"))
        .transpose()?;
    Ok(redis::TlsCertificates {
        client_tls,
        root_cert,
    })
}

/// The writer's task.
async fn run(shared: Arc<Shared>, connector: Connector, settings: RedisSettings) {
    let backoff = Backoff::doubling(settings.backoff, settings.max_backoff);
    let mut conn: Option<MultiplexedConnection> = None;
    let mut failures: u32 = 0;
    loop {
        let idle = {
            let p = shared.pending();
            p.writes.is_empty() && p.channels.is_empty()
        };
        if shared.closed.load(Ordering::Relaxed) && (idle || conn.is_none()) {
            return;
        }
        if idle {
            shared.wake.notified().await;
            continue;
        }
        let c = match &mut conn {
            Some(c) => c,
            None => match connector.connect(settings.timeout).await {
                Ok(c) => {
                    if failures > 0 {
                        tracing::info!(address = %settings.address, "the app-state cache's Redis is reachable again");
                    }
                    shared.counters.connected.store(true, Ordering::Relaxed);
                    conn.insert(c)
                }
                Err(e) => {
                    if failures == 0 {
                        tracing::warn!(address = %settings.address, "the app-state cache's Redis is unreachable ({e}); writes are kept, latest per key, until it is back");
                    }
                    failures = failures.saturating_add(1);
                    tokio::time::sleep(backoff.delay(failures - 1)).await;
                    continue;
                }
            },
        };
        let batch = std::mem::take(&mut *shared.pending());
        let mut pipe = redis::pipe();
        for (key, write) in &batch.writes {
            match write {
                Write::Set { value, ttl } => {
                    pipe.cmd("SET")
                        .arg(key)
                        .arg(value.as_slice())
                        .arg("PX")
                        .arg(ttl.as_millis().max(1) as u64)
                        .ignore();
                }
                Write::Delete => {
                    pipe.cmd("DEL").arg(key).ignore();
                }
            }
        }
        for channel in &batch.channels {
            pipe.cmd("PUBLISH").arg(channel).arg("").ignore();
        }
        let result = tokio::time::timeout(settings.timeout, pipe.query_async::<()>(c)).await;
        match result {
            Ok(Ok(())) => {
                failures = 0;
                shared
                    .counters
                    .written
                    .fetch_add(batch.writes.len() as u64, Ordering::Relaxed);
            }
            failed => {
                let reason = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => format!("no answer within {:?}", settings.timeout),
                };
                if failures == 0 {
                    tracing::warn!(address = %settings.address, "writing the app-state cache failed ({reason}); reconnecting");
                }
                shared
                    .counters
                    .failed_batches
                    .fetch_add(1, Ordering::Relaxed);
                shared.counters.connected.store(false, Ordering::Relaxed);
                conn = None;
                {
                    let mut p = shared.pending();
                    for (key, write) in batch.writes {
                        match p.writes.entry(key) {
                            std::collections::hash_map::Entry::Vacant(slot) => {
                                slot.insert(write);
                            }
                            // A newer value came meanwhile: this one is superseded.
                            std::collections::hash_map::Entry::Occupied(_) => {
                                shared.counters.superseded.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    p.channels.extend(batch.channels);
                }
                failures = failures.saturating_add(1);
                tokio::time::sleep(backoff.delay(failures - 1)).await;
            }
        }
    }
}
