//! Concurrent single-key reads and writes, combined into the store's many-key calls
//! ([`Store::get_each`], [`Store::put_each`]): group commit for bulk records.
//!
//! A takeover makes every moved app's first status one read and one compare-and-swap, about
//! 10,000 of each at once at full size. On etcd each was a request and a Raft entry of its
//! own. [`Batched`] lets each call join a queue; up to [`IN_FLIGHT`] batches are out at a
//! time, and whoever gets a slot sends what is queued (up to [`MAX_BATCH`] calls and
//! [`MAX_BATCH_BYTES`], keys distinct within a batch) as one call, then hands each caller
//! its own outcome. A call that finds a slot free goes out at once, alone: batching adds no
//! wait, it only forms while the store is busy.
//!
//! A caller dropped while it was sending a batch leaves the others of that batch with
//! [`StoreError::Unavailable`]: their requests may or may not have been sent, exactly what
//! that error means for a single call.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::future::BoxFuture;
use tokio::sync::{Semaphore, oneshot};

use super::{Entry, Precondition, Put, Store, StoreError};

/// Batches out at a time, per kind (reads, writes).
pub const IN_FLIGHT: usize = 4;

/// Calls per batch at most (etcd allows 128 operations per transaction by default).
pub const MAX_BATCH: usize = 64;

/// Bytes written per batch at most (etcd refuses requests over 1.5 MiB); a larger write
/// goes alone.
pub const MAX_BATCH_BYTES: usize = 512 * 1024;

/// Reads and writes of one store, combined while it is busy (see the module docs).
pub struct Batched {
    store: Arc<dyn Store>,
    gets: Combiner<String, Result<Option<Entry>, StoreError>>,
    puts: Combiner<Put, Result<u64, StoreError>>,
}

impl std::fmt::Debug for Batched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batched")
            .field("store", &self.store.describe())
            .finish_non_exhaustive()
    }
}

impl Batched {
    /// Combines calls to `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Batched {
            store,
            gets: Combiner::new(),
            puts: Combiner::new(),
        }
    }

    /// The store calls go to.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// [`Store::get`], possibly in one request with others.
    pub async fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        let read = |keys| self.store.get_each(keys);
        self.gets
            .call(key.to_owned(), key, 0, read)
            .await
            .unwrap_or_else(|| Err(abandoned(key)))
    }

    /// [`Store::put`], possibly in one request with others.
    pub async fn put(
        &self,
        key: &str,
        value: Vec<u8>,
        pre: Precondition,
    ) -> Result<u64, StoreError> {
        let size = key.len() + value.len();
        let put = Put {
            key: key.to_owned(),
            value,
            pre,
        };
        let write = |puts| self.store.put_each(puts);
        self.puts
            .call(put, key, size, write)
            .await
            .unwrap_or_else(|| Err(abandoned(key)))
    }
}

fn abandoned(key: &str) -> StoreError {
    StoreError::Unavailable(format!(
        "key {key}: the batch it was in was abandoned (it may or may not have been sent)"
    ))
}

/// A queued call: its request, its key and size, and where its outcome goes.
struct Queued<T, R> {
    request: T,
    key: String,
    size: usize,
    reply: oneshot::Sender<R>,
}

/// Calls queued for a many-key call, and the slots for batches out.
struct Combiner<T, R> {
    queue: Mutex<VecDeque<Queued<T, R>>>,
    slots: Semaphore,
}

impl<T, R> Combiner<T, R> {
    fn new() -> Self {
        Combiner {
            queue: Mutex::new(VecDeque::new()),
            slots: Semaphore::new(IN_FLIGHT),
        }
    }

    fn queue(&self) -> MutexGuard<'_, VecDeque<Queued<T, R>>> {
        // Each critical section leaves the queue whole: a poisoned lock is still usable.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next batch: queued calls in order, keys distinct, within the limits (a first
    /// call larger than the byte limit goes alone). Calls left behind keep their places.
    fn take(&self) -> Vec<Queued<T, R>> {
        let mut queue = self.queue();
        let mut batch = Vec::new();
        let (mut keys, mut bytes) = (HashSet::new(), 0);
        let mut i = 0;
        while i < queue.len() && batch.len() < MAX_BATCH {
            let q = &queue[i];
            let fits = batch.is_empty() || bytes + q.size <= MAX_BATCH_BYTES;
            if fits && !keys.contains(&q.key) {
                keys.insert(q.key.clone());
                bytes += q.size;
                batch.extend(queue.remove(i));
            } else {
                i += 1;
            }
        }
        batch
    }

    /// Queues `request` and waits for its outcome, sending batches (its own or others')
    /// whenever it holds a slot. `None`: the batch it was in was abandoned.
    async fn call<'s, F>(&self, request: T, key: &str, size: usize, send: F) -> Option<R>
    where
        F: Fn(Vec<T>) -> BoxFuture<'s, Vec<R>>,
    {
        let (reply, mut outcome) = oneshot::channel();
        self.queue().push_back(Queued {
            request,
            key: key.to_owned(),
            size,
            reply,
        });
        tokio::select! {
            biased;
            r = &mut outcome => r.ok(),
            slot = self.slots.acquire() => {
                let slot = slot.ok()?;
                loop {
                    let batch = self.take();
                    if batch.is_empty() {
                        // Every queued call was taken, this one too: it is out in
                        // another caller's batch.
                        drop(slot);
                        return outcome.await.ok();
                    }
                    let (requests, replies): (Vec<T>, Vec<oneshot::Sender<R>>) =
                        batch.into_iter().map(|q| (q.request, q.reply)).unzip();
                    for (reply, r) in replies.into_iter().zip(send(requests).await) {
                        let _ = reply.send(r);
                    }
                    if let Ok(r) = outcome.try_recv() {
                        return Some(r);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
