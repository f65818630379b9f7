//! Carrying a [`RepoAccess`] into one gix fetch, and saying plainly why a fetch failed.
//!
//! - HTTP(S): basic authentication (`username`/`password`, or a token as the password) or
//!   a bearer token as an `Authorization` header on every request, as go-git sends it
//!   (so `forceHttpBasicAuth` changes nothing); TLS client certificate, extra CA certificates, `insecure` and
//!   the proxy on reqwest's client. Every request has reqwest's timeouts ([`HTTP_TIMEOUT`],
//!   [`CONNECT_TIMEOUT`]).
//! - SSH: gix runs OpenSSH; the command is set for this fetch only (`core.sshCommand`):
//!   no user configuration, no agent, no prompt (`BatchMode`), only the Secret's key, the
//!   host key checked against the known hosts of `argocd-ssh-known-hosts-cm` (unless
//!   `insecure`), and connection and keep-alive timeouts. The key and the known hosts are
//!   written to a private temporary directory (mode 0700, files 0600) removed after the
//!   fetch.
//!
//! Nothing here logs or returns a credential: errors name the Secret and the key.

use std::io::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use gix::protocol::transport::client::blocking_io::http;

use super::access::{RepoAccess, Scheme, scheme};
use super::error::SourceError;

/// The longest an HTTP request may take (reqwest's blocking default, made explicit).
pub(crate) const HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest a TCP (or SSH) connection may take to open.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// SSH keep-alive: a server silent for `interval × count` ends the connection.
const SSH_ALIVE_INTERVAL_SECS: u64 = 10;
const SSH_ALIVE_COUNT: u64 = 3;

/// What a fetch authenticates with, ready for gix. Dropping it removes the SSH files.
pub(crate) struct FetchAuth {
    /// HTTP(S) transport options (`None`: not an HTTP URL).
    pub(crate) http: Option<http::Options>,
    /// The `core.sshCommand` of this fetch (`None`: not an SSH URL).
    pub(crate) ssh_command: Option<String>,
    /// Where ssh writes its messages.
    pub(crate) ssh_stderr: Option<std::path::PathBuf>,
    /// The Secrets the credentials come from, for messages.
    pub(crate) from: String,
    /// Whether a known-hosts list is checked (for messages).
    pub(crate) known_hosts: bool,
    /// Whether any credential is configured (for messages).
    pub(crate) has_credentials: bool,
    _ssh_dir: Option<tempfile::TempDir>,
}

