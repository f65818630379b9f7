//! What goes on the wire for each kind of source, checked by field number against what
//! Argo CD's controller sends (numbers from the repo-server's `ManifestRequest` and Argo
//! CD's `generated.proto`; see `proto/repository.proto`).

use std::collections::BTreeMap;
use std::time::Duration;

use fleetshard_manifest::RepoCredentials;
use fleetshard_reposerver::{ManifestInputs, ProjectInput, RepositoryInput, build_request};
use fleetshard_testsupport::repo_server::Answer;
use fleetshard_testsupport::repo_server::wire::WireMessage;
use serde_json::Value;

use super::plaintext;

mod helm;
mod others;

pub(super) fn creds(user: &str, password: &str) -> RepoCredentials {
    RepoCredentials {
        username: Some(user.into()),
        password: Some(password.into()),
        ..RepoCredentials::default()
    }
}

/// Sends `inputs` to a fake and returns the request as the fake decoded it.
pub(super) async fn sent(inputs: &ManifestInputs) -> WireMessage {
    let (fake, client) = plaintext().await;
    fake.answer_all(
        Answer::rendered(
            &[r#"{"kind":"ConfigMap","apiVersion":"v1"}"#],
            "f00d",
            "Helm",
        ),
        Duration::ZERO,
    );
    let request = build_request(inputs).unwrap();
    let rendered = client.generate_manifest(request).await.unwrap();
    assert_eq!(rendered.revision, "f00d");
    assert_eq!(rendered.source_type, "Helm");
    assert_eq!(rendered.manifests[0]["kind"], "ConfigMap");
    let mut requests = fake.requests();
    assert_eq!(requests.len(), 1);
    requests.remove(0)
}

/// Checks the fields every request carries, whatever the source.
pub(super) fn common(m: &WireMessage, inputs: &ManifestInputs) {
    assert_eq!(m.str_or_empty(2), inputs.revision, "2 revision");
    assert_eq!(
        m.str_or_empty(4),
        "app.kubernetes.io/instance",
        "4 appLabelKey"
    );
    assert_eq!(m.str_or_empty(5), inputs.app_name, "5 appName");
    assert_eq!(m.str_or_empty(8), inputs.namespace, "8 namespace");
    assert!(m.message(13).is_some(), "13 kustomizeOptions always sent");
    assert_eq!(m.str_or_empty(19), "annotation", "19 trackingMethod");
    let enabled = m.bool_map(20);
    let want: BTreeMap<String, bool> = ["Directory", "Helm", "Kustomize", "Plugin"]
        .into_iter()
        .map(|t| (t.to_owned(), true))
        .collect();
    assert_eq!(enabled, want, "20 enabledSourceTypes");
    assert_eq!(
        m.message(21).unwrap().strings(1),
        ["https", "http"],
        "21 helmOptions.valuesFileSchemes"
    );
    assert_eq!(m.str_or_empty(25), inputs.project.name, "25 projectName");
    assert_eq!(
        m.strings(24),
        inputs.project.source_repos,
        "24 projectSourceRepos"
    );
}

pub(super) fn inputs(source: Value, repository: RepositoryInput, revision: &str) -> ManifestInputs {
    let mut i = ManifestInputs::new(source, repository, revision, "guestbook");
    i.namespace = "prod".into();
    i.project = ProjectInput {
        name: "team-a".into(),
        source_repos: vec!["https://git.example/*".into()],
    };
    i
}

pub(super) fn raw_json(m: &WireMessage, n: u32) -> Value {
    serde_json::from_slice(&m.message(n).unwrap().bytes(1).unwrap()).unwrap()
}
