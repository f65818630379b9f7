//! The objects records are written as, and reading records back out of them.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use fleetshard_coord::store::{Entry, StoreError};
use k8s_openapi::ByteString;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::errors::parse_version;
use crate::names::{
    CONFIGMAP_PREFIX, KEY_ANNOTATION, MANAGED_BY_LABEL, MANAGED_BY_VALUE, RECORD_ANNOTATION,
    RECORD_BASE64_ANNOTATION, ROOT_LABEL, VALUE_KEY, root_label,
};

/// Kubernetes refuses a ConfigMap whose data and binaryData add up to more than 1 MiB.
pub const MAX_CONFIGMAP_DATA: usize = 1 << 20;
/// Kubernetes refuses an object whose annotations add up to more than 256 KiB.
pub const MAX_ANNOTATIONS: usize = 256 << 10;

/// The labels the record object of `key` carries (what the record selectors match).
pub(crate) fn record_labels(key: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY_LABEL.to_owned(), MANAGED_BY_VALUE.to_owned()),
        (ROOT_LABEL.to_owned(), root_label(key)),
    ])
}

/// Metadata of a fleetshard record object: its name, labels, key annotation and, for a
/// compare-and-swap, the resourceVersion it must still have.
fn record_meta(key: &str, name: &str, rv: Option<u64>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(record_labels(key)),
        annotations: Some(BTreeMap::from([(
            KEY_ANNOTATION.to_owned(),
            key.to_owned(),
        )])),
        resource_version: rv.map(|v| v.to_string()),
        ..ObjectMeta::default()
    }
}

/// A record ConfigMap: the value in `data.value` when it is UTF-8 (readable with
/// `kubectl`), in `binaryData.value` otherwise.
pub fn record_configmap(
    key: &str,
    name: &str,
    value: Vec<u8>,
    rv: Option<u64>,
) -> Result<ConfigMap, StoreError> {
    if value.len() > MAX_CONFIGMAP_DATA {
        return Err(StoreError::Backend(format!(
            "key {key:?}: {} bytes do not fit in a ConfigMap (1 MiB at most)",
            value.len()
        )));
    }
    let mut cm = ConfigMap {
        metadata: record_meta(key, name, rv),
        ..ConfigMap::default()
    };
    match String::from_utf8(value) {
        Ok(text) => cm.data = Some(BTreeMap::from([(VALUE_KEY.to_owned(), text)])),
        Err(e) => {
            cm.binary_data = Some(BTreeMap::from([(
                VALUE_KEY.to_owned(),
                ByteString(e.into_bytes()),
            )]))
        }
    }
    Ok(cm)
}

/// A lease record: the bytes in an annotation, and the JSON `holder` field mirrored to
/// `spec.holderIdentity` for `kubectl get leases`. No duration or renew time is set: the
/// record's liveness is judged by fleetshard's observers, and tools that act on a Lease's
/// times (kube's leader election) must not act on these.
pub fn record_lease(
    key: &str,
    name: &str,
    value: Vec<u8>,
    rv: Option<u64>,
) -> Result<Lease, StoreError> {
    let mut meta = record_meta(key, name, rv);
    let holder = holder_of(&value);
    let (annotation, text) = match String::from_utf8(value) {
        Ok(text) => (RECORD_ANNOTATION, text),
        Err(e) => (RECORD_BASE64_ANNOTATION, BASE64.encode(e.as_bytes())),
    };
    if text.len() + key.len() > MAX_ANNOTATIONS - 1024 {
        return Err(StoreError::Backend(format!(
            "key {key:?}: a {} byte lease record does not fit in a Lease's annotations",
            text.len()
        )));
    }
    if let Some(a) = meta.annotations.as_mut() {
        a.insert(annotation.to_owned(), text);
    }
    Ok(Lease {
        metadata: meta,
        spec: Some(LeaseSpec {
            holder_identity: holder,
            ..LeaseSpec::default()
        }),
    })
}

