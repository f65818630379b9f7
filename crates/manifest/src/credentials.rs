//! How to reach a cluster: the `config` key of an Argo CD cluster Secret, read as far as
//! fleetshard's reconciler can use it.
//!
//! Argo CD's `config` is a JSON object (`ClusterConfig` in its API): `bearerToken`,
//! `username`/`password`, `tlsClientConfig` (`insecure`, `serverName`, `caData`,
//! `certData`, `keyData`), `execProviderConfig`, `awsAuthConfig`, `disableCompression`,
//! `proxyUrl`. fleetshard reads `bearerToken`, `tlsClientConfig.insecure` and
//! `tlsClientConfig.caData`. Any other authentication field that is set is named in a
//! warning: the reconciler reaches that cluster without it, so a user sees why it is
//! refused instead of guessing. A field of the wrong type, or `config` that is not a JSON
//! object, is an error naming the field (the Secret keeps its last good version).

use std::fmt;

use serde_json::Value;

/// Credentials for one cluster's API server. `Debug` never prints the token.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ClusterCredentials {
    /// `bearerToken`.
    pub bearer_token: Option<String>,
    /// `tlsClientConfig.insecure`: do not verify the server's certificate.
    pub insecure: bool,
    /// `tlsClientConfig.caData`: base64 of the PEM CA bundle.
    pub ca_data: Option<String>,
    /// Argo CD's built-in in-cluster entry, which has no Secret: reach the API server as
    /// the pod's own service account (its token and CA as Kubernetes mounts them, the
    /// address from `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT`), as Argo CD does.
    /// The other fields are unused then.
    pub pod_service_account: bool,
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
        f.debug_struct("ClusterCredentials")
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "<redacted>"),
            )
            .field("insecure", &self.insecure)
            .field("ca_data", &self.ca_data.as_ref().map(|c| c.len()))
            .field("pod_service_account", &self.pod_service_account)
            .finish()
    }
}

/// Set fields of `config` that fleetshard does not use to authenticate.
const UNSUPPORTED: [&str; 7] = [
    "/username",
    "/password",
    "/tlsClientConfig/certData",
    "/tlsClientConfig/keyData",
    "/execProviderConfig",
    "/awsAuthConfig",
    "/proxyUrl",
];

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
    /// (`stringData.config`, say). Returns the credentials and the set fields that are not
    /// supported (named under `field`, for a warning); a field of the wrong type is an
    /// error naming it.
    pub fn from_argo_config(
        config: &str,
        field: &str,
    ) -> Result<(Self, Vec<String>), ConfigProblem> {
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
            match v.pointer(ptr) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if s.is_empty() => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(problem(&name(ptr), "not a string".to_owned())),
            }
        };
        let insecure = match v.pointer("/tlsClientConfig/insecure") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(problem(
                    &name("/tlsClientConfig/insecure"),
                    "not a boolean".to_owned(),
                ));
            }
        };
        let credentials = ClusterCredentials {
            bearer_token: text("/bearerToken")?,
            insecure,
            ca_data: text("/tlsClientConfig/caData")?,
            pod_service_account: false,
        };
        let unsupported = UNSUPPORTED
            .iter()
            .filter(|ptr| match v.pointer(ptr) {
                None | Some(Value::Null) => false,
                Some(Value::String(s)) => !s.is_empty(),
                Some(Value::Object(o)) => !o.is_empty(),
                Some(_) => true,
            })
            .map(|ptr| name(ptr))
            .collect();
        Ok((credentials, unsupported))
    }
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
    fn names_unsupported_authentication() {
        let (c, unsupported) = ClusterCredentials::from_argo_config(
            r#"{"awsAuthConfig":{"clusterName":"x"},"tlsClientConfig":{"certData":"Yw==","insecure":false},"username":""}"#,
            "config",
        )
        .unwrap();
        assert_eq!(c, ClusterCredentials::default());
        assert_eq!(
            unsupported,
            ["config.tlsClientConfig.certData", "config.awsAuthConfig"]
        );
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
    fn debug_never_shows_the_token() {
        let c = ClusterCredentials {
            bearer_token: Some("s3cret".into()),
            ..ClusterCredentials::default()
        };
        assert!(!format!("{c:?}").contains("s3cret"));
    }
}
