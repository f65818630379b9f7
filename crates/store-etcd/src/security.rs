//! TLS (a CA, optionally a client certificate) and user/password authentication to etcd.
//!
//! An `etcds://` store verifies etcd's server certificate against [`EtcdTls::ca_file`]
//! (there are no built-in roots: etcd's certificates are signed by the cluster's own CA)
//! and, with [`EtcdTls::client`], presents a client certificate (etcd's
//! `--client-cert-auth`). With [`EtcdSecurity::user`] the client authenticates as that
//! etcd user and sends its token with every request. A password is only sent over TLS: a
//! user on a plain `etcd://` store is refused rather than sent in the clear.
//!
//! The files are read every time the store connects (first use, and after a failure), so
//! rotated certificates are picked up on the next reconnect; they are also read once when
//! the store is made, so a missing or unreadable file is reported at start, naming it.
//!
//! A [`Password`] never shows in `Debug` output, errors or logs.

use std::fmt;
use std::path::{Path, PathBuf};

use etcd_client::{Certificate, ConnectOptions, Identity, TlsOptions};
use fleetshard_coord::store::StoreError;

/// A password: `Debug` prints `Password(<redacted>)`, and there is no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    /// Wraps a password.
    pub fn new(password: impl Into<String>) -> Self {
        Password(password.into())
    }

    /// The password itself, for sending it to etcd.
    fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

/// An etcd user to authenticate as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdUser {
    /// The user name (`etcdctl user add NAME`).
    pub name: String,
    /// Its password.
    pub password: Password,
}

/// A client certificate and its private key, both PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// The certificate (chain), PEM.
    pub cert_file: PathBuf,
    /// Its private key, PEM.
    pub key_file: PathBuf,
}

/// How an `etcds://` store checks etcd and, optionally, identifies itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdTls {
    /// The CA certificate(s), PEM, that signed etcd's server certificates.
    pub ca_file: PathBuf,
    /// The client certificate, for an etcd started with `--client-cert-auth`.
    pub client: Option<ClientCert>,
}

/// TLS and authentication for an etcd store (default: neither, plain `etcd://`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EtcdSecurity {
    /// `Some`: the store is `etcds://` (TLS).
    pub tls: Option<EtcdTls>,
    /// `Some`: authenticate as this user (only with TLS).
    pub user: Option<EtcdUser>,
}

impl EtcdSecurity {
    /// Refuses what cannot be used safely: a password over plain HTTP. `url` names the
    /// store in the error.
    pub(crate) fn check(&self, url: &str) -> Result<(), StoreError> {
        if let (None, Some(user)) = (&self.tls, &self.user) {
            return Err(StoreError::InvalidUrl {
                url: url.to_owned(),
                reason: format!(
                    "the etcd user {:?} would send its password in the clear over etcd://; \
                     use etcds:// with a CA file",
                    user.name
                ),
            });
        }
        if let Some(u) = &self.user
            && u.name.is_empty()
        {
            return Err(StoreError::InvalidUrl {
                url: url.to_owned(),
                reason: "the etcd user name is empty".into(),
            });
        }
        Ok(())
    }

    /// The client's connect options with this security applied: reads the files (an
    /// unreadable or malformed one is an error naming it).
    pub(crate) fn apply(
        &self,
        mut options: ConnectOptions,
        url: &str,
    ) -> Result<ConnectOptions, StoreError> {
        if let Some(tls) = &self.tls {
            let ca = read_pem(&tls.ca_file, "CA certificate", url)?;
            let mut config = TlsOptions::new().ca_certificate(Certificate::from_pem(ca));
            if let Some(client) = &tls.client {
                let cert = read_pem(&client.cert_file, "client certificate", url)?;
                let key = read_pem(&client.key_file, "client key", url)?;
                config = config.identity(Identity::from_pem(cert, key));
            }
            options = options.with_tls(config);
        }
        if let Some(user) = &self.user {
            // Tokens expire (etcd's --auth-token-ttl, 5 minutes of disuse by default): the
            // client authenticates again when etcd says the token is no longer valid.
            options = options
                .with_user(user.name.clone(), user.password.expose())
                .with_auto_token_refresh(true);
        }
        Ok(options)
    }
}

/// Reads a PEM file, checking that it holds at least one PEM block.
fn read_pem(path: &Path, what: &str, url: &str) -> Result<Vec<u8>, StoreError> {
    let invalid = |reason: String| StoreError::InvalidUrl {
        url: url.to_owned(),
        reason: format!("{what} {}: {reason}", path.display()),
    };
    let bytes = std::fs::read(path).map_err(|e| invalid(format!("cannot be read: {e}")))?;
    if !bytes
        .windows(b"-----BEGIN ".len())
        .any(|w| w == b"-----BEGIN ")
    {
        return Err(invalid("is not PEM (no -----BEGIN line)".into()));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_never_shows() {
        let s = EtcdSecurity {
            tls: None,
            user: Some(EtcdUser {
                name: "root".into(),
                password: Password::new("hunter2-secret"),
            }),
        };
        assert!(!format!("{s:?}").contains("hunter2"), "{s:?}");
        let e = s.check("etcd://a:1").unwrap_err().to_string();
        assert!(e.contains("in the clear") && !e.contains("hunter2"), "{e}");
    }

    #[test]
    fn files_are_checked_and_named() {
        let dir = std::env::temp_dir().join(format!("fleetshard-etcd-sec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let not_pem = dir.join("ca.txt");
        std::fs::write(&not_pem, "hello").unwrap();
        for (ca, reason) in [
            (dir.join("missing.pem"), "cannot be read"),
            (not_pem.clone(), "not PEM"),
        ] {
            let s = EtcdSecurity {
                tls: Some(EtcdTls {
                    ca_file: ca.clone(),
                    client: None,
                }),
                user: None,
            };
            let e = s
                .apply(ConnectOptions::new(), "etcds://a:1")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("CA certificate") && e.contains(&ca.display().to_string()),
                "{e}"
            );
            assert!(e.contains(reason), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
