//! The write log: every write request with its sender (User-Agent, field manager), body,
//! arrival and end; a write whose client gave up during a delay is abandoned and never
//! applied; writes of different senders are judged for overlap from the server's side.

use std::time::Duration;

use fleetshard_kube_sim::{FakeApiServer, FaultAction, Verb, WriteOutcome};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, discovery::ApiResource};
use serde_json::json;

/// A kube-rs client sending `agent` as its User-Agent.
async fn client_as(f: &FakeApiServer, agent: &str) -> Client {
    let kc: Kubeconfig = serde_yaml_kubeconfig(f);
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_str(agent).unwrap(),
    ));
    Client::try_from(config).unwrap()
}

fn serde_yaml_kubeconfig(f: &FakeApiServer) -> Kubeconfig {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    f.write_kubeconfig(&path).unwrap();
    Kubeconfig::read_from(&path).unwrap()
}

fn config_maps(client: Client) -> Api<DynamicObject> {
    let ar = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
    Api::namespaced_with(client, "default", &ar)
}

async fn apply(api: &Api<DynamicObject>, name: &str, value: &str) -> Result<(), kube::Error> {
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": name}, "data": {"v": value}});
    api.patch(
        name,
        &PatchParams::apply("fleetshard").force(),
        &Patch::Apply(&obj),
    )
    .await
    .map(|_| ())
}

#[tokio::test]
async fn writes_are_logged_with_their_sender_and_end() {
    let f = FakeApiServer::start().await.unwrap();
    let a = config_maps(client_as(&f, "fleetshard/1 a/1").await);
    let b = config_maps(client_as(&f, "fleetshard/1 b/7").await);
    apply(&a, "x", "1").await.unwrap();
    apply(&b, "x", "2").await.unwrap();
    // Reads are not writes.
    a.get("x").await.unwrap();
    let log = f.writes();
    assert_eq!(log.len(), 2, "{log:#?}");
    assert_eq!(log[0].user_agent.as_deref(), Some("fleetshard/1 a/1"));
    assert_eq!(log[1].user_agent.as_deref(), Some("fleetshard/1 b/7"));
    assert_eq!(log[0].verb, Verb::Patch);
    assert_eq!(log[0].method, "PATCH");
    assert_eq!(log[0].path, "/api/v1/namespaces/default/configmaps/x");
    assert_eq!(log[0].field_manager.as_deref(), Some("fleetshard"));
    assert_eq!(log[0].object.as_ref().unwrap()["data"]["v"], "1");
    assert_eq!(log[0].outcome, WriteOutcome::Answered(201), "created");
    assert_eq!(log[1].outcome, WriteOutcome::Answered(200));
    assert!(log[0].completed.unwrap() <= log[1].received);
    // One after the other: no overlap.
    assert!(f.write_overlaps().is_empty());
}

/// A write held by a delay whose client gives up is abandoned: never applied, and ended
/// when the connection dropped — not when the delay would have ended.
#[tokio::test]
async fn a_write_whose_client_gave_up_is_abandoned_and_never_applied() {
    let f = FakeApiServer::start().await.unwrap();
    let a = config_maps(client_as(&f, "fleetshard/1 a/1").await);
    let b = config_maps(client_as(&f, "fleetshard/1 b/1").await);
    f.inject(None, FaultAction::Delay(Duration::from_secs(3)), |r| {
        r.user_agent.as_deref() == Some("fleetshard/1 a/1") && r.verb == Some(Verb::Patch)
    });
    let cut = tokio::time::timeout(Duration::from_millis(300), apply(&a, "x", "late")).await;
    assert!(cut.is_err(), "the client gave up");
    // The server notices the closed connection and drops the request.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while f.writes()[0].outcome == WriteOutcome::InFlight {
        assert!(tokio::time::Instant::now() < deadline, "{:#?}", f.writes());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let first = f.writes().remove(0);
    assert_eq!(first.outcome, WriteOutcome::Abandoned);
    assert!(!first.may_apply());
    // Another writer after the abandonment does not overlap it.
    apply(&b, "x", "b").await.unwrap();
    assert!(f.write_overlaps().is_empty(), "{:#?}", f.write_overlaps());
    // Past the delay the abandoned write still never lands.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cm = f.get("v1", "ConfigMap", "default", "x").unwrap();
    assert_eq!(cm["data"]["v"], "b");
}

