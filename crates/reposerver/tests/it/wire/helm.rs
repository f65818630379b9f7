//! Helm: a chart in Git, a chart of a Helm repository, OCI charts.

use fleetshard_manifest::RepoCredentials;
use fleetshard_reposerver::{ClusterVersions, RepoCredsInput, RepositoryInput};
use serde_json::json;

use super::{common, creds, inputs, raw_json, sent};

#[tokio::test]
async fn helm_chart_in_git() {
    let source = json!({
        "repoURL": "https://git.example/charts.git",
        "path": "charts/web",
        "targetRevision": "main",
        "helm": {
            "valueFiles": ["values.yaml", "values-prod.yaml"],
            "values": "replicas: 2\n",
            "valuesObject": {"image": {"tag": "1.2.3"}, "ingress": {"enabled": true}},
            "parameters": [
                {"name": "service.port", "value": "8080", "forceString": true},
                {"name": "debug", "value": "false"}
            ],
            "fileParameters": [{"name": "config", "path": "files/config.json"}],
            "releaseName": "web-prod",
            "version": "v3",
            "passCredentials": true,
            "ignoreMissingValueFiles": true,
            "skipCrds": true,
            "namespace": "web",
            "kubeVersion": "1.30.0",
            "apiVersions": ["monitoring.coreos.com/v1"],
            "skipTests": true,
            "skipSchemaValidation": true
        }
    });
    let repository = RepositoryInput {
        credentials: creds("bot", "pa55word"),
        project: "team-a".into(),
        ..RepositoryInput::anonymous("https://git.example/charts.git")
    };
    let mut i = inputs(source, repository, "0123abcd");
    i.cluster = Some(
        ClusterVersions::from_discovery(
            "v1.29.3-gke.100",
            [("apps", "v1", "Deployment"), ("", "v1", "Pod")],
        )
        .unwrap(),
    );
    let m = sent(&i).await;
    common(&m, &i);
    assert_eq!(
        m.numbers(),
        [1, 2, 4, 5, 8, 10, 13, 14, 15, 19, 20, 21, 24, 25],
        "fields sent"
    );
    let repo = m.message(1).unwrap();
    assert_eq!(repo.str_or_empty(1), "https://git.example/charts.git");
    assert_eq!(repo.str_or_empty(2), "bot");
    assert_eq!(repo.str_or_empty(3), "pa55word");
    assert_eq!(repo.str_or_empty(20), "team-a", "Repository.project is 20");
    assert_eq!(m.str_or_empty(14), "v1.29.3");
    assert_eq!(
        m.strings(15),
        ["apps/v1", "apps/v1/Deployment", "v1", "v1/Pod"]
    );

    let src = m.message(10).unwrap();
    assert_eq!(src.numbers(), [1, 2, 4, 7]);
    assert_eq!(src.str_or_empty(2), "charts/web");
    assert_eq!(src.str_or_empty(4), "main");
    let helm = src.message(7).unwrap();
    assert_eq!(
        helm.numbers(),
        (1..=15).collect::<Vec<u32>>(),
        "every helm field"
    );
    assert_eq!(helm.strings(1), ["values.yaml", "values-prod.yaml"]);
    let params = helm.messages(2);
    assert_eq!(params[0].str_or_empty(1), "service.port");
    assert_eq!(params[0].str_or_empty(2), "8080");
    assert!(params[0].bool(3));
    assert!(!params[1].bool(3));
    assert_eq!(helm.str_or_empty(3), "web-prod");
    assert_eq!(helm.str_or_empty(4), "replicas: 2\n");
    assert_eq!(helm.messages(5)[0].str_or_empty(2), "files/config.json");
    assert_eq!(helm.str_or_empty(6), "v3");
    assert!(helm.bool(7) && helm.bool(8) && helm.bool(9) && helm.bool(14) && helm.bool(15));
    assert_eq!(
        raw_json(&helm, 10),
        json!({"image": {"tag": "1.2.3"}, "ingress": {"enabled": true}}),
        "valuesObject as RawExtension.raw (1)"
    );
    assert_eq!(helm.str_or_empty(11), "web");
    assert_eq!(helm.str_or_empty(12), "1.30.0");
    assert_eq!(helm.strings(13), ["monitoring.coreos.com/v1"]);
}

