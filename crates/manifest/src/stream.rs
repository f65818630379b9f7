//! A one-document list (`kubectl get … -o yaml` or `-o json`: `kind: List` or a typed list)
//! read item by item: each item becomes a `Value` of its own, is converted, and is dropped before the
//! next is parsed, so the parser never holds the whole fleet as a tree (at 500k
//! Applications that tree was about 2 GB, four times the model it became).
//!
//! The outcome is the generic path's (`document::parse`) exactly: the same objects in the
//! same order, the same warnings, and the same error when there are several — a YAML error
//! anywhere first, then the first kind error in file order (the document's, then its
//! items'), then the first conversion error. So conversion errors are kept, not raised, and
//! the rest of the file is still parsed and its kinds checked. Items without a `kind` take
//! the list's, which comes after `items` in kubectl's key order: from the first such item
//! on, items are kept as values and converted at the end, in order.

use std::fmt;

use fleetshard_core::App;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::document::{
    Accept, ObjectKind, Objects, kind_of, object_kind, unknown_kind, value_type, yaml_message,
    yaml_options,
};
use crate::error::{Ctx, LoadError};
use crate::typed::{Typed, json_item};
use crate::{ClusterSecret, FleetFile};

/// What the streamed read found.
pub(crate) enum Streamed {
    /// The file was a list, read completely (or its error), to be finished.
    List(Result<Box<Listed>, LoadError>),
    /// A single mapping without `items`: the generic path takes the value from here.
    Document(Value),
    /// Anything else (not a mapping, or a mapping that is not a list but has `items`): the
    /// generic path must read the text again. Warnings pushed here were taken back.
    Other,
}

/// A list read to its end: what is left to do no longer needs the text, which the caller
/// may free first (at 500k Applications the text is 159 MB, and finishing copies every
/// object once, [`Objects::finish`](crate::document::Objects::finish)).
pub(crate) struct Listed {
    items: Items,
    default: Option<ObjectKind>,
}

impl Listed {
    /// Checks the items' kinds, converts the items kept for the end, and packs the objects.
    pub(crate) fn finish(self, ctx: &mut Ctx) -> Result<FleetFile, LoadError> {
        self.items.finish(ctx, self.default)
    }
}

/// True when `text` has no document marker after its content (`---` or `...` at the start
/// of a line) and no directive, so it holds at most one YAML document.
pub(crate) fn one_document(text: &str) -> bool {
    let mut content = false;
    for line in text.lines() {
        let marker = ["---", "..."].iter().any(|m| {
            line.strip_prefix(m)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))
        });
        if line.starts_with('%') || (marker && content) {
            return false;
        }
        let trimmed = line.trim_start();
        content |= !marker && !trimmed.is_empty() && !trimmed.starts_with('#');
    }
    true
}

/// One item as the parser hands it over.
pub(crate) enum Item {
    /// An item to convert (`Objects::absorb`).
    Value(Value),
    /// An Application read straight into its app ([`crate::placement_app`]), when the
    /// input drops the GitOps specs and the item is plain.
    App(App),
    /// A cluster Secret read straight into its cluster ([`crate::placement_secret`]),
    /// when the item is a plain cluster Secret.
    Cluster(Box<ClusterSecret>),
}

/// Texts from this size on are parsed on this thread while another converts the items
/// (parsing and converting take about as long each); tests cross it with small texts.
const PARALLEL_FROM: usize = if cfg!(test) { 1 << 14 } else { 1 << 20 };
/// Items parsed ahead of the converting thread, at most (at most 2,048 values of items the
/// parser did not type, a few MB).
const AHEAD: usize = if cfg!(test) { 16 } else { 2048 };
/// Items handed to the converting thread at once: one hand-over per item costs more than
/// an Application read straight into its app (`crate::placement_app`), and at 64 the
/// converter, with nothing to do for typed items, still woke up often enough to cost
/// 5–25 % of a YAML load (`docs/performance.md`); tests cross batches with small texts.
const BATCH: usize = if cfg!(test) { 4 } else { 512 };

/// Reads a one-document YAML text (see [`one_document`]), or a JSON text when `json`,
/// item by item; [`Streamed::Other`] for YAML of several documents. YAML is tried on the
/// fast path first (`crate::fast_yaml`); when it declines, what it did is forgotten and
/// serde-saphyr reads the text. The fast path reads only one document (it declines on a
/// document marker or a directive), so the text is checked for being one only when it
/// declines: a second pass over the whole text saved when it reads it.
pub(crate) fn parse(text: &str, ctx: &mut Ctx, accept: Accept, json: bool) -> Streamed {
    let mark = ctx.warnings.len();
    if !json {
        if let Some(streamed) = attempt(text, ctx, accept, Reader::Fast) {
            return streamed;
        }
        ctx.warnings.truncate(mark);
        if !one_document(text) {
            return Streamed::Other;
        }
    }
    let reader = if json { Reader::Json } else { Reader::Yaml };
    attempt(text, ctx, accept, reader).unwrap_or(Streamed::Other)
}

