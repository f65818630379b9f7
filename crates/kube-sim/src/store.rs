//! Storage and revisions, as etcd keeps them for the API server: ONE store-wide revision
//! counter (every write takes the next integer as its `resourceVersion`), the current
//! objects, and a bounded history of events for watches and for reads at an older
//! revision. Dropping history (the window or [`Store::compact`]) is what makes old
//! revisions answer 410 Expired.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;

use super::admission::Admission;
use super::status::ApiError;

/// Identifies a resource across versions: (group, plural).
pub type ResId = (&'static str, &'static str);

/// Where one object lives: its resource, namespace ("" when cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjKey {
    /// The resource.
    pub res: ResId,
    /// Namespace, "" for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// A watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was removed (the object is its last state, at the deletion revision).
    Deleted,
}

/// One committed write.
#[derive(Debug, Clone)]
pub struct Event {
    /// The revision this write created.
    pub rv: u64,
    /// Which object.
    pub key: ObjKey,
    /// What happened.
    pub ty: EventType,
    /// The object after the write (for a delete: its last state, stamped with `rv`).
    pub object: Arc<Value>,
    /// The object before the write (None for a create).
    pub prev: Option<Arc<Value>>,
}

/// Objects, the revision counter and the retained history.
#[derive(Debug, Clone)]
pub struct Store {
    revision: u64,
    objects: BTreeMap<ObjKey, Arc<Value>>,
    history: VecDeque<Event>,
    /// Every event with `rv > compacted` is retained; reads and watches from an older
    /// revision are expired.
    compacted: u64,
    history_limit: usize,
    /// The mutating admission webhooks every write of a main resource passes.
    pub admission: Admission,
}

impl Store {
    /// An empty store at revision `start` keeping at most `history_limit` events.
    pub fn new(start: u64, history_limit: usize) -> Self {
        Self {
            revision: start,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            compacted: start,
            history_limit,
            admission: Admission::default(),
        }
    }

    /// The current revision (that of the latest write).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The oldest revision still readable/watchable from.
    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    /// Changes the history window (drops events beyond it now).
    pub fn set_history_limit(&mut self, limit: usize) {
        self.history_limit = limit;
        self.trim();
    }

    /// Drops all history: reads and watches from any revision older than the current one
    /// answer 410 from now on.
    pub fn compact(&mut self) {
        self.history.clear();
        self.compacted = self.revision;
    }

    /// The current object at `key`.
    pub fn get(&self, key: &ObjKey) -> Option<&Arc<Value>> {
        self.objects.get(key)
    }

    /// Current objects of a resource (in one namespace, or all), in (namespace, name) order.
    pub fn objects_of<'a>(
        &'a self,
        res: ResId,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a ObjKey, &'a Arc<Value>)> + 'a {
        self.objects
            .range(
                ObjKey {
                    res,
                    namespace: String::new(),
                    name: String::new(),
                }..,
            )
            .take_while(move |(k, _)| k.res == res)
            .filter(move |(k, _)| namespace.is_none_or(|ns| k.namespace == ns))
    }

    /// Writes (`Some`) or removes (`None`) the object at `key` as the next revision, stamping
    /// `metadata.resourceVersion`; returns the committed event.
    pub fn commit(&mut self, key: ObjKey, new: Option<Value>) -> Event {
        self.revision += 1;
        let rv = self.revision;
        let prev = self.objects.get(&key).cloned();
        let (ty, object) = match new {
            Some(mut obj) => {
                set_rv(&mut obj, rv);
                let obj = Arc::new(obj);
                self.objects.insert(key.clone(), obj.clone());
                let ty = if prev.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (ty, obj)
            }
            None => {
                self.objects.remove(&key);
                let mut last = prev.as_deref().cloned().unwrap_or(Value::Null);
                set_rv(&mut last, rv);
                (EventType::Deleted, Arc::new(last))
            }
        };
        let event = Event {
            rv,
            key,
            ty,
            object,
            prev,
        };
        self.history.push_back(event.clone());
        self.trim();
        event
    }

    fn trim(&mut self) {
        while self.history.len() > self.history_limit {
            if let Some(e) = self.history.pop_front() {
                self.compacted = e.rv;
            }
        }
    }

    /// Fails with 410 Expired when history after `rv` is no longer complete.
    pub fn check_retained(&self, rv: u64) -> Result<(), ApiError> {
        if rv < self.compacted {
            Err(ApiError::expired(format!(
                "too old resource version: {rv} ({})",
                self.compacted
            )))
        } else {
            Ok(())
        }
    }

    /// Retained events with revision > `after`, oldest first.
    pub fn events_after(&self, after: u64) -> impl Iterator<Item = &Event> + '_ {
        let start = self.history.partition_point(|e| e.rv <= after);
        self.history.range(start..)
    }

    /// The objects of a resource as they were at revision `rv` (≤ current): the current
    /// state with every later retained event undone; 410 if history after `rv` was dropped.
    pub fn snapshot_at(
        &self,
        res: ResId,
        namespace: Option<&str>,
        rv: u64,
    ) -> Result<BTreeMap<ObjKey, Arc<Value>>, ApiError> {
        let mut state: BTreeMap<ObjKey, Arc<Value>> = self
            .objects_of(res, namespace)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if rv >= self.revision {
            return Ok(state);
        }
        self.check_retained(rv)?;
        let later: Vec<&Event> = self.events_after(rv).collect();
        for e in later.into_iter().rev() {
            if e.key.res != res || namespace.is_some_and(|ns| e.key.namespace != ns) {
                continue;
            }
            match &e.prev {
                Some(p) => state.insert(e.key.clone(), p.clone()),
                None => state.remove(&e.key),
            };
        }
        Ok(state)
    }

    /// Every key currently stored (for namespace deletion).
    pub fn keys_in_namespace(&self, namespace: &str) -> Vec<ObjKey> {
        self.objects
            .keys()
            .filter(|k| k.namespace == namespace)
            .cloned()
            .collect()
    }
}

/// Stamps `metadata.resourceVersion`.
pub fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key(name: &str) -> ObjKey {
        ObjKey {
            res: ("", "configmaps"),
            namespace: "default".into(),
            name: name.into(),
        }
    }

    #[test]
    fn snapshot_undoes_later_writes_and_expires_after_compaction() {
        let mut s = Store::new(1, 100);
        let obj = |v: u32| json!({"metadata": {"name": "a"}, "data": {"v": v}});
        let e1 = s.commit(key("a"), Some(obj(1)));
        s.commit(key("a"), Some(obj(2)));
        s.commit(key("b"), Some(obj(3)));
        s.commit(key("a"), None);
        let at = s.snapshot_at(("", "configmaps"), None, e1.rv).unwrap();
        assert_eq!(at.len(), 1);
        assert_eq!(at[&key("a")]["data"]["v"], 1);
        assert_eq!(at[&key("a")]["metadata"]["resourceVersion"], "2");
        assert_eq!(s.events_after(e1.rv).count(), 3);
        s.compact();
        assert_eq!(
            s.snapshot_at(("", "configmaps"), None, e1.rv)
                .unwrap_err()
                .code,
            410
        );
        assert!(s.check_retained(s.revision()).is_ok());
    }

    #[test]
    fn window_trims_oldest() {
        let mut s = Store::new(1, 2);
        for i in 0..5 {
            s.commit(key(&format!("o{i}")), Some(json!({"metadata": {}})));
        }
        assert_eq!(s.compacted(), 4);
        assert!(s.check_retained(3).is_err());
        assert!(s.check_retained(4).is_ok());
    }
}
