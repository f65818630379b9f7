//! The controller never owns more than the coordination runner acts on, over arbitrary
//! interleavings of the two paths ownership takes into it: starts announced on the ordered
//! feed (applied later, in order, by the real [`feed`] task) and stops through the stop
//! hook, called directly on the runner's thread ([`WorkStopHook`]), which may overtake any
//! number of announcements still on their way.
//!
//! A model runner makes random starts and stops of a few clusters, restarts included, with
//! announcements delivered by arbitrary delays and stop hooks polled by hand (a hook runs
//! only when polled, and finishes only once the items it waits for are released). After
//! every event: (1) every cluster the work owns is one the runner acts on — started, its
//! stop hook not returned; (2) once every announcement is delivered, every cluster the
//! runner started and is not stopping is owned (no start lost or wrongly skipped); with no
//! stop pending either, owned equals acting; (3) an item is admitted only on an acting
//! cluster, and a returned hook leaves no item of its cluster in flight; (4) the reconciler
//! is told of a start only while the cluster is owned and acting. A failure is shrunk and
//! stored by proptest in `proptest-regressions/runtime/feed_props.txt`, replayed first on
//! every later run.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use fleetshard_coord::ownership::{Ownership, OwnershipChange, StopHook};
use fleetshard_core::{App, Cluster};
use futures::FutureExt;
use futures::future::BoxFuture;
use prometheus_client::registry::Registry;
use proptest::prelude::*;
use tokio::sync::mpsc;

use super::tests::change;
use super::{StopMode, WorkStopHook, feed};
use crate::AppKey;
use crate::processor::{Operated, ReconcileError, Reconciler};
use crate::queue::RateLimiterConfig;
use crate::shard_work::{Admission, InFlight, ShardWork};

const CLUSTERS: usize = 3;

fn cluster(i: usize) -> String {
    format!("c{i}")
}

fn app(i: usize) -> AppKey {
    AppKey::new("argocd", &format!("a{i}"))
}

/// One event of the model.
#[derive(Debug, Clone)]
enum Op {
    /// The runner starts an idle cluster: its announcement is queued for the feed.
    Start(usize),
    /// The runner stops an acting cluster: it makes the hook's future (not yet polled).
    Stop(usize),
    /// The feed receives and applies up to this many queued announcements, in order.
    Deliver(usize),
    /// The runner's thread polls the cluster's pending stop hook once.
    PollStop(usize),
    /// A worker asks to admit an item of the cluster's app, and holds it if admitted.
    Admit(usize),
    /// A worker finishes one of the items it holds (by index, modulo how many).
    Release(usize),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let c = 0..CLUSTERS;
    prop::collection::vec(
        prop_oneof![
            4 => c.clone().prop_map(Op::Start),
            4 => c.clone().prop_map(Op::Stop),
            3 => (1usize..4).prop_map(Op::Deliver),
            4 => c.clone().prop_map(Op::PollStop),
            2 => c.prop_map(Op::Admit),
            2 => (0usize..4).prop_map(Op::Release),
        ],
        1..80,
    )
}

/// What the runner does with one cluster.
enum Runner {
    /// Not started, or its last stop hook returned.
    Idle,
    /// Started (announced); no stop yet.
    Acting,
    /// Stopped by the runner, whose hook has not returned: it still counts as acting.
    Stopping(BoxFuture<'static, ()>),
}

/// Records each start the reconciler is told of, with whether the work owned it then.
#[derive(Default)]
struct Told(Mutex<Vec<(String, bool)>>);

impl Reconciler for Told {
    async fn refresh(&self, _: &AppKey) -> Result<(), ReconcileError> {
        Ok(())
    }
    async fn operate(&self, _: &AppKey) -> Result<Operated, ReconcileError> {
        Ok(Operated::Idle)
    }
    fn cluster_started(self: &std::sync::Arc<Self>, cluster: &str, still_owned: &dyn Fn() -> bool) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((cluster.to_owned(), still_owned()));
    }
}