/// Which parser reads the text.
#[derive(Clone, Copy)]
enum Reader {
    /// `crate::fast_yaml`, which may decline.
    Fast,
    /// serde-saphyr.
    Yaml,
    /// serde_json.
    Json,
}

/// [`parse`] with one reader; `None` when the fast path declined.
fn attempt(text: &str, ctx: &mut Ctx, accept: Accept, reader: Reader) -> Option<Streamed> {
    let mark = ctx.warnings.len();
    let mut items = Items::new(accept);
    let mut shape = ItemsShape::default();
    // Applications go straight into their apps when nothing but the app is kept; cluster
    // Secrets into their clusters.
    let typed = Typed {
        apps: accept.apps && !accept.specs,
        secrets: accept.secrets,
    };
    let read = if text.len() >= PARALLEL_FROM {
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Item>>(AHEAD / BATCH);
            let (items, ctx) = (&mut items, &mut *ctx);
            let converter = scope.spawn(move || {
                for batch in rx {
                    for item in batch {
                        items.item(ctx, item);
                    }
                }
            });
            // A send fails only when the converter panicked, which the join raises again.
            let mut batch = Vec::with_capacity(BATCH);
            let mut send = |item| {
                batch.push(item);
                if batch.len() == BATCH {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                    drop(tx.send(full));
                }
            };
            let read = read_root(text, reader, typed, &mut send, &mut shape);
            drop(tx.send(batch));
            drop(tx);
            if let Err(panic) = converter.join() {
                std::panic::resume_unwind(panic);
            }
            read
        })
    } else {
        let mut convert = |value| items.item(ctx, value);
        read_root(text, reader, typed, &mut convert, &mut shape)
    };
    let root = match read {
        Ok(Some(root)) => root,
        Ok(None) => return None,
        Err(e) => {
            return Some(Streamed::List(Err(LoadError::Syntax {
                file: ctx.file.clone(),
                message: yaml_message(&e),
            })));
        }
    };
    let outcome = match root {
        Root::Map { rest, had_items } => match list_kind(ctx, &rest, accept) {
            _ if shape.duplicate => None,
            Err(e) => Some(Err(e)),
            Ok(Some(default)) => Some(match shape.not_a_sequence {
                Some(found) => Err(ctx.field_error(
                    LOCATOR,
                    "items",
                    format!("expected a sequence, found {found}"),
                )),
                None => Ok(Box::new(Listed { items, default })),
            }),
            Ok(None) if had_items => None,
            Ok(None) => return Some(Streamed::Document(Value::Object(rest))),
        },
        Root::Other => None,
    };
    Some(match outcome {
        Some(result) => Streamed::List(result),
        None => {
            ctx.warnings.truncate(mark);
            Streamed::Other
        }
    })
}

/// Parses the document, handing each item of `items` to `sink` as it is read (plain
/// Applications as apps when `typed`). Invalid JSON is [`Root::Other`]: the generic path
/// tells it from a YAML flow mapping. `None` when the fast path declined.
fn read_root(
    text: &str,
    reader: Reader,
    typed: Typed,
    sink: &mut dyn FnMut(Item),
    shape: &mut ItemsShape,
) -> Result<Option<Root>, serde_saphyr::Error> {
    let seed = RootSeed {
        sink,
        shape,
        // Only serde_json hands out an item's text (`RawValue`).
        typed: if matches!(reader, Reader::Json) {
            typed
        } else {
            Typed::default()
        },
    };
    match reader {
        Reader::Fast => Ok(
            crate::fast_yaml::read_list(text, typed, seed.sink).map(|root| Root::Map {
                rest: root.rest,
                had_items: root.had_items,
            }),
        ),
        Reader::Json => {
            let mut de = serde_json::Deserializer::from_str(text);
            let root = seed
                .deserialize(&mut de)
                .and_then(|root| de.end().map(|()| root));
            Ok(Some(root.unwrap_or(Root::Other)))
        }
        Reader::Yaml => serde_saphyr::with_deserializer_from_str_with_options(
            text,
            yaml_options(text.len()),
            |de| seed.deserialize(de),
        )
        .map(Some),
    }
}

