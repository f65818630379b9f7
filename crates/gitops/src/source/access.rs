//! Which credentials a repository is fetched with: Argo CD's repository Secrets and
//! credential templates ([`RepoSettings`]) matched against an application's `repoURL` and
//! project, as Argo CD matches them.
//!
//! - A repository Secret applies when its `url` and the `repoURL` normalise alike
//!   ([`normalize`]: case, a trailing `/`, a `.git` suffix); a credential template when
//!   its normalised `url` is a prefix of the normalised `repoURL`, the longest prefix
//!   winning. Argo CD's rule is a string prefix: a template for `http://git.example.com`
//!   also matches `http://git.example.com.evil.net/…` and sends its credentials there.
//!   Such a match — one whose prefix does not end at a path boundary of the `repoURL` (the
//!   next character `/`, or the end; or `:` right after the host) — is kept, as Argo CD
//!   keeps it, but logged once per template and shown on the app
//!   ([`RepoAccess::loose_template`]); with [`TemplateMatch::PathBoundary`]
//!   (`--refuse-loose-credential-templates`) it is no match at all.
//! - A Secret with a `project` applies only to applications of that project; of two
//!   otherwise equal matches, the project's own wins over one for every project; then the
//!   first by Secret name.
//! - A repository Secret without credentials takes the matching template's (and its
//!   proxy settings when it has none), as Argo CD does; a repository Secret with
//!   credentials wins over every template.
//! - For `ssh` URLs the known hosts of `argocd-ssh-known-hosts-cm` come along, for
//!   `https` the CA certificates `argocd-tls-certs-cm` lists for the URL's host.
//!
//! [`RepoAccess`] is part of the repository cache's key: two applications share a mirror
//! only when they fetch the same exact URL with the same credentials.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Mutex, OnceLock, PoisonError};

use fleetshard_manifest::{AppProject, RepoCredentials, RepoSecret, RepoSecretKind, RepoSettings};

use super::error::SourceError;
use super::url::normalize;
use fleetshard_util::redact::redact_userinfo;

/// How a credential template's URL must match a `repoURL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TemplateMatch {
    /// Argo CD's rule: a string prefix of the normalised URL. A match that does not end
    /// at a path boundary is taken, logged once per template and noted on the app.
    #[default]
    Prefix,
    /// Only a prefix that ends at a path boundary (`--refuse-loose-credential-templates`):
    /// `http://git.example.com` matches `http://git.example.com/r` and
    /// `http://git.example.com:8080/r`, never `http://git.example.com.evil.net/r`.
    PathBoundary,
}

/// How one repository is fetched. `Debug` never shows a credential.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct RepoAccess {
    /// The Secrets the settings come from, as messages name them (empty: anonymous).
    pub from: Vec<String>,
    /// Username, password, token, SSH key, TLS client certificate.
    pub credentials: RepoCredentials,
    /// Skip the TLS certificate check (HTTPS) or the host key check (SSH).
    pub insecure: bool,
    /// Send basic authentication before the server asks.
    pub force_http_basic_auth: bool,
    /// The HTTP(S) proxy.
    pub proxy: Option<String>,
    /// Hosts not to proxy, comma-separated.
    pub no_proxy: Option<String>,
    /// SSH known hosts (an OpenSSH known-hosts file) for `ssh` URLs; `None`: the
    /// ConfigMap is absent and the user's own known hosts apply.
    pub known_hosts: Option<String>,
    /// PEM CA certificates trusted for this HTTPS server (beside the system's).
    pub ca_certs: Option<String>,
    /// Set Secret keys fleetshard does not implement, `Secret …: field` each.
    pub unsupported: Vec<String>,
    /// The matching Secret's `type` (`git`, `helm`, `oci`; empty: no Secret), which a
    /// repo-server is told.
    pub repo_type: String,
    /// The repository Secret's `name` and `project` (empty without one), which a
    /// repo-server is told.
    pub name: String,
    /// See [`RepoAccess::name`].
    pub project: String,
    /// The credentials come from a credential template (`repo-creds`).
    pub inherited_creds: bool,
    /// The template the credentials come from matched the `repoURL` only as a string,
    /// not at a path boundary (Argo CD's rule, kept under [`TemplateMatch::Prefix`]): the
    /// Secret it is, for the warning [`RepoAccess::loose_template_warning`] makes.
    pub loose_template: Option<String>,
}

