//! Several keys in one request: [`Store::put_each`] and [`Store::get_each`] as etcd
//! transactions (used for app statuses, in batches of at most 64: etcd allows 128
//! operations per transaction by default).
//!
//! [`Store::put_each`]: fleetshard_coord::store::Store::put_each
//! [`Store::get_each`]: fleetshard_coord::store::Store::get_each

use std::collections::HashSet;

use etcd_client::{Txn, TxnOp, TxnOpResponse};
use fleetshard_coord::store::{Entry, Put, Store, StoreError};

use crate::EtcdStore;

impl EtcdStore {
    /// One transaction: every comparison, then every write. When one comparison fails
    /// etcd applies none, and each write is sent again on its own to learn which failed.
    pub(crate) async fn put_many(&self, puts: Vec<Put>) -> Vec<Result<u64, StoreError>> {
        let alone = |puts: Vec<Put>| async move {
            let each = puts
                .iter()
                .map(|p| self.put(&p.key, p.value.clone(), p.pre));
            futures::future::join_all(each).await
        };
        let keys: HashSet<&str> = puts.iter().map(|p| p.key.as_str()).collect();
        // etcd refuses a transaction that writes a key twice.
        if puts.len() < 2 || keys.len() < puts.len() {
            return alone(puts).await;
        }
        let mut compares = Vec::new();
        let mut ops = Vec::with_capacity(puts.len());
        for p in &puts {
            let full = self.full_key(&p.key);
            match self.compare(&p.key, &full, p.pre) {
                Ok(c) => compares.extend(c),
                // A version no key can have: that write fails without asking.
                Err(_) => return alone(puts).await,
            }
            ops.push(TxnOp::put(full, p.value.clone(), None));
        }
        let txn = Txn::new().when(compares).and_then(ops);
        let what = format!("put {} keys ({:?}, …)", puts.len(), puts[0].key);
        let answer = self
            .call(&what, |mut kv| async move { kv.txn(txn).await })
            .await;
        match answer {
            Ok(resp) if resp.succeeded() => {
                // One transaction, one new revision: every key's mod_revision.
                let version = self.header_revision(resp.header().map(|h| h.revision()), &what);
                vec![version; puts.len()]
            }
            Ok(_) => alone(puts).await,
            Err(e) => vec![Err(e); puts.len()],
        }
    }

    /// One read-only transaction of every read.
    pub(crate) async fn get_many(
        &self,
        keys: Vec<String>,
    ) -> Vec<Result<Option<Entry>, StoreError>> {
        if keys.len() < 2 {
            let each = keys.iter().map(|k| self.get(k));
            return futures::future::join_all(each).await;
        }
        let ops: Vec<TxnOp> = keys
            .iter()
            .map(|k| TxnOp::get(self.full_key(k), None))
            .collect();
        let what = format!("get {} keys ({:?}, …)", keys.len(), keys[0]);
        let answer = self
            .call(&what, |mut kv| async move {
                kv.txn(Txn::new().and_then(ops)).await
            })
            .await;
        let resp = match answer {
            Ok(resp) => resp,
            Err(e) => return vec![Err(e); keys.len()],
        };
        let responses = resp.op_responses();
        if responses.len() != keys.len() {
            let e = StoreError::Backend(format!(
                "{what}: {} answers to {} reads",
                responses.len(),
                keys.len()
            ));
            return vec![Err(e); keys.len()];
        }
        responses
            .into_iter()
            .map(|r| match r {
                TxnOpResponse::Get(get) => get.kvs().first().map(|kv| self.entry(kv)).transpose(),
                _ => Err(StoreError::Backend(format!(
                    "{what}: an answer that is not a read"
                ))),
            })
            .collect()
    }
}
