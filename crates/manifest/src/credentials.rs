//! How to reach a cluster: the `config` key of an Argo CD cluster Secret.
//!
//! Argo CD's `config` is a JSON object (`ClusterConfig` in its API): `bearerToken`,
//! `username`/`password`, `tlsClientConfig` (`insecure`, `serverName`, `caData`,
//! `certData`, `keyData`), `execProviderConfig` (`command`, `args`, `env`, `apiVersion`,
//! `installHint`), `awsAuthConfig` (`clusterName`, `roleARN`, `profile`),
//! `disableCompression`, `proxyUrl`. fleetshard reads them all but `disableCompression`
//! (which changes nothing fleetshard sends) and `awsAuthConfig.profile` (no AWS shared
//! config file is read). A set `profile`, or a token, username or password no HTTP header
//! can carry (a newline), is kept in [`ClusterCredentials::unusable`]: the
//! reconciler refuses to reach that cluster, with a condition naming the field, rather
//! than reaching it without the authentication the Secret asks for. A field of the wrong
//! type, or `config` that is not a JSON object, is an error naming the field.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// Credentials for one cluster's API server. `Debug` never prints a secret (token,
/// password, key), nor the exec plugin's environment.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ClusterCredentials {
    /// `bearerToken`.
    pub bearer_token: Option<String>,
    /// `username` (HTTP basic authentication, with `password`).
    pub username: Option<String>,
    /// `password`.
    pub password: Option<String>,
    /// `tlsClientConfig.insecure`: do not verify the server's certificate.
    pub insecure: bool,
    /// `tlsClientConfig.serverName`: the name to verify the server's certificate against
    /// (and send as SNI) instead of the URL's host.
    pub server_name: Option<String>,
    /// `tlsClientConfig.caData`: base64 of the PEM CA bundle.
    pub ca_data: Option<String>,
    /// `tlsClientConfig.certData`: base64 of the PEM client certificate.
    pub cert_data: Option<String>,
    /// `tlsClientConfig.keyData`: base64 of the PEM client key.
    pub key_data: Option<String>,
    /// `execProviderConfig`: a credential plugin run as kubectl runs one.
    pub exec: Option<ExecProvider>,
    /// `proxyUrl`: an `http://` or `socks5://` proxy to reach the API server through.
    pub proxy_url: Option<String>,
    /// `awsAuthConfig`: an EKS cluster, reached with a token made from the pod's AWS
    /// credentials. As in Argo CD, it takes precedence over `bearerToken`,
    /// `username`/`password` and `execProviderConfig` (which are then not used); the TLS
    /// settings still apply.
    pub aws: Option<AwsAuth>,
    /// Why these credentials cannot be used, one message per field (naming it, never its
    /// value): authentication fleetshard cannot honour (`config.awsAuthConfig.profile`), or a
    /// secret no HTTP header can carry (a token with a newline). The cluster is not
    /// reached at all while this is non-empty.
    pub unusable: Vec<String>,
    /// Argo CD's built-in in-cluster entry, which has no Secret: reach the API server as
    /// the pod's own service account (its token and CA as Kubernetes mounts them, the
    /// address from `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT`), as Argo CD does.
    /// The other fields are unused then.
    pub pod_service_account: bool,
    /// The namespaces these credentials may reach (the Secret's `namespaces` and
    /// `clusterResources`, beside `config`); the default: the whole cluster.
    pub scope: crate::ClusterScope,
}

/// Argo CD's `execProviderConfig`: a client-go credential plugin.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ExecProvider {
    /// The program (looked up in `PATH` when it has no `/`).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: BTreeMap<String, String>,
    /// The `client.authentication.k8s.io` version it speaks.
    pub api_version: String,
    /// What to tell the user when the program is missing.
    pub install_hint: Option<String>,
}

/// Argo CD's `awsAuthConfig`: which EKS cluster the token is for, and the role to assume
/// first. Neither is a secret.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct AwsAuth {
    /// `clusterName`: the EKS cluster's name, signed into the token (`x-k8s-aws-id`).
    pub cluster_name: String,
    /// `roleARN`: an IAM role assumed with the pod's credentials before the token is made.
    pub role_arn: Option<String>,
}

impl fmt::Debug for ExecProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecProvider")
            .field("command", &self.command)
            .field("args", &self.args.len())
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("api_version", &self.api_version)
            .finish()
    }
}

