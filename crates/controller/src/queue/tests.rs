//! The work queue under paused tokio time.

use std::collections::HashMap;
use std::sync::Mutex as StdMutex;

use prometheus_client::registry::Registry;
use proptest::prelude::*;
use tokio::time::{advance, sleep, timeout};

use super::*;

fn queue<K: Clone + Eq + Hash>() -> WorkQueue<K> {
    WorkQueue::new(RateLimiterConfig::default(), None).unwrap()
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// `get` with a short timeout: `None` when nothing is handed out.
async fn try_get<K: Clone + Eq + Hash>(q: &WorkQueue<K>) -> Option<K> {
    timeout(ms(1), q.get()).await.ok().flatten()
}

#[tokio::test(start_paused = true)]
async fn an_item_is_queued_at_most_once() {
    let mut reg = Registry::default();
    let m = WorkQueueMetrics::register(&mut reg).queue("t");
    let q = WorkQueue::new(RateLimiterConfig::default(), Some(m.clone())).unwrap();
    q.add("a");
    q.add("b");
    q.add("a");
    q.add_many(["b", "c", "a"]);
    assert_eq!(q.len(), 3);
    assert_eq!(m.depth(), 3);
    assert_eq!(m.adds(), 3, "duplicate adds are not counted");
    assert_eq!(q.get().await, Some("a"));
    assert_eq!(q.get().await, Some("b"));
    assert_eq!(q.get().await, Some("c"));
    assert_eq!(try_get(&q).await, None);
    assert_eq!(q.processing(), 3);
    assert_eq!(m.depth(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_re_add_during_processing_gives_exactly_one_more_processing_after_done() {
    let q = queue();
    q.add(1);
    assert_eq!(q.get().await, Some(1));
    q.add(1);
    q.add(1);
    assert_eq!(q.len(), 0, "held back while processing");
    assert_eq!(
        try_get(&q).await,
        None,
        "no second worker gets it meanwhile"
    );
    q.done(&1);
    assert_eq!(q.len(), 1);
    assert_eq!(q.get().await, Some(1));
    q.done(&1);
    assert_eq!(try_get(&q).await, None, "exactly one more");
    assert_eq!(q.processing(), 0);
}

#[tokio::test(start_paused = true)]
async fn add_after_hands_items_out_in_time_order_and_keeps_the_earliest_time() {
    let q = queue();
    let t0 = Instant::now();
    q.add_after("c", ms(30));
    q.add_after("a", ms(10));
    q.add_after("b", ms(20));
    q.add_after("c", ms(50)); // later than its pending time: ignored
    q.add_after("b", ms(15)); // earlier: wins
    assert_eq!(q.waiting(), 3);
    let mut got = Vec::new();
    for _ in 0..3 {
        let item = q.get().await.unwrap();
        got.push((item, Instant::now() - t0));
        q.done(&item);
    }
    assert_eq!(got, [("a", ms(10)), ("b", ms(15)), ("c", ms(30))]);
    // The superseded entries do not fire again.
    advance(ms(100)).await;
    assert_eq!(try_get(&q).await, None);
    // Zero delay is a plain add.
    q.add_after("z", Duration::ZERO);
    assert_eq!(q.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_waiting_getter_wakes_for_an_earlier_delayed_item() {
    let q = queue();
    q.add_after("late", Duration::from_secs(10));
    let getter = tokio::spawn({
        let q = q.clone();
        async move {
            let item = q.get().await;
            (item, Instant::now())
        }
    });
    tokio::task::yield_now().await;
    let t0 = Instant::now();
    q.add_after("soon", ms(5));
    let (item, at) = getter.await.unwrap();
    assert_eq!(item, Some("soon"));
    assert_eq!(at - t0, ms(5));
}

#[tokio::test(start_paused = true)]
async fn rate_limited_adds_back_off_and_forget_resets() {
    // Whole-millisecond delays: tokio's timer resolution is 1 ms.
    let cfg = RateLimiterConfig {
        base_delay: Duration::from_secs(1),
        max_delay: Duration::from_secs(60),
        ..RateLimiterConfig::default()
    };
    let q = WorkQueue::new(cfg, None).unwrap();
    let mut delays = Vec::new();
    for _ in 0..4 {
        let t = Instant::now();
        q.add_rate_limited("x");
        assert_eq!(q.get().await, Some("x"));
        delays.push(Instant::now() - t);
        q.done(&"x");
    }
    assert_eq!(delays, [ms(1000), ms(1500), ms(2250), ms(3375)]);
    assert_eq!(q.num_requeues(&"x"), 4);
    q.forget(&"x");
    assert_eq!(q.num_requeues(&"x"), 0);
    let t = Instant::now();
    q.add_rate_limited("x");
    q.get().await;
    assert_eq!(Instant::now() - t, ms(1000));
}

#[tokio::test(start_paused = true)]
async fn the_token_bucket_spaces_retries_across_items() {
    let cfg = RateLimiterConfig {
        bucket_qps: Some(10.0),
        bucket_size: 2,
        ..RateLimiterConfig::default()
    };
    let q = WorkQueue::new(cfg, None).unwrap();
    let t0 = Instant::now();
    for i in 0..5 {
        q.add_rate_limited(i);
    }
    let mut at = Vec::new();
    for _ in 0..5 {
        let i = q.get().await.unwrap();
        at.push((i, (Instant::now() - t0).as_millis()));
    }
    // Two in the burst (after the 1 ms per-item base), then one per 100 ms.
    assert_eq!(at, [(0, 1), (1, 1), (2, 100), (3, 200), (4, 300)]);
}

#[tokio::test(start_paused = true)]
async fn shutdown_wakes_getters_and_ignores_adds() {
    let q = queue::<u32>();
    let getter = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    tokio::task::yield_now().await;
    q.add_after(9, ms(10));
    q.shut_down();
    assert_eq!(getter.await.unwrap(), None);
    q.add(1);
    q.add_rate_limited(2);
    assert!(q.is_empty());
    assert_eq!(q.waiting(), 0);
    assert_eq!(q.get().await, None);
    assert!(q.is_shutting_down());
}

#[tokio::test(start_paused = true)]
async fn shutdown_with_drain_waits_for_items_in_flight() {
    let q = queue();
    q.add_many([1, 2, 3]);
    let a = q.get().await.unwrap();
    let b = q.get().await.unwrap();
    let drain = tokio::spawn({
        let q = q.clone();
        async move {
            q.shut_down_with_drain().await;
            Instant::now()
        }
    });
    sleep(ms(100)).await;
    assert!(!drain.is_finished(), "two items still in flight");
    assert_eq!(q.get().await, None, "the queued item is not handed out");
    q.add(a); // a re-add while draining is ignored
    q.done(&a);
    sleep(ms(100)).await;
    assert!(!drain.is_finished(), "one item still in flight");
    let t = Instant::now();
    q.done(&b);
    assert_eq!(drain.await.unwrap(), t);
    assert!(q.is_empty());
}

#[tokio::test(start_paused = true)]
async fn metrics_measure_wait_work_and_running_time() {
    let mut reg = Registry::default();
    let m = WorkQueueMetrics::register(&mut reg).queue("t");
    let q = WorkQueue::new(RateLimiterConfig::default(), Some(m.clone())).unwrap();
    q.add("a");
    q.add("b");
    sleep(Duration::from_secs(2)).await;
    q.get().await;
    sleep(Duration::from_secs(1)).await;
    q.get().await;
    sleep(Duration::from_secs(3)).await;
    q.update_metrics();
    assert_eq!(m.unfinished_seconds(), 7.0);
    assert_eq!(m.longest_running_seconds(), 4.0);
    q.done(&"a");
    q.add_rate_limited("a");
    assert_eq!(m.retries(), 1);
    assert_eq!(m.longest_running_seconds(), 3.0);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
    for want in [
        "workqueue_queue_duration_seconds_sum{name=\"t\"} 5.0",
        "workqueue_queue_duration_seconds_count{name=\"t\"} 2",
        "workqueue_work_duration_seconds_sum{name=\"t\"} 4.0",
        "workqueue_work_duration_seconds_count{name=\"t\"} 1",
        "workqueue_longest_running_processor_seconds{name=\"t\"} 3.0",
    ] {
        assert!(text.lines().any(|l| l == want), "{want} in\n{text}");
    }
}

#[tokio::test(start_paused = true)]
async fn remove_many_drops_queued_waiting_and_pending_re_adds() {
    let q = queue();
    q.add_many(["busy", "queued", "kept"]);
    assert_eq!(q.get().await, Some("busy"));
    q.add("busy");
    q.add_after("later", ms(10));
    assert_eq!(q.remove_many(&["busy", "queued", "later", "absent"]), 3);
    assert_eq!(q.len(), 1);
    assert_eq!(q.processing(), 1, "the item in flight stays in flight");
    q.done(&"busy");
    advance(ms(20)).await;
    assert_eq!(q.get().await, Some("kept"));
    assert_eq!(try_get(&q).await, None);
    // A removed item can be added again.
    q.add("queued");
    assert_eq!(q.get().await, Some("queued"));
}

#[tokio::test(start_paused = true)]
async fn removal_churn_does_not_grow_the_fifo() {
    let q = queue();
    for round in 0..50u32 {
        let items: Vec<u32> = (0..100).map(|i| round * 1000 + i).collect();
        q.add_many(items.iter().copied());
        q.remove_many(&items);
    }
    assert!(q.lock().queue.len() <= 200, "{}", q.lock().queue.len());
    assert!(q.is_empty());
}

/// The room each collection of the queue keeps.
fn room<K: Clone + Eq + Hash>(q: &WorkQueue<K>) -> [usize; 6] {
    let s = q.lock();
    [
        s.queue.capacity(),
        s.dirty.capacity(),
        s.processing.capacity(),
        s.waiting.capacity(),
        s.heap.capacity(),
        s.heap_items.capacity(),
    ]
}

#[tokio::test(start_paused = true)]
async fn a_burst_does_not_keep_its_room() {
    // A replica's start queues every app of its clusters at once; the workers then drain it.
    let q = queue();
    q.add_many(0..20_000u32);
    q.remove_many(&(0..10_000).collect::<Vec<u32>>());
    while !q.is_empty() {
        let item = q.get().await.unwrap();
        q.done(&item);
    }
    // Retries wait, then are handed out.
    for i in 0..20_000u32 {
        q.add_after(i, ms(10));
    }
    advance(ms(20)).await;
    while let Some(item) = try_get(&q).await {
        q.done(&item);
    }
    assert!(q.is_empty());
    for (name, room) in [
        "fifo",
        "dirty",
        "processing",
        "waiting",
        "heap",
        "heap items",
    ]
    .into_iter()
    .zip(room(&q))
    {
        assert!(
            room <= 2 * KEPT_ROOM,
            "the {name} keeps room for {room} items"
        );
    }
}

/// One step of a random schedule: after `gap` ms, add `item` (delayed by `delay` ms when
/// nonzero).
#[derive(Debug, Clone)]
struct Add {
    gap: u64,
    item: u8,
    delay: u64,
}

fn adds() -> impl Strategy<Value = Vec<Add>> {
    prop::collection::vec(
        (0u64..5, 0u8..6, prop_oneof![Just(0u64), 1u64..8]).prop_map(|(gap, item, delay)| Add {
            gap,
            item,
            delay,
        }),
        1..60,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(fleetshard_util::cases::property_cases(ProptestConfig::default().cases, 64)))]

    /// N workers with random processing times never hold one item at the same time, and
    /// every add is followed by a processing of that item that starts after it (none lost).
    #[test]
    fn workers_never_share_an_item_and_no_add_is_lost(
        schedule in adds(),
        workers in 1usize..6,
        work in prop::collection::vec(0u64..6, 8),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let (violations, starts, add_times) = rt.block_on(async move {
            let q = queue::<u8>();
            let holding: Arc<StdMutex<HashMap<u8, usize>>> = Arc::default();
            let violations = Arc::new(StdMutex::new(0usize));
            // Adds and starts are numbered in one sequence (one thread: the order is exact).
            let seq = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let starts: Arc<StdMutex<Vec<(u8, u64)>>> = Arc::default();
            let mut tasks = Vec::new();
            for w in 0..workers {
                let (q, holding, violations, starts, seq) = (
                    q.clone(),
                    holding.clone(),
                    violations.clone(),
                    starts.clone(),
                    seq.clone(),
                );
                let work = work.clone();
                tasks.push(tokio::spawn(async move {
                    let mut n = 0usize;
                    while let Some(item) = q.get().await {
                        {
                            let mut h = holding.lock().unwrap();
                            let c = h.entry(item).or_default();
                            *c += 1;
                            if *c > 1 {
                                *violations.lock().unwrap() += 1;
                            }
                        }
                        let n_start = seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        starts.lock().unwrap().push((item, n_start));
                        let d = work[(w + n + usize::from(item)) % work.len()];
                        n += 1;
                        if d > 0 {
                            sleep(ms(d)).await;
                        } else {
                            tokio::task::yield_now().await;
                        }
                        *holding.lock().unwrap().get_mut(&item).unwrap() -= 1;
                        q.done(&item);
                    }
                }));
            }
            let mut add_times = Vec::new();
            for a in schedule {
                sleep(ms(a.gap)).await;
                if a.delay == 0 {
                    q.add(a.item);
                } else {
                    q.add_after(a.item, ms(a.delay));
                }
                add_times.push((a.item, seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
            }
            // Everything settles well within a second of the last add.
            sleep(Duration::from_secs(1)).await;
            q.shut_down_with_drain().await;
            for t in tasks {
                t.await.unwrap();
            }
            let v = *violations.lock().unwrap();
            let s = starts.lock().unwrap().clone();
            (v, s, add_times)
        });
        prop_assert_eq!(violations, 0);
        // A delayed add may be absorbed by an earlier pending time of the same item
        // (client-go keeps the earliest), but the item is still processed after the add.
        for (item, at) in add_times {
            prop_assert!(
                starts.iter().any(|&(i, s)| i == item && s > at),
                "add #{} of {} never followed by a processing", at, item
            );
        }
    }
}