/// A JSON merge patch that makes a Lease equal to `lease` (built by [`record_lease`] with a
/// resourceVersion, which the API server then checks). Leases are written this way, not
/// with PUT, because a real API server lets a PUT *create* a missing Lease (its strategy
/// allows create-on-update), which would let a compare-and-swap on a deleted record
/// succeed; a patch of a missing object is always 404.
pub fn lease_merge_patch(lease: &Lease) -> serde_json::Value {
    let annotations = lease.metadata.annotations.clone().unwrap_or_default();
    let mut patch_annotations = serde_json::Map::new();
    for name in [RECORD_ANNOTATION, RECORD_BASE64_ANNOTATION] {
        // The encoding not used this time is removed (null), in case the last one used it.
        patch_annotations.insert(name.to_owned(), serde_json::Value::Null);
    }
    for (k, v) in annotations {
        patch_annotations.insert(k, v.into());
    }
    let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
    serde_json::json!({
        "metadata": {
            "resourceVersion": lease.metadata.resource_version,
            "labels": lease.metadata.labels,
            "annotations": patch_annotations,
        },
        "spec": { "holderIdentity": holder },
    })
}

/// The `holder` string of a JSON record, if it is one.
fn holder_of(value: &[u8]) -> Option<String> {
    let json: serde_json::Value = serde_json::from_slice(value).ok()?;
    Some(json.get("holder")?.as_str()?.to_owned()).filter(|h| !h.is_empty())
}

/// Whether fleetshard created this object for one of its records.
pub fn is_record(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == MANAGED_BY_VALUE)
        && record_key(meta).is_some()
}

/// The key a record object stores.
pub fn record_key(meta: &ObjectMeta) -> Option<&str> {
    meta.annotations
        .as_ref()?
        .get(KEY_ANNOTATION)
        .map(String::as_str)
}

/// `kind name` for messages.
pub fn describe(kind: &str, meta: &ObjectMeta) -> String {
    format!("{kind} {}", meta.name.as_deref().unwrap_or("(unnamed)"))
}

/// The entry a record ConfigMap holds.
pub fn configmap_entry(cm: &ConfigMap) -> Result<Entry, StoreError> {
    let what = describe("ConfigMap", &cm.metadata);
    let key = record_key(&cm.metadata)
        .ok_or_else(|| StoreError::Backend(format!("{what}: no {KEY_ANNOTATION} annotation")))?;
    let version = parse_version(cm.metadata.resource_version.as_deref(), &what)?;
    let text = cm.data.as_ref().and_then(|d| d.get(VALUE_KEY));
    let bytes = cm.binary_data.as_ref().and_then(|d| d.get(VALUE_KEY));
    let value = match (text, bytes) {
        (Some(t), None) => Ok(t.clone().into_bytes()),
        (None, Some(b)) => Ok(b.0.clone()),
        (None, None) => Err(format!("no data.{VALUE_KEY} or binaryData.{VALUE_KEY}")),
        (Some(_), Some(_)) => Err(format!("both data.{VALUE_KEY} and binaryData.{VALUE_KEY}")),
    };
    let value = or_unreadable(value, &what, key);
    Ok(Entry {
        key: key.to_owned(),
        value,
        version,
    })
}

/// The entry a record Lease holds.
pub fn lease_entry(lease: &Lease) -> Result<Entry, StoreError> {
    let what = describe("Lease", &lease.metadata);
    let key = record_key(&lease.metadata)
        .ok_or_else(|| StoreError::Backend(format!("{what}: no {KEY_ANNOTATION} annotation")))?;
    let version = parse_version(lease.metadata.resource_version.as_deref(), &what)?;
    let annotations = lease.metadata.annotations.as_ref();
    let value = if let Some(text) = annotations.and_then(|a| a.get(RECORD_ANNOTATION)) {
        Ok(text.clone().into_bytes())
    } else if let Some(b64) = annotations.and_then(|a| a.get(RECORD_BASE64_ANNOTATION)) {
        BASE64
            .decode(b64)
            .map_err(|e| format!("annotation {RECORD_BASE64_ANNOTATION}: {e}"))
    } else {
        Err(format!("no {RECORD_ANNOTATION} annotation"))
    };
    let value = or_unreadable(value, &what, key);
    Ok(Entry {
        key: key.to_owned(),
        value,
        version,
    })
}

