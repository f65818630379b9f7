//! How a replica reaches a secured etcd: the TLS files and the etcd user, as given on the
//! command line (`--etcd-ca-file`, `--etcd-cert-file`, `--etcd-key-file`,
//! `--etcd-username`, and the password from a file or the environment), checked together
//! with the URL's scheme: `etcds://` needs a CA file, the TLS files need `etcds://`, a
//! certificate needs its key (and the other way round), a user needs a password (and the
//! other way round). Mixed or incomplete settings are refused, naming what is missing.
//!
//! The password never shows: [`EtcdAccess`]'s `Debug` redacts it and no message holds it.

use std::fmt;
use std::path::PathBuf;

/// The TLS files and the user of an etcd store (all `None`: plain, no authentication).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct EtcdAccess {
    /// The CA (PEM) that signed etcd's server certificates.
    pub ca_file: Option<PathBuf>,
    /// The client certificate (PEM), for an etcd with `--client-cert-auth`.
    pub cert_file: Option<PathBuf>,
    /// The client certificate's key (PEM).
    pub key_file: Option<PathBuf>,
    /// The etcd user to authenticate as.
    pub username: Option<String>,
    /// Its password (never printed).
    pub password: Option<String>,
}

impl fmt::Debug for EtcdAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdAccess")
            .field("ca_file", &self.ca_file)
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl EtcdAccess {
    /// Whether anything is set.
    pub fn is_empty(&self) -> bool {
        *self == EtcdAccess::default()
    }

    /// Checks the settings against the URL's scheme (`tls`: `etcds://`).
    pub(crate) fn check(&self, tls: bool) -> Result<(), String> {
        let tls_files = [
            ("--etcd-ca-file", &self.ca_file),
            ("--etcd-cert-file", &self.cert_file),
            ("--etcd-key-file", &self.key_file),
        ];
        if !tls {
            if let Some((flag, _)) = tls_files.iter().find(|(_, f)| f.is_some()) {
                return Err(format!(
                    "{flag} is for TLS, but the store URL is plain etcd://; write etcds://"
                ));
            }
            if self.username.is_some() {
                return Err(
                    "--etcd-username over plain etcd:// would send the password in \
                            the clear; write etcds:// (with --etcd-ca-file)"
                        .into(),
                );
            }
        }
        if tls && self.ca_file.is_none() {
            return Err(
                "etcds:// needs --etcd-ca-file: the CA certificate (PEM) that signed \
                        etcd's server certificate"
                    .into(),
            );
        }
        match (&self.cert_file, &self.key_file) {
            (Some(_), None) => return Err("--etcd-cert-file needs --etcd-key-file".into()),
            (None, Some(_)) => return Err("--etcd-key-file needs --etcd-cert-file".into()),
            _ => {}
        }
        match (&self.username, &self.password) {
            (Some(u), _) if u.is_empty() => Err("--etcd-username is empty".into()),
            (Some(u), None) => Err(format!(
                "--etcd-username {u:?} needs a password: --etcd-password-file or \
                 FLEETSHARD_ETCD_PASSWORD"
            )),
            (None, Some(_)) => Err("an etcd password was given (--etcd-password-file or \
                 FLEETSHARD_ETCD_PASSWORD) without --etcd-username"
                .into()),
            _ => Ok(()),
        }
    }

    /// The etcd store's security settings (already [checked](EtcdAccess::check)).
    #[cfg(feature = "etcd")]
    pub(crate) fn security(&self, tls: bool) -> fleetshard_store_etcd::EtcdSecurity {
        use fleetshard_store_etcd::{ClientCert, EtcdTls, EtcdUser, Password};
        fleetshard_store_etcd::EtcdSecurity {
            tls: tls.then(|| EtcdTls {
                ca_file: self.ca_file.clone().unwrap_or_default(),
                client: self.cert_file.clone().zip(self.key_file.clone()).map(
                    |(cert_file, key_file)| ClientCert {
                        cert_file,
                        key_file,
                    },
                ),
            }),
            user: self
                .username
                .clone()
                .zip(self.password.clone())
                .map(|(name, p)| EtcdUser {
                    name,
                    password: Password::new(p),
                }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(ca: bool, cert: bool, key: bool, user: bool, password: bool) -> EtcdAccess {
        EtcdAccess {
            ca_file: ca.then(|| "ca.pem".into()),
            cert_file: cert.then(|| "c.pem".into()),
            key_file: key.then(|| "k.pem".into()),
            username: user.then(|| "root".into()),
            password: password.then(|| "pw-secret-1".into()),
        }
    }

    #[test]
    fn complete_settings_pass_and_mixed_or_incomplete_ones_are_refused() {
        assert_eq!(EtcdAccess::default().check(false), Ok(()));
        assert_eq!(access(true, false, false, false, false).check(true), Ok(()));
        assert_eq!(access(true, true, true, true, true).check(true), Ok(()));
        for (a, tls, reason) in [
            (
                access(false, false, false, false, false),
                true,
                "needs --etcd-ca-file",
            ),
            (
                access(true, false, false, false, false),
                false,
                "write etcds://",
            ),
            (
                access(false, true, true, false, false),
                false,
                "--etcd-cert-file is for TLS",
            ),
            (
                access(false, false, false, true, true),
                false,
                "in the clear",
            ),
            (
                access(true, true, false, false, false),
                true,
                "needs --etcd-key-file",
            ),
            (
                access(true, false, true, false, false),
                true,
                "needs --etcd-cert-file",
            ),
            (
                access(true, false, false, true, false),
                true,
                "needs a password",
            ),
            (
                access(true, false, false, false, true),
                true,
                "without --etcd-username",
            ),
        ] {
            let e = a.check(tls).unwrap_err();
            assert!(e.contains(reason), "{a:?} tls={tls}: {e}");
            assert!(!e.contains("pw-secret-1"), "{e}");
        }
    }

    #[test]
    fn debug_hides_the_password() {
        let text = format!("{:?}", access(true, true, true, true, true));
        assert!(
            !text.contains("pw-secret-1") && text.contains("<redacted>"),
            "{text}"
        );
    }
}
