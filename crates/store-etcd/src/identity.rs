//! Which etcd cluster answers (the store is the store): every answer's header carries the
//! id of the cluster that sent it. The first one is recorded; an answer from another
//! cluster — etcd re-created or restored from a backup as a new cluster, another cluster
//! put behind the same endpoints or load balancer — is [`StoreError::Replaced`]: nothing
//! this process wrote is there, and whatever it does there (a write may have applied) is
//! not confirmed to it. The check costs nothing: the id comes with every answer.

use etcd_client::{GetResponse, ResponseHeader, TxnResponse, WatchResponse};
use fleetshard_coord::store::{StoreError, StoreIdentity};

use crate::EtcdStore;

/// An answer with a header.
pub(crate) trait Headed {
    /// The answer's header.
    fn header(&self) -> Option<&ResponseHeader>;
}

impl Headed for GetResponse {
    fn header(&self) -> Option<&ResponseHeader> {
        GetResponse::header(self)
    }
}

impl Headed for TxnResponse {
    fn header(&self) -> Option<&ResponseHeader> {
        TxnResponse::header(self)
    }
}

impl Headed for WatchResponse {
    fn header(&self) -> Option<&ResponseHeader> {
        WatchResponse::header(self)
    }
}

/// The clusters that answered this store.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Clusters {
    /// The first cluster that answered.
    pub(crate) first: Option<u64>,
    /// The latest.
    pub(crate) latest: Option<u64>,
}

impl Clusters {
    /// Notes an answer from cluster `id` (0: the answer did not say); `Err` with the
    /// first cluster's id when another one answered.
    pub(crate) fn answered(&mut self, id: u64) -> Result<(), u64> {
        if id == 0 {
            return Ok(());
        }
        self.latest = Some(id);
        match self.first {
            None => {
                self.first = Some(id);
                Ok(())
            }
            Some(first) if first == id => Ok(()),
            Some(first) => Err(first),
        }
    }

    /// Whether the latest answer came from another cluster than the first (its id).
    pub(crate) fn other(&self) -> Option<(u64, u64)> {
        match (self.first, self.latest) {
            (Some(first), Some(latest)) if first != latest => Some((first, latest)),
            _ => None,
        }
    }
}

impl EtcdStore {
    fn clusters(&self) -> std::sync::MutexGuard<'_, Clusters> {
        self.inner
            .clusters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn replaced(&self, first: u64, now: u64, what: &str) -> StoreError {
        StoreError::Replaced {
            what: format!(
                "{}: {what}: etcd cluster {now:#018x} answered, not cluster {first:#018x} \
                 that this process reached first",
                self.inner.url
            ),
        }
    }

    /// Notes the cluster an answer came from: [`StoreError::Replaced`] if it is not the
    /// first one.
    pub(crate) fn answered_by(
        &self,
        header: Option<&ResponseHeader>,
        what: &str,
    ) -> Result<(), StoreError> {
        let id = header.map_or(0, ResponseHeader::cluster_id);
        let first = self.clusters().answered(id);
        first.map_err(|first| self.replaced(first, id, what))
    }

    /// The cluster this store reaches (asking etcd only before its first answer).
    pub(crate) async fn identity(&self) -> Result<StoreIdentity, StoreError> {
        if self.clusters().first.is_none() {
            self.revision().await?;
        }
        let clusters = *self.clusters();
        if let Some((first, latest)) = clusters.other() {
            return Err(self.replaced(first, latest, "its latest answer"));
        }
        match clusters.first {
            Some(first) => Ok(StoreIdentity::Recorded(format!(
                "{}: etcd cluster {first:#018x}",
                self.inner.url
            ))),
            None => Err(StoreError::Backend(format!(
                "{}: etcd's answers carry no cluster id",
                self.inner.url
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_cluster_is_recorded_and_another_one_refused() {
        let mut c = Clusters::default();
        assert_eq!(c.answered(0), Ok(()));
        assert_eq!(c.first, None);
        assert_eq!(c.answered(7), Ok(()));
        assert_eq!(c.answered(7), Ok(()));
        assert_eq!(c.answered(0), Ok(()));
        assert_eq!(c.other(), None);
        assert_eq!(c.answered(9), Err(7));
        assert_eq!(c.other(), Some((7, 9)));
        assert_eq!(c.first, Some(7));
        // The first one answering again is fine for this answer; the guard above the
        // store has already made the replacement final.
        assert_eq!(c.answered(7), Ok(()));
        assert_eq!(c.other(), None);
    }
}
