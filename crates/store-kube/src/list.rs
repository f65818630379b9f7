//! `list` and `wait_for_change` straight from the API server: label-selected lists and
//! watches of both kinds (without the watch cache, or while it is not fresh).

use std::time::Duration;

use fleetshard_coord::store::{Entry, Listing, StoreError};
use futures::stream::{self, BoxStream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, ObjectList, WatchEvent, WatchParams};
use kube::{Api, Resource};

use crate::errors::{CallError, call, parse_version};
use crate::names::{ConfigMapScope, configmap_may_match, record_selector};
use crate::objects::{configmap_entry, data_entries, is_record, lease_entry, record_key};
use crate::{Ctx, KubeStore};

/// The lists and watches that cover a prefix (and the watch cache's scope key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Label selector of the Leases to read; `None`: no Lease can match.
    pub(crate) leases: Option<String>,
    /// Label and field selectors of the ConfigMaps to read.
    pub(crate) configmaps: (Option<String>, Option<String>),
}

impl Plan {
    pub(crate) fn of(prefix: &str) -> Plan {
        let records = record_selector(prefix);
        match ConfigMapScope::of(prefix) {
            // Only fleetshard's own records can be under the prefix.
            ConfigMapScope::None => Plan {
                leases: Some(records.clone()),
                configmaps: (Some(records), None),
            },
            // `configmap/NAME/…`: that one ConfigMap, and no record key starts so.
            ConfigMapScope::One(name) => Plan {
                leases: None,
                configmaps: (None, Some(format!("metadata.name={name}"))),
            },
            // Records and every shared ConfigMap.
            ConfigMapScope::All => Plan {
                leases: Some(records),
                configmaps: (None, None),
            },
        }
    }
}

/// What one watch event means to a waiter.
enum Seen {
    /// Something under the prefix changed at this revision.
    Change(u64),
    /// The store reached this revision (an event elsewhere, or a bookmark).
    Progress(u64),
    /// The watch cannot go on (410 Gone, an error event, a broken stream).
    Broken(String),
}

/// A LIST with these label and field selectors.
pub(crate) fn list_params(selectors: &(Option<String>, Option<String>)) -> ListParams {
    ListParams {
        label_selector: selectors.0.clone(),
        field_selector: selectors.1.clone(),
        ..ListParams::default()
    }
}

/// A WATCH with these selectors that the server ends after `timeout` (whole seconds,
/// 1..=290). Bookmarks are on by default: they carry the revision while nothing matches.
pub(crate) fn watch_params(
    selectors: &(Option<String>, Option<String>),
    timeout: Duration,
) -> WatchParams {
    let mut wp = WatchParams::default().timeout(timeout.as_secs().clamp(1, 290) as u32);
    wp.label_selector = selectors.0.clone();
    wp.field_selector = selectors.1.clone();
    wp
}

/// A LIST's resourceVersion (`kind` names it in errors).
pub(crate) fn list_revision<K>(list: &ObjectList<K>, kind: &str) -> Result<u64, StoreError>
where
    K: Clone,
{
    parse_version(
        list.metadata.resource_version.as_deref(),
        &format!("the {kind} list"),
    )
}

/// Whether a change to `meta` (a Lease if `lease`) concerns a watcher of `prefix`.
fn concerns(meta: &ObjectMeta, lease: bool, prefix: &str) -> bool {
    if is_record(meta) {
        return record_key(meta).is_some_and(|k| k.starts_with(prefix));
    }
    // A shared ConfigMap: any of its data keys may be under the prefix (spurious wake-ups
    // are allowed; a removed data key cannot be told from the new object anyway).
    !lease
        && ConfigMapScope::of(prefix) != ConfigMapScope::None
        && configmap_may_match(meta.name.as_deref().unwrap_or_default(), prefix)
}

fn classify<K: Resource<DynamicType = ()>>(
    event: Result<WatchEvent<K>, kube::Error>,
    lease: bool,
    prefix: &str,
    since: u64,
) -> Seen {
    let object = match event {
        Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) => o,
        Ok(WatchEvent::Bookmark(b)) => {
            return match b.metadata.resource_version.parse() {
                Ok(rv) => Seen::Progress(rv),
                Err(_) => Seen::Broken(format!(
                    "bookmark resourceVersion {:?} is not a number",
                    b.metadata.resource_version
                )),
            };
        }
        Ok(WatchEvent::Error(status)) => {
            return Seen::Broken(format!(
                "{} {}: {}",
                status.code, status.reason, status.message
            ));
        }
        Err(e) => return Seen::Broken(e.to_string()),
    };
    let meta = object.meta();
    let Some(rv) = meta
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
    else {
        return Seen::Broken(format!(
            "{} {}: resourceVersion {:?} is not a number",
            K::kind(&()),
            meta.name.as_deref().unwrap_or_default(),
            meta.resource_version
        ));
    };
    if rv > since && concerns(meta, lease, prefix) {
        Seen::Change(rv)
    } else {
        Seen::Progress(rv)
    }
}