/// `Ok(Some(default))` when the document is a list (`List`: `None` as the items' default
/// kind), `Ok(None)` when it is something else, or the document's kind error.
#[allow(clippy::type_complexity)]
fn list_kind(
    ctx: &Ctx,
    doc: &serde_json::Map<String, Value>,
    accept: Accept,
) -> Result<Option<Option<ObjectKind>>, LoadError> {
    if !doc.contains_key("kind") && !doc.contains_key("apiVersion") {
        return Ok(None);
    }
    // Only `kind`, which is all `kind_of` reads.
    let kind: serde_json::Map<String, Value> = doc
        .get("kind")
        .map(|k| [("kind".to_owned(), k.clone())].into_iter().collect())
        .unwrap_or_default();
    Ok(match kind_of(ctx, &Value::Object(kind), LOCATOR)? {
        "List" => Some(None),
        "SecretList" if accept.secrets => Some(Some(ObjectKind::Secret)),
        "ApplicationList" if accept.apps => Some(Some(ObjectKind::Application)),
        "AppProjectList" if accept.apps => Some(Some(ObjectKind::AppProject)),
        _ => None,
    })
}

/// The only document's locator, as the generic path names it.
const LOCATOR: &str = "document 1";

/// How an item's kind was read while streaming.
enum ItemKind {
    /// Its own `kind`, accepted by this input.
    Own(ObjectKind),
    /// No `kind`: the list's.
    Implied,
    /// Not an object, or a kind this input refuses: the error the generic path raises.
    /// (Boxed: one of these is kept per item, 500k of them in a large export.)
    Refused(Box<LoadError>),
}

/// The items read so far.
struct Items {
    accept: Accept,
    objects: Objects,
    kinds: Vec<ItemKind>,
    /// From the first item without a kind on: items kept to be converted at the end.
    kept: Vec<(usize, Item)>,
    keeping: bool,
    /// The first conversion error; nothing is converted after it.
    failed: Option<LoadError>,
    /// An item was refused: the rest are only parsed.
    refused: bool,
}

/// What the document's `items` looked like, besides its items.
#[derive(Default)]
struct ItemsShape {
    /// A second `items` key (JSON).
    duplicate: bool,
    /// `items` was there but not a sequence (nor null): what it was.
    not_a_sequence: Option<&'static str>,
}

impl Items {
    fn new(accept: Accept) -> Self {
        Items {
            accept,
            objects: Objects::default(),
            kinds: Vec::new(),
            kept: Vec::new(),
            keeping: false,
            failed: None,
            refused: false,
        }
    }

    fn item(&mut self, ctx: &mut Ctx, item: Item) {
        match item {
            Item::Value(value) => self.value(ctx, value),
            Item::App(app) => self.app(app),
            Item::Cluster(cluster) => self.cluster(cluster),
        }
    }

    /// A cluster Secret read straight into its cluster: its kind is its own (`Secret`,
    /// which only an input accepting Secrets types), its conversion cannot fail.
    fn cluster(&mut self, cluster: Box<ClusterSecret>) {
        if self.refused {
            return;
        }
        let j = self.kinds.len();
        if self.keeping {
            self.kept.push((j, Item::Cluster(cluster)));
        } else if self.failed.is_none() {
            self.objects.push_cluster(*cluster);
        }
        self.kinds.push(ItemKind::Own(ObjectKind::Secret));
    }

    /// An Application read straight into its app: its kind is its own (`Application`,
    /// which only an input accepting apps types), its conversion cannot fail.
    fn app(&mut self, app: App) {
        if self.refused {
            return;
        }
        let j = self.kinds.len();
        if self.keeping {
            self.kept.push((j, Item::App(app)));
        } else if self.failed.is_none() {
            self.objects.push_app(app);
        }
        self.kinds.push(ItemKind::Own(ObjectKind::Application));
    }

    fn value(&mut self, ctx: &mut Ctx, value: Value) {
        if self.refused {
            return;
        }
        let j = self.kinds.len();
        let locator = item_locator(j);
        let kind = if !value.is_object() {
            ItemKind::Refused(Box::new(ctx.document_error(
                &locator,
                format!("expected an object, found {}", value_type(&value)),
            )))
        } else {
            match value.get("kind") {
                None | Some(Value::Null) => ItemKind::Implied,
                Some(_) => match kind_of(ctx, &value, &locator)
                    .and_then(|k| object_kind(ctx, k, &locator, self.accept))
                {
                    Ok(kind) => ItemKind::Own(kind),
                    Err(e) => ItemKind::Refused(Box::new(e)),
                },
            }
        };
        match &kind {
            ItemKind::Refused(_) => self.refused = true,
            ItemKind::Implied => self.keeping = true,
            ItemKind::Own(_) => {}
        }
        if self.keeping && !self.refused {
            self.kept.push((j, Item::Value(value)));
        } else if let (ItemKind::Own(object), None) = (&kind, &self.failed) {
            let (accept, object) = (self.accept, *object);
            if let Err(e) = self.objects.absorb(ctx, accept, object, &value, &locator) {
                self.failed = Some(e);
            }
        }
        self.kinds.push(kind);
    }

