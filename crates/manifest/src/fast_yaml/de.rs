//! The fast path's nodes handed to a serde visitor directly, without a `Value`: what lets
//! an item be read straight into typed fields (`crate::placement_app`).
//!
//! The nodes are read exactly as [`Block`] reads them into values — the same lines, the
//! same scalar typing, the same declines (a duplicate key among them) — so a type that
//! deserialises from here gets what it would get from the value [`Block`] gives, and
//! anything the fast path would decline is an error. A visitor that stops before the end
//! of a mapping or sequence is an error too.

use std::borrow::Cow;
use std::fmt;

use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::block::{Block, Declined, Fast, MAX_DEPTH, Span, is_dash, quoted_key};
use super::scalar;

/// The node is not one the fast path reads, or not of the type asked for: the caller
/// reads the item the ordinary way.
#[derive(Debug)]
pub(crate) struct NotRead;

impl fmt::Display for NotRead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not read by the typed fast path")
    }
}

impl std::error::Error for NotRead {}

impl serde::de::Error for NotRead {
    fn custom<T: fmt::Display>(_: T) -> Self {
        NotRead
    }
}

impl From<Declined> for NotRead {
    fn from(_: Declined) -> Self {
        NotRead
    }
}

/// A node whose first line was read: what it is.
enum Shape<'a> {
    Null,
    /// A scalar that is the rest of its line.
    Scalar(&'a str),
    /// A block sequence whose first dash (consumed) is `first`.
    Seq {
        first: Span,
        depth: usize,
    },
    /// A block mapping at `col` whose first key (its line consumed) was read.
    Map {
        col: usize,
        key: Cow<'a, str>,
        rest: Option<Span>,
        depth: usize,
    },
}

/// [`Block::node`]'s reading, stopping at what the node is.
fn node<'a>(block: &Block<'a>, span: Span, depth: usize) -> Fast<Shape<'a>> {
    if depth > MAX_DEPTH {
        return Err(Declined);
    }
    let s = block.str(span);
    if is_dash(s) {
        return Ok(Shape::Seq { first: span, depth });
    }
    if let Some((key, rest)) = block.key_ref(span)? {
        return Ok(Shape::Map {
            col: span.col,
            key,
            rest,
            depth,
        });
    }
    Ok(Shape::Scalar(s))
}

/// [`Block::entry`]'s reading.
fn entry<'a>(block: &mut Block<'a>, dash: Span, depth: usize) -> Fast<Shape<'a>> {
    let s = block.str(dash);
    let skipped = s.len() - s[1..].trim_start_matches(' ').len();
    if skipped == s.len() {
        return match block.deeper(dash.col)? {
            Some(span) => node(block, span, depth + 1),
            None => Ok(Shape::Null),
        };
    }
    let span = Span {
        start: dash.start + skipped,
        end: dash.end,
        col: dash.col + skipped,
    };
    node(block, span, depth + 1)
}

/// [`Block::value`]'s reading.
fn value<'a>(
    block: &mut Block<'a>,
    rest: Option<Span>,
    col: usize,
    depth: usize,
) -> Fast<Shape<'a>> {
    if let Some(span) = rest {
        let s = block.str(span);
        if is_dash(s) || quoted_key(block, span)? {
            return Err(Declined);
        }
        return Ok(Shape::Scalar(s));
    }
    match block.peek()? {
        Some((span, next)) if span.col > col => {
            block.pos = next;
            node(block, span, depth + 1)
        }
        Some((span, next)) if span.col == col && is_dash(block.str(span)) => {
            block.pos = next;
            if depth + 1 > MAX_DEPTH {
                return Err(Declined);
            }
            Ok(Shape::Seq {
                first: span,
                depth: depth + 1,
            })
        }
        _ => Ok(Shape::Null),
    }
}

/// Deserialises the item whose dash is `dash` (its line consumed), a mapping, as `T`; the
/// item must end before a line indented no more than its dash, as [`Block`]'s items do.
pub(crate) fn item<'a, T: serde::Deserialize<'a>>(
    block: &mut Block<'a>,
    dash: Span,
) -> Result<T, NotRead> {
    let shape = entry(block, dash, 1)?;
    // A struct reads from a sequence too; an item that is not a mapping is refused.
    if !matches!(shape, Shape::Map { .. }) {
        return Err(NotRead);
    }
    let read = T::deserialize(NodeDe {
        block: &mut *block,
        shape,
    })?;
    match block.peek()? {
        Some((span, _)) if span.col > dash.col => Err(NotRead),
        _ => Ok(read),
    }
}

/// One node, its first line read.
struct NodeDe<'b, 'a> {
    block: &'b mut Block<'a>,
    shape: Shape<'a>,
}