impl ClusterCredentials {
    /// The credentials of Argo CD's built-in in-cluster entry: the pod's service account.
    pub fn pod_service_account() -> Self {
        ClusterCredentials {
            pod_service_account: true,
            ..ClusterCredentials::default()
        }
    }
}

impl fmt::Debug for ClusterCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redacted = |o: &Option<String>| o.as_ref().map(|_| "<redacted>");
        f.debug_struct("ClusterCredentials")
            .field("bearer_token", &redacted(&self.bearer_token))
            .field("username", &self.username)
            .field("password", &redacted(&self.password))
            .field("insecure", &self.insecure)
            .field("server_name", &self.server_name)
            .field("ca_data", &self.ca_data.as_ref().map(|c| c.len()))
            .field("cert_data", &self.cert_data.as_ref().map(|c| c.len()))
            .field("key_data", &redacted(&self.key_data))
            .field("exec", &self.exec)
            .field("proxy_url", &self.proxy_url.as_ref().map(|_| "<set>"))
            .field("aws", &self.aws)
            .field("unusable", &self.unusable)
            .field("pod_service_account", &self.pod_service_account)
            .field("scope", &self.scope)
            .finish()
    }
}

/// Why a `config` could not be read: the field (`config`, `config.bearerToken`, …, under
/// the name the caller gave `config`) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The field inside the Secret's `config`, prefixed with the name given to `config`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl ClusterCredentials {
    /// Reads an Argo CD cluster Secret's `config` JSON, found in the Secret's field `field`
    /// (`stringData.config`, say). Returns the credentials and what makes them unusable
    /// (fields named under `field`, for warnings; also kept in
    /// [`ClusterCredentials::unusable`]); a field of the wrong type is an error naming it.
    pub fn from_argo_config(
        config: &str,
        field: &str,
    ) -> Result<(Self, Vec<ConfigProblem>), ConfigProblem> {
        let problem = |field: &str, message: String| ConfigProblem {
            field: field.to_owned(),
            message,
        };
        let v: Value = serde_json::from_str(config)
            .map_err(|e| problem(field, format!("invalid JSON: {e}")))?;
        if !v.is_object() {
            return Err(problem(field, "not a JSON object".to_owned()));
        }
        let name = |ptr: &str| format!("{field}{}", ptr.replace('/', "."));
        let text = |ptr: &str| -> Result<Option<String>, ConfigProblem> {
            match at(&v, ptr) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if s.is_empty() => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(problem(&name(ptr), "not a string".to_owned())),
            }
        };
        let insecure = match at(&v, "/tlsClientConfig/insecure") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(problem(
                    &name("/tlsClientConfig/insecure"),
                    "not a boolean".to_owned(),
                ));
            }
        };
        let exec = match at(&v, "/execProviderConfig") {
            None | Some(Value::Null) => None,
            Some(Value::Object(o)) if o.is_empty() => None,
            Some(Value::Object(_)) => Some(exec_provider(&v, &name, &text)?),
            Some(_) => {
                return Err(problem(
                    &name("/execProviderConfig"),
                    "not an object".to_owned(),
                ));
            }
        };
        let proxy_url = text("/proxyUrl")?;
        if let Some(url) = &proxy_url
            && !(url.starts_with("http://") || url.starts_with("socks5://"))
        {
            return Err(problem(
                &name("/proxyUrl"),
                "not an http:// or socks5:// URL (the schemes fleetshard's client speaks)"
                    .to_owned(),
            ));
        }
        let mut unusable: Vec<ConfigProblem> = Vec::new();
        let aws = match at(&v, "/awsAuthConfig") {
            None | Some(Value::Null) => None,
            Some(Value::Object(o)) if o.is_empty() => None,
            Some(Value::Object(_)) => Some(aws_auth(&name, &text, &mut unusable)?),
            Some(_) => return Err(problem(&name("/awsAuthConfig"), "not an object".to_owned())),
        };
        // What goes into an HTTP header must be one line of visible text: a token pasted
        // with its newline would be refused by every request (and made the client panic).
        for ptr in ["/bearerToken", "/username", "/password"] {
            if let Some(text) = text(ptr)?
                && text.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f)
            {
                unusable.push(problem(
                    &name(ptr),
                    "contains a control character (a trailing newline?), which no HTTP \
                     header can carry; nothing is sent to the cluster"
                        .to_owned(),
                ));
            }
        }
        let credentials = ClusterCredentials {
            bearer_token: text("/bearerToken")?,
            username: text("/username")?,
            password: text("/password")?,
            insecure,
            server_name: text("/tlsClientConfig/serverName")?,
            ca_data: text("/tlsClientConfig/caData")?,
            cert_data: text("/tlsClientConfig/certData")?,
            key_data: text("/tlsClientConfig/keyData")?,
            exec,
            proxy_url,
            aws,
            unusable: unusable
                .iter()
                .map(|p| format!("{}: {}", p.field, p.message))
                .collect(),
            pod_service_account: false,
            scope: crate::ClusterScope::default(),
        };
        if credentials.cert_data.is_some() != credentials.key_data.is_some() {
            return Err(problem(
                &name("/tlsClientConfig"),
                "certData and keyData go together: a client certificate needs its key".to_owned(),
            ));
        }
        Ok((credentials, unusable))
    }
}