/// The value of a record object, or — when someone damaged the object (a hand edit) — an
/// empty value, logged. An empty value is a record that does not decode, which the
/// protocols report and ignore, and can replace with a compare-and-swap on its version; an
/// error instead would make the whole listing unreadable, or a missing entry would make the
/// key impossible to claim (its create would conflict forever).
fn or_unreadable(value: Result<Vec<u8>, String>, what: &str, key: &str) -> Vec<u8> {
    value.unwrap_or_else(|reason| {
        tracing::warn!(
            object = what,
            key,
            reason,
            "unreadable record: read as empty"
        );
        Vec::new()
    })
}

/// Checks that a record object read by name stores `key` (and not another key whose name
/// it shares, which the naming rule makes all but impossible).
pub fn check_key(entry: Entry, key: &str, what: &str) -> Result<Entry, StoreError> {
    if entry.key == key {
        Ok(entry)
    } else {
        Err(StoreError::Backend(format!(
            "{what} holds key {:?}, not {key:?}: two keys map to one object name",
            entry.key
        )))
    }
}

/// The value of data key `data_key` of a shared ConfigMap.
pub fn data_value(cm: &ConfigMap, data_key: &str) -> Option<Vec<u8>> {
    if let Some(text) = cm.data.as_ref().and_then(|d| d.get(data_key)) {
        return Some(text.clone().into_bytes());
    }
    cm.binary_data
        .as_ref()
        .and_then(|d| d.get(data_key))
        .map(|b| b.0.clone())
}

/// Sets (or with `None` removes) data key `data_key` of a shared ConfigMap, leaving every
/// other key, label and annotation as it is; UTF-8 values go to `data`, others to
/// `binaryData`, as `kubectl create configmap --from-file` does.
pub fn set_data_value(
    cm: &mut ConfigMap,
    data_key: &str,
    value: Option<Vec<u8>>,
    key: &str,
) -> Result<(), StoreError> {
    if let Some(d) = cm.data.as_mut() {
        d.remove(data_key);
    }
    if let Some(d) = cm.binary_data.as_mut() {
        d.remove(data_key);
    }
    match value.map(String::from_utf8) {
        None => {}
        Some(Ok(text)) => {
            cm.data
                .get_or_insert_default()
                .insert(data_key.to_owned(), text);
        }
        Some(Err(e)) => {
            cm.binary_data
                .get_or_insert_default()
                .insert(data_key.to_owned(), ByteString(e.into_bytes()));
        }
    }
    // What the API server counts against the limit: the values.
    let size: usize = cm
        .data
        .iter()
        .flatten()
        .map(|(_, v)| v.len())
        .sum::<usize>()
        + cm.binary_data
            .iter()
            .flatten()
            .map(|(_, v)| v.0.len())
            .sum::<usize>();
    if size > MAX_CONFIGMAP_DATA {
        return Err(StoreError::Backend(format!(
            "key {key:?}: the ConfigMap's data would be {size} bytes (1 MiB at most)"
        )));
    }
    Ok(())
}

/// Every `configmap/NAME/DATAKEY` entry of a shared ConfigMap under `prefix`.
pub fn data_entries(cm: &ConfigMap, prefix: &str) -> Result<Vec<Entry>, StoreError> {
    let what = describe("ConfigMap", &cm.metadata);
    let name = cm.metadata.name.as_deref().unwrap_or_default();
    let version = parse_version(cm.metadata.resource_version.as_deref(), &what)?;
    let text = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k, v.as_bytes().to_vec()));
    let bytes = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| (k, v.0.clone()));
    Ok(text
        .chain(bytes)
        .map(|(k, value)| Entry {
            key: format!("{CONFIGMAP_PREFIX}{name}/{k}"),
            value,
            version,
        })
        .filter(|e| e.key.starts_with(prefix))
        .collect())
}
