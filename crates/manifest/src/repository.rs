//! How to reach private Git repositories, as Argo CD declares it: repository Secrets
//! (label `argocd.argoproj.io/secret-type: repository`, one repository by its `url`),
//! credential templates (`repo-creds`, every repository whose URL starts with `url`), and
//! two ConfigMaps of Argo CD's namespace: `argocd-ssh-known-hosts-cm` (key
//! `ssh_known_hosts`, an OpenSSH known-hosts file) and `argocd-tls-certs-cm` (one key per
//! server host name, its PEM CA certificates).
//!
//! Keys read from a Secret (`stringData` wins over `data`, as the API server merges
//! them): `url` (required), `type` (`git` by default), `name`, `project`, `username`,
//! `password`, `bearerToken`, `sshPrivateKey`, `insecure`, `forceHttpBasicAuth`,
//! `tlsClientCertData`, `tlsClientCertKey`, `proxy`, `noProxy`. Other authentication keys
//! Argo CD knows (GitHub App, Google Cloud, Azure workload identity, LFS, OCI) are kept as
//! names in [`RepoSecret::unsupported`]: a repository that would need them is refused
//! when used, naming the key, rather than read anonymously.
//!
//! Secret values never appear in a message, a warning or `Debug` output: errors name the
//! Secret and the key only.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::document::{meta_names, typed};
use crate::error::{Ctx, LoadError, object_name};
use crate::secret::{SECRET_TYPE_LABEL, SecretObject};

/// The ConfigMap of SSH known hosts (Argo CD's name).
pub const KNOWN_HOSTS_CONFIG_MAP: &str = "argocd-ssh-known-hosts-cm";
/// The key of [`KNOWN_HOSTS_CONFIG_MAP`] holding the known-hosts file.
pub const KNOWN_HOSTS_KEY: &str = "ssh_known_hosts";
/// The ConfigMap of TLS CA certificates per Git server host name (Argo CD's name).
pub const TLS_CERTS_CONFIG_MAP: &str = "argocd-tls-certs-cm";

/// Authentication keys of Argo CD repository Secrets that fleetshard does not implement.
const UNSUPPORTED_KEYS: [&str; 11] = [
    "githubAppID",
    "githubAppInstallationID",
    "githubAppPrivateKey",
    "githubAppEnterpriseBaseUrl",
    "gcpServiceAccountKey",
    "useAzureWorkloadIdentity",
    "enableLfs",
    "enableOCI",
    "awsAuthConfig",
    "useWorkloadIdentity",
    "depth",
];

/// Which of the two Secret types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RepoSecretKind {
    /// `repository`: one repository, matched by its whole (normalised) URL.
    Repository,
    /// `repo-creds`: a credential template, for every repository under a URL prefix.
    Template,
}

/// The secret part of a repository Secret. `Debug` shows which fields are set, never
/// their values.
#[derive(Clone, PartialEq, Eq, Default, Hash)]
pub struct RepoCredentials {
    /// `username` (HTTPS basic authentication; the SSH user when the URL has none).
    pub username: Option<String>,
    /// `password` (or an access token used as the password).
    pub password: Option<String>,
    /// `bearerToken`: sent as `Authorization: Bearer` (Bitbucket Data Center).
    pub bearer_token: Option<String>,
    /// `sshPrivateKey`: a PEM or OpenSSH private key.
    pub ssh_private_key: Option<String>,
    /// `tlsClientCertData`: the PEM client certificate for HTTPS.
    pub tls_client_cert_data: Option<String>,
    /// `tlsClientCertKey`: its PEM private key.
    pub tls_client_cert_key: Option<String>,
}

impl RepoCredentials {
    /// Whether any credential is set (a repository Secret without one inherits a
    /// template's, as in Argo CD).
    pub fn is_empty(&self) -> bool {
        *self == RepoCredentials::default()
    }
}

impl fmt::Debug for RepoCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |v: &Option<String>| v.as_ref().map(|_| "<redacted>");
        f.debug_struct("RepoCredentials")
            .field("username", &set(&self.username))
            .field("password", &set(&self.password))
            .field("bearer_token", &set(&self.bearer_token))
            .field("ssh_private_key", &set(&self.ssh_private_key))
            .field("tls_client_cert_data", &set(&self.tls_client_cert_data))
            .field("tls_client_cert_key", &set(&self.tls_client_cert_key))
            .finish()
    }
}

