//! Where a key lives: which kind of object, under which name, with which labels. Pure
//! functions of the key, so every replica (and `kubectl`) finds the same object.

use fleetshard_coord::fenced::is_lease_key;
use fleetshard_coord::store::StoreError;

/// The prefix of keys that address a data key of any ConfigMap (Argo CD's shard map).
pub const CONFIGMAP_PREFIX: &str = "configmap/";
/// Label on every object fleetshard creates for its own records.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY_VALUE: &str = "fleetshard";
/// Label naming the first segment of the key (the fleet root, usually `fleetshard`), or a
/// hash of it when it is not a valid label value.
pub const ROOT_LABEL: &str = "fleetshard.io/root";
/// Annotation holding the exact key an object stores.
pub const KEY_ANNOTATION: &str = "fleetshard.io/key";
/// Annotation holding a Lease record's bytes (UTF-8 records, which all of fleetshard's are).
pub const RECORD_ANNOTATION: &str = "fleetshard.io/record";
/// Annotation holding a Lease record's bytes in base64, for a value that is not UTF-8.
pub const RECORD_BASE64_ANNOTATION: &str = "fleetshard.io/record-base64";
/// The data key of a record ConfigMap that holds the value.
pub const VALUE_KEY: &str = "value";
/// [`ROOT_LABEL`]'s value for keys without a `/`.
const NO_ROOT: &str = "none";
/// Longest object name Kubernetes accepts (a DNS-1123 subdomain).
const MAX_NAME: usize = 253;
/// How much of the key a hashed name keeps, so names stay readable in `kubectl get`.
const READABLE_PREFIX: usize = 40;

/// The object a key is stored in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `configmap/NAME/DATAKEY`: data key `data_key` of ConfigMap `name`, shared with
    /// whoever else owns that ConfigMap (Argo CD).
    ConfigMapKey {
        /// The ConfigMap's name.
        name: String,
        /// The data key.
        data_key: String,
    },
    /// A lease record: a `coordination.k8s.io/v1` Lease of this name.
    Lease {
        /// The Lease's name.
        name: String,
    },
    /// Any other record: a ConfigMap of this name holding only this key.
    Record {
        /// The ConfigMap's name.
        name: String,
    },
}

impl Target {
    /// Where `key` is stored; a `configmap/` key that names no valid ConfigMap data key is
    /// refused.
    pub fn of(key: &str) -> Result<Target, StoreError> {
        if let Some(rest) = key.strip_prefix(CONFIGMAP_PREFIX) {
            let bad = |why: &str| {
                StoreError::Backend(format!(
                    "key {key:?}: expected configmap/NAME/DATAKEY: {why}"
                ))
            };
            let (name, data_key) = rest.split_once('/').ok_or_else(|| bad("no data key"))?;
            if !is_dns_subdomain(name) {
                return Err(bad("NAME is not a valid ConfigMap name"));
            }
            if !is_configmap_key(data_key) {
                return Err(bad(
                    "DATAKEY is not a valid ConfigMap key (letters, digits, '-', '_', '.')",
                ));
            }
            return Ok(Target::ConfigMapKey {
                name: name.to_owned(),
                data_key: data_key.to_owned(),
            });
        }
        if key.is_empty() {
            return Err(StoreError::Backend("the empty key cannot be stored".into()));
        }
        let name = object_name(key);
        Ok(if is_lease_key(key) {
            Target::Lease { name }
        } else {
            Target::Record { name }
        })
    }
}

/// The object name of a fleetshard record. A key made of lowercase DNS labels separated by
/// `/` (and no `--`) reads as itself with `/` → `.` (`fleetshard/shards/0` →
/// `fleetshard.shards.0`); any other key gets a readable prefix, `--` and a 20-hex-digit
/// hash of the whole key. Only hashed names contain `--`, so two keys never share a name
/// (short of a 80-bit hash collision, which reading also detects by the key annotation).
pub fn object_name(key: &str) -> String {
    let plain =
        key.len() <= MAX_NAME && !key.contains("--") && key.split('/').all(is_dns_label_chars);
    if plain {
        return key.replace('/', ".");
    }
    let mut readable = String::new();
    for c in key.chars().map(|c| c.to_ascii_lowercase()) {
        if readable.len() >= READABLE_PREFIX {
            break;
        }
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            readable.push(c);
        } else if !readable.is_empty() && !readable.ends_with('-') {
            readable.push('-');
        }
    }
    let readable = readable.trim_end_matches('-');
    let readable = if readable.is_empty() { "k" } else { readable };
    format!("{readable}--{}", short_hash(key))
}

/// The [`ROOT_LABEL`] value of `key`: its first segment, or a hash of it.
pub fn root_label(key: &str) -> String {
    match key.split_once('/') {
        None => NO_ROOT.to_owned(),
        Some((first, _)) if is_label_value(first) && !first.is_empty() => first.to_owned(),
        Some((first, _)) => format!("h-{}", short_hash(first)),
    }
}

/// The label selector of the record objects that may hold keys under `prefix`: all of
/// fleetshard's, narrowed to one root when the prefix names its first segment.
pub fn record_selector(prefix: &str) -> String {
    let managed = format!("{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}");
    if prefix.contains('/') {
        format!("{managed},{ROOT_LABEL}={}", root_label(prefix))
    } else {
        managed
    }
}