impl FetchAuth {
    /// Prepares `access` for a fetch of `url` (`repo_url` names it in errors); `base` is
    /// the repository's own HTTP options (gix's defaults from its configuration).
    pub(crate) fn prepare(
        repo_url: &str,
        url: &str,
        access: &RepoAccess,
        base: Option<http::Options>,
    ) -> Result<FetchAuth, SourceError> {
        access.check(repo_url)?;
        let refuse = |message: String| SourceError::Credentials {
            repo: repo_url.to_owned(),
            message,
        };
        let from = if access.from.is_empty() {
            "no repository Secret".to_owned()
        } else {
            access.from.join(" with ")
        };
        let c = &access.credentials;
        let mut auth = FetchAuth {
            http: None,
            ssh_command: None,
            ssh_stderr: None,
            from: from.clone(),
            known_hosts: access.known_hosts.is_some(),
            has_credentials: !c.is_empty(),
            _ssh_dir: None,
        };
        match scheme(url) {
            Scheme::Https => {
                let mut options = base.unwrap_or_default();
                options.connect_timeout = Some(CONNECT_TIMEOUT);
                let mut certs = Vec::new();
                if let Some(pem) = &access.ca_certs {
                    certs =
                        reqwest::Certificate::from_pem_bundle(pem.as_bytes()).map_err(|_| {
                            refuse(
                            "argocd-tls-certs-cm: the certificates for this host are not valid \
                             PEM"
                                .to_owned(),
                        )
                        })?;
                }
                let identity = match (&c.tls_client_cert_data, &c.tls_client_cert_key) {
                    (Some(cert), Some(key)) => {
                        let pem = format!("{}\n{}\n", cert.trim(), key.trim());
                        Some(reqwest::Identity::from_pem(pem.as_bytes()).map_err(|_| {
                            refuse(format!(
                                "{from}: tlsClientCertData/tlsClientCertKey are not a valid PEM \
                                 certificate and private key"
                            ))
                        })?)
                    }
                    _ => None,
                };
                let proxy = match &access.proxy {
                    Some(p) => {
                        let proxy = reqwest::Proxy::all(p.as_str())
                            .map_err(|_| refuse(format!("{from}: proxy is not a valid URL")))?;
                        Some(
                            proxy.no_proxy(
                                access
                                    .no_proxy
                                    .as_deref()
                                    .and_then(reqwest::NoProxy::from_string),
                            ),
                        )
                    }
                    None => None,
                };
                // Sent with every request, as go-git (Argo CD's client) sends it, rather
                // than after a 401: gix refuses to answer a challenge over plain http, and
                // a header set here stops gix from following a redirect to another server.
                let header = match (&c.bearer_token, &c.username, &c.password) {
                    (Some(token), _, _) => Some(
                        header_value(&format!("Bearer {}", token.trim())).ok_or_else(|| {
                            refuse(format!(
                                "{from}: bearerToken holds characters an HTTP header cannot carry"
                            ))
                        })?,
                    ),
                    (None, None, None) => None,
                    (None, user, password) => {
                        let encoded = base64::engine::general_purpose::STANDARD.encode(format!(
                            "{}:{}",
                            user.as_deref().unwrap_or_default(),
                            password.as_deref().unwrap_or_default()
                        ));
                        Some(header_value(&format!("Basic {encoded}")).ok_or_else(|| {
                            refuse(format!("{from}: username/password cannot be sent"))
                        })?)
                    }
                };
                let insecure = access.insecure;
                let configure_client: Box<http::reqwest::ConfigureClientFn> =
                    Box::new(move |mut builder: reqwest::blocking::ClientBuilder| {
                        builder = builder
                            .connect_timeout(CONNECT_TIMEOUT)
                            .timeout(HTTP_TIMEOUT);
                        for cert in &certs {
                            builder = builder.add_root_certificate(cert.clone());
                        }
                        if let Some(identity) = &identity {
                            builder = builder.identity(identity.clone());
                        }
                        if insecure {
                            builder = builder.danger_accept_invalid_certs(true);
                        }
                        if let Some(proxy) = &proxy {
                            builder = builder.no_proxy().proxy(proxy.clone());
                        }
                        Ok(builder)
                    });
                let configure_request: Option<Box<http::reqwest::ConfigureRequestFn>> =
                    header.map(|value| {
                        Box::new(move |request: &mut reqwest::blocking::Request| {
                            request
                                .headers_mut()
                                .insert(reqwest::header::AUTHORIZATION, value.clone());
                            Ok(())
                        }) as Box<http::reqwest::ConfigureRequestFn>
                    });
                options.backend = Some(Arc::new(Mutex::new(http::reqwest::Options {
                    configure_client: Some(configure_client),
                    configure_request,
                })));
                auth.http = Some(options);
            }
            Scheme::Ssh => {
                let dir = tempfile::Builder::new()
                    .prefix("fleetshard-ssh-")
                    .tempdir()
                    .map_err(|e| {
                        fetch(repo_url, format!("cannot create a private directory: {e}"))
                    })?;
                let mut options = vec![
                    "-F /dev/null".to_owned(),
                    "-o BatchMode=yes".to_owned(),
                    "-o IdentityAgent=none".to_owned(),
                    "-o PasswordAuthentication=no".to_owned(),
                    "-o KbdInteractiveAuthentication=no".to_owned(),
                    format!("-o ConnectTimeout={}", CONNECT_TIMEOUT.as_secs()),
                    format!("-o ServerAliveInterval={SSH_ALIVE_INTERVAL_SECS}"),
                    format!("-o ServerAliveCountMax={SSH_ALIVE_COUNT}"),
                ];
                if access.insecure {
                    options.push("-o StrictHostKeyChecking=no".to_owned());
                    options.push("-o UserKnownHostsFile=/dev/null".to_owned());
                    options.push("-o GlobalKnownHostsFile=/dev/null".to_owned());
                } else {
                    options.push("-o StrictHostKeyChecking=yes".to_owned());
                    if let Some(hosts) = &access.known_hosts {
                        let path = dir.path().join("known_hosts");
                        write_private(&path, hosts).map_err(|e| fetch(repo_url, e))?;
                        options.push(format!("-o UserKnownHostsFile={}", quote(&path)));
                        options.push("-o GlobalKnownHostsFile=/dev/null".to_owned());
                    }
                }
                if let Some(key) = &c.ssh_private_key {
                    let path = dir.path().join("key");
                    // OpenSSH refuses a key file without a final newline.
                    let key = format!("{}\n", key.trim_end());
                    write_private(&path, &key).map_err(|e| fetch(repo_url, e))?;
                    options.push("-o IdentitiesOnly=yes".to_owned());
                    options.push(format!("-i {}", quote(&path)));
                }
                // ssh's own messages (host key, permission) go to a file of this fetch, to
                // say why it failed; gix would only see a closed connection.
                let stderr = dir.path().join("stderr");
                auth.ssh_stderr = Some(stderr.clone());
                auth.ssh_command = Some(format!("ssh {} 2>>{}", options.join(" "), quote(&stderr)));
                auth._ssh_dir = Some(dir);
            }
            Scheme::Other => {}
        }
        Ok(auth)
    }
}