/// One repository Secret or credential template.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RepoSecret {
    /// Repository or template.
    pub kind: RepoSecretKind,
    /// The Secret, as messages name it (`Secret argocd/private-repo`).
    pub secret: String,
    /// `url`: the repository's URL, or the templates' prefix.
    pub url: String,
    /// `type`: `git` (the default), `helm` or `oci` (a chart source's repository, which
    /// only a repo-server renders from).
    pub repo_type: String,
    /// `project`: only applications of this project use it (empty: every project).
    pub project: String,
    /// `name`: the repository's name (what a Helm chart's dependencies call it, `@name`
    /// or `alias:name`; empty: none).
    pub name: String,
    /// The credentials.
    pub credentials: RepoCredentials,
    /// `insecure`: skip the TLS certificate check (HTTPS) or the host key check (SSH).
    pub insecure: bool,
    /// `forceHttpBasicAuth`: send basic authentication without waiting for a challenge.
    pub force_http_basic_auth: bool,
    /// `proxy`: the HTTP(S) proxy URL.
    pub proxy: Option<String>,
    /// `noProxy`: hosts not to proxy, comma-separated.
    pub no_proxy: Option<String>,
    /// Set keys fleetshard does not implement (`stringData.githubAppPrivateKey`, say).
    pub unsupported: Vec<String>,
}

/// Everything repository access depends on: the Secrets and the two ConfigMaps.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct RepoSettings {
    /// Repository Secrets and templates, ordered by Secret name.
    pub secrets: Vec<RepoSecret>,
    /// `argocd-ssh-known-hosts-cm`'s `ssh_known_hosts` (none: no host is known).
    pub known_hosts: Option<String>,
    /// `argocd-tls-certs-cm`: PEM CA certificates by server host name.
    pub tls_certs: BTreeMap<String, String>,
}

impl RepoSettings {
    /// Whether nothing is configured (every repository is read anonymously).
    pub fn is_empty(&self) -> bool {
        *self == RepoSettings::default()
    }

    /// Adds what `other` holds (Secrets appended, then ordered by name; a ConfigMap of
    /// `other` replaces this one's).
    pub fn merge(&mut self, other: RepoSettings) {
        self.secrets.extend(other.secrets);
        self.secrets.sort_by(|a, b| a.secret.cmp(&b.secret));
        if other.known_hosts.is_some() {
            self.known_hosts = other.known_hosts;
        }
        self.tls_certs.extend(other.tls_certs);
    }
}

/// The value of a Secret's label `argocd.argoproj.io/secret-type`, read leniently (to
/// route a Secret before it is deserialised).
pub(crate) fn secret_type(value: &Value) -> Option<&str> {
    value
        .get("metadata")?
        .get("labels")?
        .get(SECRET_TYPE_LABEL)?
        .as_str()
}

/// Whether `value`'s secret type is a repository Secret or template.
pub(crate) fn is_repo_secret(value: &Value) -> bool {
    matches!(secret_type(value), Some("repository" | "repo-creds"))
}