impl fmt::Debug for RepoAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RepoAccess")
            .field("from", &self.from)
            .field("credentials", &self.credentials)
            .field("insecure", &self.insecure)
            .field("force_http_basic_auth", &self.force_http_basic_auth)
            .field("proxy", &self.proxy.as_ref().map(|_| "<set>"))
            .field("no_proxy", &self.no_proxy)
            .field("known_hosts", &self.known_hosts.as_ref().map(String::len))
            .field("ca_certs", &self.ca_certs.as_ref().map(String::len))
            .field("unsupported", &self.unsupported)
            .field("repo_type", &self.repo_type)
            .field("name", &self.name)
            .field("project", &self.project)
            .field("inherited_creds", &self.inherited_creds)
            .field("loose_template", &self.loose_template)
            .finish()
    }
}

/// The Helm and OCI repositories (repository Secrets of type `helm` or `oci`) and the
/// credential templates of those types that an app of `project` may use, as Argo CD's
/// controller sends them to the repo-server (`repos` and `helmRepoCreds`: a chart's
/// dependencies are fetched with them). A Secret of another project is left out, and so is
/// a URL the project's `sourceRepos` do not permit (Argo CD's `GetPermittedRepos`).
pub fn permitted_helm_repositories(
    settings: &RepoSettings,
    project: &AppProject,
) -> (Vec<RepoSecret>, Vec<RepoSecret>) {
    let usable = |s: &&RepoSecret| {
        matches!(s.repo_type.as_str(), "helm" | "oci")
            && (s.project.is_empty() || s.project == project.name)
            && project.permits_source(&s.url)
    };
    let of = |kind: RepoSecretKind| {
        settings
            .secrets
            .iter()
            .filter(|s| s.kind == kind)
            .filter(usable)
            .cloned()
            .collect()
    };
    (of(RepoSecretKind::Repository), of(RepoSecretKind::Template))
}

impl RepoAccess {
    /// Anonymous access with the system's defaults.
    pub fn anonymous() -> Self {
        RepoAccess::default()
    }

