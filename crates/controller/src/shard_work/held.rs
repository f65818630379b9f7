//! Items dropped while the lease gate was closed, kept to be queued again when it opens.
//!
//! The runner announces a cluster's start and reports its lease deadline on two channels,
//! followed by two tasks of the runtime; a worker can get a freshly started cluster's app
//! before the deadline has reached the gate. Dropped then ([`Admission::LeaseLapsed`]),
//! the app would wait for the next resync (3 minutes by default) although its cluster is
//! owned and the lease valid a moment later: a new owner would leave the apps it took
//! over unreconciled. So such an item is held here and queued again the moment the gate
//! opens, if its cluster is still owned then (a lease that really lapsed stops its
//! clusters, and their held items are dropped with them).
//!
//! [`Admission::LeaseLapsed`]: super::Admission::LeaseLapsed

use crate::AppKey;

use super::ShardWork;

/// The queue an item came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueKind {
    /// `app_refresh`.
    Refresh,
    /// `app_operation`.
    Operation,
}

impl ShardWork {
    /// Keeps `app`, which a worker of `queue` dropped because the lease gate was closed
    /// ([`super::Admission::LeaseLapsed`]), to be queued again once the gate opens; at
    /// once if it opened meanwhile.
    pub fn hold_for_lease(&self, queue: QueueKind, app: AppKey) {
        let mut s = self.lock();
        if s.lease.open() {
            drop(s);
            self.queue_of(queue).add(app);
            return;
        }
        s.held.insert((queue, app));
    }

    /// With the gate open: queues again the held items whose cluster is still owned, and
    /// forgets the others.
    pub(super) fn requeue_held(&self) {
        let mut s = self.lock();
        if s.held.is_empty() || !s.lease.open() {
            return;
        }
        let held = std::mem::take(&mut s.held);
        let owned: Vec<(QueueKind, AppKey)> = held
            .into_iter()
            .filter(|(_, app)| s.apps.cluster_of(app).is_some_and(|c| s.owned.contains(c)))
            .collect();
        drop(s);
        for (queue, app) in owned {
            self.queue_of(queue).add(app);
        }
    }

    fn queue_of(&self, queue: QueueKind) -> &crate::queue::WorkQueue<AppKey> {
        match queue {
            QueueKind::Refresh => &self.refresh,
            QueueKind::Operation => &self.operation,
        }
    }
}
