//! The pod's AWS credentials, in the order of the AWS SDK's default chain as far as it
//! applies in a pod: access keys in the environment, then a web identity (IRSA: STS
//! `AssumeRoleWithWebIdentity` with the projected token file), then a container
//! credentials endpoint (EKS Pod Identity). Shared config files, profiles and the instance
//! metadata service are not read.
//!
//! The STS calls are STS's query API over reqwest (already in the tree) with an XML answer,
//! not `aws-config` + `aws-sdk-sts`: those bring about 45 crates new to the tree, among
//! them `aws-lc-sys` (a C build this workspace avoids, see the root `Cargo.toml`), for
//! three requests.

use std::time::Duration;

use super::EksError;
use super::env::{AwsEnv, Endpoint};
use super::sigv4::{self, CanonicalRequest, Scope, SigningKeys};

/// STS's API version, in every request.
pub(crate) const STS_VERSION: &str = "2011-06-15";

/// Credentials and when they expire (Unix seconds; never for access keys).
#[derive(Clone)]
pub(crate) struct Credentials {
    pub keys: SigningKeys,
    pub expires: Option<i64>,
}

/// Where the pod's own credentials come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// Access keys in the environment.
    Keys,
    /// IRSA: a role assumed with the projected service-account token.
    WebIdentity {
        role_arn: String,
        token_file: String,
    },
    /// EKS Pod Identity: the agent's endpoint, with the projected token.
    Container { uri: String },
}

impl Source {
    /// The first source the environment configures, in the SDK's order.
    pub(crate) fn of(env: &AwsEnv) -> Result<Source, EksError> {
        match (&env.access_key_id, &env.secret_access_key) {
            (Some(_), Some(_)) => return Ok(Source::Keys),
            (Some(_), None) | (None, Some(_)) => {
                return Err(EksError::Setup(
                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together; one is set \
                     without the other"
                        .to_owned(),
                ));
            }
            (None, None) => {}
        }
        match (&env.web_identity_token_file, &env.role_arn) {
            (Some(file), Some(role)) => {
                return Ok(Source::WebIdentity {
                    role_arn: role.clone(),
                    token_file: file.clone(),
                });
            }
            (Some(_), None) => {
                return Err(EksError::Setup(
                    "AWS_WEB_IDENTITY_TOKEN_FILE is set without AWS_ROLE_ARN".to_owned(),
                ));
            }
            _ => {}
        }
        if let Some(uri) = &env.container_credentials_full_uri {
            return Ok(Source::Container { uri: uri.clone() });
        }
        Err(EksError::Setup(
            "no AWS credentials in this pod: fleetshard reads AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY, IRSA's AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE, or EKS \
             Pod Identity's AWS_CONTAINER_CREDENTIALS_FULL_URI (not profiles, nor the \
             instance metadata service)"
                .to_owned(),
        ))
    }

    /// What this source is called in messages.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Source::Keys => "the AWS_ACCESS_KEY_ID in the environment",
            Source::WebIdentity { .. } => "web identity (IRSA)",
            Source::Container { .. } => "EKS Pod Identity",
        }
    }
}

/// The HTTP calls that get credentials: STS and the Pod Identity agent.
pub(crate) struct Fetcher {
    pub http: reqwest::Client,
    pub timeout: Duration,
}

impl Fetcher {
    /// Reads a token file (re-read each time: the kubelet rotates projected tokens).
    async fn read_token(path: &str, variable: &str) -> Result<String, EksError> {
        let owned = path.to_owned();
        let read = tokio::task::spawn_blocking(move || std::fs::read_to_string(owned))
            .await
            .map_err(|e| EksError::Setup(format!("{variable} {path}: {e}")))?;
        let text =
            read.map_err(|e| EksError::Setup(format!("{variable} {path}: cannot be read: {e}")))?;
        Ok(text.trim().to_owned())
    }

    /// STS `AssumeRoleWithWebIdentity` (not signed: the web identity token is the proof).
    pub(crate) async fn web_identity(
        &self,
        endpoint: &Endpoint,
        role_arn: &str,
        token_file: &str,
        session_name: &str,
    ) -> Result<Credentials, EksError> {
        let token = Self::read_token(token_file, "AWS_WEB_IDENTITY_TOKEN_FILE").await?;
        let body = form(&[
            ("Action", "AssumeRoleWithWebIdentity"),
            ("Version", STS_VERSION),
            ("RoleArn", role_arn),
            ("RoleSessionName", session_name),
            ("WebIdentityToken", &token),
        ]);
        let request = self
            .http
            .post(format!("{}/", endpoint.url))
            .header(http::header::CONTENT_TYPE, FORM_TYPE)
            .body(body);
        self.sts_call("AssumeRoleWithWebIdentity", request).await
    }

