//! The shared etcd client: made on first use, remade after a failure, and every request
//! bounded by the store's timeout.

use std::future::Future;
use std::sync::MutexGuard;

use etcd_client::{Client, ConnectOptions, KvClient};
use fleetshard_coord::store::StoreError;

use crate::EtcdStore;
use crate::error::{self, Kind, store_error};
use crate::identity::Headed;

/// Largest response the client decodes (tonic's default is 4 MiB; a page of large values
/// can be bigger, and etcd itself allows 1.5 MiB per value).
const MAX_DECODE: usize = 256 << 20;

impl EtcdStore {
    fn client_slot(&self) -> MutexGuard<'_, Option<Client>> {
        // The slot holds a cheap handle; a panic cannot leave it half-written.
        self.inner.client.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The shared client, connecting if there is none.
    pub(crate) async fn client(&self) -> Result<Client, StoreError> {
        if let Some(c) = self.client_slot().clone() {
            return Ok(c);
        }
        let t = self.inner.options.timeout;
        let options = ConnectOptions::new()
            .with_connect_timeout(t)
            .with_timeout(t);
        // The TLS files are read at every connect, so a rotated certificate is used from
        // the next reconnect on.
        let options = self
            .inner
            .options
            .security
            .apply(options, &self.inner.url)?;
        let connecting = Client::connect(&self.inner.endpoints, Some(options));
        let client = match tokio::time::timeout(t, connecting).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(self.error(&e, "connect")),
            Err(_) => {
                return Err(StoreError::Unavailable(format!(
                    "{}: connect: no answer within {t:?}",
                    self.inner.url
                )));
            }
        };
        // Two calls racing here both connect; the later one's client is kept, and the
        // earlier one's is dropped when its call ends. Harmless, and rare.
        *self.client_slot() = Some(client.clone());
        Ok(client)
    }

    /// The trait's error for `e`. etcd refuses a TLS connection that brings no client
    /// certificate when it requires one, which the client sees as "connection closed" or,
    /// depending on when the alert arrives, as a `BadCertificate` or `CertificateRequired`
    /// alert, or (TLS 1.3: the client writes before the server's alert is read) as a broken
    /// pipe or a reset connection: with no client certificate configured, the message says so.
    fn error(&self, e: &etcd_client::Error, what: &str) -> StoreError {
        let hint = " (etcd refused the connection: an etcd with --client-cert-auth needs a \
                    client certificate, and none is configured)";
        let no_client_cert = self
            .inner
            .options
            .security
            .tls
            .as_ref()
            .is_some_and(|t| t.client.is_none());
        match store_error(e, &self.inner.url, what) {
            StoreError::Unavailable(m)
                if no_client_cert
                    && [
                        "connection closed",
                        "BadCertificate",
                        "CertificateRequired",
                        "broken pipe",
                        "connection reset",
                    ]
                    .iter()
                    .any(|sign| m.contains(sign)) =>
            {
                StoreError::Unavailable(format!("{m}{hint}"))
            }
            other => other,
        }
    }

    /// Forgets the client after a failure that may have broken its connection, so the next
    /// call connects afresh.
    pub(crate) fn reset(&self) {
        tracing::debug!(store = %self.inner.url, "etcd: dropping the client; the next call reconnects");
        self.client_slot().take();
    }

    /// Runs one KV request with the timeout, mapping errors (and resetting the client when
    /// the failure may be the connection's).
    pub(crate) async fn call<T: Headed, F, Fut>(&self, what: &str, op: F) -> Result<T, StoreError>
    where
        F: FnOnce(KvClient) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        self.call_kind(what, op).await.map_err(|(_, e)| e)
    }

    /// [`EtcdStore::call`], also telling what kind of failure it was. An answer from
    /// another etcd cluster than the first is `Replaced` (`identity.rs`).
    pub(crate) async fn call_kind<T: Headed, F, Fut>(
        &self,
        what: &str,
        op: F,
    ) -> Result<T, (Kind, StoreError)>
    where
        F: FnOnce(KvClient) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let kv = self
            .client()
            .await
            .map_err(|e| (Kind::Unavailable, e))?
            .kv_client()
            .max_decoding_message_size(MAX_DECODE);
        let answer = self.bounded(what, op(kv)).await?;
        self.answered_by(answer.header(), what)
            .map_err(|e| (Kind::Backend, e))?;
        Ok(answer)
    }

    /// Awaits `fut` with the timeout, mapping errors.
    pub(crate) async fn bounded<T>(
        &self,
        what: &str,
        fut: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, (Kind, StoreError)> {
        let t = self.inner.options.timeout;
        match tokio::time::timeout(t, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                let kind = error::kind(&e);
                if kind == Kind::Unavailable {
                    self.reset();
                }
                Err((kind, self.error(&e, what)))
            }
            Err(_) => {
                self.reset();
                Err((
                    Kind::Unavailable,
                    StoreError::Unavailable(format!(
                        "{}: {what}: no answer within {t:?}",
                        self.inner.url
                    )),
                ))
            }
        }
    }
}