    /// The access `settings` give `repo_url` for an application of `project`, templates
    /// matched as `matching` says.
    pub fn resolve(
        settings: &RepoSettings,
        repo_url: &str,
        project: &str,
        matching: TemplateMatch,
    ) -> RepoAccess {
        let url = normalize(repo_url);
        let applies = |s: &RepoSecret| s.project.is_empty() || s.project == project;
        // Of equal matches: the project's own first, then by Secret name (the list's order).
        let better = |a: &RepoSecret, b: &RepoSecret| !a.project.is_empty() && b.project.is_empty();
        let mut repository: Option<&RepoSecret> = None;
        let mut template: Option<(usize, &RepoSecret)> = None;
        for s in settings.secrets.iter().filter(|s| applies(s)) {
            let prefix = normalize(&s.url);
            match s.kind {
                RepoSecretKind::Repository
                    if prefix == url && repository.is_none_or(|r| better(s, r)) =>
                {
                    repository = Some(s);
                }
                RepoSecretKind::Template
                    if !prefix.is_empty()
                        && url.starts_with(&prefix)
                        && (matching == TemplateMatch::Prefix
                            || at_path_boundary(&url, &prefix))
                        && template.is_none_or(|(l, t)| {
                            prefix.len() > l || (prefix.len() == l && better(s, t))
                        }) =>
                {
                    template = Some((prefix.len(), s));
                }
                _ => {}
            }
        }
        let template = template.map(|(_, t)| t);
        let mut access = RepoAccess::default();
        let take = |s: &RepoSecret, access: &mut RepoAccess| {
            access.from.push(s.secret.clone());
            access.repo_type.clone_from(&s.repo_type);
            access.credentials = s.credentials.clone();
            access.force_http_basic_auth = s.force_http_basic_auth;
            access.unsupported = s
                .unsupported
                .iter()
                .map(|f| format!("{}: {f}", s.secret))
                .collect();
        };
        if let Some(r) = repository {
            access.name.clone_from(&r.name);
            access.project.clone_from(&r.project);
        }
        match (repository, template) {
            (Some(r), Some(t)) if r.credentials.is_empty() && r.unsupported.is_empty() => {
                access.from.push(r.secret.clone());
                take(t, &mut access);
                access.inherited_creds = true;
                access.repo_type.clone_from(&r.repo_type);
                access.insecure = r.insecure;
                access.proxy = r.proxy.clone().or_else(|| t.proxy.clone());
                access.no_proxy = r.no_proxy.clone().or_else(|| t.no_proxy.clone());
            }
            (None, Some(s)) => {
                take(s, &mut access);
                access.inherited_creds = true;
                access.insecure = s.insecure;
                access.proxy = s.proxy.clone();
                access.no_proxy = s.no_proxy.clone();
            }
            (Some(s), _) => {
                take(s, &mut access);
                access.insecure = s.insecure;
                access.proxy = s.proxy.clone();
                access.no_proxy = s.no_proxy.clone();
            }
            (None, None) => {}
        }
        // The template's credentials were taken: say so when it matched only as a string.
        if let Some(t) = template
            .filter(|t| access.inherited_creds && !at_path_boundary(&url, &normalize(&t.url)))
        {
            warn_once(t, repo_url);
            access.loose_template = Some(t.secret.clone());
        }
        match scheme(repo_url) {
            Scheme::Ssh => access.known_hosts = settings.known_hosts.clone(),
            Scheme::Https => {
                access.ca_certs = host(repo_url).and_then(|h| settings.tls_certs.get(&h).cloned());
            }
            Scheme::Other => {}
        }
        access
    }

    /// What an operator is told on the app when the credentials come from a template
    /// that matched `repo_url` only as a string prefix.
    pub fn loose_template_warning(&self, repo_url: &str) -> Option<String> {
        let template = self.loose_template.as_ref()?;
        Some(format!(
            "{template}: the credential template's url is a prefix of repoURL {} that does \
             not end at a path boundary, so its credentials are sent to another host or \
             path than it names (Argo CD's rule; a trailing `/` on the template's url is \
             normalised away); --refuse-loose-credential-templates refuses such matches",
            redact_userinfo(repo_url)
        ))
    }

    /// Refuses what cannot be done with these settings: keys fleetshard does not
    /// implement, or credentials the URL's transport cannot carry.
    pub(crate) fn check(&self, repo_url: &str) -> Result<(), SourceError> {
        let refuse = |message: String| SourceError::Credentials {
            repo: repo_url.to_owned(),
            message,
        };
        if let Some(field) = self.unsupported.first() {
            return Err(refuse(format!(
                "{field} is not supported by fleetshard (only username/password, bearer \
                 token, SSH private key and TLS client certificate); the repository is not \
                 fetched without it"
            )));
        }
        let c = &self.credentials;
        let from = self.from.join(", ");
        match scheme(repo_url) {
            Scheme::Ssh if c.password.is_some() && c.ssh_private_key.is_none() => Err(refuse(
                format!("{from}: a password over SSH is not supported (use sshPrivateKey)"),
            )),
            Scheme::Https | Scheme::Other if c.ssh_private_key.is_some() && !has_http(c) => {
                Err(refuse(format!(
                    "{from}: sshPrivateKey is set but the URL is not an SSH URL"
                )))
            }
            _ => Ok(()),
        }
    }