    /// STS `AssumeRole`, signed with `keys` at `amz_date`.
    pub(crate) async fn assume_role(
        &self,
        endpoint: &Endpoint,
        region: &str,
        keys: &SigningKeys,
        role_arn: &str,
        session_name: &str,
        amz_date: &str,
    ) -> Result<Credentials, EksError> {
        let body = form(&[
            ("Action", "AssumeRole"),
            ("Version", STS_VERSION),
            ("RoleArn", role_arn),
            ("RoleSessionName", session_name),
        ]);
        let payload_hash = sigv4::sha256_hex(body.as_bytes());
        let mut headers = vec![
            ("content-type", FORM_TYPE),
            ("host", endpoint.host.as_str()),
            ("x-amz-date", amz_date),
        ];
        if let Some(token) = &keys.session_token {
            headers.push(("x-amz-security-token", token.as_str()));
        }
        let scope = Scope {
            amz_date,
            region,
            service: "sts",
        };
        let authorization = sigv4::authorization(
            keys,
            &scope,
            &CanonicalRequest {
                method: "POST",
                path: "/",
                query: &[],
                headers: &headers,
                payload_hash: &payload_hash,
            },
        );
        let mut request = self
            .http
            .post(format!("{}/", endpoint.url))
            .header(http::header::AUTHORIZATION, authorization)
            .body(body);
        for (name, value) in headers {
            if name != "host" {
                request = request.header(name, value);
            }
        }
        self.sts_call("AssumeRole", request).await
    }

    /// Sends an STS request and reads the credentials of its answer.
    async fn sts_call(
        &self,
        action: &'static str,
        request: reqwest::RequestBuilder,
    ) -> Result<Credentials, EksError> {
        let sts = |message: String| EksError::Sts { action, message };
        let response = request
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| sts(without_url(e)))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| sts(without_url(e)))?;
        if !status.is_success() {
            return Err(sts(format!("HTTP {status}: {}", sts_error(&text))));
        }
        credentials_xml(&text).map_err(sts)
    }

    /// The EKS Pod Identity agent's credentials (the container credentials protocol).
    pub(crate) async fn container(&self, env: &AwsEnv, uri: &str) -> Result<Credentials, EksError> {
        let agent = |message: String| EksError::PodIdentity(message);
        check_container_uri(uri).map_err(agent)?;
        let token = match (
            &env.container_authorization_token_file,
            &env.container_authorization_token,
        ) {
            (Some(file), _) => {
                Some(Self::read_token(file, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE").await?)
            }
            (None, Some(token)) => Some(token.trim().to_owned()),
            (None, None) => None,
        };
        let mut request = self.http.get(uri).timeout(self.timeout);
        if let Some(token) = token {
            request = request.header(http::header::AUTHORIZATION, token);
        }
        let response = request.send().await.map_err(|e| agent(without_url(e)))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| agent(without_url(e)))?;
        if !status.is_success() {
            // The agent's error body names the problem, never a credential.
            let said: String = text.chars().take(300).collect();
            return Err(agent(format!("HTTP {status}: {said}")));
        }
        credentials_json(&text).map_err(agent)
    }
}

const FORM_TYPE: &str = "application/x-www-form-urlencoded; charset=utf-8";

/// A form body.
fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", sigv4::uri_encode(k), sigv4::uri_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// reqwest's error without the URL (a presigned URL or a query could carry a secret).
fn without_url(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    text
}

/// As the SDK: over plain `http://`, the container endpoint must be on this host or the
/// EKS/ECS agent's link-local address (the token would cross the network in clear).
fn check_container_uri(uri: &str) -> Result<(), String> {
    let url = reqwest::Url::parse(uri)
        .map_err(|e| format!("AWS_CONTAINER_CREDENTIALS_FULL_URI is not a URL: {e}"))?;
    match url.scheme() {
        "https" => Ok(()),
        "http" => {
            let host = url.host_str().unwrap_or("");
            let ip = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>();
            let allowed = match ip {
                Ok(std::net::IpAddr::V4(ip)) => {
                    ip.is_loopback()
                        || ip.octets() == [169, 254, 170, 2]
                        || ip.octets() == [169, 254, 170, 23]
                }
                Ok(std::net::IpAddr::V6(ip)) => {
                    ip.is_loopback() || ip.segments() == [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23]
                }
                Err(_) => host == "localhost",
            };
            if allowed {
                Ok(())
            } else {
                Err(
                    "AWS_CONTAINER_CREDENTIALS_FULL_URI over http:// must be a loopback or the \
                     agent's link-local address (169.254.170.23, fd00:ec2::23)"
                        .to_owned(),
                )
            }
        }
        other => Err(format!(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI: scheme {other} is not http(s)"
        )),
    }
}

