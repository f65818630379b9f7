//! One rustls `ClientConfig` per distinct TLS setting, shared by every cluster client that
//! has that setting.
//!
//! kube's `Client::try_from(config)` builds a whole rustls configuration per client: with no
//! CA given, a root store of the platform's roots (≈ 86 KiB), and always a session cache
//! (≈ 14 KiB) — about 100 KiB per cluster although most clusters of a fleet trust the same
//! roots (see `docs/performance.md`). [`TlsConfigs`] builds it once per setting, with kube's
//! own `ConfigExt::rustls_client_config` (the same verifier, identity and `insecure`
//! handling), and hands out the same `Arc` while any client still uses it.
//!
//! What the configuration depends on, and so the key ([`tls_key`]): the CA certificates
//! (`root_cert`), `insecure` (`accept_invalid_certs`) and the client certificate and key. The
//! server name to verify (`tls_server_name`) is not part of it: each cluster's connector
//! resolves its own name ([`super::connector`]), so clusters differing only there share one
//! configuration. A configuration kube would build from something else — an exec plugin
//! (it may return a client certificate, and runs while the client is built), an auth
//! provider, certificate or key files, a CA file it re-reads (in-cluster) — has no key, and
//! such a cluster's client is built by kube itself, as before.
//!
//! The cache holds weak references: a configuration lives exactly as long as some
//! cluster's client holds it, so a rotated client certificate does not leave its old
//! configuration behind. Dead entries are dropped whenever a configuration is added.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use kube::Config;
use kube::client::{ClientBuilder, ConfigExt};
use rustls::ClientConfig;
use secrecy::ExposeSecret;

use super::connector::{self, GenericService};
use super::lock;

/// A digest of what a cluster's rustls configuration is built from (never the secrets
/// themselves: the key material stays only in the configuration).
pub(super) type TlsKey = [u8; 32];

/// The shared rustls configurations of one process's cluster clients.
#[derive(Default)]
pub(super) struct TlsConfigs {
    configs: Mutex<HashMap<TlsKey, Weak<ClientConfig>>>,
}

impl TlsConfigs {
    /// The configuration for `config`'s TLS setting: the one a live client already uses,
    /// else a new one built by kube (`None` when `config`'s TLS cannot be shared, see
    /// [`tls_key`]). Built under the lock, so clusters connecting at once with one setting
    /// build it once.
    pub(super) fn get(&self, config: &Config) -> Result<Option<Arc<ClientConfig>>, kube::Error> {
        let Some(key) = tls_key(config) else {
            return Ok(None);
        };
        let mut configs = lock(&self.configs);
        if let Some(shared) = configs.get(&key).and_then(Weak::upgrade) {
            return Ok(Some(shared));
        }
        let built = Arc::new(config.rustls_client_config()?);
        configs.retain(|_, weak| weak.strong_count() > 0);
        configs.insert(key, Arc::downgrade(&built));
        Ok(Some(built))
    }

    /// kube's default client builder for `config`, around the shared rustls configuration
    /// of its TLS setting, or built wholly by kube when the setting is not shared.
    pub(super) fn client_builder(
        &self,
        config: Config,
    ) -> Result<ClientBuilder<GenericService>, kube::Error> {
        match self.get(&config)? {
            Some(tls) => connector::client_builder(config, tls),
            None => ClientBuilder::try_from(config),
        }
    }

    /// How many distinct configurations some client still uses.
    pub(super) fn live(&self) -> usize {
        lock(&self.configs)
            .values()
            .filter(|weak| weak.strong_count() > 0)
            .count()
    }
}

/// The key of `config`'s rustls configuration, or `None` when kube builds it from more than
/// the Config's own data (exec plugin, auth provider, files): those are not shared.
pub(super) fn tls_key(config: &Config) -> Option<TlsKey> {
    let auth = &config.auth_info;
    if auth.exec.is_some()
        || auth.auth_provider.is_some()
        || auth.client_certificate.is_some()
        || auth.client_key.is_some()
        || config.root_cert_file.is_some()
    {
        return None;
    }
    let mut state = blake2b_simd::Params::new().hash_length(32).to_state();
    // Every part length-prefixed and tagged, so no two settings give one input.
    let mut part = |tag: u8, bytes: Option<&[u8]>| {
        state.update(&[tag]);
        match bytes {
            None => state.update(&[0]),
            Some(bytes) => state
                .update(&[1])
                .update(&(bytes.len() as u64).to_le_bytes())
                .update(bytes),
        };
    };
    part(b'i', Some(&[u8::from(config.accept_invalid_certs)]));
    match &config.root_cert {
        None => part(b'r', None),
        Some(certs) => {
            part(b'r', Some(&(certs.len() as u64).to_le_bytes()));
            for der in certs {
                part(b'c', Some(der));
            }
        }
    }
    part(
        b'p',
        auth.client_certificate_data.as_deref().map(str::as_bytes),
    );
    part(
        b'k',
        auth.client_key_data
            .as_ref()
            .map(|key| key.expose_secret().as_bytes()),
    );
    let digest = state.finalize();
    let mut key = [0; 32];
    key.copy_from_slice(digest.as_bytes());
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        let mut config = Config::new("https://10.0.0.1:6443".parse().unwrap());
        config.root_cert = Some(vec![b"ca".to_vec()]);
        config.auth_info.client_certificate_data = Some("cert".into());
        config.auth_info.client_key_data = Some("key".into());
        config
    }

    type Change = fn(&mut Config);

    /// The key changes with each input of the rustls configuration and with nothing else.
    #[test]
    fn the_key_is_the_ca_the_identity_and_insecure() {
        let base = tls_key(&config()).expect("shared");
        let mut same = config();
        same.cluster_url = "https://10.0.0.2".parse().unwrap();
        same.tls_server_name = Some("api.internal".into());
        same.auth_info.token = Some("token".into());
        assert_eq!(
            tls_key(&same),
            Some(base),
            "server, name and token are not TLS"
        );

        let changes: [(&str, Change); 6] = [
            ("another CA", |c| c.root_cert = Some(vec![b"ca2".to_vec()])),
            ("one more CA", |c| {
                c.root_cert.as_mut().unwrap().push(b"ca2".to_vec())
            }),
            ("no CA", |c| c.root_cert = None),
            ("another certificate", |c| {
                c.auth_info.client_certificate_data = Some("cert2".into())
            }),
            ("another key", |c| {
                c.auth_info.client_key_data = Some("key2".into())
            }),
            ("insecure", |c| c.accept_invalid_certs = true),
        ];
        for (what, change) in changes {
            let mut changed = config();
            change(&mut changed);
            assert_ne!(tls_key(&changed), Some(base), "{what}");
        }
    }

    /// What kube reads from elsewhere (a plugin, files) is not shared: kube builds it.
    #[test]
    fn plugins_and_files_are_not_shared() {
        let mut with_file = config();
        with_file.root_cert_file = Some("/var/run/ca.crt".into());
        assert_eq!(tls_key(&with_file), None);
        let mut with_cert_file = config();
        with_cert_file.auth_info.client_certificate = Some("/cert.pem".into());
        assert_eq!(tls_key(&with_cert_file), None);
        let mut with_key_file = config();
        with_key_file.auth_info.client_key = Some("/key.pem".into());
        assert_eq!(tls_key(&with_key_file), None);
    }
}
