//! The coordination store named on the command line, shared by `run`, `status`, `apps`
//! and `scale`. Only `run` creates a store; the one-shot commands open an existing one
//! (read-only when they only read) and fail naming a path where there is none.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use fleetshard_coord::store::Store;
use fleetshard_replica::StoreUrl;
use fleetshard_replica::store::{EtcdAccess, OpenMode};

/// The environment variable holding the etcd user's password (there is no flag: a flag's
/// value shows in `ps`).
pub const ETCD_PASSWORD_ENV: &str = "FLEETSHARD_ETCD_PASSWORD";

/// The flags that name a fleet's records in a store.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// Coordination store: `sqlite://PATH`, `etcd://HOST:PORT[,HOST:PORT…]` or
    /// `etcds://…` (TLS; see --etcd-ca-file) (builds with `--features etcd`), `kubernetes://NAMESPACE` (ConfigMaps and Leases; in-cluster or
    /// KUBECONFIG credentials; empty NAMESPACE: the configuration's), `memory://` (this
    /// process only).
    #[arg(
        long,
        value_name = "URL",
        default_value = "sqlite://fleetshard.db",
        env = "FLEETSHARD_STORE",
        value_parser = StoreUrlParser
    )]
    pub store: StoreUrl,
    /// Key prefix of this fleet's records in the store (ends with `/`).
    #[arg(
        long,
        value_name = "PREFIX",
        default_value = "fleetshard/",
        env = "FLEETSHARD_ROOT"
    )]
    pub root: String,
    /// etcd's TLS files and user.
    #[command(flatten)]
    pub etcd: EtcdAccessArgs,
}

/// Parses a store URL for clap without repeating it: clap's own message for a rejected
/// value quotes the value, and a store URL may hold a password
/// (`etcd://user:password@…`, refused). The message is the parser's, which leaves the
/// URL's user information out.
#[derive(Debug, Clone, Copy)]
pub struct StoreUrlParser;

impl clap::builder::TypedValueParser for StoreUrlParser {
    type Value = StoreUrl;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<StoreUrl, clap::Error> {
        let name = arg.map_or_else(|| "--store".to_owned(), ToString::to_string);
        let refuse = |why: String| {
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("invalid value for '{name}': {why}\n"),
            )
            .with_cmd(cmd)
        };
        let text = value
            .to_str()
            .ok_or_else(|| refuse("not UTF-8".to_owned()))?;
        text.parse().map_err(refuse)
    }
}

/// The flags that reach a secured etcd (`etcds://`): TLS files and a user. Shared by every
/// command that opens a store (`plan --from-store` too).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EtcdAccessArgs {
    /// etcds:// stores: the CA certificate (PEM) that signed etcd's server certificate.
    #[arg(long, value_name = "FILE", env = "FLEETSHARD_ETCD_CA_FILE")]
    pub etcd_ca_file: Option<PathBuf>,
    /// etcds:// stores: a client certificate (PEM), for an etcd with --client-cert-auth
    /// (with --etcd-key-file).
    #[arg(long, value_name = "FILE", env = "FLEETSHARD_ETCD_CERT_FILE")]
    pub etcd_cert_file: Option<PathBuf>,
    /// etcds:// stores: the client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", env = "FLEETSHARD_ETCD_KEY_FILE")]
    pub etcd_key_file: Option<PathBuf>,
    /// etcds:// stores: authenticate as this etcd user; its password comes from
    /// --etcd-password-file or the environment variable FLEETSHARD_ETCD_PASSWORD.
    #[arg(long, value_name = "NAME", env = "FLEETSHARD_ETCD_USERNAME")]
    pub etcd_username: Option<String>,
    /// A file holding the etcd user's password (one trailing newline is ignored), e.g. a
    /// mounted Secret.
    #[arg(long, value_name = "FILE", env = "FLEETSHARD_ETCD_PASSWORD_FILE")]
    pub etcd_password_file: Option<PathBuf>,
}