impl<'de> serde::Deserializer<'de> for NodeDe<'_, 'de> {
    type Error = NotRead;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NotRead> {
        match self.shape {
            Shape::Null => visitor.visit_unit(),
            Shape::Scalar(s) => scalar::visit(s, visitor),
            Shape::Seq { first, depth } => {
                let mut seq = SeqDe {
                    block: self.block,
                    col: first.col,
                    next: Some(first),
                    depth,
                };
                let read = visitor.visit_seq(&mut seq)?;
                match seq.next {
                    None => Ok(read),
                    Some(_) => Err(NotRead),
                }
            }
            Shape::Map {
                col,
                key,
                rest,
                depth,
            } => {
                let mut map = MapDe {
                    block: self.block,
                    col,
                    depth,
                    first: Some((key, rest)),
                    rest: None,
                    seen: Seen::default(),
                    done: false,
                };
                let read = visitor.visit_map(&mut map)?;
                if map.done { Ok(read) } else { Err(NotRead) }
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NotRead> {
        match self.shape {
            Shape::Null => visitor.visit_none(),
            Shape::Scalar(s) if scalar::is_null(s) => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// A block sequence's entries, as [`Block::seq`] reads them.
struct SeqDe<'b, 'a> {
    block: &'b mut Block<'a>,
    col: usize,
    /// The next entry's dash (consumed), `None` at the end.
    next: Option<Span>,
    depth: usize,
}

impl<'de> SeqAccess<'de> for SeqDe<'_, 'de> {
    type Error = NotRead;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, NotRead> {
        let Some(dash) = self.next.take() else {
            return Ok(None);
        };
        let shape = entry(self.block, dash, self.depth)?;
        let read = seed.deserialize(NodeDe {
            block: &mut *self.block,
            shape,
        })?;
        match self.block.peek()? {
            Some((span, next)) if span.col == self.col && is_dash(self.block.str(span)) => {
                self.block.pos = next;
                self.next = Some(span);
            }
            Some((span, _)) if span.col > self.col => return Err(NotRead),
            _ => {}
        }
        Ok(Some(read))
    }
}

/// A block mapping's entries, as `Block::map` reads them (a duplicate key declines).
struct MapDe<'b, 'a> {
    block: &'b mut Block<'a>,
    col: usize,
    depth: usize,
    /// The first key, read with the mapping's first line.
    first: Option<(Cow<'a, str>, Option<Span>)>,
    /// What follows the current key's colon on its line.
    rest: Option<Span>,
    seen: Seen<'a>,
    /// The mapping's end was reached.
    done: bool,
}

impl<'de> MapAccess<'de> for MapDe<'_, 'de> {
    type Error = NotRead;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, NotRead> {
        let next = match self.first.take() {
            Some(first) => Some(first),
            None => self.block.next_key_ref(self.col)?,
        };
        let Some((key, rest)) = next else {
            self.done = true;
            return Ok(None);
        };
        if !self.seen.insert(key.clone()) {
            return Err(NotRead);
        }
        self.rest = rest;
        match key {
            Cow::Borrowed(k) => seed.deserialize(BorrowedStrDeserializer::new(k)),
            Cow::Owned(k) => seed.deserialize(StringDeserializer::new(k)),
        }
        .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, NotRead> {
        let shape = value(self.block, self.rest.take(), self.col, self.depth)?;
        seed.deserialize(NodeDe {
            block: &mut *self.block,
            shape,
        })
    }
}

/// The keys of a mapping read so far: the first few on the stack (a mapping of an
/// Application has a handful), the rest in a set (a Secret's `data` or a label map can hold
/// thousands; a scan per key would be quadratic).
#[derive(Default)]
struct Seen<'a> {
    first: [&'a str; 12],
    len: usize,
    more: std::collections::HashSet<Cow<'a, str>>,
}

impl<'a> Seen<'a> {
    /// Adds `key`; false when it was there.
    fn insert(&mut self, key: Cow<'a, str>) -> bool {
        let first = &self.first[..self.len];
        if first.contains(&key.as_ref()) {
            return false;
        }
        match key {
            Cow::Borrowed(k) if self.len < self.first.len() => {
                self.first[self.len] = k;
                self.len += 1;
                true
            }
            key => self.more.insert(key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Seen;
    use std::borrow::Cow;

    #[test]
    fn a_key_seen_twice_is_found_on_the_stack_and_beyond_it() {
        let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
        let mut seen = Seen::default();
        for k in &keys {
            assert!(seen.insert(Cow::Borrowed(k)), "{k} is new");
        }
        assert!(!seen.insert(Cow::Borrowed("k3")), "on the stack");
        assert!(!seen.insert(Cow::Borrowed("k30")), "beyond it");
        assert!(!seen.insert(Cow::Owned("k31".to_owned())), "owned alike");
        assert!(seen.insert(Cow::Owned("k40".to_owned())));
    }
}
