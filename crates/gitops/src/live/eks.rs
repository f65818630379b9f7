//! EKS clusters (`awsAuthConfig`): the bearer token Argo CD gets from `argocd-k8s-auth
//! aws`, made in-process.
//!
//! The token is `k8s-aws-v1.` followed by the unpadded base64url of a presigned STS
//! `GetCallerIdentity` URL (SigV4 query signing, `X-Amz-Expires=60`, the cluster's name
//! signed in the header `x-k8s-aws-id`). The API server's authenticator calls that URL and
//! maps the caller's identity to a Kubernetes user; it accepts a token for 15 minutes after
//! its `X-Amz-Date`. The credentials that sign are the pod's (`eks/sources.rs`, from the
//! environment as [`AwsEnv`] reads it), then, when the Secret has a `roleARN`, that role's
//! (STS `AssumeRole`).
//!
//! [`EksTokens`] caches each token per (cluster, role) for [`TOKEN_USE`] (or until the
//! credentials that signed it expire), the pod's credentials and each assumed role's until
//! [`CREDENTIALS_MARGIN`] before their `Expiration`: one STS call per role per credentials
//! lifetime, however many connections and requests use the token. The wall clock is
//! injected ([`UnixClock`]); the replica gives the system's.

mod env;
mod layer;
mod sigv4;
mod sources;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use base64::Engine as _;
use fleetshard_manifest::AwsAuth;

pub use env::AwsEnv;
pub(crate) use layer::BearerLayer;
pub use sigv4::SigningKeys;
use sources::{Credentials, Fetcher, Source};

/// Time since the Unix epoch, now (the replica gives `SystemClock::since_epoch`).
pub type UnixClock = Arc<dyn Fn() -> Duration + Send + Sync>;

/// How long a token is used after it is signed (the API server accepts it for 15 minutes;
/// the rest is margin for clock skew and requests in flight).
pub const TOKEN_USE: Duration = Duration::from_secs(10 * 60);

/// Credentials are refreshed this long before their `Expiration`, so that a token signed
/// with them outlives neither.
pub const CREDENTIALS_MARGIN: Duration = Duration::from_secs(5 * 60);

/// The token's prefix.
pub const TOKEN_PREFIX: &str = "k8s-aws-v1.";

/// Why no EKS token could be made. Messages name variables, files, STS actions and AWS's
/// error codes, never a key, a session token or a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EksError {
    /// The pod's AWS setup is incomplete or unreadable.
    #[error("{0}")]
    Setup(String),
    /// An STS call failed.
    #[error("STS {action}: {message}")]
    Sts {
        /// The STS action.
        action: &'static str,
        /// What went wrong (AWS's error code and message).
        message: String,
    },
    /// The EKS Pod Identity agent did not give credentials.
    #[error("EKS Pod Identity agent: {0}")]
    PodIdentity(String),
}

/// A bearer token; `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct EksToken(String);

impl EksToken {
    /// The token, for the `Authorization` header.
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for EksToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EksToken(<redacted>)")
    }
}

/// A token and until when it is used (Unix seconds).
struct Cached {
    token: EksToken,
    until: i64,
}

/// What [`EksTokens`] keeps.
#[derive(Default)]
struct Cache {
    /// The pod's own credentials.
    base: Option<Credentials>,
    /// Assumed roles' credentials, by role ARN.
    roles: HashMap<String, Credentials>,
    /// Tokens by cluster name and role.
    tokens: HashMap<AwsAuth, Cached>,
}

/// Makes and caches EKS tokens for every cluster of this replica with `awsAuthConfig`.
pub struct EksTokens {
    env: AwsEnv,
    clock: UnixClock,
    fetcher: Fetcher,
    /// One refresh at a time: concurrent connections to a cluster wait for one STS call.
    cache: tokio::sync::Mutex<Cache>,
    calls: AtomicU64,
}

impl std::fmt::Debug for EksTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EksTokens")
            .field("env", &self.env)
            .field("credential_calls", &self.credential_calls())
            .finish()
    }
}

