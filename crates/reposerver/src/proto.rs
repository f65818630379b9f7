//! The messages and client generated from `proto/repository.proto` (our own file, Argo
//! CD's field numbers). [`Repository`] and [`RepoCreds`] carry credentials: their `Debug`
//! shows which secret fields are set, never their values.

use std::fmt;

#[allow(missing_docs, clippy::all, clippy::pedantic)]
mod generated {
    tonic::include_proto!("repository");
}

pub use generated::*;

/// `Some("<redacted>")` for a set secret, `None` for an empty one.
fn set(v: &str) -> Option<&'static str> {
    (!v.is_empty()).then_some("<redacted>")
}

impl fmt::Debug for Repository {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Repository")
            .field("repo", &self.repo)
            .field("type", &self.r#type)
            .field("name", &self.name)
            .field("project", &self.project)
            .field("username", &set(&self.username))
            .field("password", &set(&self.password))
            .field("ssh_private_key", &set(&self.ssh_private_key))
            .field("tls_client_cert_data", &set(&self.tls_client_cert_data))
            .field("tls_client_cert_key", &set(&self.tls_client_cert_key))
            .field("bearer_token", &set(&self.bearer_token))
            .field("github_app_private_key", &set(&self.github_app_private_key))
            .field(
                "gcp_service_account_key",
                &set(&self.gcp_service_account_key),
            )
            .field("proxy", &set(&self.proxy))
            .field("no_proxy", &self.no_proxy)
            .field("insecure", &self.insecure)
            .field("insecure_ignore_host_key", &self.insecure_ignore_host_key)
            .field("enable_lfs", &self.enable_lfs)
            .field("enable_oci", &self.enable_oci)
            .field("inherited_creds", &self.inherited_creds)
            .field("force_http_basic_auth", &self.force_http_basic_auth)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for RepoCreds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RepoCreds")
            .field("url", &self.url)
            .field("type", &self.r#type)
            .field("username", &set(&self.username))
            .field("password", &set(&self.password))
            .field("ssh_private_key", &set(&self.ssh_private_key))
            .field("tls_client_cert_data", &set(&self.tls_client_cert_data))
            .field("tls_client_cert_key", &set(&self.tls_client_cert_key))
            .field("bearer_token", &set(&self.bearer_token))
            .field("github_app_private_key", &set(&self.github_app_private_key))
            .field(
                "gcp_service_account_key",
                &set(&self.gcp_service_account_key),
            )
            .field("proxy", &set(&self.proxy))
            .field("no_proxy", &self.no_proxy)
            .field("enable_oci", &self.enable_oci)
            .field("force_http_basic_auth", &self.force_http_basic_auth)
            .finish_non_exhaustive()
    }
}