/// The model runner, the real work and the real feed task between them.
struct Model {
    work: std::sync::Arc<ShardWork>,
    hook: WorkStopHook,
    told: std::sync::Arc<Told>,
    /// How many of `told`'s starts were checked.
    told_seen: usize,
    runner: Vec<Runner>,
    /// Announcements sent and not yet received by the feed, oldest first.
    queued: VecDeque<OwnershipChange>,
    to_feed: mpsc::UnboundedSender<OwnershipChange>,
    applied: mpsc::UnboundedReceiver<OwnershipChange>,
    held: Vec<InFlight>,
    /// What happened so far, for the failure message.
    log: Vec<String>,
}

impl Model {
    fn new() -> Self {
        let work =
            ShardWork::registered(RateLimiterConfig::default(), &mut Registry::default()).unwrap();
        let clusters: Vec<Cluster> = (0..CLUSTERS)
            .map(|i| Cluster::new(&cluster(i), &format!("https://{}", cluster(i))))
            .collect();
        let apps: Vec<App> = (0..CLUSTERS)
            .map(|i| App::to_server("argocd", &format!("a{i}"), &format!("https://c{i}")))
            .collect();
        work.set_inventory(&clusters, &apps);
        let told = std::sync::Arc::new(Told::default());
        let (to_feed, events) = mpsc::unbounded_channel();
        let (applied, _task) = feed(work.clone(), told.clone(), events, StopMode::Gated);
        Model {
            hook: WorkStopHook(work.clone()),
            work,
            told,
            told_seen: 0,
            runner: (0..CLUSTERS).map(|_| Runner::Idle).collect(),
            queued: VecDeque::new(),
            to_feed,
            applied,
            held: Vec::new(),
            log: Vec::new(),
        }
    }

    fn acting(&self, i: usize) -> bool {
        !matches!(self.runner[i], Runner::Idle)
    }

    /// Runs one event, then checks every invariant; `Err` names the first one broken.
    async fn step(&mut self, op: &Op) -> Result<(), String> {
        self.log.push(format!("{op:?}"));
        match *op {
            Op::Start(i) => {
                if matches!(self.runner[i], Runner::Idle) {
                    self.runner[i] = Runner::Acting;
                    self.queued
                        .push_back(change(Ownership::Started(cluster(i))));
                }
            }
            Op::Stop(i) => {
                if matches!(self.runner[i], Runner::Acting) {
                    self.runner[i] = Runner::Stopping(self.hook.stop(cluster(i)));
                }
            }
            Op::Deliver(n) => {
                for _ in 0..n {
                    let Some(c) = self.queued.pop_front() else {
                        break;
                    };
                    self.to_feed.send(c).map_err(|_| "the feed ended")?;
                    // The feed passes an event on once it took effect.
                    self.applied.recv().await.ok_or("the feed ended")?;
                }
            }
            Op::PollStop(i) => self.poll_stop(i)?,
            Op::Admit(i) => {
                if let Admission::Admitted(g) = self.work.admit(&app(i)) {
                    if !self.acting(i) {
                        return Err(format!(
                            "admitted an item of c{i}, which the runner does not act on"
                        ));
                    }
                    self.held.push(g);
                }
            }
            Op::Release(k) => {
                if !self.held.is_empty() {
                    let k = k % self.held.len();
                    drop(self.held.swap_remove(k));
                }
            }
        }
        self.check()
    }

    /// Polls cluster `i`'s stop hook once, if one is pending; when it returns the runner
    /// considers the cluster stopped, and reports the stop on the feed after its starts.
    fn poll_stop(&mut self, i: usize) -> Result<(), String> {
        let Runner::Stopping(hook) = &mut self.runner[i] else {
            return Ok(());
        };
        if hook.poll_unpin(&mut Context::from_waker(Waker::noop())) == Poll::Pending {
            return Ok(());
        }
        self.runner[i] = Runner::Idle;
        let c = cluster(i);
        if self.work.in_flight(&c) != 0 || self.work.owns(&c) {
            return Err(format!(
                "{c}'s stop hook returned with its work still owned or running"
            ));
        }
        self.queued.push_back(change(Ownership::Stopped(c)));
        Ok(())
    }

