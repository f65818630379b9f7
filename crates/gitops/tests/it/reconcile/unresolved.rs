//! An app whose destination resolves to no cluster (its cluster Secret deleted, a name
//! misspelt), as Argo CD's controller treats it: its status says so, a sync asked for
//! ends in error, and its deletion completes without deleting anything.

use fleetshard_controller::{Operated, Reconciler};
use fleetshard_core::{App, Destination};
use fleetshard_gitops::reconciler::{Inventory, UnresolvedTarget};
use fleetshard_manifest::{AutoSync, InitiatedBy, SyncRequest};
use fleetshard_testsupport::git::config_map;
use fleetshard_testsupport::kube_api::{FakeApiServer, Verb};
use serde_json::json;

use super::lifecycle::{delete_application, owner_reporting_to};
use super::support::*;

const PRUNE: Option<AutoSync> = Some(AutoSync {
    prune: true,
    self_heal: true,
    allow_empty: false,
});

/// App `a` synced to its cluster, its Application on a control-plane fake, and its owner
/// reporting there.
async fn synced_app() -> (SyncEnv, FakeApiServer) {
    let e = sync_env(&[("app/cm.yaml", config_map("settings", "one"))], PRUNE).await;
    assert_eq!(e.sync_to(&e.first).await, "Succeeded");
    let control = FakeApiServer::start().await.unwrap();
    control.install_argocd_crds().unwrap();
    control.insert(application("a")).unwrap();
    (e, control)
}

/// App `a` as the inventory shows it once its destination names no cluster.
fn unresolve(e: &SyncEnv, destination: Destination, edit: impl FnOnce(&mut UnresolvedTarget)) {
    let spec = match e.inventory.target(&key("a")) {
        Some(t) => t.spec,
        None => e.inventory.unresolved(&key("a")).expect("known").spec,
    };
    let app = App {
        destination,
        ..App::to_server("argocd", "a", "https://unused")
    };
    let mut t = UnresolvedTarget::new(app, spec);
    edit(&mut t);
    e.inventory.insert_unresolved(t);
}

fn gone_server() -> Destination {
    Destination {
        server: Some("https://gone.example".into()),
        ..Destination::default()
    }
}

const GONE_SERVER: &str = "error getting cluster by server \"https://gone.example\": rpc error: \
     code = NotFound desc = cluster \"https://gone.example\" not found";

/// What the app's cluster received since the sync: no write at all.
fn cluster_writes_after(e: &SyncEnv, before: usize) -> Vec<String> {
    e.fake
        .writes()
        .iter()
        .skip(before)
        .filter(|w| w.verb != Verb::Get)
        .map(|w| format!("{:?} {}", w.verb, w.path))
        .collect()
}

#[tokio::test]
async fn its_status_is_unknown_with_argo_cds_invalid_spec_error() {
    let (e, control) = synced_app().await;
    let owner = owner_reporting_to(&e, &control);
    owner.refresh(&key("a")).await.unwrap();
    assert_eq!(app_status(&control, "a")["sync"]["status"], "Synced");
    let before = e.fake.writes().len();
    // By server, then by name, as Argo CD words each.
    for (destination, message) in [
        (gone_server(), GONE_SERVER.to_owned()),
        (
            Destination {
                name: Some("prod".into()),
                ..Destination::default()
            },
            "there are no clusters with this name: prod".to_owned(),
        ),
    ] {
        unresolve(&e, destination, |_| {});
        owner.refresh(&key("a")).await.unwrap();
        let status = app_status(&control, "a");
        assert_eq!(status["sync"]["status"], "Unknown");
        assert_eq!(status["health"]["status"], "Unknown");
        assert_eq!(
            status["conditions"],
            json!([{
                "type": "InvalidSpecError",
                "message": message,
                "lastTransitionTime": NOW,
            }])
        );
        assert_eq!(status["resources"], json!([]), "no resource is compared");
        // Argo CD's `argocd_app_info` shows it, from the anchor's owner.
        let report = owner.app_reports().into_iter().find(|r| r.key == key("a"));
        let report = report.expect("reported");
        assert_eq!(
            (report.sync_status.as_str(), report.health_status.as_str()),
            ("Unknown", "Unknown")
        );
        assert_eq!(report.conditions.get("InvalidSpecError"), Some(&1));
        // Nothing is synced, healed or pruned (its cluster is not there to act on).
        assert!(matches!(owner.operate(&key("a")).await, Ok(Operated::Idle)));
    }
    assert_eq!(cluster_writes_after(&e, before), Vec::<String>::new());
}

#[tokio::test]
async fn a_sync_asked_for_ends_in_error_once() {
    let (e, control) = synced_app().await;
    let owner = owner_reporting_to(&e, &control);
    let before = e.fake.writes().len();
    unresolve(&e, gone_server(), |t| {
        t.spec.sync_request = Some(SyncRequest {
            initiated_by: InitiatedBy {
                username: "alice".into(),
                automated: false,
            },
            ..SyncRequest::default()
        })
    });
    assert!(matches!(
        owner.operate(&key("a")).await,
        Ok(Operated::Finished)
    ));
    let op = app_status(&control, "a")["operationState"].clone();
    assert_eq!(op["phase"], "Error");
    assert_eq!(
        op["message"],
        format!("Failed to get destination cluster: {GONE_SERVER}")
    );
    assert_eq!(op["operation"]["initiatedBy"]["username"], "alice");
    assert_eq!(op["finishedAt"], NOW);
    // The same request (a fleet file keeps it) is not ended again.
    assert!(matches!(owner.operate(&key("a")).await, Ok(Operated::Idle)));
    assert_eq!(cluster_writes_after(&e, before), Vec::<String>::new());
}

#[tokio::test]
async fn its_deletion_removes_argo_cds_finalizers_and_deletes_nothing() {
    let (e, control) = synced_app().await;
    let finalizers = [
        "resources-finalizer.argocd.argoproj.io",
        "post-delete-finalizer.argocd.argoproj.io",
        "example.com/someone-elses",
    ];
    let mut app = application("a");
    app["metadata"]["finalizers"] = json!(finalizers);
    control.insert(app).unwrap();
    let owner = owner_reporting_to(&e, &control);
    let before = e.fake.writes().len();
    delete_application(&control).await;
    unresolve(&e, gone_server(), |t| {
        t.spec.lifecycle.deleting = true;
        t.spec.lifecycle.finalizers = finalizers.map(str::to_owned).to_vec();
    });
    assert!(matches!(
        owner.operate(&key("a")).await,
        Ok(Operated::Finished)
    ));
    let left = control
        .get("argoproj.io/v1alpha1", "Application", "argocd", "a")
        .expect("another controller's finalizer still holds it");
    assert_eq!(
        left["metadata"]["finalizers"],
        json!(["example.com/someone-elses"])
    );
    assert!(
        e.live("v1", "ConfigMap", "settings").is_some(),
        "nothing deleted"
    );
    assert_eq!(cluster_writes_after(&e, before), Vec::<String>::new());
}