impl KubeStore {
    /// Two LISTs, straight from the API server (no cache, or the cache is not fresh).
    pub(crate) async fn list_direct(&self, ctx: &Ctx, prefix: &str) -> Result<Listing, StoreError> {
        let plan = Plan::of(prefix);
        let timeout = self.inner.options.call_timeout;
        let leases = async {
            let Some(selector) = &plan.leases else {
                return Ok(None);
            };
            let lp = list_params(&(Some(selector.clone()), None));
            call(|| "list Leases".into(), timeout, ctx.leases.list(&lp))
                .await
                .map(Some)
        };
        let lp = list_params(&plan.configmaps);
        let configmaps = call(
            || "list ConfigMaps".into(),
            timeout,
            ctx.configmaps.list(&lp),
        );
        let (leases, configmaps) =
            futures::try_join!(leases, configmaps).map_err(|e: CallError| e.into_store(prefix))?;
        let mut revision = list_revision(&configmaps, "ConfigMap")?;
        let mut entries = Vec::new();
        if let Some(leases) = leases {
            revision = revision.min(list_revision(&leases, "Lease")?);
            for lease in leases.items.iter().filter(|l| is_record(&l.metadata)) {
                entries.push(lease_entry(lease)?);
            }
        }
        for cm in &configmaps.items {
            if is_record(&cm.metadata) {
                entries.push(configmap_entry(cm)?);
            } else if plan.configmaps.0.is_none() {
                entries.extend(data_entries(cm, prefix)?);
            }
        }
        entries.retain(|e: &Entry| e.key.starts_with(prefix));
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Listing { entries, revision })
    }

    /// Two fresh watches from `since` (only with the cache turned off).
    pub(crate) async fn wait_direct(
        &self,
        ctx: &Ctx,
        prefix: &str,
        since: u64,
    ) -> Result<u64, StoreError> {
        let plan = Plan::of(prefix);
        let options = &self.inner.options;
        let wp = |selectors: &(Option<String>, Option<String>)| {
            watch_params(selectors, options.watch_timeout)
        };
        let rv = since.to_string();
        let mut streams: Vec<BoxStream<'_, Seen>> = Vec::new();
        if let Some(selector) = &plan.leases {
            let wp = wp(&(Some(selector.clone()), None));
            let events = call(
                || "watch Leases".into(),
                options.call_timeout,
                ctx.leases.watch(&wp, &rv),
            )
            .await
            .map_err(|e| e.into_store(prefix))?;
            streams.push(
                events
                    .map(move |e| classify::<Lease>(e, true, prefix, since))
                    .boxed(),
            );
        }
        let wp = wp(&plan.configmaps);
        let events = call(
            || "watch ConfigMaps".into(),
            options.call_timeout,
            ctx.configmaps.watch(&wp, &rv),
        )
        .await
        .map_err(|e| e.into_store(prefix))?;
        streams.push(
            events
                .map(move |e| classify::<ConfigMap>(e, false, prefix, since))
                .boxed(),
        );
        let mut seen = stream::select_all(streams);
        let idle = options.watch_timeout + options.call_timeout;
        let mut latest = since;
        loop {
            match tokio::time::timeout(idle, seen.next()).await {
                Ok(Some(Seen::Change(rv))) => return Ok(rv.max(latest)),
                Ok(Some(Seen::Progress(rv))) => latest = latest.max(rv),
                Ok(Some(Seen::Broken(why))) => {
                    tracing::debug!(prefix, since, why, "watch ended; waking the caller");
                    return self.current_revision(ctx, prefix).await;
                }
                // The server ended the watches (their timeout): a spurious wake-up.
                Ok(None) => return self.current_revision(ctx, prefix).await,
                Err(_) => {
                    return Err(StoreError::Unavailable(format!(
                        "watching {prefix:?}: nothing from the API server for {idle:?}"
                    )));
                }
            }
        }
    }

    /// The store revision now: the resourceVersion of a one-item list.
    async fn current_revision(&self, ctx: &Ctx, prefix: &str) -> Result<u64, StoreError> {
        let api: &Api<Lease> = &ctx.leases;
        let lp = ListParams::default().limit(1);
        let list = call(
            || "list Leases".into(),
            self.inner.options.call_timeout,
            api.list_metadata(&lp),
        )
        .await
        .map_err(|e| e.into_store(prefix))?;
        parse_version(list.metadata.resource_version.as_deref(), "the Lease list")
    }
}
