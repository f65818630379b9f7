//! Argo CD's tracking methods, read and written.

use serde_json::{Value, json};

use super::*;

fn object(annotations: Value, labels: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "prod", "annotations": annotations, "labels": labels},
    })
}

fn key() -> ResourceKey {
    ResourceKey::new("apps", "Deployment", "prod", "web")
}

fn tracking(method: TrackingMethod, installation_id: &str) -> Tracking {
    Tracking {
        method,
        installation_id: installation_id.to_owned(),
        ..Tracking::default()
    }
}

#[test]
fn annotation_tracking_needs_the_id_of_this_very_object() {
    let t = Tracking::default();
    let ours = object(
        json!({TRACKING_ANNOTATION: "shop:apps/Deployment:prod/web"}),
        json!({}),
    );
    assert!(t.is_tracked_by(&ours, "shop"));
    assert!(!t.is_tracked_by(&ours, "other"));
    // Copied onto another object by an operator: not ours.
    let copied = object(
        json!({TRACKING_ANNOTATION: "shop:apps/Deployment:prod/api"}),
        json!({}),
    );
    assert!(!t.is_tracked_by(&copied, "shop"));
    // The instance label alone does not track under annotation tracking.
    let labelled = object(json!({}), json!({DEFAULT_APP_LABEL_KEY: "shop"}));
    assert!(!t.is_tracked_by(&labelled, "shop"));
}

#[test]
fn label_tracking_reads_the_instance_label_of_the_configured_key() {
    let t = tracking(TrackingMethod::Label, "");
    let labelled = object(json!({}), json!({DEFAULT_APP_LABEL_KEY: "shop"}));
    assert!(t.is_tracked_by(&labelled, "shop"));
    let annotated = object(
        json!({TRACKING_ANNOTATION: "shop:apps/Deployment:prod/web"}),
        json!({}),
    );
    assert!(!t.is_tracked_by(&annotated, "shop"));
    let custom = Tracking {
        label_key: "example.com/app".into(),
        ..t
    };
    assert!(!custom.is_tracked_by(&labelled, "shop"));
    assert!(custom.is_tracked_by(
        &object(json!({}), json!({"example.com/app": "shop"})),
        "shop"
    ));
}

#[test]
fn an_installation_id_makes_other_instances_objects_not_ours() {
    let t = tracking(TrackingMethod::Annotation, "eu-1");
    let stamped = |id: Option<&str>| {
        let mut a = json!({TRACKING_ANNOTATION: "shop:apps/Deployment:prod/web"});
        if let Some(id) = id {
            a[INSTALLATION_ID_ANNOTATION] = json!(id);
        }
        object(a, json!({}))
    };
    assert!(t.is_tracked_by(&stamped(Some("eu-1")), "shop"));
    assert!(!t.is_tracked_by(&stamped(Some("us-1")), "shop"));
    assert!(!t.is_tracked_by(&stamped(None), "shop"));
    // Without an id of our own, any object's id is accepted (as Argo CD).
    assert!(Tracking::default().is_tracked_by(&stamped(Some("us-1")), "shop"));
}

#[test]
fn objects_are_stamped_as_each_method_says() {
    let stamp = |t: &Tracking| {
        let mut o = object(json!({INSTALLATION_ID_ANNOTATION: "old"}), json!({}));
        t.stamp(&mut o, "shop", &key());
        (
            o["metadata"]["annotations"].clone(),
            o["metadata"]["labels"].clone(),
        )
    };
    let (a, l) = stamp(&Tracking::default());
    assert_eq!(
        a,
        json!({TRACKING_ANNOTATION: "shop:apps/Deployment:prod/web"})
    );
    assert_eq!(l, json!({}));
    let (a, l) = stamp(&tracking(TrackingMethod::Annotation, "eu-1"));
    assert_eq!(
        a,
        json!({TRACKING_ANNOTATION: "shop:apps/Deployment:prod/web", INSTALLATION_ID_ANNOTATION: "eu-1"})
    );
    assert_eq!(l, json!({}));
    let (a, l) = stamp(&tracking(TrackingMethod::Label, "eu-1"));
    assert_eq!(
        a,
        json!({INSTALLATION_ID_ANNOTATION: "old"}),
        "label tracking leaves annotations"
    );
    assert_eq!(l, json!({DEFAULT_APP_LABEL_KEY: "shop"}));
    let (a, l) = stamp(&tracking(TrackingMethod::AnnotationAndLabel, ""));
    assert_eq!(
        a,
        json!({TRACKING_ANNOTATION: "shop:apps/Deployment:prod/web"})
    );
    assert_eq!(l, json!({DEFAULT_APP_LABEL_KEY: "shop"}));
    // What is stamped is recognised.
    for t in [
        Tracking::default(),
        tracking(TrackingMethod::Annotation, "eu-1"),
        tracking(TrackingMethod::Label, ""),
        tracking(TrackingMethod::AnnotationAndLabel, "eu-1"),
    ] {
        let mut o = object(json!({}), json!({}));
        t.stamp(&mut o, "shop", &key());
        assert!(t.is_tracked_by(&o, "shop"), "{t:?}");
    }
}

#[test]
fn the_label_beside_the_annotation_fits_a_label_value() {
    let long = format!("{}-_x", "a".repeat(61));
    let mut o = object(json!({}), json!({}));
    tracking(TrackingMethod::AnnotationAndLabel, "").stamp(&mut o, &long, &key());
    let label = o["metadata"]["labels"][DEFAULT_APP_LABEL_KEY]
        .as_str()
        .unwrap();
    assert_eq!(
        label,
        "a".repeat(61),
        "cut to 63, then to an alphanumeric end"
    );
}

#[test]
fn caches_index_every_name_an_object_could_be_tracked_under() {
    let o = object(
        json!({TRACKING_ANNOTATION: "shop:apps/Deployment:prod/web"}),
        json!({DEFAULT_APP_LABEL_KEY: "legacy"}),
    );
    assert_eq!(
        candidate_apps(&o, DEFAULT_APP_LABEL_KEY),
        ["shop", "legacy"]
    );
    assert_eq!(candidate_apps(&o, "other/key"), ["shop"]);
}
