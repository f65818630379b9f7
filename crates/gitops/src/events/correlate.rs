//! Rate limit and aggregation of events, as client-go's event correlator does them: a
//! token bucket per involved object (the spam filter: a burst of 25, one token more every
//! 5 minutes), then identical events — same object, type, reason and message — written
//! once and counted (the event logger: the next is a `count` bump of the first). Pure: the
//! time is passed in.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

/// The correlator's limits (client-go's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorrelatorConfig {
    /// Events about one object written at once at most.
    pub burst: u32,
    /// One more may be written after each such interval.
    pub refill_every: Duration,
    /// Objects and distinct events remembered at most (the oldest forgotten first).
    pub remembered: usize,
}

impl Default for CorrelatorConfig {
    fn default() -> Self {
        CorrelatorConfig {
            burst: 25,
            refill_every: Duration::from_secs(300),
            remembered: 4096,
        }
    }
}

/// What to do with one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Correlation {
    /// Write a new event.
    Create,
    /// Bump the event `name`, written before, to `count`.
    Bump {
        /// The earlier event's name.
        name: String,
        /// Its count with this one.
        count: i32,
    },
    /// Drop it: too many about this object lately.
    RateLimited,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// A map that forgets its oldest keys beyond a bound.
#[derive(Debug)]
struct Bounded<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
    bound: usize,
}

impl<K: Eq + Hash + Clone, V> Bounded<K, V> {
    fn new(bound: usize) -> Self {
        Bounded {
            map: HashMap::new(),
            order: VecDeque::new(),
            bound: bound.max(1),
        }
    }

    fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.map.get_mut(key)
    }

    fn insert(&mut self, key: K, value: V) {
        if self.map.insert(key.clone(), value).is_none() {
            self.order.push_back(key);
        }
        while self.map.len() > self.bound {
            match self.order.pop_front() {
                Some(old) => {
                    self.map.remove(&old);
                }
                None => break,
            }
        }
    }

    fn remove(&mut self, key: &K) {
        if self.map.remove(key).is_some() {
            self.order.retain(|k| k != key);
        }
    }
}

/// The correlator of one writer. `O` identifies an involved object, `E` an event (its
/// object, type, reason and message).
#[derive(Debug)]
pub struct Correlator<O = String, E = String> {
    config: CorrelatorConfig,
    buckets: Bounded<O, Bucket>,
    written: Bounded<E, (String, i32)>,
}

impl<O: Eq + Hash + Clone, E: Eq + Hash + Clone> Correlator<O, E> {
    /// Empty.
    pub fn new(config: CorrelatorConfig) -> Self {
        Correlator {
            config,
            buckets: Bounded::new(config.remembered),
            written: Bounded::new(config.remembered),
        }
    }

    /// Decides on `event` about `object` at `now` (a token is taken if it is written).
    pub fn correlate(&mut self, object: &O, event: &E, now: Instant) -> Correlation {
        if !self.take_token(object, now) {
            return Correlation::RateLimited;
        }
        match self.written.get_mut(event) {
            Some((name, count)) => Correlation::Bump {
                name: name.clone(),
                count: count.saturating_add(1),
            },
            None => Correlation::Create,
        }
    }

    /// `event` was written as `name` with `count` (a create's count is 1).
    pub fn written(&mut self, event: &E, name: &str, count: i32) {
        self.written.insert(event.clone(), (name.to_owned(), count));
    }

    /// The event written for `event` is gone (expired on the server): the next is created.
    pub fn forget(&mut self, event: &E) {
        self.written.remove(event);
    }

    fn take_token(&mut self, object: &O, now: Instant) -> bool {
        let (burst, every) = (
            f64::from(self.config.burst),
            self.config.refill_every.as_secs_f64(),
        );
        let bucket = match self.buckets.get_mut(object) {
            Some(b) => b,
            None => {
                self.buckets.insert(
                    object.clone(),
                    Bucket {
                        tokens: burst,
                        at: now,
                    },
                );
                match self.buckets.get_mut(object) {
                    Some(b) => b,
                    None => return false,
                }
            }
        };
        if every > 0.0 {
            let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
            bucket.tokens = (bucket.tokens + elapsed / every).min(burst);
        } else {
            bucket.tokens = burst;
        }
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn correlator(burst: u32) -> Correlator<&'static str, &'static str> {
        Correlator::new(CorrelatorConfig {
            burst,
            refill_every: Duration::from_secs(300),
            remembered: 8,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn an_identical_event_bumps_the_first_and_a_new_message_creates_another() {
        let mut c = correlator(25);
        let now = Instant::now();
        assert_eq!(c.correlate(&"app", &"a", now), Correlation::Create);
        c.written(&"a", "app.1", 1);
        assert_eq!(
            c.correlate(&"app", &"a", now),
            Correlation::Bump {
                name: "app.1".into(),
                count: 2
            }
        );
        c.written(&"a", "app.1", 2);
        assert_eq!(c.correlate(&"app", &"b", now), Correlation::Create);
        c.forget(&"a");
        assert_eq!(c.correlate(&"app", &"a", now), Correlation::Create);
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_about_one_object_is_cut_at_the_burst_and_refilled_over_time() {
        let mut c = correlator(3);
        let start = Instant::now();
        let written = (0..10)
            .filter(|_| c.correlate(&"app", &"a", start) != Correlation::RateLimited)
            .count();
        assert_eq!(written, 3, "the burst");
        // Another object has its own bucket.
        assert_ne!(c.correlate(&"other", &"a", start), Correlation::RateLimited);
        let later = start + Duration::from_secs(299);
        assert_eq!(c.correlate(&"app", &"a", later), Correlation::RateLimited);
        let refilled = start + Duration::from_secs(600);
        assert_ne!(
            c.correlate(&"app", &"a", refilled),
            Correlation::RateLimited
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_oldest_objects_and_events_are_forgotten_beyond_the_bound() {
        let mut c: Correlator<String, String> = Correlator::new(CorrelatorConfig {
            burst: 1,
            refill_every: Duration::from_secs(300),
            remembered: 8,
        });
        let now = Instant::now();
        let a = "a".to_owned();
        for i in 0..9 {
            assert_eq!(
                c.correlate(&format!("app{i}"), &a, now),
                Correlation::Create
            );
        }
        // `app8` spent its token; `app0` was forgotten: its bucket is full again.
        assert_eq!(
            c.correlate(&"app8".into(), &a, now),
            Correlation::RateLimited
        );
        assert_eq!(c.correlate(&"app0".into(), &a, now), Correlation::Create);
        assert_eq!(c.buckets.map.len(), 8);
    }
}
