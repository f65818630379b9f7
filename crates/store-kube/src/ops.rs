//! `get`, `put` and `delete`: one object per key, a resourceVersion compare-and-swap per
//! write.

use fleetshard_util::backoff::Backoff;
use std::fmt::Debug;
use std::time::Duration;

use fleetshard_coord::store::{Entry, Precondition, StoreError};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::errors::{call, parse_version};
use crate::names::Target;
use crate::objects::{
    check_key, configmap_entry, data_value, describe, is_record, lease_entry, lease_merge_patch,
    record_configmap, record_lease, set_data_value,
};
use crate::{Ctx, KubeStore};

/// The longest pause between two write attempts.
const MAX_BACKOFF: Duration = Duration::from_millis(200);

/// What a record kind needs to be handled generically, and how a compare-and-swap
/// replaces one.
trait Kind: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug {
    /// `None`: PUT the whole object; `Some`: send this merge patch instead.
    fn merge_patch(&self) -> Option<serde_json::Value>;
}

impl Kind for ConfigMap {
    fn merge_patch(&self) -> Option<serde_json::Value> {
        None
    }
}

impl Kind for Lease {
    fn merge_patch(&self) -> Option<serde_json::Value> {
        Some(lease_merge_patch(self))
    }
}

fn patch_of<K: Kind>(obj: &K) -> Option<serde_json::Value> {
    obj.merge_patch()
}

fn conflict(key: &str) -> StoreError {
    StoreError::Conflict {
        key: key.to_owned(),
    }
}

impl KubeStore {
    fn timeout(&self) -> Duration {
        self.inner.options.call_timeout
    }

    /// Sleeps before attempt `attempt` (1-based; none before the first).
    async fn backoff(&self, attempt: u32) {
        if attempt > 1 {
            let backoff = Backoff::doubling(self.inner.options.retry_backoff, MAX_BACKOFF);
            tokio::time::sleep(backoff.delay(attempt - 2)).await;
        }
    }

    async fn get_object<K: Kind>(
        &self,
        api: &Api<K>,
        name: &str,
        key: &str,
    ) -> Result<Option<K>, StoreError> {
        call(
            || format!("get {} {name}", K::kind(&())),
            self.timeout(),
            api.get_opt(name),
        )
        .await
        .map_err(|e| e.into_store(key))
    }

    pub(crate) async fn get_entry(
        &self,
        ctx: &Ctx,
        key: &str,
    ) -> Result<Option<Entry>, StoreError> {
        match Target::of(key)? {
            Target::Record { name } => self
                .get_object(&ctx.configmaps, &name, key)
                .await?
                .map(|cm| {
                    check_key(
                        configmap_entry(&cm)?,
                        key,
                        &describe("ConfigMap", &cm.metadata),
                    )
                })
                .transpose(),
            Target::Lease { name } => self
                .get_object(&ctx.leases, &name, key)
                .await?
                .map(|l| check_key(lease_entry(&l)?, key, &describe("Lease", &l.metadata)))
                .transpose(),
            Target::ConfigMapKey { name, data_key } => {
                let Some(cm) = self.shared_configmap(ctx, &name, key).await? else {
                    return Ok(None);
                };
                let version = shared_version(&cm)?;
                Ok(data_value(&cm, &data_key).map(|value| Entry {
                    key: key.to_owned(),
                    value,
                    version,
                }))
            }
        }
    }

    pub(crate) async fn put_entry(
        &self,
        ctx: &Ctx,
        key: &str,
        value: Vec<u8>,
        pre: Precondition,
    ) -> Result<u64, StoreError> {
        let target = Target::of(key)?;
        let written = match &target {
            Target::Record { name } => {
                let build = |rv| record_configmap(key, name, value.clone(), rv);
                self.put_record(&ctx.configmaps, name, key, pre, build)
                    .await
            }
            Target::Lease { name } => {
                let build = |rv| record_lease(key, name, value.clone(), rv);
                self.put_record(&ctx.leases, name, key, pre, build).await
            }
            Target::ConfigMapKey { name, data_key } => self
                .write_shared(ctx, name, data_key, key, Some(value), pre)
                .await
                .map(|v| v.unwrap_or_default()),
        }?;
        self.wrote(&target, key, written);
        Ok(written)
    }

    pub(crate) async fn delete_entry(
        &self,
        ctx: &Ctx,
        key: &str,
        pre: Precondition,
    ) -> Result<(), StoreError> {
        let target = Target::of(key)?;
        match &target {
            Target::Record { name } => {
                self.delete_record(&ctx.configmaps, name, key, pre).await?;
                self.deleted(&target, key, pre);
            }
            Target::Lease { name } => {
                self.delete_record(&ctx.leases, name, key, pre).await?;
                self.deleted(&target, key, pre);
            }
            Target::ConfigMapKey { name, data_key } => {
                // Removing a data key replaces the ConfigMap: a write with a version.
                if let Some(v) = self
                    .write_shared(ctx, name, data_key, key, None, pre)
                    .await?
                {
                    self.wrote(&target, key, v);
                }
            }
        }
        Ok(())
    }

