//! The pod's AWS settings as the AWS SDK reads them from the environment, and the STS
//! endpoint they name.

use super::EksError;

/// The pod's AWS settings, read from the environment as the AWS SDK reads them (an empty
/// variable counts as unset). `Debug` shows which are set, never a secret.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AwsEnv {
    /// `AWS_REGION`, else `AWS_DEFAULT_REGION`.
    pub region: Option<String>,
    /// `AWS_ENDPOINT_URL_STS`, else `AWS_ENDPOINT_URL`: the STS endpoint instead of the
    /// region's.
    pub sts_endpoint: Option<String>,
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: Option<String>,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: Option<String>,
    /// `AWS_SESSION_TOKEN`.
    pub session_token: Option<String>,
    /// `AWS_ROLE_ARN` (web identity).
    pub role_arn: Option<String>,
    /// `AWS_WEB_IDENTITY_TOKEN_FILE` (web identity).
    pub web_identity_token_file: Option<String>,
    /// `AWS_ROLE_SESSION_NAME` (web identity; generated when unset).
    pub role_session_name: Option<String>,
    /// `AWS_CONTAINER_CREDENTIALS_FULL_URI` (EKS Pod Identity).
    pub container_credentials_full_uri: Option<String>,
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` (EKS Pod Identity).
    pub container_authorization_token_file: Option<String>,
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN`, used when no token file is given.
    pub container_authorization_token: Option<String>,
    /// The endpoint variants asked for and not implemented (`AWS_USE_FIPS_ENDPOINT`,
    /// `AWS_USE_DUALSTACK_ENDPOINT` set to `true`): refused rather than ignored.
    pub unsupported: Vec<String>,
}

impl std::fmt::Debug for AwsEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = |o: &Option<String>| o.is_some();
        f.debug_struct("AwsEnv")
            .field("region", &self.region)
            .field("sts_endpoint", &self.sts_endpoint)
            .field("access_key_id", &set(&self.access_key_id))
            .field("secret_access_key", &set(&self.secret_access_key))
            .field("session_token", &set(&self.session_token))
            .field("role_arn", &self.role_arn)
            .field("web_identity_token_file", &self.web_identity_token_file)
            .field(
                "container_credentials_full_uri",
                &self.container_credentials_full_uri,
            )
            .field(
                "container_authorization_token_file",
                &self.container_authorization_token_file,
            )
            .field(
                "container_authorization_token",
                &set(&self.container_authorization_token),
            )
            .field("unsupported", &self.unsupported)
            .finish()
    }
}

impl AwsEnv {
    /// The process's environment.
    pub fn from_process() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// The variables `get` gives (tests pass a map).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Self {
        let var = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        AwsEnv {
            region: var("AWS_REGION").or_else(|| var("AWS_DEFAULT_REGION")),
            sts_endpoint: var("AWS_ENDPOINT_URL_STS").or_else(|| var("AWS_ENDPOINT_URL")),
            access_key_id: var("AWS_ACCESS_KEY_ID"),
            secret_access_key: var("AWS_SECRET_ACCESS_KEY"),
            session_token: var("AWS_SESSION_TOKEN"),
            role_arn: var("AWS_ROLE_ARN"),
            web_identity_token_file: var("AWS_WEB_IDENTITY_TOKEN_FILE"),
            role_session_name: var("AWS_ROLE_SESSION_NAME"),
            container_credentials_full_uri: var("AWS_CONTAINER_CREDENTIALS_FULL_URI"),
            container_authorization_token_file: var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"),
            container_authorization_token: var("AWS_CONTAINER_AUTHORIZATION_TOKEN"),
            unsupported: ["AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT"]
                .into_iter()
                .filter(|name| var(name).is_some_and(|v| v.trim().eq_ignore_ascii_case("true")))
                .map(str::to_owned)
                .collect(),
        }
    }

    /// The variables of `vars`, for tests.
    #[cfg(test)]
    pub(crate) fn from_pairs(vars: &[(&str, &str)]) -> Self {
        Self::from_vars(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    /// The region, which the STS endpoint and every signature name.
    pub(crate) fn region(&self) -> Result<&str, EksError> {
        self.region.as_deref().ok_or_else(|| {
            EksError::Setup(
                "no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION) in the pod".to_owned(),
            )
        })
    }

    /// The STS endpoint: the override, else the region's (`https://sts.REGION.amazonaws.com`,
    /// `.amazonaws.com.cn` in China).
    pub(crate) fn sts_endpoint(&self) -> Result<Endpoint, EksError> {
        let url = match &self.sts_endpoint {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None if !self.unsupported.is_empty() => {
                return Err(EksError::Setup(format!(
                    "{} set: fleetshard does not pick FIPS or dual-stack STS endpoints; set \
                     AWS_ENDPOINT_URL_STS to the endpoint to use",
                    self.unsupported.join(" and ")
                )));
            }
            None => {
                let region = self.region()?;
                let suffix = if region.starts_with("cn-") {
                    "amazonaws.com.cn"
                } else {
                    "amazonaws.com"
                };
                format!("https://sts.{region}.{suffix}")
            }
        };
        let parsed = reqwest::Url::parse(&url).map_err(|e| {
            EksError::Setup(format!("AWS_ENDPOINT_URL_STS {url:?} is not a URL: {e}"))
        })?;
        let host = match (parsed.host_str(), parsed.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            (None, _) => {
                return Err(EksError::Setup(format!(
                    "AWS_ENDPOINT_URL_STS {url:?} has no host"
                )));
            }
        };
        if !matches!(parsed.scheme(), "https" | "http") || parsed.path() != "/" {
            return Err(EksError::Setup(format!(
                "AWS_ENDPOINT_URL_STS {url:?}: only http(s)://HOST[:PORT] is supported"
            )));
        }
        Ok(Endpoint { url, host })
    }
}

/// An STS endpoint: its base URL (no trailing `/`) and the `host` header it signs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub url: String,
    pub host: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_names_the_sts_endpoint() {
        let e = AwsEnv::from_pairs(&[("AWS_DEFAULT_REGION", "eu-west-1")]);
        assert_eq!(
            e.sts_endpoint().unwrap().url,
            "https://sts.eu-west-1.amazonaws.com"
        );
        let e = AwsEnv::from_pairs(&[("AWS_REGION", "cn-north-1"), ("AWS_DEFAULT_REGION", "x")]);
        assert_eq!(
            e.sts_endpoint().unwrap().host,
            "sts.cn-north-1.amazonaws.com.cn"
        );
        let e = AwsEnv::from_pairs(&[("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:4566/")]);
        let endpoint = e.sts_endpoint().unwrap();
        assert_eq!(
            (endpoint.url.as_str(), endpoint.host.as_str()),
            ("http://127.0.0.1:4566", "127.0.0.1:4566")
        );
        let missing = AwsEnv::from_pairs(&[])
            .sts_endpoint()
            .unwrap_err()
            .to_string();
        assert!(missing.contains("AWS_REGION"), "{missing}");
        let fips = AwsEnv::from_pairs(&[
            ("AWS_REGION", "us-east-1"),
            ("AWS_USE_FIPS_ENDPOINT", "true"),
        ]);
        let refused = fips.sts_endpoint().unwrap_err().to_string();
        assert!(refused.contains("AWS_USE_FIPS_ENDPOINT"), "{refused}");
    }
}
