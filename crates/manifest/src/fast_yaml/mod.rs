//! A fast reader for the block-style YAML lists that `kubectl get … -o yaml` and
//! `fleetshard fleet generate --format argocd` print, giving each item the value
//! serde-saphyr would give it, or declining.
//!
//! serde-saphyr reads about 8–10 MB of YAML per second of CPU (`docs/performance.md`, "the
//! loader's profile"); an export of 500k Applications is 159 MB. What kubectl prints is a
//! small part of YAML: block mappings and sequences, one-line plain and quoted scalars, no
//! comments, anchors, tags, flow collections, block or multi-line scalars. This module reads
//! that part line by line and types plain scalars as serde-saphyr does with
//! [`yaml_options`]; on anything else it declines:
//!
//! - An item it cannot read is read by serde-saphyr alone (its text, the dash blanked, with
//!   the document's options); the other items stay on the fast path.
//! - If serde-saphyr refuses such an item, or anything outside the items is not plain block
//!   YAML, the whole text is declined and `stream` reads it with serde-saphyr from the start,
//!   so every error, and every value of an unusual file, stays serde-saphyr's.
//!
//! The item read alone gets the value it has in the document: it ends at the first line
//! indented no more than its dash, which no multi-line construct inside it can reach; an
//! alias to an anchor outside it, a duplicate key or a budget it breaks makes serde-saphyr
//! refuse it; its depth budget is cut by the levels above it; and an indentation indicator
//! on a block scalar (relative to the enclosing node, which differs alone) declines.

mod block;
mod de;
mod scalar;
#[cfg(test)]
mod tests;

use serde_json::map::Entry;
use serde_json::{Map, Value};

use crate::document::yaml_options;
use crate::placement_app::PlacementApp;
use crate::placement_secret::TypedSecret;
use crate::stream::Item;
use crate::typed::Typed;
use block::{Block, Declined, Fast, Span, is_dash};

/// A list read by the fast path.
pub(crate) struct FastRoot {
    /// The document's keys other than `items`.
    pub(crate) rest: Map<String, Value>,
    /// Whether it had `items` (the items went to the sink).
    pub(crate) had_items: bool,
    /// How many items serde-saphyr read alone (what the tests and the measurement check).
    #[cfg_attr(not(test), allow(dead_code, reason = "read by the tests"))]
    pub(crate) alone: usize,
}

/// Reads a one-document YAML text whose root is a block mapping, handing each item of its
/// `items` sequence to `sink` in order (as `typed` allows, a plain Application as its app,
/// [`PlacementApp`], and a plain cluster Secret as its cluster, [`TypedSecret`]); `None`
/// when it declines (then the sink may have received some items, which the caller must
/// forget).
pub(crate) fn read_list(text: &str, typed: Typed, sink: &mut dyn FnMut(Item)) -> Option<FastRoot> {
    read(text, typed, sink).ok()
}

fn read(text: &str, typed: Typed, sink: &mut dyn FnMut(Item)) -> Fast<FastRoot> {
    let mut block = Block::new(text);
    let (first, next) = block.peek()?.ok_or(Declined)?;
    if first.col != 0 {
        return Err(Declined);
    }
    block.pos = next;
    let (mut key, mut rest) = block.key(first)?.ok_or(Declined)?;
    let mut map = Map::new();
    let mut had_items = false;
    let mut alone = 0usize;
    loop {
        if key == "items" {
            if had_items || rest.is_some() {
                return Err(Declined);
            }
            had_items = true;
            alone = items(text, &mut block, typed, sink)?;
        } else {
            let value = block.value(rest, 0, 1)?;
            match map.entry(key) {
                Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                Entry::Occupied(_) => return Err(Declined),
            }
        }
        match block.next_key(0)? {
            Some((k, r)) => (key, rest) = (k, r),
            None => break,
        }
    }
    Ok(FastRoot {
        rest: map,
        had_items,
        alone,
    })
}

