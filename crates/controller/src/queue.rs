//! A work queue with client-go's semantics (`k8s.io/client-go/util/workqueue`), async.
//!
//! - **dirty set**: an item is queued at most once; adding a queued item does nothing.
//! - **processing set**: an item handed out by [`WorkQueue::get`] is being processed until
//!   [`WorkQueue::done`]; adding it meanwhile marks it dirty only, and `done` queues it
//!   again — so no two workers ever hold the same item, and no add is lost.
//! - **delays**: [`WorkQueue::add_after`] (an item waiting keeps its earliest time) and
//!   [`WorkQueue::add_rate_limited`] (per-item backoff and an overall token bucket,
//!   [`RateLimiterConfig`]).
//!
//! Differences from client-go, on purpose: shutting down stops handing out items at once
//! and drops what is queued (a replica that stops rebuilds its state when it starts again;
//! finishing a 100k-item backlog is not a graceful stop); [`WorkQueue::remove_many`]
//! exists so the shard filter can drop a cluster's items in O(items).
//!
//! All time is `tokio::time`, so tests run under paused time.

use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

mod metrics;
mod rate_limit;
#[cfg(test)]
mod tests;

pub use metrics::{QueueLabel, QueueMetrics, WorkQueueMetrics};
use rate_limit::RateLimiter;
pub use rate_limit::RateLimiterConfig;

use crate::ConfigError;

/// An item that is dirty (added and not yet handed out).
#[derive(Debug, Clone, Copy)]
struct Dirty {
    /// When it was added, for the wait-time histogram.
    since: Instant,
    /// Its entry in `queue`; `None` while it waits for the current processing to end.
    slot: Option<u64>,
}

#[derive(Debug)]
struct State<K> {
    /// FIFO of (item, slot); an entry whose slot no longer matches the item's dirty slot
    /// was removed and is skipped (removal is O(1), the entry is dropped lazily).
    queue: VecDeque<(K, u64)>,
    /// Live entries in `queue`.
    live: usize,
    dirty: HashMap<K, Dirty>,
    /// Items handed out and not done, with when they were handed out.
    processing: HashMap<K, Instant>,
    /// Items to add later: their earliest time and the heap entry that carries it.
    waiting: HashMap<K, (Instant, u64)>,
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    heap_items: HashMap<u64, K>,
    next_id: u64,
    limiter: RateLimiter<K>,
    shutting_down: bool,
}

/// A collection of the queue keeps up to this much room whatever its contents: shrinking
/// a small one saves little and costs a rehash.
const KEPT_ROOM: usize = 1024;

/// Whether a collection of `len` items in room for `capacity` should give room back: at
/// most a quarter full, and larger than [`KEPT_ROOM`]. Shrunk to twice its contents, it
/// must lose half of them again before the next shrink, so a shrink's cost is spread over
/// the removals that led to it.
fn sparse(len: usize, capacity: usize) -> bool {
    capacity > KEPT_ROOM && len < capacity / 4
}

impl<K: Eq + Hash> State<K> {
    /// Gives back the room a burst left (a replica's start queues every app of its clusters
    /// at once; the sets would otherwise keep room for all of them for good). Called where
    /// items leave the queue.
    fn release_room(&mut self) {
        macro_rules! release {
            ($($collection:expr),*) => {$(
                if sparse($collection.len(), $collection.capacity()) {
                    $collection.shrink_to($collection.len() * 2);
                }
            )*};
        }
        release!(
            self.queue,
            self.dirty,
            self.processing,
            self.waiting,
            self.heap,
            self.heap_items
        );
    }
}

struct Inner<K> {
    state: Mutex<State<K>>,
    /// Wakes getters: one per add, all on shutdown.
    ready: Notify,
    /// Wakes `shut_down_with_drain` when the processing set empties.
    idle: Notify,
    metrics: Option<QueueMetrics>,
}

/// A deduplicating, rate-limited work queue (see the module documentation). Clones share
/// the queue.
pub struct WorkQueue<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        WorkQueue {
            inner: self.inner.clone(),
        }
    }
}

impl<K> std::fmt::Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue").finish_non_exhaustive()
    }
}

impl<K: Clone + Eq + Hash> WorkQueue<K> {
    /// A queue retrying with `limits`, reporting to `metrics` when given.
    pub fn new(
        limits: RateLimiterConfig,
        metrics: Option<QueueMetrics>,
    ) -> Result<Self, ConfigError> {
        limits.validate()?;
        Ok(Self::build(limits, metrics))
    }

    /// A queue with the default limits (valid by construction) and no metrics.
    pub fn with_default_limits() -> Self {
        Self::build(RateLimiterConfig::default(), None)
    }

