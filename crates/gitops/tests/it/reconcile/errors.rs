//! Broken apps and unreachable clusters show on the app's status (the Application object's
//! status subresource on a control-plane fake) and never stop the other apps. As Argo
//! CD's controller, a source that cannot be rendered is tried again at the next periodic
//! refresh or change (never in a loop), an unreachable cluster after 10 s.

use std::sync::Arc;
use std::time::Duration;

use super::support::*;
use fleetshard_controller::{Operated, ReconcileError, Reconciler};
use fleetshard_gitops::reconciler::{MemorySink, StaticInventory, StatusSink};
use fleetshard_manifest::AutoSync;
use fleetshard_testsupport::git::{Git, config_map};
use fleetshard_testsupport::kube_api::FakeApiServer;

const AUTO: Option<AutoSync> = Some(AutoSync {
    prune: true,
    self_heal: true,
    allow_empty: false,
});

#[tokio::test]
async fn a_bad_manifest_a_missing_repo_or_revision_shows_on_the_app_and_others_go_on() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("good/cm.yaml", &config_map("good", "1"));
    git.write(
        "bad/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: [not, a, map\n",
    );
    git.commit("initial");
    let cluster = FakeApiServer::start().await.unwrap();
    let control = FakeApiServer::start().await.unwrap();
    // Argo CD's CRD: every status written is checked against its schema.
    control.install_argocd_crds().unwrap();
    let inventory = Arc::new(StaticInventory::default());
    let c1 = access("c1", &cluster);
    let missing_repo = tmp.path().join("no-such-repo").display().to_string();
    for (name, repo, rev, path) in [
        ("good", git.path(), "main", "good"),
        ("bad", git.path(), "main", "bad"),
        ("norepo", missing_repo, "main", "good"),
        ("norev", git.path(), "no-such-branch", "good"),
    ] {
        inventory.insert(target(name, &repo, rev, path, c1.clone(), AUTO));
        control.insert(application(name)).unwrap();
    }
    let sink = Arc::new(sink_for(&control));
    let r = reconciler(
        &inventory,
        repos(&tmp.path().join("cache")),
        live_options(),
        sink,
        always(),
    );

    // Every source problem is recorded and waits for the next periodic refresh or a change
    // (a missing repository or revision too: Argo CD does not re-queue a failed comparison).
    for app in ["bad", "norepo", "norev"] {
        r.refresh(&key(app)).await.unwrap();
    }
    r.refresh(&key("good")).await.unwrap();
    assert_eq!(r.operate(&key("good")).await.unwrap(), Operated::Finished);
    r.refresh(&key("good")).await.unwrap();
    for app in ["bad", "norepo", "norev"] {
        assert_eq!(r.operate(&key(app)).await.unwrap(), Operated::Idle, "{app}");
    }

    for (app, expect) in [
        ("bad", "cm.yaml"),
        ("norepo", "not found"),
        ("norev", "revision \"no-such-branch\" not found"),
    ] {
        let s = app_status(&control, app);
        assert_eq!(s["sync"]["status"], "Unknown", "{app}: {s}");
        assert_eq!(s["conditions"][0]["type"], "ComparisonError", "{app}: {s}");
        let message = s["conditions"][0]["message"].as_str().unwrap();
        assert!(message.contains(expect), "{app}: {message}");
        assert_eq!(s["reconciledAt"], NOW);
    }
    let good = app_status(&control, "good");
    assert_eq!(good["sync"]["status"], "Synced", "{good}");
    assert_eq!(good["sync"]["revision"].as_str().unwrap().len(), 40);
    assert_eq!(good["health"]["status"], "Healthy");
    assert!(good.get("conditions").is_none(), "{good}");
    assert_eq!(good["resources"][0]["kind"], "ConfigMap");
    assert_eq!(good["resources"][0]["status"], "Synced");
    assert_eq!(good["operationState"]["phase"], "Succeeded");
    assert_eq!(
        good["operationState"]["syncResult"]["resources"][0]["status"],
        "Synced"
    );
    assert!(cluster.get("v1", "ConfigMap", "default", "good").is_some());
    // The recorded operation reads back from the Application (what a new owner learns).
    let op = sink_for(&control)
        .last_operation(&key("good"))
        .await
        .unwrap()
        .expect("recorded");
    assert_eq!(op.phase, "Succeeded");
    assert_eq!(
        Some(op.sync_result.unwrap().revision),
        good["sync"]["revision"].as_str().map(str::to_owned)
    );
    assert_eq!(
        sink_for(&control).last_operation(&key("bad")).await,
        Ok(None)
    );

    // Fixing the manifest clears the error.
    git.write("bad/cm.yaml", &config_map("fixed", "1"));
    git.commit("fix");
    r.refresh(&key("bad")).await.unwrap();
    let s = app_status(&control, "bad");
    assert_eq!(s["sync"]["status"], "OutOfSync", "{s}");
    assert!(s.get("conditions").is_none(), "{s}");
}

