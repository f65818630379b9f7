//! Protocol Buffers read and written by field number, without any generated type: the
//! fake repo-server decodes requests with this, so a field number wrong in the client's
//! `.proto` shows up as a field missing here (tests on both sides of the same generated
//! code would agree with each other and miss it).

use std::collections::BTreeMap;

/// One field's value as it travels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireValue {
    /// Wire type 0: integers, booleans, enums.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 2: strings, bytes, nested messages, packed repeated fields, map entries.
    Bytes(Vec<u8>),
    /// Wire type 5.
    Fixed32(u32),
}

/// A decoded message: its fields by number, in the order they came (repeated fields
/// keep every occurrence).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WireMessage {
    /// `(field number, value)`, as received.
    pub fields: Vec<(u32, WireValue)>,
}

/// Why bytes are not a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a protobuf message: {0}")]
pub struct WireError(String);

fn varint(buf: &[u8], at: &mut usize) -> Result<u64, WireError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *buf
            .get(*at)
            .ok_or_else(|| WireError("truncated varint".into()))?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(WireError("varint longer than 10 bytes".into()))
}

fn take<'a>(buf: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], WireError> {
    let end = at
        .checked_add(n)
        .filter(|&e| e <= buf.len())
        .ok_or_else(|| WireError("truncated field".into()))?;
    let bytes = &buf[*at..end];
    *at = end;
    Ok(bytes)
}

impl WireMessage {
    /// Decodes `buf`.
    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut fields = Vec::new();
        let mut at = 0;
        while at < buf.len() {
            let key = varint(buf, &mut at)?;
            let number = u32::try_from(key >> 3)
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| WireError(format!("bad field number in key {key}")))?;
            let value = match key & 7 {
                0 => WireValue::Varint(varint(buf, &mut at)?),
                1 => {
                    let b = take(buf, &mut at, 8)?;
                    WireValue::Fixed64(u64::from_le_bytes(b.try_into().unwrap_or_default()))
                }
                2 => {
                    let len = usize::try_from(varint(buf, &mut at)?)
                        .map_err(|_| WireError("length out of range".into()))?;
                    WireValue::Bytes(take(buf, &mut at, len)?.to_vec())
                }
                5 => {
                    let b = take(buf, &mut at, 4)?;
                    WireValue::Fixed32(u32::from_le_bytes(b.try_into().unwrap_or_default()))
                }
                other => return Err(WireError(format!("wire type {other} of field {number}"))),
            };
            fields.push((number, value));
        }
        Ok(WireMessage { fields })
    }

    /// Every value of field `n`.
    pub fn all(&self, n: u32) -> impl Iterator<Item = &WireValue> {
        self.fields
            .iter()
            .filter(move |(f, _)| *f == n)
            .map(|(_, v)| v)
    }

    /// The field numbers present, in order, without repeats.
    pub fn numbers(&self) -> Vec<u32> {
        let mut out: Vec<u32> = self.fields.iter().map(|(n, _)| *n).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    fn last_bytes(&self, n: u32) -> Option<&[u8]> {
        self.all(n).last().and_then(|v| match v {
            WireValue::Bytes(b) => Some(b.as_slice()),
            _ => None,
        })
    }

    /// Field `n` as a string (the last occurrence; proto3's "last one wins"); `None` when
    /// absent.
    pub fn string(&self, n: u32) -> Option<String> {
        self.last_bytes(n)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// Field `n` as a string, `""` when absent (proto3's default).
    pub fn str_or_empty(&self, n: u32) -> String {
        self.string(n).unwrap_or_default()
    }

    /// Field `n`'s raw bytes.
    pub fn bytes(&self, n: u32) -> Option<Vec<u8>> {
        self.last_bytes(n).map(<[u8]>::to_vec)
    }

    /// Every occurrence of repeated string field `n`.
    pub fn strings(&self, n: u32) -> Vec<String> {
        self.all(n)
            .filter_map(|v| match v {
                WireValue::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            })
            .collect()
    }

    /// Field `n` as a varint, 0 when absent.
    pub fn varint(&self, n: u32) -> u64 {
        self.all(n)
            .filter_map(|v| match v {
                WireValue::Varint(x) => Some(*x),
                _ => None,
            })
            .last()
            .unwrap_or(0)
    }

    /// Field `n` as a boolean, false when absent.
    pub fn bool(&self, n: u32) -> bool {
        self.varint(n) != 0
    }

    /// Field `n` as a nested message; `None` when absent or not a message.
    pub fn message(&self, n: u32) -> Option<WireMessage> {
        self.last_bytes(n).and_then(|b| WireMessage::decode(b).ok())
    }

    /// Every occurrence of repeated message field `n` (undecodable ones skipped).
    pub fn messages(&self, n: u32) -> Vec<WireMessage> {
        self.all(n)
            .filter_map(|v| match v {
                WireValue::Bytes(b) => WireMessage::decode(b).ok(),
                _ => None,
            })
            .collect()
    }

    /// Map field `n` with string keys (entry field 1) and string values (entry field 2).
    pub fn string_map(&self, n: u32) -> BTreeMap<String, String> {
        self.messages(n)
            .into_iter()
            .map(|e| (e.str_or_empty(1), e.str_or_empty(2)))
            .collect()
    }

    /// Map field `n` with string keys and boolean values.
    pub fn bool_map(&self, n: u32) -> BTreeMap<String, bool> {
        self.messages(n)
            .into_iter()
            .map(|e| (e.str_or_empty(1), e.bool(2)))
            .collect()
    }

    /// Map field `n` with string keys and message values.
    pub fn message_map(&self, n: u32) -> BTreeMap<String, WireMessage> {
        self.messages(n)
            .into_iter()
            .map(|e| (e.str_or_empty(1), e.message(2).unwrap_or_default()))
            .collect()
    }
}

/// Writes a message field by field.
#[derive(Debug, Default)]
pub struct WireWriter {
    buf: Vec<u8>,
}

impl WireWriter {
    fn put_varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    /// A length-delimited field (string, bytes, message).
    pub fn bytes(&mut self, n: u32, value: &[u8]) -> &mut Self {
        self.put_varint(u64::from(n) << 3 | 2);
        self.put_varint(value.len() as u64);
        self.buf.extend_from_slice(value);
        self
    }

    /// A string field (skipped when empty, as proto3 writes it).
    pub fn string(&mut self, n: u32, value: &str) -> &mut Self {
        if !value.is_empty() {
            self.bytes(n, value.as_bytes());
        }
        self
    }

    /// The bytes.
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_by_number() {
        let mut inner = WireWriter::default();
        let inner = inner.string(1, "key").string(2, "value").finish();
        let mut w = WireWriter::default();
        let bytes = w.string(3, "a").string(3, "b").bytes(7, &inner).finish();
        let m = WireMessage::decode(&bytes).unwrap();
        assert_eq!(m.strings(3), ["a", "b"]);
        assert_eq!(m.string_map(7)["key"], "value");
        assert_eq!(m.numbers(), [3, 7]);
        assert!(WireMessage::decode(&[0x0a, 5, b'x']).is_err());
    }
}
