//! The cluster Secrets as `pin` reads and writes them: listed fresh for each pass (the
//! resourceVersion each write is guarded by, the `shard` as written, the manual-pin
//! annotation), and written with a JSON merge patch that names only `data.shard` and
//! carries the resourceVersion read, so a Secret changed in between is a conflict, never
//! overwritten.

use std::collections::BTreeMap;

use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use fleetshard_controller::inventory::secret_resource;
use fleetshard_core::Cluster;
use fleetshard_core::argo::is_built_in_in_cluster;
use fleetshard_manifest::SECRET_TYPE_LABEL;
use fleetshard_plan::{CurrentShard, MANUAL_PIN_ANNOTATION, MANUAL_PIN_VALUE, PinEntry, PinPlan};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

/// The cluster Secrets of one namespace.
pub(super) struct Secrets {
    api: Api<DynamicObject>,
    namespace: String,
}

/// One cluster Secret as listed.
#[derive(Debug)]
struct Listed {
    name: String,
    resource_version: String,
    current: CurrentShard,
    manual: bool,
}

/// A listing: the Secrets by uid, and what was wrong with them.
#[derive(Debug, Default)]
pub(super) struct Listing {
    namespace: String,
    by_uid: BTreeMap<String, Listed>,
    /// Problems, each naming the Secret and the field.
    pub(super) problems: Vec<String>,
}

/// How a pass's writes ended.
pub(super) enum WriteOutcome {
    /// Every change written; how many.
    Done(usize),
    /// This Secret (`namespace/name`) changed since it was listed; the writes before it
    /// stand.
    Conflict(String),
}

impl Secrets {
    pub(super) fn new(client: kube::Client, namespace: &str) -> Self {
        Secrets {
            api: Api::namespaced_with(client, namespace, &secret_resource()),
            namespace: namespace.to_owned(),
        }
    }

    /// Lists the cluster Secrets now.
    pub(super) async fn list(&self) -> anyhow::Result<Listing> {
        let params = ListParams::default().labels(&format!("{SECRET_TYPE_LABEL}=cluster"));
        let list = self.api.list(&params).await.with_context(|| {
            format!(
                "listing the cluster Secrets in namespace {} ({SECRET_TYPE_LABEL}=cluster)",
                self.namespace
            )
        })?;
        let mut listing = Listing {
            namespace: self.namespace.clone(),
            ..Listing::default()
        };
        for obj in list.items {
            let name = obj.metadata.name.clone().unwrap_or_default();
            let what = format!("Secret {}/{name}", self.namespace);
            let (Some(uid), Some(rv)) = (
                obj.metadata.uid.clone(),
                obj.metadata.resource_version.clone(),
            ) else {
                listing.problems.push(format!(
                    "{what}: metadata: no uid or resourceVersion; left alone"
                ));
                continue;
            };
            let manual = match obj
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(MANUAL_PIN_ANNOTATION))
            {
                None => false,
                Some(v) if v == MANUAL_PIN_VALUE => true,
                Some(v) => {
                    listing.problems.push(format!(
                        "{what}: metadata.annotations[{MANUAL_PIN_ANNOTATION}]: {v:?} is not \
                         {MANUAL_PIN_VALUE:?}; left alone, as if pinned by hand"
                    ));
                    true
                }
            };
            let current = match shard_value(&obj.data) {
                Ok(v) => CurrentShard::parse(v.as_deref()),
                Err(why) => {
                    listing.problems.push(format!("{what}: data.shard: {why}"));
                    CurrentShard::NotInteger(why)
                }
            };
            listing.by_uid.insert(
                uid,
                Listed {
                    name,
                    resource_version: rv,
                    current,
                    manual,
                },
            );
        }
        Ok(listing)
    }

    /// Writes the plan's changes, in order, each guarded by the resourceVersion listed.
    pub(super) async fn write(
        &self,
        plan: &PinPlan,
        listing: &Listing,
    ) -> anyhow::Result<WriteOutcome> {
        let listed: BTreeMap<String, &Listed> = listing
            .by_uid
            .values()
            .map(|l| (format!("{}/{}", listing.namespace, l.name), l))
            .collect();
        let mut written = 0;
        for (secret, shard) in plan.writes() {
            let Some(l) = listed.get(secret) else {
                // Cannot happen: the plan's Secrets come from this listing.
                anyhow::bail!("Secret {secret}: not in the listing the plan was made from");
            };
            let (name, version) = (&l.name, &l.resource_version);
            let patch = json!({
                "metadata": {"resourceVersion": version},
                "data": {"shard": STANDARD.encode(shard.to_string())},
            });
            match self
                .api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => written += 1,
                Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => {
                    return Ok(WriteOutcome::Conflict(secret.to_owned()));
                }
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("writing data.shard = {shard} of Secret {secret} ({written} written before it)")
                    });
                }
            }
        }
        Ok(WriteOutcome::Done(written))
    }
}

impl Listing {
    /// Argo CD's cluster list (the inventory's `clusters`) with each Secret's state as
    /// listed now. A cluster whose Secret is no longer listed is left out (gone); a
    /// Secret the inventory does not show yet waits for the next pass.
    pub(super) fn entries(&self, clusters: &[Cluster]) -> Vec<PinEntry> {
        clusters
            .iter()
            .filter_map(|c| {
                if is_built_in_in_cluster(c) {
                    return Some(PinEntry {
                        cluster: c.clone(),
                        secret: None,
                        current: CurrentShard::Unset,
                        manual: false,
                    });
                }
                let listed = self.by_uid.get(&c.id)?;
                Some(PinEntry {
                    cluster: c.clone(),
                    secret: Some(format!("{}/{}", self.namespace, listed.name)),
                    current: listed.current.clone(),
                    manual: listed.manual,
                })
            })
            .collect()
    }
}

/// `shard` of a Secret's `data` (base64) or `stringData`: `Ok(None)` when absent, an error
/// saying why when it cannot be read as text.
fn shard_value(data: &Value) -> Result<Option<String>, String> {
    if let Some(v) = data.pointer("/stringData/shard").and_then(Value::as_str) {
        return Ok(Some(v.to_owned()));
    }
    let Some(encoded) = data.pointer("/data/shard") else {
        return Ok(None);
    };
    let encoded = encoded.as_str().ok_or("not a string")?;
    let bytes = fleetshard_manifest::decode_secret_data(encoded)
        .map_err(|e| format!("invalid base64: {e}"))?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| "not UTF-8 text".to_owned())
}