    fn check(&mut self) -> Result<(), String> {
        let owned: BTreeSet<String> = self.work.owned().into_iter().collect();
        let acting: BTreeSet<String> = (0..CLUSTERS)
            .filter(|&i| self.acting(i))
            .map(cluster)
            .collect();
        let started: BTreeSet<String> = (0..CLUSTERS)
            .filter(|&i| matches!(self.runner[i], Runner::Acting))
            .map(cluster)
            .collect();
        if !owned.is_subset(&acting) {
            return Err(format!(
                "the work owns {owned:?}, the runner acts on {acting:?} only"
            ));
        }
        if self.queued.is_empty() && !started.is_subset(&owned) {
            return Err(format!(
                "every announcement delivered, the runner started {started:?}, the work owns {owned:?}"
            ));
        }
        // The starts told during this event (the runner's state did not change during a
        // delivery, so it is the state they were told in).
        let told = self
            .told
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let new = told.get(self.told_seen..).unwrap_or_default();
        if let Some((c, _)) = new.iter().find(|(c, owned)| !owned || !acting.contains(c)) {
            return Err(format!(
                "the reconciler was told of {c}'s start while not owned or acting"
            ));
        }
        self.told_seen = told.len();
        Ok(())
    }

    /// Lets everything settle: items finished, stops returned, announcements delivered;
    /// then owned must equal acting. Then starts every idle cluster once more: a skip left
    /// over from a revoke would leave one of them unowned.
    async fn settle(&mut self) -> Result<(), String> {
        self.held.clear();
        for round in 0..2 {
            for i in 0..CLUSTERS {
                self.step(&Op::PollStop(i)).await?;
                if let Runner::Stopping(_) = self.runner[i] {
                    return Err(format!(
                        "c{i}'s stop hook did not return with no item in flight"
                    ));
                }
            }
            self.step(&Op::Deliver(usize::MAX)).await?;
            let owned: BTreeSet<String> = self.work.owned().into_iter().collect();
            let acting: BTreeSet<String> = (0..CLUSTERS)
                .filter(|&i| self.acting(i))
                .map(cluster)
                .collect();
            if owned != acting {
                return Err(format!(
                    "settled (round {round}): the work owns {owned:?}, the runner acts on {acting:?}"
                ));
            }
            for i in 0..CLUSTERS {
                self.step(&Op::Start(i)).await?;
            }
        }
        Ok(())
    }
}

/// Runs `ops` on a fresh model under paused time; `Err`: the broken invariant, with the
/// events that led to it.
fn run(ops: &[Op]) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut m = Model::new();
        let mut result = Ok(());
        for op in ops {
            result = m.step(op).await;
            if result.is_err() {
                break;
            }
        }
        if result.is_ok() {
            result = m.settle().await;
        }
        result.map_err(|e| format!("{e}\nafter {}", m.log.join(", ")))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Starts on the ordered feed and stops through the hook, interleaved at random
    /// (restarts with announcements in flight included), never make the controller own a
    /// cluster the runner does not act on, and lose no start.
    #[test]
    fn the_work_never_owns_more_than_the_runner_acts_on(ops in ops()) {
        if let Err(e) = run(&ops) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The shape of the defect fixed by `ShardWork::revoke_cluster` and the counted skips,
/// spelled out: three acquisitions of one cluster, each stopped before its announcement
/// arrived, the second and third before the first arrived.
#[test]
fn three_acquisitions_stopped_before_their_announcements_arrive() {
    use Op::*;
    let ops = [
        Start(0),
        Stop(0),
        PollStop(0),
        Start(0),
        Stop(0),
        PollStop(0),
        Start(0),
        Deliver(2),
        Stop(0),
        PollStop(0),
        Deliver(usize::MAX),
    ];
    run(&ops).unwrap();
}