/// STS's `<Error><Code>…</Code><Message>…</Message></Error>`, or the start of the body.
fn sts_error(text: &str) -> String {
    let Ok(doc) = roxmltree::Document::parse(text) else {
        return text.chars().take(300).collect();
    };
    let field = |name: &str| {
        doc.descendants()
            .find(|n| n.has_tag_name(name))
            .and_then(|n| n.text())
            .unwrap_or("")
            .to_owned()
    };
    format!("{}: {}", field("Code"), field("Message"))
}

/// The `<Credentials>` of an STS answer.
pub(crate) fn credentials_xml(text: &str) -> Result<Credentials, String> {
    let doc = roxmltree::Document::parse(text).map_err(|e| format!("answer is not XML: {e}"))?;
    let creds = doc
        .descendants()
        .find(|n| n.has_tag_name("Credentials"))
        .ok_or("answer has no Credentials")?;
    let field = |name: &str| -> Result<String, String> {
        creds
            .children()
            .find(|n| n.has_tag_name(name))
            .and_then(|n| n.text())
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| format!("answer has no Credentials.{name}"))
    };
    Ok(Credentials {
        keys: SigningKeys {
            access_key_id: field("AccessKeyId")?,
            secret_access_key: field("SecretAccessKey")?,
            session_token: Some(field("SessionToken")?),
        },
        expires: Some(timestamp(&field("Expiration")?)?),
    })
}

/// The container credentials protocol's JSON answer.
fn credentials_json(text: &str) -> Result<Credentials, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("answer is not JSON: {e}"))?;
    let field = |name: &str| -> Result<String, String> {
        v.get(name)
            .and_then(|f| f.as_str())
            .filter(|f| !f.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| format!("answer has no {name}"))
    };
    Ok(Credentials {
        keys: SigningKeys {
            access_key_id: field("AccessKeyId")?,
            secret_access_key: field("SecretAccessKey")?,
            session_token: field("Token").ok(),
        },
        expires: match field("Expiration") {
            Ok(e) => Some(timestamp(&e)?),
            Err(_) => None,
        },
    })
}

/// RFC 3339 → Unix seconds.
fn timestamp(text: &str) -> Result<i64, String> {
    text.parse::<jiff::Timestamp>()
        .map(|t| t.as_second())
        .map_err(|e| format!("Expiration {text:?} is not a time: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sources_come_in_the_sdks_order() {
        let all = [
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"),
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "http://169.254.170.23/v1/credentials",
            ),
        ];
        assert_eq!(Source::of(&AwsEnv::from_pairs(&all)).unwrap(), Source::Keys);
        assert!(matches!(
            Source::of(&AwsEnv::from_pairs(&all[2..])).unwrap(),
            Source::WebIdentity { .. }
        ));
        assert!(matches!(
            Source::of(&AwsEnv::from_pairs(&all[4..])).unwrap(),
            Source::Container { .. }
        ));
        let none = Source::of(&AwsEnv::from_pairs(&[]))
            .unwrap_err()
            .to_string();
        assert!(none.contains("AWS_WEB_IDENTITY_TOKEN_FILE"), "{none}");
        let half = Source::of(&AwsEnv::from_pairs(&all[..1]))
            .unwrap_err()
            .to_string();
        assert!(half.contains("AWS_SECRET_ACCESS_KEY"), "{half}");
    }

    #[test]
    fn the_container_endpoint_over_http_must_be_local() {
        assert!(check_container_uri("http://169.254.170.23/v1/credentials").is_ok());
        assert!(check_container_uri("http://127.0.0.1:8080/creds").is_ok());
        assert!(check_container_uri("https://creds.example/").is_ok());
        assert!(check_container_uri("http://creds.example/").is_err());
    }

    #[test]
    fn reads_sts_answers_and_errors() {
        let ok = "<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
            <AssumeRoleResult><Credentials><AccessKeyId>ASIA1</AccessKeyId>\
            <SecretAccessKey>sk</SecretAccessKey><SessionToken>st</SessionToken>\
            <Expiration>2026-11-26T18:00:00Z</Expiration></Credentials></AssumeRoleResult>\
            </AssumeRoleResponse>";
        let c = credentials_xml(ok).unwrap();
        assert_eq!(c.keys.access_key_id, "ASIA1");
        assert_eq!(c.keys.session_token.as_deref(), Some("st"));
        assert_eq!(c.expires, Some(1_795_716_000));
        let err = "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>\
            <Message>not authorized</Message></Error></ErrorResponse>";
        assert_eq!(sts_error(err), "AccessDenied: not authorized");
        assert!(credentials_xml(err).is_err());
    }
}