impl EksTokens {
    /// Tokens from the credentials `env` describes, at the time `clock` says; every STS or
    /// Pod Identity call is bounded by `timeout`.
    pub fn new(env: AwsEnv, clock: UnixClock, timeout: Duration) -> Result<Self, EksError> {
        crate::source::install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| EksError::Setup(format!("the HTTP client for STS: {e}")))?;
        Ok(EksTokens {
            env,
            clock,
            fetcher: Fetcher { http, timeout },
            cache: tokio::sync::Mutex::new(Cache::default()),
            calls: AtomicU64::new(0),
        })
    }

    /// How many calls for credentials (STS, Pod Identity agent) were made so far.
    pub fn credential_calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Now, in Unix seconds.
    fn now(&self) -> i64 {
        i64::try_from((self.clock)().as_secs()).unwrap_or(i64::MAX)
    }

    /// The token for `auth`: the cached one while it is good, else a new one (new
    /// credentials first, when theirs are near expiry).
    pub async fn token(&self, auth: &AwsAuth) -> Result<EksToken, EksError> {
        let mut cache = self.cache.lock().await;
        let now = self.now();
        if let Some(cached) = cache.tokens.get(auth)
            && now < cached.until
        {
            return Ok(cached.token.clone());
        }
        let credentials = self.credentials(&mut cache, auth, now).await?;
        let token = presigned_token(&self.env, &credentials.keys, &auth.cluster_name, now)?;
        let use_secs = i64::try_from(TOKEN_USE.as_secs()).unwrap_or(i64::MAX);
        let until = credentials
            .expires
            .map_or(now + use_secs, |e| e.min(now + use_secs));
        cache.tokens.insert(
            auth.clone(),
            Cached {
                token: token.clone(),
                until,
            },
        );
        Ok(token)
    }

    /// The credentials that sign `auth`'s token: the pod's, or the role's assumed with them.
    async fn credentials(
        &self,
        cache: &mut Cache,
        auth: &AwsAuth,
        now: i64,
    ) -> Result<Credentials, EksError> {
        let fresh = |c: &Credentials| {
            let margin = i64::try_from(CREDENTIALS_MARGIN.as_secs()).unwrap_or(0);
            c.expires.is_none_or(|e| now + margin < e)
        };
        let base = match cache.base.as_ref().filter(|c| fresh(c)) {
            Some(base) => base.clone(),
            None => {
                let base = self.base_credentials(now).await?;
                cache.base = Some(base.clone());
                base
            }
        };
        let Some(role) = &auth.role_arn else {
            return Ok(base);
        };
        if let Some(assumed) = cache.roles.get(role).filter(|c| fresh(c)) {
            return Ok(assumed.clone());
        }
        let endpoint = self.env.sts_endpoint()?;
        self.calls.fetch_add(1, Ordering::Relaxed);
        let assumed = self
            .fetcher
            .assume_role(
                &endpoint,
                self.env.region()?,
                &base.keys,
                role,
                &session_name(now),
                &amz_date(now),
            )
            .await?;
        cache.roles.insert(role.clone(), assumed.clone());
        Ok(assumed)
    }

    /// The pod's own credentials, from the first source its environment configures.
    async fn base_credentials(&self, now: i64) -> Result<Credentials, EksError> {
        let source = Source::of(&self.env)?;
        let named = |e: EksError| match e {
            EksError::Setup(m) => EksError::Setup(format!("{}: {m}", source.name())),
            other => other,
        };
        match &source {
            Source::Keys => Ok(Credentials {
                keys: sigv4::SigningKeys {
                    access_key_id: self.env.access_key_id.clone().unwrap_or_default(),
                    secret_access_key: self.env.secret_access_key.clone().unwrap_or_default(),
                    session_token: self.env.session_token.clone(),
                },
                expires: None,
            }),
            Source::WebIdentity {
                role_arn,
                token_file,
            } => {
                let endpoint = self.env.sts_endpoint()?;
                let session = self
                    .env
                    .role_session_name
                    .clone()
                    .unwrap_or_else(|| session_name(now));
                self.calls.fetch_add(1, Ordering::Relaxed);
                self.fetcher
                    .web_identity(&endpoint, role_arn, token_file, &session)
                    .await
                    .map_err(named)
            }
            Source::Container { uri } => {
                self.calls.fetch_add(1, Ordering::Relaxed);
                self.fetcher.container(&self.env, uri).await.map_err(named)
            }
        }
    }
}

/// `20261126T170000Z`.
fn amz_date(unix_secs: i64) -> String {
    jiff::Timestamp::from_second(unix_secs)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string()
}

/// A role session's name (`fleetshard-<unix seconds>`), as the SDK makes one.
fn session_name(unix_secs: i64) -> String {
    format!("fleetshard-{unix_secs}")
}

/// The token for `cluster_name` signed with `keys` at `unix_secs`: `k8s-aws-v1.` and the
/// unpadded base64url of the presigned `GetCallerIdentity` URL.
pub(crate) fn presigned_token(
    env: &AwsEnv,
    keys: &sigv4::SigningKeys,
    cluster_name: &str,
    unix_secs: i64,
) -> Result<EksToken, EksError> {
    let endpoint = env.sts_endpoint()?;
    let date = amz_date(unix_secs);
    let scope = sigv4::Scope {
        amz_date: &date,
        region: env.region()?,
        service: "sts",
    };
    let query = sigv4::presign_query(
        keys,
        &scope,
        &[
            ("Action", "GetCallerIdentity"),
            ("Version", sources::STS_VERSION),
        ],
        &[("host", &endpoint.host), ("x-k8s-aws-id", cluster_name)],
        60,
    );
    let url = format!("{}/?{query}", endpoint.url);
    Ok(EksToken(format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(url)
    )))
}

#[cfg(test)]
mod tests;