impl EtcdAccessArgs {
    /// `url` with these TLS files and user (checked together; the password read from its
    /// file or [`ETCD_PASSWORD_ENV`]).
    pub fn apply(&self, url: StoreUrl) -> anyhow::Result<StoreUrl> {
        let password = password(
            self.etcd_password_file.as_deref(),
            std::env::var(ETCD_PASSWORD_ENV).ok(),
        )?;
        let access = EtcdAccess {
            ca_file: self.etcd_ca_file.clone(),
            cert_file: self.etcd_cert_file.clone(),
            key_file: self.etcd_key_file.clone(),
            username: self.etcd_username.clone(),
            password,
        };
        url.with_etcd_access(access).map_err(anyhow::Error::msg)
    }
}

impl StoreArgs {
    /// The key prefix, checked.
    pub fn root(&self) -> anyhow::Result<&str> {
        if !self.root.ends_with('/') {
            bail!("--root {:?} must end with '/'", self.root);
        }
        Ok(&self.root)
    }

    /// The store URL with the etcd TLS files and user (checked together; the password
    /// read from its file or [`ETCD_PASSWORD_ENV`]).
    pub fn url(&self) -> anyhow::Result<StoreUrl> {
        self.etcd.apply(self.store.clone())
    }

    /// Opens the store in `mode` (a one-shot command: [`OpenMode::ReadOnly`] to read,
    /// [`OpenMode::Existing`] to write; neither creates a store). Values too large for the
    /// backend (a big fleet's assignment) are split into parts transparently.
    pub fn open(&self, mode: OpenMode) -> anyhow::Result<Arc<dyn Store>> {
        Ok(self.url()?.open_in(mode)?.store)
    }
}

/// The etcd password: from `file` (one trailing newline dropped) or `env` (the value of
/// [`ETCD_PASSWORD_ENV`]); both at once is refused. No message holds the password.
fn password(file: Option<&Path>, env: Option<String>) -> anyhow::Result<Option<String>> {
    match (file, env) {
        (Some(path), Some(_)) => bail!(
            "--etcd-password-file {} and {ETCD_PASSWORD_ENV} are both set; give the password \
             one way",
            path.display()
        ),
        (Some(path), None) => {
            let text = std::fs::read_to_string(path).with_context(|| {
                format!("--etcd-password-file {}: cannot be read", path.display())
            })?;
            let text = text
                .strip_suffix('\n')
                .map(|t| t.strip_suffix('\r').unwrap_or(t))
                .unwrap_or(&text);
            if text.is_empty() {
                bail!("--etcd-password-file {}: the file is empty", path.display());
            }
            Ok(Some(text.to_owned()))
        }
        (None, Some(env)) if env.is_empty() => bail!("{ETCD_PASSWORD_ENV} is set but empty"),
        (None, env) => Ok(env),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_comes_from_one_place_and_never_shows() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "pw-from-file\n").unwrap();
        assert_eq!(
            password(Some(&file), None).unwrap().as_deref(),
            Some("pw-from-file")
        );
        assert_eq!(
            password(None, Some("pw-env".into())).unwrap().as_deref(),
            Some("pw-env")
        );
        assert_eq!(password(None, None).unwrap(), None);
        let e = format!(
            "{:#}",
            password(Some(&file), Some("pw-env".into())).unwrap_err()
        );
        assert!(
            e.contains("both set") && !e.contains("pw-env") && !e.contains("pw-from"),
            "{e}"
        );
        std::fs::write(&file, "\n").unwrap();
        assert!(format!("{:#}", password(Some(&file), None).unwrap_err()).contains("empty"));
        let missing = dir.path().join("missing");
        let e = format!("{:#}", password(Some(&missing), None).unwrap_err());
        assert!(e.contains("cannot be read") && e.contains("missing"), "{e}");
    }
}