    /// A stable digest of everything here, for the cache key (never shown).
    pub(crate) fn digest_input(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut put = |label: &str, v: Option<&str>| {
            out.extend_from_slice(label.as_bytes());
            match v {
                Some(v) => {
                    out.push(1);
                    out.extend_from_slice(&(v.len() as u64).to_le_bytes());
                    out.extend_from_slice(v.as_bytes());
                }
                None => out.push(0),
            }
        };
        let c = &self.credentials;
        put("username", c.username.as_deref());
        put("password", c.password.as_deref());
        put("bearer", c.bearer_token.as_deref());
        put("ssh", c.ssh_private_key.as_deref());
        put("cert", c.tls_client_cert_data.as_deref());
        put("key", c.tls_client_cert_key.as_deref());
        put("insecure", self.insecure.then_some("1"));
        put("basic", self.force_http_basic_auth.then_some("1"));
        put("proxy", self.proxy.as_deref());
        put("noproxy", self.no_proxy.as_deref());
        put("hosts", self.known_hosts.as_deref());
        put("ca", self.ca_certs.as_deref());
        out
    }
}

/// Whether `prefix` (a prefix of `url`, both normalised) ends at a path boundary of
/// `url`: the next character is `/` or there is none, or it is `:` right after the host
/// (a port, or scp-like `host:path`).
fn at_path_boundary(url: &str, prefix: &str) -> bool {
    match url[prefix.len()..].chars().next() {
        None | Some('/') => true,
        Some(':') => {
            let authority = prefix.split_once("://").map_or(prefix, |(_, rest)| rest);
            !authority.contains(['/', ':'])
        }
        Some(_) => false,
    }
}

/// Logs, once per template (its Secret and URL) in this process, that it matched a
/// `repoURL` beyond a path boundary.
fn warn_once(template: &RepoSecret, repo_url: &str) {
    static WARNED: OnceLock<Mutex<HashSet<(String, String)>>> = OnceLock::new();
    let first = WARNED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert((template.secret.clone(), template.url.clone()));
    if first {
        tracing::warn!(
            template = %template.secret,
            template_url = %redact_userinfo(&template.url),
            repo = %redact_userinfo(repo_url),
            "a credential template matched a repoURL that its url is only a string prefix \
             of (not at a path boundary): its credentials go to that repository too, as \
             Argo CD sends them (--refuse-loose-credential-templates refuses such matches)"
        );
    }
}

fn has_http(c: &RepoCredentials) -> bool {
    c.username.is_some()
        || c.password.is_some()
        || c.bearer_token.is_some()
        || c.tls_client_cert_data.is_some()
}

/// The transport family of a URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// `ssh://`, `git+ssh://`, `ssh+git://` or scp-like `user@host:path`.
    Ssh,
    /// `https://` or `http://`.
    Https,
    /// Anything else (`git://`, a local path).
    Other,
}

/// The transport of `url`.
pub(crate) fn scheme(url: &str) -> Scheme {
    let url = url.trim();
    match url.split_once("://") {
        Some((s, _)) => match s.to_ascii_lowercase().as_str() {
            "ssh" | "git+ssh" | "ssh+git" => Scheme::Ssh,
            "https" | "http" => Scheme::Https,
            _ => Scheme::Other,
        },
        None if super::url::is_scp_like(url) => Scheme::Ssh,
        None => Scheme::Other,
    }
}

/// The host of a URL (lower case, without user and port), scp-like forms included.
pub(crate) fn host(url: &str) -> Option<String> {
    let url = url.trim();
    let rest = match url.split_once("://") {
        Some((_, rest)) => rest.split('/').next()?,
        None => url.split(':').next()?,
    };
    let rest = rest.rsplit('@').next()?;
    let host = if let Some(v6) = rest.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        rest.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests;
