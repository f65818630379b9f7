//! Writes bounded by the shard lease as the cluster sees them. A request to a cluster is
//! cut `WRITE_MARGIN` before the lease deadline, but an API server may still serve a
//! request its client gave up on (it was already inside), and may apply one whose answer
//! never arrives. The margin is what keeps such a write before the deadline — after which
//! a successor may write. These tests land writes behind the reconciler's back (the
//! simulated API server's `ServeAfterGiveUp` and `LoseReply`) under paused time, so every
//! instant is exact; the first fails with the margin set to zero.

use std::sync::Arc;
use std::time::Duration;

use super::support::*;
use fleetshard_controller::Reconciler;
use fleetshard_gitops::apply::WRITE_MARGIN;
use fleetshard_manifest::AutoSync;
use fleetshard_testsupport::git::config_map;
use fleetshard_testsupport::kube_api::{FaultAction, RequestInfo, Verb, WriteOutcome, WriteRecord};

/// How long after its client gave up the cluster serves a held write: a property of the
/// cluster (a request already inside the API server), which the margin must exceed.
const LATE: Duration = Duration::from_millis(100);

const AUTO: Option<AutoSync> = Some(AutoSync {
    prune: false,
    self_heal: false,
    allow_empty: false,
});

fn the_apply(r: &RequestInfo) -> bool {
    r.is(Verb::Patch, "configmaps") && !r.dry_run
}

/// The first apply of the ConfigMap once it has ended (time advances while waiting).
async fn ended_apply(env: &SyncEnv) -> WriteRecord {
    for _ in 0..1_000 {
        let found = env.fake.writes().into_iter().find(|w| {
            w.verb == Verb::Patch
                && !w.dry_run
                && w.outcome != WriteOutcome::InFlight
                && w.object.as_ref().is_some_and(|o| o["kind"] == "ConfigMap")
        });
        if let Some(w) = found {
            return w;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no apply ended: {:#?}", env.fake.writes());
}

/// The cluster holds the apply until the reconciler gives up (at the margin before its
/// lease deadline), then applies it `LATE` after: it still lands before the deadline.
#[tokio::test(start_paused = true)]
async fn a_write_served_after_its_client_gave_up_still_lands_before_the_lease_ends() {
    assert!(LATE < WRITE_MARGIN, "the margin covers a late write");
    let env = sync_env(&[("app/cm.yaml", config_map("cm", "v"))], AUTO).await;
    // The lease ends before the call timeout (2 s) would cut the request.
    let until = tokio::time::Instant::now() + Duration::from_millis(1_500);
    let r = env.owner_with(Arc::new(move || Some(until)));
    r.refresh(&key("a")).await.unwrap();
    env.fake
        .inject(None, FaultAction::ServeAfterGiveUp(LATE), the_apply);
    let _ = r.operate(&key("a")).await;
    let w = ended_apply(&env).await;
    assert_eq!(w.outcome, WriteOutcome::AfterGiveUp(201), "{w:#?}");
    let gave_up = w.gave_up.expect("the reconciler gave up");
    assert!(gave_up <= until - WRITE_MARGIN, "cut at the margin: {w:#?}");
    assert!(
        w.completed.unwrap() < until,
        "the write landed after the lease deadline, where a successor may write: {w:#?}"
    );
    assert_eq!(
        env.live("v1", "ConfigMap", "cm").unwrap()["data"]["value"],
        "v"
    );
}

/// The cluster applies the write and the answer is lost: the reconciler does not count
/// it as applied (the resource fails with no answer), and the retry that follows applies
/// it again and succeeds.
#[tokio::test(start_paused = true)]
async fn a_write_whose_reply_is_lost_is_not_counted_and_is_retried() {
    let env = sync_env(&[("app/cm.yaml", config_map("cm", "v"))], AUTO).await;
    env.fake.inject(Some(1), FaultAction::LoseReply, the_apply);
    env.r.refresh(&key("a")).await.unwrap();
    let _ = env.r.operate(&key("a")).await;
    let w = ended_apply(&env).await;
    assert_eq!(w.outcome, WriteOutcome::ReplyLost(201), "{w:#?}");
    let op = env.op().expect("an operation");
    let cm = op
        .sync_result
        .as_ref()
        .and_then(|s| s.resources.iter().find(|r| r.name == "cm").cloned());
    assert!(
        op.phase != "Succeeded" && cm.as_ref().is_none_or(|c| c.status != "Synced"),
        "an apply with no answer is not reported applied: {op:?}"
    );
    assert_eq!(env.sync_to(&env.first).await, "Succeeded");
}
