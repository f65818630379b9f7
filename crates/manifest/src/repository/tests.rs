use crate::{RepoSecretKind, parse_input, repo_config_map_from_value, repo_secret_from_value};

const INPUT: &str = r#"
apiVersion: v1
kind: Secret
metadata:
  name: private-repo
  namespace: argocd
  labels:
    argocd.argoproj.io/secret-type: repository
stringData:
  url: https://git.example.com/team/app.git
  username: deploy
  password: hunter2-token
  project: team-a
  insecure: "true"
  proxy: http://proxy.example.com:3128
  noProxy: .internal,10.0.0.0/8
---
apiVersion: v1
kind: Secret
metadata:
  name: team-creds
  namespace: argocd
  labels:
    argocd.argoproj.io/secret-type: repo-creds
data:
  url: c3NoOi8vZ2l0QGdpdC5leGFtcGxlLmNvbS90ZWFt
  sshPrivateKey: LS0tLS1CRUdJTiBPUEVOU1NIIFBSSVZBVEUgS0VZLS0tLS0Kc2VjcmV0LWtleS1ib2R5Ci0tLS0tRU5EIE9QRU5TU0ggUFJJVkFURSBLRVktLS0tLQo=
  githubAppPrivateKey: eA==
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-ssh-known-hosts-cm
  namespace: argocd
data:
  ssh_known_hosts: "git.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-tls-certs-cm
  namespace: argocd
data:
  Git.Example.com: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  namespace: argocd
data: {}
"#;

#[test]
fn reads_repository_secrets_templates_and_config_maps() {
    let loaded = parse_input(INPUT, "repos.yaml").unwrap();
    let repos = &loaded.value.repositories;
    assert_eq!(repos.secrets.len(), 2);
    let repo = &repos.secrets[0];
    assert_eq!(repo.secret, "Secret argocd/private-repo");
    assert_eq!(repo.kind, RepoSecretKind::Repository);
    assert_eq!(repo.url, "https://git.example.com/team/app.git");
    assert_eq!(repo.project, "team-a");
    assert_eq!(repo.credentials.username.as_deref(), Some("deploy"));
    assert_eq!(repo.credentials.password.as_deref(), Some("hunter2-token"));
    assert!(repo.insecure);
    assert_eq!(repo.proxy.as_deref(), Some("http://proxy.example.com:3128"));
    assert_eq!(repo.no_proxy.as_deref(), Some(".internal,10.0.0.0/8"));
    let template = &repos.secrets[1];
    assert_eq!(template.kind, RepoSecretKind::Template);
    assert_eq!(template.url, "ssh://git@git.example.com/team");
    assert!(
        template
            .credentials
            .ssh_private_key
            .as_deref()
            .is_some_and(|k| k.contains("secret-key-body"))
    );
    assert_eq!(template.unsupported, ["data.githubAppPrivateKey"]);
    assert!(
        repos
            .known_hosts
            .as_deref()
            .is_some_and(|k| k.starts_with("git.example.com ssh-ed25519"))
    );
    assert!(repos.tls_certs.contains_key("git.example.com"));
    // The cluster list is untouched, and the unrelated ConfigMap is named in a warning.
    assert!(loaded.value.fleet.clusters.is_empty());
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(
        loaded.warnings[0]
            .to_string()
            .contains("ConfigMap argocd/argocd-cm")
    );
}

#[test]
fn debug_and_errors_never_show_a_secret() {
    let loaded = parse_input(INPUT, "repos.yaml").unwrap();
    let shown = format!("{:?}", loaded.value.repositories);
    for secret in ["hunter2-token", "deploy", "secret-key-body"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    let bad = serde_json::json!({
        "kind": "Secret",
        "metadata": {"name": "r", "namespace": "argocd",
                     "labels": {"argocd.argoproj.io/secret-type": "repository"}},
        "data": {"url": "aHR0cHM6Ly9h", "password": "c2VjcmV0!!"},
    });
    let e = repo_secret_from_value(&bad, "kubernetes")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Secret argocd/r") && e.contains("data.password"),
        "{e}"
    );
    assert!(!e.contains("c2VjcmV0"), "{e}");
}

#[test]
fn errors_name_the_file_object_and_field() {
    let no_url = r#"{"kind":"Secret","metadata":{"name":"r","namespace":"argocd",
        "labels":{"argocd.argoproj.io/secret-type":"repo-creds"}},"stringData":{"password":"p"}}"#;
    let e = parse_input(no_url, "f.json").unwrap_err().to_string();
    assert!(
        e.contains("f.json") && e.contains("Secret argocd/r") && e.contains("data.url"),
        "{e}"
    );
    let half_cert = r#"{"kind":"Secret","metadata":{"name":"r","namespace":"argocd",
        "labels":{"argocd.argoproj.io/secret-type":"repository"}},
        "stringData":{"url":"https://a","tlsClientCertData":"c"}}"#;
    let e = parse_input(half_cert, "f.json").unwrap_err().to_string();
    assert!(e.contains("tlsClientCertKey"), "{e}");
    let bad_flag = r#"{"kind":"Secret","metadata":{"name":"r","namespace":"argocd",
        "labels":{"argocd.argoproj.io/secret-type":"repository"}},
        "stringData":{"url":"https://a","insecure":"yes"}}"#;
    let e = parse_input(bad_flag, "f.json").unwrap_err().to_string();
    assert!(e.contains("stringData.insecure"), "{e}");
}

#[test]
fn helm_repositories_are_kept_other_types_skipped_and_config_maps_read_alone() {
    let secret = |t: &str| {
        serde_json::json!({
            "kind": "Secret",
            "metadata": {"name": "charts", "namespace": "argocd",
                         "labels": {"argocd.argoproj.io/secret-type": "repository"}},
            "stringData": {"url": "https://charts.example.com", "type": t,
                           "username": "u", "password": "p"},
        })
    };
    // A repo-server renders charts from Helm repositories with their credentials.
    let loaded = repo_secret_from_value(&secret("helm"), "kubernetes").unwrap();
    let helm = loaded.value.expect("kept");
    assert_eq!(helm.repo_type, "helm");
    assert_eq!(helm.credentials.password.as_deref(), Some("p"));
    assert!(loaded.warnings.is_empty());
    let loaded = repo_secret_from_value(&secret("svn"), "kubernetes").unwrap();
    assert!(loaded.value.is_none());
    assert_eq!(loaded.warnings.len(), 1);
    let cm = serde_json::json!({
        "kind": "ConfigMap",
        "metadata": {"name": "argocd-ssh-known-hosts-cm", "namespace": "argocd"},
        "data": {"ssh_known_hosts": "h ssh-ed25519 AAAA"},
    });
    let loaded = repo_config_map_from_value(&cm, "kubernetes").unwrap();
    assert_eq!(
        loaded.value.known_hosts.as_deref(),
        Some("h ssh-ed25519 AAAA")
    );
    let wrong = serde_json::json!({
        "kind": "ConfigMap",
        "metadata": {"name": "argocd-tls-certs-cm", "namespace": "argocd"},
        "data": {"host": 5},
    });
    let e = repo_config_map_from_value(&wrong, "kubernetes")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ConfigMap argocd/argocd-tls-certs-cm") && e.contains("data.host"),
        "{e}"
    );
}