    /// Checks every item's kind against the list's `default` (as the generic path does
    /// before converting anything), then converts the kept items.
    fn finish(self, ctx: &mut Ctx, default: Option<ObjectKind>) -> Result<FleetFile, LoadError> {
        let mut resolved = Vec::with_capacity(self.kept.len());
        for (j, kind) in self.kinds.into_iter().enumerate() {
            let locator = item_locator(j);
            let object = match kind {
                ItemKind::Refused(e) => return Err(*e),
                ItemKind::Implied => match default {
                    Some(d) => d,
                    None => return Err(unknown_kind(ctx, &locator, "", self.accept)),
                },
                ItemKind::Own(object) => {
                    if default.is_some_and(|d| d != object) {
                        return Err(unknown_kind(ctx, &locator, kind_name(object), self.accept));
                    }
                    object
                }
            };
            resolved.push(object);
        }
        if let Some(e) = self.failed {
            return Err(e);
        }
        let mut objects = self.objects;
        for (j, item) in self.kept {
            match item {
                Item::Value(value) => {
                    objects.absorb(ctx, self.accept, resolved[j], &value, &item_locator(j))?;
                }
                Item::App(app) => objects.push_app(app),
                Item::Cluster(cluster) => objects.push_cluster(*cluster),
            }
        }
        Ok(objects.finish())
    }
}

/// The kind as written (the only spelling [`object_kind`] accepts).
fn kind_name(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Secret => "Secret",
        ObjectKind::Application => "Application",
        ObjectKind::AppProject => "AppProject",
        ObjectKind::ConfigMap => "ConfigMap",
    }
}

fn item_locator(j: usize) -> String {
    format!("{LOCATOR}, items[{j}]")
}

/// The document: its keys other than `items` as values; `items` streamed into [`Items`].
enum Root {
    Map {
        rest: serde_json::Map<String, Value>,
        had_items: bool,
    },
    /// Not a mapping.
    Other,
}

struct RootSeed<'a> {
    sink: &'a mut dyn FnMut(Item),
    shape: &'a mut ItemsShape,
    /// Items are read as JSON texts first and plain items typed from them.
    typed: Typed,
}

impl<'de> DeserializeSeed<'de> for RootSeed<'_> {
    type Value = Root;
    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<Root, D::Error> {
        de.deserialize_any(self)
    }
}

/// Answers [`Root::Other`] (or, for `items`, records what it was) for every shape but a
/// mapping or a sequence, draining what it skips.
macro_rules! not_a_mapping {
    ($out:expr) => {
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($out(self, "a boolean"))
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($out(self, "a number"))
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($out(self, "a number"))
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($out(self, "a number"))
        }
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($out(self, "a string"))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok($out(self, "null"))
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok($out(self, "null"))
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
            de.deserialize_any(self)
        }
    };
}

impl<'de> Visitor<'de> for RootSeed<'_> {
    type Value = Root;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML document")
    }

    not_a_mapping!(|_, _| Root::Other);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Root, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Root::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Root, A::Error> {
        let mut rest = serde_json::Map::new();
        let mut had_items = false;
        // YAML's parser refuses duplicate keys before any visitor sees them; JSON's does not
        // (a value keeps the last), so a second `items` leaves the text to the generic path.
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" && had_items {
                map.next_value::<IgnoredAny>()?;
                self.shape.duplicate = true;
            } else if key == "items" {
                had_items = true;
                map.next_value_seed(ItemsSeed {
                    sink: &mut *self.sink,
                    shape: &mut *self.shape,
                    typed: self.typed,
                })?;
            } else {
                rest.insert(key, map.next_value()?);
            }
        }
        Ok(Root::Map { rest, had_items })
    }
}

struct ItemsSeed<'a> {
    sink: &'a mut dyn FnMut(Item),
    shape: &'a mut ItemsShape,
    /// See [`RootSeed::typed`].
    typed: Typed,
}

impl<'de> DeserializeSeed<'de> for ItemsSeed<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ItemsSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence of objects")
    }

    not_a_mapping!(|seed: ItemsSeed<'_>, found| {
        if found != "null" {
            seed.shape.not_a_sequence = Some(found);
        }
    });

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        self.shape.not_a_sequence = Some("a mapping");
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if !self.typed.any() {
            while let Some(value) = seq.next_element::<Value>()? {
                (self.sink)(Item::Value(value));
            }
            return Ok(());
        }
        while let Some(raw) = seq.next_element::<&'de RawValue>()? {
            let item = json_item(raw.get(), self.typed).map_err(serde::de::Error::custom)?;
            (self.sink)(item);
        }
        Ok(())
    }
}