#[tokio::test]
async fn an_unreachable_cluster_is_retried_later_and_shows_on_the_app() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("app/cm.yaml", &config_map("cm", "1"));
    git.commit("initial");
    let partitioned = FakeApiServer::start().await.unwrap();
    let dropped = FakeApiServer::start().await.unwrap();
    let healthy = FakeApiServer::start().await.unwrap();
    let inventory = Arc::new(StaticInventory::default());
    for (name, fake) in [("p", &partitioned), ("d", &dropped), ("h", &healthy)] {
        inventory.insert(target(
            name,
            &git.path(),
            "main",
            "app",
            access(name, fake),
            AUTO,
        ));
    }
    let sink = MemorySink::new();
    let r = reconciler(
        &inventory,
        repos(&tmp.path().join("cache")),
        live_options(),
        sink.clone(),
        always(),
    );
    for app in ["p", "d", "h"] {
        r.refresh(&key(app)).await.unwrap();
        assert_eq!(r.operate(&key(app)).await.unwrap(), Operated::Finished);
    }
    partitioned.partition(|_| true);
    drop(dropped);
    for app in ["p", "d"] {
        let message = eventually(Duration::from_secs(20), "retry later", || async {
            match r.refresh(&key(app)).await {
                // Tried again after Argo CD's 10 s between attempts at a cluster.
                Err(ReconcileError::RetryAfter { reason, after }) => {
                    assert_eq!(after, Duration::from_secs(10));
                    Some(reason)
                }
                _ => None,
            }
        })
        .await;
        assert!(message.contains("unreachable"), "{app}: {message}");
        let s = sink.get(&key(app)).unwrap().comparison.unwrap();
        assert_eq!(s.sync.status, "Unknown");
        assert!(s.conditions[0].message.contains("unreachable"), "{app}");
    }
    // The healthy cluster's app is unaffected.
    r.refresh(&key("h")).await.unwrap();
    assert_eq!(
        sink.get(&key("h")).unwrap().comparison.unwrap().sync.status,
        "Synced"
    );

    // Healed: the app comes back.
    partitioned.heal();
    eventually(Duration::from_secs(20), "recovery", || async {
        r.refresh(&key("p")).await.ok()?;
        let s = sink.get(&key("p")).unwrap().comparison.unwrap();
        (s.sync.status == "Synced").then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_status_beyond_the_size_limit_leaves_an_unknown_error_until_one_fits() {
    let e = sync_env(&[("app/cm.yaml", config_map("settings", "1"))], None).await;
    let control = FakeApiServer::start().await.unwrap();
    control.install_argocd_crds().unwrap();
    control.insert(application("a")).unwrap();
    let owner = super::lifecycle::owner_reporting_to(&e, &control);
    let unknown_errors = || -> Vec<String> {
        app_status(&control, "a")["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["type"] == "UnknownError")
            .map(|c| c["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    // The API server refuses the status as too large (Request Entity Too Large).
    let too_large = control.fail_next(1, 413, |r| {
        r.is(
            fleetshard_testsupport::kube_api::Verb::Patch,
            "applications",
        )
    });
    owner.refresh(&key("a")).await.unwrap();
    let errors = unknown_errors();
    assert_eq!(errors.len(), 1, "{:#}", app_status(&control, "a"));
    assert!(errors[0].contains("size limit"), "{errors:?}");
    control.remove_fault(too_large);
    owner.refresh(&key("a")).await.unwrap();
    assert!(unknown_errors().is_empty());
    assert_eq!(app_status(&control, "a")["sync"]["status"], "OutOfSync");
}