    fn build(limits: RateLimiterConfig, metrics: Option<QueueMetrics>) -> Self {
        let state = State {
            queue: VecDeque::new(),
            live: 0,
            dirty: HashMap::new(),
            processing: HashMap::new(),
            waiting: HashMap::new(),
            heap: BinaryHeap::new(),
            heap_items: HashMap::new(),
            next_id: 0,
            limiter: RateLimiter::new(limits, Instant::now()),
            shutting_down: false,
        };
        WorkQueue {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                ready: Notify::new(),
                idle: Notify::new(),
                metrics,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // A panic while holding the lock leaves consistent state (no await, no user code
        // inside), so a poisoned lock is still usable.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `item` unless it is already queued; if it is being processed, it is queued
    /// again when [`WorkQueue::done`] is called. Ignored after shutdown.
    pub fn add(&self, item: K) {
        let mut s = self.lock();
        if self.add_locked(&mut s, item, Instant::now()) {
            self.inner.ready.notify_one();
        }
    }

    /// Adds every item, taking the lock once.
    pub fn add_many(&self, items: impl IntoIterator<Item = K>) {
        let mut s = self.lock();
        let now = Instant::now();
        for item in items {
            if self.add_locked(&mut s, item, now) {
                self.inner.ready.notify_one();
            }
        }
    }

    /// Returns whether the item entered the FIFO (a getter should wake).
    fn add_locked(&self, s: &mut State<K>, item: K, now: Instant) -> bool {
        if s.shutting_down {
            return false;
        }
        let processing = s.processing.contains_key(&item);
        let Entry::Vacant(v) = s.dirty.entry(item) else {
            return false;
        };
        if let Some(m) = &self.inner.metrics {
            m.adds.inc();
        }
        if processing {
            v.insert(Dirty {
                since: now,
                slot: None,
            });
            return false;
        }
        let id = s.next_id;
        s.next_id += 1;
        let item = v.key().clone();
        v.insert(Dirty {
            since: now,
            slot: Some(id),
        });
        s.queue.push_back((item, id));
        s.live += 1;
        self.set_depth(s);
        true
    }

    /// Adds `item` once `delay` has passed (at once for zero). An item already waiting
    /// keeps the earlier of its two times.
    pub fn add_after(&self, item: K, delay: Duration) {
        let mut s = self.lock();
        if s.shutting_down {
            return;
        }
        let now = Instant::now();
        if delay.is_zero() {
            if self.add_locked(&mut s, item, now) {
                self.inner.ready.notify_one();
            }
            return;
        }
        let at = now + delay;
        if s.waiting.get(&item).is_some_and(|&(t, _)| t <= at) {
            return;
        }
        let id = s.next_id;
        s.next_id += 1;
        s.heap.push(Reverse((at, id)));
        s.heap_items.insert(id, item.clone());
        s.waiting.insert(item, (at, id));
        // A getter asleep until a later time must recompute its deadline.
        self.inner.ready.notify_one();
    }

    /// Adds `item` after its rate-limited delay (counts a retry).
    pub fn add_rate_limited(&self, item: K) {
        let delay = {
            let mut s = self.lock();
            if s.shutting_down {
                return;
            }
            s.limiter.when(&item, Instant::now())
        };
        if let Some(m) = &self.inner.metrics {
            m.retries.inc();
        }
        self.add_after(item, delay);
    }

    /// Resets `item`'s backoff (call after it was processed successfully).
    pub fn forget(&self, item: &K) {
        self.lock().limiter.forget(item);
    }

    /// Rate-limited retries of `item` since it was last forgotten.
    pub fn num_requeues(&self, item: &K) -> u32 {
        self.lock().limiter.num_requeues(item)
    }

    /// Waits for an item and hands it out (it is then being processed until `done`).
    /// `None` once the queue is shut down.
    pub async fn get(&self) -> Option<K> {
        loop {
            let notified = self.inner.ready.notified();
            tokio::pin!(notified);
            // Registered before looking, so an add between the look and the wait wakes us.
            notified.as_mut().enable();
            let deadline = {
                let mut s = self.lock();
                if s.shutting_down {
                    return None;
                }
                let now = Instant::now();
                self.promote_due(&mut s, now);
                if let Some(item) = self.pop_locked(&mut s, now) {
                    if s.live > 0 {
                        // Pass the baton: one wake per add may have been taken by a getter
                        // that found several items.
                        self.inner.ready.notify_one();
                    }
                    return Some(item);
                }
                s.heap.peek().map(|Reverse((t, _))| *t)
            };
            match deadline {
                Some(at) => {
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Moves waiting items whose time has come into the FIFO.
    fn promote_due(&self, s: &mut State<K>, now: Instant) {
        while let Some(&Reverse((at, id))) = s.heap.peek() {
            if at > now {
                break;
            }
            s.heap.pop();
            let Some(item) = s.heap_items.remove(&id) else {
                continue;
            };
            // A stale entry (superseded by an earlier time, or removed) is skipped.
            if s.waiting.get(&item).is_some_and(|&(_, w)| w == id) {
                s.waiting.remove(&item);
                self.add_locked(s, item, now);
            }
        }
        s.release_room();
    }

    fn pop_locked(&self, s: &mut State<K>, now: Instant) -> Option<K> {
        while let Some((item, id)) = s.queue.pop_front() {
            let live = s.dirty.get(&item).is_some_and(|d| d.slot == Some(id));
            if !live {
                continue;
            }
            let since = s.dirty.remove(&item).map_or(now, |d| d.since);
            s.live -= 1;
            s.release_room();
            s.processing.insert(item.clone(), now);
            if let Some(m) = &self.inner.metrics {
                m.wait
                    .observe(now.saturating_duration_since(since).as_secs_f64());
            }
            self.set_depth(s);
            self.update_running(s, now);
            return Some(item);
        }
        None
    }

    /// Marks `item` processed. If it was added meanwhile, it is queued again now.
    pub fn done(&self, item: &K) {
        let mut s = self.lock();
        let now = Instant::now();
        if let Some(started) = s.processing.remove(item)
            && let Some(m) = &self.inner.metrics
        {
            m.work
                .observe(now.saturating_duration_since(started).as_secs_f64());
        }
        s.release_room();
        let requeue = !s.shutting_down && s.dirty.get(item).is_some_and(|d| d.slot.is_none());
        if requeue {
            let id = s.next_id;
            s.next_id += 1;
            if let Some(d) = s.dirty.get_mut(item) {
                d.slot = Some(id);
            }
            s.queue.push_back((item.clone(), id));
            s.live += 1;
            self.set_depth(&s);
            self.inner.ready.notify_one();
        }
        self.update_running(&s, now);
        if s.processing.is_empty() {
            self.inner.idle.notify_waiters();
        }
    }

    /// Drops every item in `items` from the queue, from the waiting items, and from the
    /// re-adds of items being processed (so `done` does not queue them again); items being
    /// processed stay so. Returns how many queued or waiting entries were dropped.
    pub fn remove_many<'a>(&self, items: impl IntoIterator<Item = &'a K>) -> usize
    where
        K: 'a,
    {
        let mut s = self.lock();
        let mut dropped = 0;
        for item in items {
            if let Some(d) = s.dirty.remove(item) {
                dropped += 1;
                if d.slot.is_some() {
                    s.live -= 1;
                }
            }
            if s.waiting.remove(item).is_some() {
                dropped += 1;
            }
        }
        // Compact when dead entries outnumber live ones, so churn cannot grow the FIFO.
        if s.queue.len() > 64 && s.queue.len() > 2 * s.live {
            let State { queue, dirty, .. } = &mut *s;
            queue.retain(|(k, id)| dirty.get(k).is_some_and(|d| d.slot == Some(*id)));
        }
        s.release_room();
        self.set_depth(&s);
        dropped
    }

    /// Items queued now (not counting waiting or in-process ones).
    pub fn len(&self) -> usize {
        self.lock().live
    }

    /// Whether no item is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Items being processed now.
    pub fn processing(&self) -> usize {
        self.lock().processing.len()
    }

    /// Items waiting for their delay.
    pub fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// Whether the queue is shut down.
    pub fn is_shutting_down(&self) -> bool {
        self.lock().shutting_down
    }

    /// Stops the queue: getters get `None`, adds are ignored, queued and waiting items are
    /// dropped. Items being processed may still be marked `done`.
    pub fn shut_down(&self) {
        let mut s = self.lock();
        s.shutting_down = true;
        s.queue.clear();
        s.live = 0;
        s.dirty.clear();
        s.waiting.clear();
        s.heap.clear();
        s.heap_items.clear();
        self.set_depth(&s);
        drop(s);
        self.inner.ready.notify_waiters();
    }

    /// [`WorkQueue::shut_down`], then waits until every item being processed is done.
    pub async fn shut_down_with_drain(&self) {
        self.shut_down();
        loop {
            let idle = self.inner.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.lock().processing.is_empty() {
                return;
            }
            idle.await;
        }
    }

    /// The queue's metrics, when it reports any.
    pub fn metrics(&self) -> Option<&QueueMetrics> {
        self.inner.metrics.as_ref()
    }

    /// Recomputes the unfinished-work and longest-running gauges (they also update on
    /// every get and done; call this periodically so a stuck item shows).
    pub fn update_metrics(&self) {
        let s = self.lock();
        self.update_running(&s, Instant::now());
    }

    fn set_depth(&self, s: &State<K>) {
        if let Some(m) = &self.inner.metrics {
            m.depth.set(i64::try_from(s.live).unwrap_or(i64::MAX));
        }
    }

    fn update_running(&self, s: &State<K>, now: Instant) {
        let Some(m) = &self.inner.metrics else {
            return;
        };
        let (mut total, mut longest) = (0.0f64, 0.0f64);
        for started in s.processing.values() {
            let secs = now.saturating_duration_since(*started).as_secs_f64();
            total += secs;
            longest = longest.max(secs);
        }
        m.unfinished.set(total);
        m.longest.set(longest);
    }
}