/// Reads `awsAuthConfig` (known to be a non-empty object). A `profile` names a section of
/// an AWS shared config file, which fleetshard does not read: the cluster is refused
/// (`unusable`) rather than reached with other credentials than the profile's.
fn aws_auth(
    name: &dyn Fn(&str) -> String,
    text: &dyn Fn(&str) -> Result<Option<String>, ConfigProblem>,
    unusable: &mut Vec<ConfigProblem>,
) -> Result<AwsAuth, ConfigProblem> {
    let problem = |ptr: &str, message: &str| ConfigProblem {
        field: name(ptr),
        message: message.to_owned(),
    };
    let cluster_name = text("/awsAuthConfig/clusterName")?.ok_or_else(|| {
        problem(
            "/awsAuthConfig/clusterName",
            "missing; the EKS cluster's name, which the token is signed for",
        )
    })?;
    // EKS cluster names: a letter or digit, then letters, digits, `-` and `_`, at most 100.
    let valid = cluster_name.len() <= 100
        && cluster_name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && cluster_name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return Err(problem(
            "/awsAuthConfig/clusterName",
            "not an EKS cluster name (a letter or digit, then letters, digits, '-' and '_', \
             at most 100)",
        ));
    }
    let role_arn = text("/awsAuthConfig/roleARN")?;
    if let Some(arn) = &role_arn
        && (!arn.starts_with("arn:") || arn.chars().any(|c| c.is_control() || c == ' '))
    {
        return Err(problem(
            "/awsAuthConfig/roleARN",
            "not an IAM role ARN (arn:aws:iam::ACCOUNT:role/NAME)",
        ));
    }
    if text("/awsAuthConfig/profile")?.is_some() {
        unusable.push(problem(
            "/awsAuthConfig/profile",
            "AWS profiles (a shared config file) are not read by fleetshard, which takes the \
             pod's AWS credentials from its environment (IRSA, EKS Pod Identity or access \
             keys); remove the profile or use roleARN; nothing is sent to the cluster",
        ));
    }
    Ok(AwsAuth {
        cluster_name,
        role_arn,
    })
}

/// Reads `execProviderConfig` (known to be a non-empty object).
fn exec_provider(
    v: &Value,
    name: &dyn Fn(&str) -> String,
    text: &dyn Fn(&str) -> Result<Option<String>, ConfigProblem>,
) -> Result<ExecProvider, ConfigProblem> {
    let problem = |ptr: &str, message: &str| ConfigProblem {
        field: name(ptr),
        message: message.to_owned(),
    };
    let command = text("/execProviderConfig/command")?
        .ok_or_else(|| problem("/execProviderConfig/command", "missing; the plugin to run"))?;
    let args = match at(v, "/execProviderConfig/args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|a| a.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| problem("/execProviderConfig/args", "not a list of strings"))?,
        Some(_) => return Err(problem("/execProviderConfig/args", "not a list of strings")),
    };
    let env = match at(v, "/execProviderConfig/env") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(o)) => o
            .iter()
            .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
            .collect::<Option<BTreeMap<_, _>>>()
            .ok_or_else(|| problem("/execProviderConfig/env", "not a map of strings to strings"))?,
        Some(_) => {
            return Err(problem(
                "/execProviderConfig/env",
                "not a map of strings to strings",
            ));
        }
    };
    let api_version = text("/execProviderConfig/apiVersion")?.ok_or_else(|| {
        problem(
            "/execProviderConfig/apiVersion",
            "missing; e.g. client.authentication.k8s.io/v1beta1",
        )
    })?;
    Ok(ExecProvider {
        command,
        args,
        env,
        api_version,
        install_hint: text("/execProviderConfig/installHint")?,
    })
}