/// A slow write that is still in the server when another writer's write arrives is an
/// overlap, reported with both.
#[tokio::test]
async fn a_slow_write_still_in_flight_overlaps_the_next_writer() {
    let f = FakeApiServer::start().await.unwrap();
    let a = config_maps(client_as(&f, "fleetshard/1 a/1").await);
    let b = config_maps(client_as(&f, "fleetshard/1 b/1").await);
    f.inject(None, FaultAction::Delay(Duration::from_millis(600)), |r| {
        r.user_agent.as_deref() == Some("fleetshard/1 a/1")
    });
    let slow = tokio::spawn(async move { apply(&a, "x", "a").await });
    while f.writes().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    apply(&b, "x", "b").await.unwrap();
    slow.await.unwrap().unwrap();
    // The slow write landed last: what B wrote is gone.
    let cm = f.get("v1", "ConfigMap", "default", "x").unwrap();
    assert_eq!(cm["data"]["v"], "a");
    let overlaps = f.write_overlaps();
    assert_eq!(overlaps.len(), 1, "{overlaps:#?}");
    assert_eq!(
        overlaps[0].0.user_agent.as_deref(),
        Some("fleetshard/1 a/1")
    );
    assert_eq!(
        overlaps[0].1.user_agent.as_deref(),
        Some("fleetshard/1 b/1")
    );
}

/// Waits (a generous limit) until write `index` of the log has ended.
async fn ended(f: &FakeApiServer, index: usize) -> fleetshard_kube_sim::WriteRecord {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let w = f.writes().remove(index);
        if w.outcome != WriteOutcome::InFlight {
            return w;
        }
        assert!(tokio::time::Instant::now() < deadline, "{w:#?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// "Applied, reply lost": the write is applied, its client hears nothing and gives up
/// not knowing; the log says it was applied.
#[tokio::test]
async fn a_write_whose_reply_is_lost_is_applied_and_never_answered() {
    let f = FakeApiServer::start().await.unwrap();
    let a = config_maps(client_as(&f, "fleetshard/1 a/1").await);
    f.inject(Some(1), FaultAction::LoseReply, |r| {
        r.is(Verb::Patch, "configmaps")
    });
    let cut = tokio::time::timeout(Duration::from_millis(300), apply(&a, "x", "1")).await;
    assert!(cut.is_err(), "no answer came");
    let cm = f.get("v1", "ConfigMap", "default", "x").unwrap();
    assert_eq!(cm["data"]["v"], "1", "applied all the same");
    let w = ended(&f, 0).await;
    assert_eq!(w.outcome, WriteOutcome::ReplyLost(201));
    assert!(w.may_apply());
    // One-shot: the next write is answered.
    apply(&a, "x", "2").await.unwrap();
    assert_eq!(f.writes()[1].outcome, WriteOutcome::Answered(200));
}

/// "Held, then applied after the client gave up": nothing lands while the client waits;
/// the write lands the given time after the server saw the client go, and occupies the
/// server until then.
#[tokio::test]
async fn a_write_served_after_its_client_gave_up_lands_then() {
    let f = FakeApiServer::start().await.unwrap();
    let a = config_maps(client_as(&f, "fleetshard/1 a/1").await);
    let after = Duration::from_millis(200);
    f.inject(Some(1), FaultAction::ServeAfterGiveUp(after), |r| {
        r.is(Verb::Patch, "configmaps")
    });
    let wait = Duration::from_millis(300);
    let cut = tokio::time::timeout(wait, apply(&a, "x", "late")).await;
    assert!(cut.is_err(), "no answer came");
    let w = ended(&f, 0).await;
    assert_eq!(w.outcome, WriteOutcome::AfterGiveUp(201));
    assert!(w.may_apply());
    let gave_up = w.gave_up.expect("the server saw the client go");
    assert!(gave_up > w.received, "{w:#?}");
    assert!(w.completed.unwrap() >= gave_up + after, "{w:#?}");
    let cm = f.get("v1", "ConfigMap", "default", "x").unwrap();
    assert_eq!(cm["data"]["v"], "late");
    assert!(w.received_unix_ms > 0);
}
