//! Object metadata the server assigns or checks: uids, timestamps, generated names, name
//! validation, and the Secret `stringData` → `data` conversion.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine;
use serde_json::Value;

use super::status::ApiError;

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn random_u64() -> u64 {
    // A fresh RandomState is seeded per process and per instance; mixing in a counter
    // makes every call distinct without a random-number dependency.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

/// A version-4-shaped UID.
pub fn new_uid() -> String {
    let a = random_u64();
    let b = random_u64();
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

/// The 5-character suffix the server appends to `generateName`.
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut r = random_u64();
    (0..5)
        .map(|_| {
            let c = ALPHABET[(r % ALPHABET.len() as u64) as usize] as char;
            r /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// The wall-clock time in RFC 3339 (seconds), as `creationTimestamp` is written.
pub fn now_rfc3339() -> String {
    #[allow(clippy::disallowed_types)]
    // a fixture stamping objects, as a real server does; no logic depends on it
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format_rfc3339(secs)
}

/// Wall-clock milliseconds since the Unix epoch: a write's arrival as other processes on
/// this machine (replicas' audit logs) date their events.
pub fn unix_ms() -> u64 {
    #[allow(clippy::disallowed_types)]
    // a record compared with other processes' wall-clock logs; no logic depends on it
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    u64::try_from(ms).unwrap_or(u64::MAX)
}

/// Formats Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, proleptic Gregorian).
pub fn format_rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Checks an object name: a DNS-1123 subdomain (≤ 253 chars), or a DNS-1123 label
/// (≤ 63 chars) for namespaces. Errors are 422 naming `metadata.name`.
pub fn validate_name(group: &str, kind: &str, name: &str, label: bool) -> Result<(), ApiError> {
    let max = if label { 63 } else { 253 };
    let part_ok = |p: &str| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !p.starts_with('-')
            && !p.ends_with('-')
    };
    let ok = name.len() <= max
        && if label {
            part_ok(name)
        } else {
            name.split('.').all(part_ok)
        };
    if ok {
        return Ok(());
    }
    let why = if label {
        format!(
            "Invalid value: {name:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
        )
    } else {
        format!(
            "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        )
    };
    Err(ApiError::invalid(group, kind, name, "metadata.name", &why))
}

/// Secrets: merges `stringData` into `data` (base64) and checks `data` values are base64,
/// as the real server does on every write.
pub fn normalize_secret(obj: &mut Value, name: &str) -> Result<(), ApiError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    if let Some(Value::Object(sd)) = obj.as_object_mut().and_then(|m| m.remove("stringData")) {
        let data = obj.as_object_mut().map(|m| {
            m.entry("data")
                .or_insert_with(|| Value::Object(Default::default()))
        });
        if let Some(Value::Object(data)) = data {
            for (k, v) in sd {
                let s = v.as_str().unwrap_or_default().to_string();
                data.insert(k, Value::String(b64.encode(s)));
            }
        }
    }
    if let Some(Value::Object(data)) = obj.get("data") {
        for (k, v) in data {
            let ok = v.as_str().is_some_and(|s| b64.decode(s).is_ok());
            if !ok {
                return Err(ApiError::invalid(
                    "",
                    "Secret",
                    name,
                    &format!("data[{k}]"),
                    "Invalid value: not a base64-encoded string",
                ));
            }
        }
    }
    Ok(())
}

/// The largest ConfigMap or Secret payload the real server accepts (`MaxSecretSize`).
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

/// The largest stored object etcd accepts by default (`--max-request-bytes` 1.5 MiB),
/// measured here on the JSON encoding.
pub const MAX_OBJECT_BYTES: usize = 1024 * 1024 * 3 / 2;

/// Checks the real server's size limits: a ConfigMap's `data` plus decoded `binaryData`,
/// or a Secret's decoded `data`, at most 1 MiB (422 Invalid); any object at most what
/// etcd stores (500 "etcdserver: request is too large").
pub fn check_size(kind: &str, obj: &Value, name: &str) -> Result<(), ApiError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let strings = |field: &str, decode: bool| -> usize {
        obj.get(field)
            .and_then(Value::as_object)
            .map(|m| {
                m.values()
                    .filter_map(Value::as_str)
                    .map(|s| {
                        if decode {
                            b64.decode(s).map_or(s.len(), |b| b.len())
                        } else {
                            s.len()
                        }
                    })
                    .sum()
            })
            .unwrap_or(0)
    };
    let (total, field) = match kind {
        "ConfigMap" => (strings("data", false) + strings("binaryData", true), "[]"),
        "Secret" => (strings("data", true), "data"),
        _ => (0, ""),
    };
    if total > MAX_DATA_BYTES {
        return Err(ApiError::invalid(
            "",
            kind,
            name,
            field,
            &format!("Too long: may not be more than {MAX_DATA_BYTES} bytes"),
        ));
    }
    let encoded = serde_json::to_vec(obj).map_or(0, |v| v.len());
    if encoded > MAX_OBJECT_BYTES {
        return Err(ApiError::internal(format!(
            "etcdserver: request is too large ({kind} {name:?}: {encoded} bytes)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rfc3339_known_dates() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_rfc3339(1_795_275_043), "2026-11-21T15:30:43Z");
    }

    #[test]
    fn names() {
        assert!(validate_name("", "ConfigMap", "a.b-c", false).is_ok());
        assert!(validate_name("", "Namespace", "a.b", true).is_err());
        let e = validate_name("", "ConfigMap", "Bad_Name", false).unwrap_err();
        assert_eq!(
            (e.code, e.details.field.as_deref()),
            (422, Some("metadata.name"))
        );
        assert_ne!(new_uid(), new_uid());
        assert_eq!(name_suffix().len(), 5);
    }

    #[test]
    fn size_limits() {
        let big = "x".repeat(MAX_DATA_BYTES);
        let ok = json!({"data": {"a": big}});
        assert!(check_size("ConfigMap", &ok, "c").is_ok());
        let over = json!({"data": {"a": big, "b": "y"}});
        let e = check_size("ConfigMap", &over, "c").unwrap_err();
        assert_eq!((e.code, e.details.field.as_deref()), (422, Some("[]")));
        let huge = json!({"spec": {"a": "x".repeat(MAX_OBJECT_BYTES)}});
        assert_eq!(check_size("Lease", &huge, "l").unwrap_err().code, 500);
    }

    #[test]
    fn secret_string_data() {
        let mut s = json!({"stringData": {"a": "hi"}, "data": {"b": "aGk="}});
        normalize_secret(&mut s, "s").unwrap();
        assert_eq!(s, json!({"data": {"a": "aGk=", "b": "aGk="}}));
        let mut bad = json!({"data": {"b": "!!"}});
        assert_eq!(normalize_secret(&mut bad, "s").unwrap_err().code, 422);
    }
}