/// Reads one repository Secret or credential template. `Ok(None)` (with a warning) for a
/// Secret of another `type` than `git`, `helm` or `oci`. Helm and OCI repositories are
/// kept: Argo CD's repo-server renders charts from them with their credentials.
pub(crate) fn to_repo_secret(
    ctx: &mut Ctx,
    value: &Value,
    locator: &str,
) -> Result<Option<RepoSecret>, LoadError> {
    let (ns, name) = meta_names(value);
    let object = object_name("Secret", ns, name, locator);
    let kind = match secret_type(value) {
        Some("repo-creds") => RepoSecretKind::Template,
        _ => RepoSecretKind::Repository,
    };
    let secret: SecretObject = typed(ctx, value, &object)?;
    let get = |key: &str| secret_value(ctx, &secret, &object, key);
    let url = match get("url")? {
        Some((url, _)) if !url.trim().is_empty() => url.trim().to_owned(),
        Some((_, field)) => {
            return Err(ctx.field_error(&object, &field, "empty repository URL".to_owned()));
        }
        None => {
            return Err(ctx.field_error(
                &object,
                "data.url",
                "missing; a repository Secret needs the repository URL".to_owned(),
            ));
        }
    };
    let repo_type = get("type")?
        .map(|(t, _)| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "git".to_owned());
    let text = |key: &str| -> Result<Option<String>, LoadError> {
        Ok(get(key)?.map(|(v, _)| v).filter(|v| !v.is_empty()))
    };
    let flag = |key: &str| -> Result<bool, LoadError> {
        match get(key)? {
            None => Ok(false),
            Some((v, field)) => match v.trim() {
                "" | "false" | "False" | "FALSE" | "0" | "f" | "F" => Ok(false),
                "true" | "True" | "TRUE" | "1" | "t" | "T" => Ok(true),
                _ => Err(ctx.field_error(&object, &field, format!("{v:?} is not a boolean"))),
            },
        }
    };
    let credentials = RepoCredentials {
        username: text("username")?,
        password: text("password")?,
        bearer_token: text("bearerToken")?,
        ssh_private_key: text("sshPrivateKey")?,
        tls_client_cert_data: text("tlsClientCertData")?,
        tls_client_cert_key: text("tlsClientCertKey")?,
    };
    if credentials.tls_client_cert_data.is_some() != credentials.tls_client_cert_key.is_some() {
        let missing = if credentials.tls_client_cert_data.is_some() {
            "tlsClientCertKey"
        } else {
            "tlsClientCertData"
        };
        return Err(ctx.field_error(
            &object,
            &format!("data.{missing}"),
            "missing; a TLS client certificate needs both tlsClientCertData and \
             tlsClientCertKey"
                .to_owned(),
        ));
    }
    let mut unsupported = Vec::new();
    for key in UNSUPPORTED_KEYS {
        if let Some((v, field)) = get(key)?
            && !v.is_empty()
            && v != "false"
        {
            unsupported.push(field);
        }
    }
    let repo = RepoSecret {
        kind,
        secret: object.clone(),
        url,
        repo_type,
        project: text("project")?.unwrap_or_default(),
        name: text("name")?.unwrap_or_default(),
        insecure: flag("insecure")?,
        force_http_basic_auth: flag("forceHttpBasicAuth")?,
        proxy: text("proxy")?,
        no_proxy: text("noProxy")?,
        credentials,
        unsupported,
    };
    if !matches!(repo.repo_type.as_str(), "git" | "helm" | "oci") {
        ctx.warn(
            &object,
            Some("data.type"),
            format!(
                "a {:?} repository: Argo CD's types are git, helm and oci; skipped",
                repo.repo_type
            ),
        );
        return Ok(None);
    }
    Ok(Some(repo))
}

/// A Secret's value without ever putting it (or part of it) in a message.
fn secret_value(
    ctx: &Ctx,
    secret: &SecretObject,
    object: &str,
    key: &str,
) -> Result<Option<(String, String)>, LoadError> {
    if let Some(v) = secret.string_data.as_ref().and_then(|d| d.get(key)) {
        return Ok(Some((v.clone(), format!("stringData.{key}"))));
    }
    let Some(encoded) = secret.data.as_ref().and_then(|d| d.get(key)) else {
        return Ok(None);
    };
    let field = format!("data.{key}");
    let bytes = crate::secret::decode_secret_data(encoded)
        .map_err(|e| ctx.field_error(object, &field, format!("invalid base64: {e}")))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| ctx.field_error(object, &field, "decoded value is not UTF-8".to_owned()))?;
    Ok(Some((text, field)))
}

/// Reads a ConfigMap of the input: Argo CD's known hosts or TLS certificates into
/// `settings`; any other ConfigMap is skipped with a warning.
pub(crate) fn read_config_map(
    ctx: &mut Ctx,
    value: &Value,
    locator: &str,
    settings: &mut RepoSettings,
) -> Result<(), LoadError> {
    let (ns, name) = meta_names(value);
    let object = object_name("ConfigMap", ns, name, locator);
    let data = match value.get("data") {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => {
            return Err(ctx.field_error(&object, "data", "expected a mapping".to_owned()));
        }
    };
    let mut strings = BTreeMap::new();
    for (key, v) in data {
        let Value::String(s) = v else {
            return Err(ctx.field_error(
                &object,
                &format!("data.{key}"),
                "expected a string".to_owned(),
            ));
        };
        strings.insert(key, s);
    }
    match name {
        Some(KNOWN_HOSTS_CONFIG_MAP) => {
            settings.known_hosts = Some(strings.remove(KNOWN_HOSTS_KEY).unwrap_or_default());
        }
        Some(TLS_CERTS_CONFIG_MAP) => {
            settings.tls_certs = strings
                .into_iter()
                .map(|(host, pem)| (host.to_ascii_lowercase(), pem))
                .collect();
        }
        _ => ctx.warn(
            &object,
            None,
            format!(
                "not a ConfigMap fleetshard reads (only {KNOWN_HOSTS_CONFIG_MAP} and \
                 {TLS_CERTS_CONFIG_MAP}); skipped"
            ),
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests;