fn fetch(repo_url: &str, message: String) -> SourceError {
    SourceError::Fetch {
        repo: repo_url.to_owned(),
        message,
    }
}

/// An `Authorization` value, marked sensitive (kept out of reqwest's debug output);
/// `None` when it holds characters a header cannot carry (a newline, say).
fn header_value(value: &str) -> Option<reqwest::header::HeaderValue> {
    let mut value = reqwest::header::HeaderValue::from_str(value).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Writes `text` to a new file only the owner can read.
fn write_private(path: &Path, text: &str) -> Result<(), String> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    file.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `path` quoted for the shell that runs `core.sshCommand`.
fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// The plain reason of a failed fetch, from what the transport said and what was sent.
pub(crate) fn explain(
    auth: &FetchAuth,
    text: &str,
    asked_for_credentials: bool,
    http_status: Option<u16>,
) -> Option<String> {
    let from = &auth.from;
    if asked_for_credentials || http_status == Some(401) {
        return Some(if auth.has_credentials {
            format!(
                "the server refused the credentials of {from} (HTTP 401): wrong username, \
                 password or token"
            )
        } else {
            "the server asks for credentials (HTTP 401): the repository is private or does \
             not exist, and no repository Secret or credential template matches this URL \
             for this application's project"
                .to_owned()
        });
    }
    if http_status == Some(403) {
        return Some(if auth.has_credentials {
            format!("access denied (HTTP 403) with the credentials of {from}: {text}")
        } else {
            format!(
                "access denied (HTTP 403), and no repository Secret or credential template \
                 matches this URL for this application's project: {text}"
            )
        });
    }
    if let Some(path) = &auth.ssh_stderr {
        let said = std::fs::read_to_string(path).unwrap_or_default();
        let text = format!("{text}\n{said}");
        if text.contains("Host key verification failed")
            || text.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
            || text.contains("No matching host key")
        {
            return Some(if auth.known_hosts {
                "the server's SSH host key is not in argocd-ssh-known-hosts-cm (host key \
                 verification failed)"
                    .to_owned()
            } else {
                "the server's SSH host key is not known (host key verification failed; \
                 argocd-ssh-known-hosts-cm is absent, so the user's known hosts were used)"
                    .to_owned()
            });
        }
        if text.contains("Permission denied") {
            return Some(format!(
                "the server refused the SSH key of {from} (permission denied)"
            ));
        }
        let last = said.lines().rev().find(|l| !l.trim().is_empty());
        if let Some(last) = last {
            return Some(format!("ssh: {}", last.trim()));
        }
    }
    None
}