/// Which ConfigMaps may hold `configmap/` keys under `prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigMapScope {
    /// None: the prefix excludes every `configmap/` key.
    None,
    /// Only this ConfigMap.
    One(String),
    /// Any ConfigMap of the namespace (a prefix shorter than `configmap/NAME/`).
    All,
}

impl ConfigMapScope {
    /// The scope of `prefix`.
    pub fn of(prefix: &str) -> ConfigMapScope {
        if CONFIGMAP_PREFIX.starts_with(prefix) {
            return ConfigMapScope::All;
        }
        match prefix.strip_prefix(CONFIGMAP_PREFIX) {
            None => ConfigMapScope::None,
            Some(rest) => match rest.split_once('/') {
                Some((name, _)) => ConfigMapScope::One(name.to_owned()),
                None => ConfigMapScope::All,
            },
        }
    }
}

/// Whether a key under ConfigMap `name` can be under `prefix` (a change to that ConfigMap
/// may concern a watcher of `prefix`).
pub fn configmap_may_match(name: &str, prefix: &str) -> bool {
    let base = format!("{CONFIGMAP_PREFIX}{name}/");
    base.starts_with(prefix) || prefix.starts_with(&base)
}

/// 80 bits of BLAKE2b of `s`, in hex: stable across platforms and versions.
fn short_hash(s: &str) -> String {
    let hash = blake2b_simd::Params::new()
        .hash_length(10)
        .hash(s.as_bytes());
    hash.to_hex().to_string()
}

/// `[a-z0-9]([a-z0-9-]*[a-z0-9])?`, any length (the caller bounds the total).
fn is_dns_label_chars(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A DNS-1123 label: what a namespace name must be.
pub fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && is_dns_label_chars(s)
}

/// A DNS-1123 subdomain: what a ConfigMap or Lease name must be.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= MAX_NAME && s.split('.').all(is_dns_label_chars)
}

/// A valid ConfigMap data key.
fn is_configmap_key(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME
        && s != "."
        && s != ".."
        && !s.starts_with("..")
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A valid label value (possibly empty).
fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b.first().is_none_or(u8::is_ascii_alphanumeric)
        && b.last().is_none_or(u8::is_ascii_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_keys_read_as_themselves() {
        assert_eq!(object_name("fleetshard/shards/0"), "fleetshard.shards.0");
        assert_eq!(
            object_name("fleetshard/assignment"),
            "fleetshard.assignment"
        );
        assert_eq!(
            Target::of("fleetshard/shards/3").unwrap(),
            Target::Lease {
                name: "fleetshard.shards.3".into()
            }
        );
        assert_eq!(
            Target::of("fleetshard/config/shards").unwrap(),
            Target::Record {
                name: "fleetshard.config.shards".into()
            }
        );
    }

    #[test]
    fn awkward_keys_get_a_readable_prefix_and_a_hash() {
        for key in [
            "Fleet/Shards/0",
            "a.b/c",
            "a--b",
            "x//y",
            "/lead",
            "_",
            "ünï/cödé",
            &"long/".repeat(100),
        ] {
            let name = object_name(key);
            assert!(is_dns_subdomain(&name), "{key:?} → {name:?}");
            assert!(name.contains("--"), "{key:?} → {name:?}");
            assert!(name.len() <= READABLE_PREFIX + 22, "{name}");
            assert_eq!(object_name(key), name, "stable");
        }
        assert!(object_name("Fleet/Shards/0").starts_with("fleet-shards-0--"));
        // Keys that would read the same get different names.
        assert_ne!(object_name("a.b/c"), object_name("a/b/c"));
        assert_ne!(object_name("A/b"), object_name("a/b"));
    }

    #[test]
    fn configmap_keys_are_checked() {
        assert_eq!(
            Target::of("configmap/argocd-app-controller-shard-cm/shardControllerMapping").unwrap(),
            Target::ConfigMapKey {
                name: "argocd-app-controller-shard-cm".into(),
                data_key: "shardControllerMapping".into()
            }
        );
        for bad in [
            "configmap/x",
            "configmap/Upper/k",
            "configmap/x/a/b",
            "configmap/x/..",
            "configmap//k",
        ] {
            let e = Target::of(bad).unwrap_err();
            assert!(e.to_string().contains(bad), "{e}");
        }
        assert!(Target::of("").is_err());
    }

    #[test]
    fn labels_and_selectors() {
        assert_eq!(root_label("fleetshard/shards/0"), "fleetshard");
        assert_eq!(root_label("distributor"), "none");
        assert!(root_label("_bad_/x").starts_with("h-"));
        assert_eq!(
            record_selector("fleetshard/"),
            "app.kubernetes.io/managed-by=fleetshard,fleetshard.io/root=fleetshard"
        );
        assert_eq!(
            record_selector("flee"),
            "app.kubernetes.io/managed-by=fleetshard"
        );
    }

    #[test]
    fn configmap_scopes() {
        assert_eq!(ConfigMapScope::of(""), ConfigMapScope::All);
        assert_eq!(ConfigMapScope::of("config"), ConfigMapScope::All);
        assert_eq!(ConfigMapScope::of("configmap/arg"), ConfigMapScope::All);
        assert_eq!(
            ConfigMapScope::of("configmap/cm/k"),
            ConfigMapScope::One("cm".into())
        );
        assert_eq!(ConfigMapScope::of("fleetshard/"), ConfigMapScope::None);
        assert!(configmap_may_match("cm", "configmap/c"));
        assert!(configmap_may_match("cm", "configmap/cm/key"));
        assert!(!configmap_may_match("cm", "configmap/cn/"));
    }
}