/// The block sequence of `items` (on the lines after its key), each item to `sink`; how
/// many items serde-saphyr read alone.
fn items<'a>(
    text: &'a str,
    block: &mut Block<'a>,
    typed: Typed,
    sink: &mut dyn FnMut(Item),
) -> Fast<usize> {
    let mut alone_items = 0;
    let (mut dash, mut next) = block.peek()?.ok_or(Declined)?;
    if !is_dash(block.str(dash)) {
        return Err(Declined);
    }
    let col = dash.col;
    loop {
        block.pos = next;
        let item = match typed {
            Typed { apps: true, .. } => typed_item(block, dash, PlacementApp::placement, Item::App),
            _ => None,
        };
        let item = match (item, typed) {
            (None, Typed { secrets: true, .. }) => typed_item(
                block,
                dash,
                |s: TypedSecret<'_>| s.cluster(),
                |c| Item::Cluster(Box::new(c)),
            ),
            (item, _) => item,
        };
        if let Some(item) = item {
            sink(item);
        } else {
            let value = match fast_item(block, dash) {
                Ok(value) => value,
                Err(Declined) => {
                    let (value, end) = read_alone(text, dash, next)?;
                    block.pos = end;
                    alone_items += 1;
                    value
                }
            };
            sink(Item::Value(value));
        }
        match block.peek()? {
            Some((span, after)) if span.col == col && is_dash(block.str(span)) => {
                (dash, next) = (span, after);
            }
            Some((span, _)) if span.col > col => return Err(Declined),
            _ => return Ok(alone_items),
        }
    }
}

/// The item whose dash is `dash` (its line consumed) read as `T` and made into what
/// `made` answers (an app, a cluster), when it is plain; otherwise `None`, and nothing of
/// it consumed.
fn typed_item<'a, T: serde::Deserialize<'a>, M>(
    block: &mut Block<'a>,
    dash: Span,
    made: impl FnOnce(T) -> Option<M>,
    item: impl FnOnce(M) -> Item,
) -> Option<Item> {
    let start = block.clone();
    let read = de::item::<T>(block, dash).ok().and_then(made);
    if read.is_none() {
        *block = start;
    }
    read.map(item)
}

/// One item on the fast path: it must end before a line indented no more than its dash.
fn fast_item(block: &mut Block<'_>, dash: Span) -> Fast<Value> {
    let value = block.entry(dash, 1)?;
    match block.peek()? {
        Some((span, _)) if span.col > dash.col => Err(Declined),
        _ => Ok(value),
    }
}

/// The item whose dash is `dash` (its line ends at `next`) read by serde-saphyr alone, and
/// where the line after it starts.
fn read_alone(text: &str, dash: Span, next: usize) -> Fast<(Value, usize)> {
    let end = item_end(text.as_bytes(), next, dash.col);
    let line = dash.start - dash.col;
    let item = &text[line..end];
    if has_indentation_indicator(item) {
        return Err(Declined);
    }
    let mut alone = item.to_owned();
    alone.replace_range(dash.col..dash.col + 1, " ");
    let mut options = yaml_options(text.len());
    if let Some(budget) = options.budget.as_mut() {
        // The list's root mapping and sequence, and one level of margin.
        budget.max_depth = budget.max_depth.saturating_sub(3);
    }
    let value = serde_saphyr::from_str_with_options(&alone, options).map_err(|_| Declined)?;
    Ok((value, end))
}

/// The start of the first line from `from` with content indented no more than `col`.
fn item_end(bytes: &[u8], from: usize, col: usize) -> usize {
    let mut line = from;
    while line < bytes.len() {
        let indent = bytes[line..].iter().take_while(|&&b| b == b' ').count();
        let at = line + indent;
        if indent <= col && at < bytes.len() && bytes[at] != b'\n' {
            return line;
        }
        line = match bytes[at..].iter().position(|&b| b == b'\n') {
            Some(n) => at + n + 1,
            None => bytes.len(),
        };
    }
    bytes.len()
}

/// Whether `item` may hold a block scalar header with an indentation indicator (`|2`,
/// `>-1`, `|+3`…), whose meaning depends on the enclosing node's indentation.
fn has_indentation_indicator(item: &str) -> bool {
    let b = item.as_bytes();
    b.iter().enumerate().any(|(i, &c)| {
        matches!(c, b'|' | b'>') && {
            let rest = &b[i + 1..];
            let rest = rest
                .strip_prefix(b"-")
                .or(rest.strip_prefix(b"+"))
                .unwrap_or(rest);
            rest.first().is_some_and(u8::is_ascii_digit)
        }
    })
}