/// `v.pointer(ptr)` for a pointer made of object keys without escapes (all of this file's
/// are), without the string `Value::pointer` allocates for each key: the config of every
/// cluster Secret is read through a dozen of them.
fn at<'v>(v: &'v Value, ptr: &str) -> Option<&'v Value> {
    ptr.split('/')
        .skip(1)
        .try_fold(v, |v, key| v.as_object()?.get(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_supported_fields() {
        let (c, unsupported) = ClusterCredentials::from_argo_config(
            r#"{"bearerToken":"t0k","tlsClientConfig":{"insecure":true,"caData":"Q0E="}}"#,
            "config",
        )
        .unwrap();
        assert_eq!(c.bearer_token.as_deref(), Some("t0k"));
        assert!(c.insecure);
        assert_eq!(c.ca_data.as_deref(), Some("Q0E="));
        assert!(unsupported.is_empty());
    }

    #[test]
    fn reads_aws_auth_config_and_refuses_a_profile() {
        let (c, unusable) = ClusterCredentials::from_argo_config(
            r#"{"awsAuthConfig":{"clusterName":"prod-eu_1","roleARN":"arn:aws:iam::123456789012:role/argocd"},
                "tlsClientConfig":{"caData":"Q0E="}}"#,
            "config",
        )
        .unwrap();
        assert!(unusable.is_empty(), "{unusable:?}");
        assert!(c.unusable.is_empty());
        let aws = c.aws.as_ref().expect("awsAuthConfig read");
        assert_eq!(aws.cluster_name, "prod-eu_1");
        assert_eq!(
            aws.role_arn.as_deref(),
            Some("arn:aws:iam::123456789012:role/argocd")
        );
        assert_eq!(c.ca_data.as_deref(), Some("Q0E="));

        let (c, unusable) = ClusterCredentials::from_argo_config(
            r#"{"awsAuthConfig":{"clusterName":"x","profile":"team-a"},
                "tlsClientConfig":{"certData":"Yw==","keyData":"aw==","insecure":false},"username":""}"#,
            "config",
        )
        .unwrap();
        let fields: Vec<&str> = unusable.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["config.awsAuthConfig.profile"]);
        assert_eq!(c.unusable.len(), 1, "kept: the cluster is refused");
        assert!(
            c.unusable[0].starts_with("config.awsAuthConfig.profile: "),
            "{:?}",
            c.unusable
        );
        assert!(!c.unusable[0].contains("team-a"), "{:?}", c.unusable);
        assert_eq!(c.cert_data.as_deref(), Some("Yw=="));
        // An empty awsAuthConfig is no awsAuthConfig.
        let (c, _) =
            ClusterCredentials::from_argo_config(r#"{"awsAuthConfig":{}}"#, "config").unwrap();
        assert_eq!(c.aws, None);
    }

    #[test]
    fn malformed_aws_auth_config_names_the_field() {
        for (config, field) in [
            (r#"{"awsAuthConfig":"eks"}"#, "config.awsAuthConfig"),
            (
                r#"{"awsAuthConfig":{"roleARN":"arn:aws:iam::1:role/r"}}"#,
                "config.awsAuthConfig.clusterName",
            ),
            (
                r#"{"awsAuthConfig":{"clusterName":7}}"#,
                "config.awsAuthConfig.clusterName",
            ),
            (
                r#"{"awsAuthConfig":{"clusterName":"a b"}}"#,
                "config.awsAuthConfig.clusterName",
            ),
            (
                r#"{"awsAuthConfig":{"clusterName":"c\n"}}"#,
                "config.awsAuthConfig.clusterName",
            ),
            (
                r#"{"awsAuthConfig":{"clusterName":"c","roleARN":"argocd"}}"#,
                "config.awsAuthConfig.roleARN",
            ),
            (
                r#"{"awsAuthConfig":{"clusterName":"c","profile":1}}"#,
                "config.awsAuthConfig.profile",
            ),
        ] {
            let e = ClusterCredentials::from_argo_config(config, "config").unwrap_err();
            assert_eq!(e.field, field, "{config}: {e:?}");
        }
    }

    #[test]
    fn wrong_types_name_the_field() {
        let e = ClusterCredentials::from_argo_config(r#"{"bearerToken":7}"#, "config").unwrap_err();
        assert_eq!(e.field, "config.bearerToken");
        let e = ClusterCredentials::from_argo_config(
            r#"{"tlsClientConfig":{"insecure":"yes"}}"#,
            "config",
        )
        .unwrap_err();
        assert_eq!(e.field, "config.tlsClientConfig.insecure");
        let e = ClusterCredentials::from_argo_config("[1]", "config").unwrap_err();
        assert_eq!(e.field, "config");
        let e = ClusterCredentials::from_argo_config("{", "config").unwrap_err();
        assert!(e.message.contains("invalid JSON"), "{e:?}");
    }

    #[test]
    fn a_token_with_a_newline_makes_the_credentials_unusable() {
        let (c, unusable) = ClusterCredentials::from_argo_config(
            "{\"bearerToken\":\"s3cret-token\\n\",\"password\":\"p\\u0000w\"}",
            "config",
        )
        .unwrap();
        let fields: Vec<&str> = unusable.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["config.bearerToken", "config.password"]);
        assert_eq!(c.unusable.len(), 2);
        let shown = format!("{:?} {:?}", c.unusable, unusable);
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn debug_never_shows_a_secret() {
        let c = ClusterCredentials {
            bearer_token: Some("s3cret-token".into()),
            password: Some("s3cret-password".into()),
            key_data: Some("s3cret-key".into()),
            proxy_url: Some("http://user:s3cret-proxy@proxy:3128".into()),
            exec: Some(ExecProvider {
                command: "plugin".into(),
                args: vec!["--token=s3cret-arg".into()],
                env: [("SECRET".to_owned(), "s3cret-env".to_owned())].into(),
                ..ExecProvider::default()
            }),
            ..ClusterCredentials::default()
        };
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn reads_every_other_authentication_argo_cd_offers() {
        let (c, unsupported) = ClusterCredentials::from_argo_config(
            r#"{"username":"u","password":"p","proxyUrl":"http://proxy:3128",
                "tlsClientConfig":{"serverName":"api.internal","certData":"Yw==","keyData":"aw=="},
                "execProviderConfig":{"command":"gke-gcloud-auth-plugin","args":["--x"],
                  "env":{"A":"1"},"apiVersion":"client.authentication.k8s.io/v1beta1",
                  "installHint":"install it"}}"#,
            "config",
        )
        .unwrap();
        assert!(unsupported.is_empty());
        assert_eq!(
            (c.username.as_deref(), c.password.as_deref()),
            (Some("u"), Some("p"))
        );
        assert_eq!(c.server_name.as_deref(), Some("api.internal"));
        assert_eq!(c.proxy_url.as_deref(), Some("http://proxy:3128"));
        let exec = c.exec.unwrap();
        assert_eq!(exec.command, "gke-gcloud-auth-plugin");
        assert_eq!(exec.args, ["--x"]);
        assert_eq!(exec.env["A"], "1");
        assert_eq!(exec.install_hint.as_deref(), Some("install it"));
    }

    #[test]
    fn malformed_authentication_names_the_field() {
        for (config, field) in [
            (
                r#"{"execProviderConfig":{"apiVersion":"v"}}"#,
                "config.execProviderConfig.command",
            ),
            (
                r#"{"execProviderConfig":{"command":"c"}}"#,
                "config.execProviderConfig.apiVersion",
            ),
            (
                r#"{"execProviderConfig":{"command":"c","apiVersion":"v","args":[1]}}"#,
                "config.execProviderConfig.args",
            ),
            (
                r#"{"execProviderConfig":{"command":"c","apiVersion":"v","env":{"A":1}}}"#,
                "config.execProviderConfig.env",
            ),
            (
                r#"{"execProviderConfig":"gcloud"}"#,
                "config.execProviderConfig",
            ),
            (r#"{"proxyUrl":"https://proxy"}"#, "config.proxyUrl"),
            (
                r#"{"tlsClientConfig":{"certData":"Yw=="}}"#,
                "config.tlsClientConfig",
            ),
            (r#"{"password":7}"#, "config.password"),
        ] {
            let e = ClusterCredentials::from_argo_config(config, "config").unwrap_err();
            assert_eq!(e.field, field, "{config}: {e:?}");
        }
    }
}
