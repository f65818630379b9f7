//! `data.shardControllerMapping`: the shard-to-controller list Argo CD keeps in the ConfigMap
//! `argocd-app-controller-shard-cm`, read and written exactly as Argo CD does
//! (argo-compat §5.3 in `docs/glossary.md`).
//!
//! Writing is byte for byte what Go's `json.Marshal` produces for
//! `[]struct{ShardNumber int; ControllerName string; HeartbeatTime metav1.Time}`; reading
//! accepts and refuses what Go's `json.Unmarshal` accepts and refuses. That way an Argo CD
//! controller and fleetshard can read each other's maps, and tooling that greps the map keeps
//! working.

use super::json::{self, Kind, Reader};
use super::time::{TimeError, WallTime};

/// One element of the mapping: who holds a shard and when it last said so.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ShardEntry {
    /// `ShardNumber`. Any `int` Go can decode; whether it is in range is the reader's
    /// business (see [`super::repair()`]), not the codec's.
    pub shard_number: i64,
    /// `ControllerName`: the holder's identity (a pod's hostname, for Argo CD). Empty means
    /// the shard is free.
    pub controller_name: String,
    /// `HeartbeatTime`: the holder's wall clock at its last heartbeat; [`WallTime::ZERO`]
    /// (written `null`) when never set. Written for Argo CD's sake; fleetshard does not
    /// judge liveness by it (W13).
    pub heartbeat_time: WallTime,
}

impl ShardEntry {
    /// A free entry for shard `shard_number`: no controller, no heartbeat.
    pub fn free(shard_number: i64) -> ShardEntry {
        ShardEntry {
            shard_number,
            ..ShardEntry::default()
        }
    }

    /// An entry held by `controller_name` since `heartbeat_time`.
    pub fn held(
        shard_number: i64,
        controller_name: impl Into<String>,
        heartbeat_time: WallTime,
    ) -> ShardEntry {
        ShardEntry {
            shard_number,
            controller_name: controller_name.into(),
            heartbeat_time,
        }
    }

    /// Whether nobody holds this entry (`ControllerName == ""`).
    pub fn is_free(&self) -> bool {
        self.controller_name.is_empty()
    }
}

/// Why `data.shardControllerMapping` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    /// The data key is missing or holds only whitespace. Go reads a missing key as `""`,
    /// which `json.Unmarshal` refuses ("unexpected end of JSON input").
    #[error("no shard mapping: the data key is missing or empty")]
    Empty,
    /// The text is not JSON.
    #[error("the shard mapping is not JSON: {reason} at byte {offset}")]
    Syntax {
        /// Byte offset of the problem.
        offset: usize,
        /// What Go's scanner would complain about.
        reason: &'static str,
    },
    /// JSON, but a value of the wrong type where Go's struct expects another.
    #[error(
        "the shard mapping does not fit Argo CD's format: {at}: expected {expected}, found {found}"
    )]
    Type {
        /// Where: `the mapping`, or `entry 3, ShardNumber`.
        at: String,
        /// What Go's type needs there.
        expected: &'static str,
        /// What the text has there.
        found: String,
    },
    /// A `HeartbeatTime` string that is not an RFC 3339 time.
    #[error("the shard mapping does not fit Argo CD's format: {at}: {source}")]
    Time {
        /// Where: `entry 3, HeartbeatTime`.
        at: String,
        /// Why the time did not parse.
        source: TimeError,
    },
}

/// The mapping as Go's `json.Marshal` writes it: `[{"ShardNumber":0,"ControllerName":"…",
/// "HeartbeatTime":"2026-08-22T18:31:32Z"},…]`, no whitespace, HTML-safe string escaping,
/// `null` for a zero time, the time in UTC with the fraction dropped.
///
/// An empty list is written `[]` (Go writes `null` for a nil slice and `[]` for an empty
/// one; both read back as an empty list). Never panics; an instant outside the years
/// 0–9999 is written as Go writes it, which nobody can read back, so writers check
/// [`WallTime::is_readable`] first ([`super::get_or_update_shard`] does).
pub fn encode(entries: &[ShardEntry]) -> String {
    let mut out = String::with_capacity(2 + entries.len() * 96);
    out.push('[');
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"ShardNumber\":");
        out.push_str(&entry.shard_number.to_string());
        out.push_str(",\"ControllerName\":");
        json::push_go_string(&mut out, &entry.controller_name);
        out.push_str(",\"HeartbeatTime\":");
        if entry.heartbeat_time.is_zero() {
            out.push_str("null");
        } else {
            out.push('"');
            entry.heartbeat_time.write_rfc3339(&mut out);
            out.push('"');
        }
        out.push('}');
    }
    out.push(']');
    out
}

/// Reads the mapping as Go's `json.Unmarshal` into Argo CD's struct slice does.
///
/// - The whole text must be JSON first; then `null` is an empty list and anything but an
///   array is an error.
/// - Each element is an object or `null` (a zero entry). Keys match the field names
///   case-insensitively, Go's way (`shardnumber`, `SHARDNUMBER`, even `ſhardNumber` with a
///   long s); unknown keys are ignored; of repeated keys the last wins.
/// - `ShardNumber` must be an integer literal that fits `int` (`1.0` and `1e2` are errors);
///   `ControllerName` a string. `null` leaves either as it was.
/// - `HeartbeatTime` is `null` (zero) or an RFC 3339 string (fractions and offsets accepted,
///   converted to UTC, see [`super::time::parse_rfc3339`]); anything else is an error.
///
/// Never panics, on any input.
pub fn decode(data: &str) -> Result<Vec<ShardEntry>, MappingError> {
    if data.bytes().all(json::is_space) {
        return Err(MappingError::Empty);
    }
    json::validate(data).map_err(|e| MappingError::Syntax {
        offset: e.offset,
        reason: e.reason,
    })?;
    let mut r = Reader::new(data);
    match r.peek_kind() {
        Some(Kind::Null) => return Ok(Vec::new()),
        Some(Kind::Array) => {}
        other => return Err(type_error("the mapping", "an array", other, &mut r)),
    }
    r.eat(b'[');
    let mut entries = Vec::new();
    if r.eat(b']') {
        return Ok(entries);
    }
    loop {
        entries.push(decode_entry(&mut r, entries.len())?);
        if !r.eat(b',') {
            break;
        }
    }
    Ok(entries)
}