#[tokio::test]
async fn helm_repository_chart_with_permitted_repositories() {
    let source = json!({
        "repoURL": "https://charts.example/stable",
        "chart": "nginx",
        "targetRevision": "15.1.0",
        "helm": {"releaseName": "edge", "valuesObject": {"replicaCount": 3}}
    });
    let repository = RepositoryInput {
        repo_type: "helm".into(),
        name: "stable".into(),
        credentials: creds("helm", "chart-pass"),
        ..RepositoryInput::anonymous("https://charts.example/stable")
    };
    let mut i = inputs(source, repository.clone(), "15.1.0");
    i.helm_repos = vec![repository];
    i.helm_repo_creds = vec![RepoCredsInput {
        url: "https://charts.example".into(),
        repo_type: "helm".into(),
        credentials: creds("tmpl", "tmpl-pass"),
        ..RepoCredsInput::default()
    }];
    let m = sent(&i).await;
    common(&m, &i);
    assert_eq!(
        m.numbers(),
        [1, 2, 4, 5, 8, 10, 11, 13, 17, 19, 20, 21, 24, 25]
    );
    let src = m.message(10).unwrap();
    assert_eq!(src.str_or_empty(12), "nginx", "12 chart");
    assert_eq!(src.str_or_empty(4), "15.1.0");
    assert_eq!(
        raw_json(&src.message(7).unwrap(), 10),
        json!({"replicaCount": 3})
    );
    let repos = m.messages(11);
    assert_eq!(repos.len(), 1);
    assert_eq!(repos[0].str_or_empty(1), "https://charts.example/stable");
    assert_eq!(repos[0].str_or_empty(11), "helm", "Repository.type is 11");
    assert_eq!(repos[0].str_or_empty(12), "stable", "Repository.name is 12");
    let creds = m.messages(17);
    assert_eq!(creds[0].str_or_empty(1), "https://charts.example");
    assert_eq!(creds[0].str_or_empty(2), "tmpl");
    assert_eq!(creds[0].str_or_empty(3), "tmpl-pass");
    assert_eq!(creds[0].str_or_empty(12), "helm", "RepoCreds.type is 12");
}

#[tokio::test]
async fn oci_charts() {
    // An oci:// source (Argo CD 3.1+).
    let source = json!({
        "repoURL": "oci://registry.example/charts/app",
        "path": ".",
        "targetRevision": "1.4.0"
    });
    let repository = RepositoryInput {
        repo_type: "oci".into(),
        ..RepositoryInput::anonymous("oci://registry.example/charts/app")
    };
    let i = inputs(source, repository, "1.4.0");
    let m = sent(&i).await;
    let src = m.message(10).unwrap();
    assert_eq!(src.str_or_empty(1), "oci://registry.example/charts/app");
    assert_eq!(m.message(1).unwrap().str_or_empty(11), "oci");

    // A Helm OCI registry without scheme, with a chart: the repository has enableOCI.
    let source = json!({
        "repoURL": "registry.example/charts",
        "chart": "app",
        "targetRevision": "1.4.0"
    });
    let repository = RepositoryInput {
        repo_type: "helm".into(),
        enable_oci: true,
        credentials: RepoCredentials {
            bearer_token: Some("oci-token".into()),
            ..RepoCredentials::default()
        },
        ..RepositoryInput::anonymous("registry.example/charts")
    };
    let i = inputs(source, repository, "1.4.0");
    let m = sent(&i).await;
    let repo = m.message(1).unwrap();
    assert!(repo.bool(14), "Repository.enableOCI is 14");
    assert_eq!(
        repo.str_or_empty(25),
        "oci-token",
        "Repository.bearerToken is 25"
    );
    assert_eq!(m.message(10).unwrap().str_or_empty(12), "app");
}