    /// Writes a record object: create for `Absent`, replace at the version for
    /// `Version`, read-then-write (retried) for `Any`.
    async fn put_record<K: Kind>(
        &self,
        api: &Api<K>,
        name: &str,
        key: &str,
        pre: Precondition,
        build: impl Fn(Option<u64>) -> Result<K, StoreError>,
    ) -> Result<u64, StoreError> {
        let kind = K::kind(&());
        let pp = &PostParams::default();
        let create = |obj: K| {
            let what = || format!("create {kind} {name}");
            async move { call(what, self.timeout(), api.create(pp, &obj)).await }
        };
        let replace = |obj: K| {
            let what = || format!("replace {kind} {name}");
            async move {
                match patch_of(&obj) {
                    Some(patch) => {
                        let patch = Patch::Merge(patch);
                        let params = PatchParams::default();
                        call(what, self.timeout(), api.patch(name, &params, &patch)).await
                    }
                    None => call(what, self.timeout(), api.replace(name, pp, &obj)).await,
                }
            }
        };
        let written = |obj: K| parse_version(obj.meta().resource_version.as_deref(), name);
        match pre {
            Precondition::Absent => match create(build(None)?).await {
                Ok(obj) => written(obj),
                Err(e) if e.is_conflict() => Err(conflict(key)),
                Err(e) => Err(e.into_store(key)),
            },
            Precondition::Version(v) => match replace(build(Some(v))?).await {
                Ok(obj) => written(obj),
                Err(e) if e.is_conflict() || e.is_not_found() => Err(conflict(key)),
                Err(e) => Err(e.into_store(key)),
            },
            Precondition::Any => {
                for attempt in 1..=self.inner.options.write_attempts.max(1) {
                    self.backoff(attempt).await;
                    let result = match self.get_object(api, name, key).await? {
                        None => create(build(None)?).await,
                        Some(current) => {
                            let rv =
                                parse_version(current.meta().resource_version.as_deref(), name)?;
                            replace(build(Some(rv))?).await
                        }
                    };
                    match result {
                        Ok(obj) => return written(obj),
                        // Someone wrote (or deleted) between our read and our write.
                        Err(e) if e.is_conflict() || e.is_not_found() => continue,
                        Err(e) => return Err(e.into_store(key)),
                    }
                }
                Err(conflict(key))
            }
        }
    }

    async fn delete_record<K: Kind>(
        &self,
        api: &Api<K>,
        name: &str,
        key: &str,
        pre: Precondition,
    ) -> Result<(), StoreError> {
        let rv = match pre {
            Precondition::Absent => {
                // Deleting "if absent" is a read: there is nothing to delete.
                return match self.get_object(api, name, key).await? {
                    Some(_) => Err(conflict(key)),
                    None => Ok(()),
                };
            }
            Precondition::Version(v) => Some(v.to_string()),
            Precondition::Any => None,
        };
        let dp = DeleteParams {
            preconditions: rv.clone().map(|rv| Preconditions {
                resource_version: Some(rv),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        let what = || format!("delete {} {name}", K::kind(&()));
        match call(what, self.timeout(), api.delete(name, &dp)).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_conflict() => Err(conflict(key)),
            Err(e) if e.is_not_found() => match rv {
                Some(_) => Err(conflict(key)),
                None => Ok(()),
            },
            Err(e) => Err(e.into_store(key)),
        }
    }

    /// A ConfigMap addressed by `configmap/NAME/…`, refusing fleetshard's own records.
    async fn shared_configmap(
        &self,
        ctx: &Ctx,
        name: &str,
        key: &str,
    ) -> Result<Option<ConfigMap>, StoreError> {
        let cm = self.get_object(&ctx.configmaps, name, key).await?;
        if let Some(cm) = &cm
            && is_record(&cm.metadata)
        {
            return Err(StoreError::Backend(format!(
                "key {key:?}: ConfigMap {name} holds a fleetshard record; address it by its own key"
            )));
        }
        Ok(cm)
    }

    /// Sets (`Some`) or removes (`None`) one data key of a shared ConfigMap: read, check
    /// the precondition against the ConfigMap's resourceVersion, replace the whole object
    /// at that resourceVersion (other keys as they were). A 409 caused by a write to another
    /// data key is retried when the precondition does not name a version; with a version
    /// it is a conflict, since that version is gone. Returns the new version, if written.
    async fn write_shared(
        &self,
        ctx: &Ctx,
        name: &str,
        data_key: &str,
        key: &str,
        value: Option<Vec<u8>>,
        pre: Precondition,
    ) -> Result<Option<u64>, StoreError> {
        let api = &ctx.configmaps;
        let pp = PostParams::default();
        for attempt in 1..=self.inner.options.write_attempts.max(1) {
            self.backoff(attempt).await;
            let cm = self.shared_configmap(ctx, name, key).await?;
            let current = match &cm {
                Some(cm) if data_value(cm, data_key).is_some() => Some(shared_version(cm)?),
                _ => None,
            };
            if !pre.admits(current) {
                return Err(conflict(key));
            }
            let result = match (cm, &value) {
                // Removing a key that is not there: nothing to write.
                (_, None) if current.is_none() => return Ok(None),
                (None, None) => return Ok(None),
                (None, Some(v)) => {
                    let mut cm = ConfigMap::default();
                    cm.metadata.name = Some(name.to_owned());
                    set_data_value(&mut cm, data_key, Some(v.clone()), key)?;
                    let what = || format!("create ConfigMap {name}");
                    call(what, self.timeout(), api.create(&pp, &cm)).await
                }
                (Some(mut cm), _) => {
                    set_data_value(&mut cm, data_key, value.clone(), key)?;
                    let what = || format!("replace ConfigMap {name}");
                    call(what, self.timeout(), api.replace(name, &pp, &cm)).await
                }
            };
            match result {
                Ok(cm) => return shared_version(&cm).map(Some),
                Err(e) if e.is_conflict() || e.is_not_found() => {
                    if matches!(pre, Precondition::Version(_)) {
                        return Err(conflict(key));
                    }
                }
                Err(e) => return Err(e.into_store(key)),
            }
        }
        Err(conflict(key))
    }
}

fn shared_version(cm: &ConfigMap) -> Result<u64, StoreError> {
    parse_version(
        cm.metadata.resource_version.as_deref(),
        &describe("ConfigMap", &cm.metadata),
    )
}