/// The struct's fields, as a JSON key names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    ShardNumber,
    ControllerName,
    HeartbeatTime,
}

impl Field {
    const ALL: [(Field, &'static str); 3] = [
        (Field::ShardNumber, "SHARDNUMBER"),
        (Field::ControllerName, "CONTROLLERNAME"),
        (Field::HeartbeatTime, "HEARTBEATTIME"),
    ];

    fn name(self) -> &'static str {
        match self {
            Field::ShardNumber => "ShardNumber",
            Field::ControllerName => "ControllerName",
            Field::HeartbeatTime => "HeartbeatTime",
        }
    }

    /// The field a key names, if any. Go (1.21+) compares keys after folding every
    /// character with `unicode.ToUpper(unicode.ToLower(r))`; for our all-ASCII names that
    /// means ASCII case-insensitivity plus the four non-ASCII characters that fold onto an
    /// ASCII letter: `ſ` (long s) → S, `K` (Kelvin sign) → K, `ı` and `İ` → I.
    fn of_key(key: &str) -> Option<Field> {
        if key.is_ascii() {
            // The same rule without allocating: ASCII case-insensitivity.
            return Field::ALL
                .iter()
                .find(|(_, name)| key.eq_ignore_ascii_case(name))
                .map(|&(field, _)| field);
        }
        let folded: Option<String> = key
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' => Some(c.to_ascii_uppercase()),
                '\u{17F}' => Some('S'),
                '\u{212A}' => Some('K'),
                '\u{130}' | '\u{131}' => Some('I'),
                // Anything else folds to itself or to something non-ASCII: it matches
                // only itself, and no field name contains it.
                c if c.is_ascii() => Some(c),
                _ => None,
            })
            .collect();
        let folded = folded?;
        Field::ALL
            .iter()
            .find(|(_, name)| *name == folded)
            .map(|&(field, _)| field)
    }
}

fn decode_entry(r: &mut Reader<'_>, index: usize) -> Result<ShardEntry, MappingError> {
    let mut entry = ShardEntry::default();
    match r.peek_kind() {
        Some(Kind::Null) => {
            // `null` into a struct leaves it zero.
            r.raw_value();
            return Ok(entry);
        }
        Some(Kind::Object) => {}
        other => {
            let at = format!("entry {index}");
            return Err(type_error(&at, "an object", other, r));
        }
    }
    r.eat(b'{');
    if r.eat(b'}') {
        return Ok(entry);
    }
    loop {
        let key = r.string();
        r.eat(b':');
        match Field::of_key(&key) {
            None => {
                r.raw_value();
            }
            Some(field) => decode_field(r, field, index, &mut entry)?,
        }
        if !r.eat(b',') {
            break;
        }
    }
    r.eat(b'}');
    Ok(entry)
}

fn decode_field(
    r: &mut Reader<'_>,
    field: Field,
    index: usize,
    entry: &mut ShardEntry,
) -> Result<(), MappingError> {
    let at = || format!("entry {index}, {}", field.name());
    let kind = r.peek_kind();
    match (field, kind) {
        // Go ignores `null` for an int or a string: the field keeps its value.
        (Field::ShardNumber | Field::ControllerName, Some(Kind::Null)) => {
            r.raw_value();
        }
        (Field::ShardNumber, Some(Kind::Number)) => {
            let literal = r.raw_value();
            // strconv.ParseInt(literal, 10, 64): a fraction or an exponent is an error.
            entry.shard_number = literal.parse().map_err(|_| MappingError::Type {
                at: at(),
                expected: "an integer that fits int",
                found: format!("number {literal}"),
            })?;
        }
        (Field::ShardNumber, other) => return Err(type_error(&at(), "a number", other, r)),
        (Field::ControllerName, Some(Kind::String)) => entry.controller_name = r.string(),
        (Field::ControllerName, other) => return Err(type_error(&at(), "a string", other, r)),
        // metav1.Time.UnmarshalJSON: exactly `null` is zero, otherwise a JSON string.
        (Field::HeartbeatTime, Some(Kind::Null)) => {
            r.raw_value();
            entry.heartbeat_time = WallTime::ZERO;
        }
        (Field::HeartbeatTime, Some(Kind::String)) => {
            let text = r.string();
            entry.heartbeat_time = WallTime::parse_rfc3339(&text)
                .map_err(|source| MappingError::Time { at: at(), source })?;
        }
        (Field::HeartbeatTime, other) => {
            return Err(type_error(&at(), "a string or null", other, r));
        }
    }
    Ok(())
}

fn type_error(
    at: &str,
    expected: &'static str,
    found: Option<Kind>,
    r: &mut Reader<'_>,
) -> MappingError {
    let found = match found {
        Some(kind @ (Kind::Number | Kind::Bool)) => format!("{} {}", kind.name(), r.raw_value()),
        Some(kind) => kind.name().to_owned(),
        None => "nothing".to_owned(),
    };
    MappingError::Type {
        at: at.to_owned(),
        expected,
        found,
    }
}

#[cfg(test)]
mod tests;
