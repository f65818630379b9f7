use serde_json::json;

use super::*;
use crate::settings::TrackingMethod;

fn anonymous(url: &str) -> RepositoryInput {
    RepositoryInput::anonymous(url)
}

#[test]
fn ref_sources_are_keyed_and_take_the_synced_revision() {
    let sources = [
        json!({"repoURL": "https://charts.example", "chart": "web", "targetRevision": "1.0"}),
        json!({"repoURL": "https://git.example/values", "targetRevision": "main", "ref": "values"}),
        json!({"repoURL": "https://charts.example", "chart": "db", "targetRevision": "2.0", "ref": "db_chart-2"}),
    ];
    let refs = ref_sources(
        &sources,
        &["a".into(), "".into(), "2.0.1".into()],
        anonymous,
    )
    .unwrap();
    let got: Vec<_> = refs
        .iter()
        .map(|r| {
            (
                r.key.as_str(),
                r.repository.repo.as_str(),
                r.target_revision.as_str(),
                r.chart.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("$values", "https://git.example/values", "main", ""),
            ("$db_chart-2", "https://charts.example", "2.0.1", "db"),
        ]
    );
}

#[test]
fn bad_or_repeated_refs_are_refused_as_argo_cd_refuses_them() {
    let bad = [json!({"repoURL": "r", "ref": "my.values"})];
    let err = ref_sources(&bad, &[], anonymous).unwrap_err().to_string();
    assert!(
        err.starts_with("spec.sources[0].ref: \"my.values\" may contain only"),
        "{err}"
    );
    let twice = [
        json!({"repoURL": "r", "ref": "v"}),
        json!({"repoURL": "s", "ref": "v"}),
    ];
    let err = ref_sources(&twice, &[], anonymous).unwrap_err().to_string();
    assert!(err.starts_with("spec.sources[1].ref:"), "{err}");
}

#[test]
fn an_unknown_source_field_stops_the_request() {
    let inputs = ManifestInputs::new(
        json!({"repoURL": "r", "hydrate": true}),
        anonymous("r"),
        "main",
        "app",
    );
    assert_eq!(
        build_request(&inputs).unwrap_err(),
        RequestError::UnknownField {
            path: "spec.source.hydrate".into()
        }
    );
}

#[test]
fn tracking_methods_are_argo_cds_strings() {
    assert_eq!(TrackingMethod::default().as_str(), "annotation");
    assert_eq!(TrackingMethod::Label.as_str(), "label");
    assert_eq!(
        TrackingMethod::AnnotationAndLabel.as_str(),
        "annotation+label"
    );
}
