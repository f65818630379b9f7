//! A cluster Secret's credentials as kube's client configuration.

use kube::Config;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

use super::ClusterAccess;

/// The client configuration for a cluster Secret's credentials: a kubeconfig, which is
/// the documented way to give kube a CA bundle as PEM and a token.
pub(super) async fn kubeconfig_config(access: &ClusterAccess) -> Result<Config, String> {
    let c = &access.credentials;
    if !c.unusable.is_empty() {
        return Err(format!(
            "the cluster Secret's credentials cannot be used ({}); nothing is sent to this \
             cluster rather than reaching it without them",
            c.unusable.join("; ")
        ));
    }
    let mut cluster = json!({"server": access.server});
    let mut user = json!({});
    let set = |map: &mut serde_json::Value, key: &str, value: &Option<String>| {
        if let Some(v) = value {
            map[key] = json!(v);
        }
    };
    set(&mut cluster, "certificate-authority-data", &c.ca_data);
    set(&mut cluster, "tls-server-name", &c.server_name);
    set(&mut cluster, "proxy-url", &c.proxy_url);
    // With awsAuthConfig, as in Argo CD, the EKS token (a layer of the client) is the
    // authentication: the token, basic auth and exec plugin are not used.
    let aws = c.aws.is_some();
    if !aws {
        set(&mut user, "token", &c.bearer_token);
        set(&mut user, "username", &c.username);
        set(&mut user, "password", &c.password);
    }
    set(&mut user, "client-certificate-data", &c.cert_data);
    set(&mut user, "client-key-data", &c.key_data);
    if c.insecure {
        cluster["insecure-skip-tls-verify"] = json!(true);
    }
    if let Some(exec) = c.exec.as_ref().filter(|_| !aws) {
        // As kubectl runs a credential plugin: its own environment plus `env`, never
        // interactive; kube caches the credential until its `expirationTimestamp`.
        let env: Vec<_> = exec
            .env
            .iter()
            .map(|(name, value)| json!({"name": name, "value": value}))
            .collect();
        user["exec"] = json!({
            "command": exec.command,
            "args": exec.args,
            "env": env,
            "apiVersion": exec.api_version,
            "installHint": exec.install_hint,
            "interactiveMode": "Never",
        });
    }
    let kubeconfig: Kubeconfig = serde_json::from_value(json!({
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }))
    .map_err(|e| e.to_string())?;
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())
}
