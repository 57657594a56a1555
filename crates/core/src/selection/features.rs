//! NFD's raw features of a node (`NodeFeature.spec.features`), as image selection evaluates
//! them: each feature by name, stored once per distinct content and shared by every object and
//! node that has it.
//!
//! - **Bounded while read.** [`NodeFeatures`] deserializes straight from the object's bytes
//!   (no JSON tree of the whole `spec.features`): at most [`MAX_FEATURES`] features,
//!   [`MAX_FEATURE_ITEMS`] elements (or instance attributes) per feature and [`MAX_NODE_ITEMS`]
//!   per node; a feature past a bound is kept out whole and named as truncated (what it would
//!   answer is unknown, not false); values are cut to [`MAX_VALUE_BYTES`]; names longer than a
//!   spec can write are dropped. A malformed `spec.features` reads as no feature.
//! - **Hash-consed.** Features are interned by content (their strings too): nodes of one node
//!   group, whose objects differ in a few per-node values, share every other feature; so do
//!   objects and merged views that are equal (compared by the identity of their interned
//!   parts). An interned value no object or node holds any more is freed by the next sweep of
//!   the tables, which runs whenever a table has doubled since the last one.
//! - **Merged as NFD merges.** [`NodeFeatures::merge`] folds several objects of one node in the
//!   order given, as nfd-master's `MergeInto` does: flags are united, attributes overwritten
//!   element by element by later objects, instances appended.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::limits;

/// At most this many elements or instance attributes are kept per feature; a feature with more
/// is [`NodeFeatures::is_truncated`].
pub const MAX_FEATURE_ITEMS: usize = 4096;
/// At most this many features are kept per node (flags, attributes and instances together).
pub const MAX_FEATURES: usize = 512;
/// At most this many elements (instance attributes counted each, an instance at least one) are
/// kept per node; the features past it are [`NodeFeatures::is_truncated`].
pub const MAX_NODE_ITEMS: usize = 16_384;
/// Bytes kept of a feature value (cut at a character boundary): a spec value has at most 63
/// characters, so a longer value equals none before or after the cut.
pub const MAX_VALUE_BYTES: usize = 256;

/// An interned string.
pub type Text = Arc<str>;

/// Element name → value, sorted by name.
pub type Attributes = Box<[(Text, Text)]>;

/// One feature of a node.
#[derive(Debug, PartialEq, Eq, Hash)]
pub enum Feature {
    /// A flag feature: its element names, sorted.
    Flags(Box<[Text]>),
    /// An attribute feature: its elements.
    Attributes(Attributes),
    /// An instance feature: each instance's attributes.
    Instances(Box<[Attributes]>),
}

impl Feature {
    /// Whether the flag feature has `element`.
    pub fn has_flag(&self, element: &str) -> bool {
        match self {
            Self::Flags(names) => names.binary_search_by(|n| n.as_ref().cmp(element)).is_ok(),
            _ => false,
        }
    }

    /// The value of an attribute feature's `element`.
    pub fn attribute(&self, element: &str) -> Option<&str> {
        match self {
            Self::Attributes(elements) => attribute(elements, element),
            _ => None,
        }
    }

    /// Elements (instance attributes counted each, an instance at least one).
    fn items(&self) -> usize {
        match self {
            Self::Flags(names) => names.len(),
            Self::Attributes(elements) => elements.len(),
            Self::Instances(instances) => instances.iter().map(|i| i.len().max(1)).sum(),
        }
    }
}

/// The value of `element` among sorted attributes.
pub fn attribute<'a>(elements: &'a [(Text, Text)], element: &str) -> Option<&'a str> {
    elements
        .binary_search_by(|(name, _)| name.as_ref().cmp(element))
        .ok()
        .and_then(|i| elements.get(i))
        .map(|(_, value)| value.as_ref())
}

/// NFD's raw features of a node (or of one `NodeFeature` object), each feature interned.
/// Equality and hashing compare the interned parts by identity.
#[derive(Debug, Default)]
pub struct NodeFeatures {
    /// Feature name (lowercased) → feature, sorted by name.
    features: Box<[(Text, Arc<Feature>)]>,
    /// Features present but not kept whole (past a bound), sorted: what they would answer is
    /// unknown, not false.
    truncated: Box<[Text]>,
}

impl PartialEq for NodeFeatures {
    fn eq(&self, other: &Self) -> bool {
        self.features.len() == other.features.len()
            && self.truncated.len() == other.truncated.len()
            && self
                .features
                .iter()
                .zip(other.features.iter())
                .all(|((a, x), (b, y))| a == b && Arc::ptr_eq(x, y))
            && self.truncated == other.truncated
    }
}

impl Eq for NodeFeatures {}

impl Hash for NodeFeatures {
    fn hash<H: Hasher>(&self, state: &mut H) {
        for (name, feature) in self.features.iter() {
            name.hash(state);
            std::ptr::hash(Arc::as_ptr(feature), state);
        }
        self.truncated.hash(state);
    }
}

impl NodeFeatures {
    /// The feature named `name` (lowercase).
    pub fn get(&self, name: &str) -> Option<&Feature> {
        self.features
            .binary_search_by(|(n, _)| n.as_ref().cmp(name))
            .ok()
            .and_then(|i| self.features.get(i))
            .map(|(_, feature)| feature.as_ref())
    }

    /// The features, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Feature)> {
        self.features.iter().map(|(n, f)| (n.as_ref(), f.as_ref()))
    }

    /// Whether `feature` was present but not kept whole.
    pub fn is_truncated(&self, feature: &str) -> bool {
        self.truncated
            .binary_search_by(|n| n.as_ref().cmp(feature))
            .is_ok()
    }

    /// Whether no feature is known (none kept, none truncated).
    pub fn is_empty(&self) -> bool {
        self.features.is_empty() && self.truncated.is_empty()
    }

    /// Reads `spec.features` of a `NodeFeature` from a JSON value (tests, files): as
    /// deserializing it from the object does.
    pub fn from_spec_features(features: &serde_json::Value) -> Self {
        Self::deserialize(features).unwrap_or_default()
    }

    /// The features of one node described by several objects, merged in the order given as
    /// nfd-master merges them (later objects take precedence): flags united, attributes
    /// overwritten element by element, instances appended; a feature truncated in any object
    /// is truncated. The merged view is bounded like one object. Interned.
    pub fn merge<'a>(objects: impl IntoIterator<Item = &'a Arc<NodeFeatures>>) -> Arc<Self> {
        let objects: Vec<&Arc<NodeFeatures>> = objects.into_iter().collect();
        if let [one] = objects.as_slice() {
            return Arc::clone(one);
        }
        // Name → the features of that name, in order.
        let mut by_name: BTreeMap<&Text, Vec<&Arc<Feature>>> = BTreeMap::new();
        let mut truncated: BTreeSet<Text> = BTreeSet::new();
        for object in &objects {
            for (name, feature) in object.features.iter() {
                by_name.entry(name).or_default().push(feature);
            }
            truncated.extend(object.truncated.iter().cloned());
        }
        let mut budget = Budget::default();
        let mut features = Vec::with_capacity(by_name.len());
        for (name, parts) in by_name {
            if truncated.contains(name) {
                continue;
            }
            let merged = match parts.as_slice() {
                [one] => Some(Arc::clone(one)),
                _ => merge_feature(&parts),
            };
            match merged {
                Some(feature) if budget.admit(feature.items()) => {
                    features.push((name.clone(), feature));
                }
                _ => {
                    truncated.insert(name.clone());
                }
            }
        }
        intern_features(NodeFeatures {
            features: features.into_boxed_slice(),
            truncated: truncated.into_iter().collect(),
        })
    }
}

/// Features of one name in several objects, merged; `None` when they are of different kinds
/// (NFD would keep each in its own map, and evaluate the flag first: unknown here) or past
/// [`MAX_FEATURE_ITEMS`].
fn merge_feature(parts: &[&Arc<Feature>]) -> Option<Arc<Feature>> {
    let merged = match parts.first().map(|f| f.as_ref())? {
        Feature::Flags(_) => {
            let mut names: BTreeSet<&Text> = BTreeSet::new();
            for part in parts {
                let Feature::Flags(more) = part.as_ref() else {
                    return None;
                };
                names.extend(more.iter());
                if names.len() > MAX_FEATURE_ITEMS {
                    return None;
                }
            }
            Feature::Flags(names.into_iter().cloned().collect())
        }
        Feature::Attributes(_) => {
            let mut elements: BTreeMap<&Text, &Text> = BTreeMap::new();
            for part in parts {
                let Feature::Attributes(more) = part.as_ref() else {
                    return None;
                };
                elements.extend(more.iter().map(|(k, v)| (k, v)));
                if elements.len() > MAX_FEATURE_ITEMS {
                    return None;
                }
            }
            Feature::Attributes(
                elements
                    .into_iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
        }
        Feature::Instances(_) => {
            let mut instances = Vec::new();
            let mut items = 0usize;
            for part in parts {
                let Feature::Instances(more) = part.as_ref() else {
                    return None;
                };
                items = items.saturating_add(part.items());
                if items > MAX_FEATURE_ITEMS {
                    return None;
                }
                instances.extend(more.iter().cloned());
            }
            Feature::Instances(instances.into_boxed_slice())
        }
    };
    Some(intern_feature(merged))
}

/// What a node keeps, counted.
#[derive(Default)]
struct Budget {
    items: usize,
    features: usize,
}

impl Budget {
    /// Whether a feature of `size` items fits (counted when it does).
    fn admit(&mut self, size: usize) -> bool {
        let fits = size <= MAX_FEATURE_ITEMS
            && self.features < MAX_FEATURES
            && self.items.saturating_add(size) <= MAX_NODE_ITEMS;
        if fits {
            self.items = self.items.saturating_add(size);
            self.features = self.features.saturating_add(1);
        }
        fits
    }

    /// Items the node may still keep, within one feature's bound.
    fn room(&self) -> usize {
        MAX_FEATURE_ITEMS.min(MAX_NODE_ITEMS.saturating_sub(self.items))
    }
}

// ---------------------------------------------------------------------------------------------
// Interning.

/// Interned strings, features and feature sets. Entries only the table holds are swept when a
/// table has doubled since its last sweep.
#[derive(Default)]
struct Tables {
    texts: Table<str>,
    features: Table<Feature>,
    sets: Table<NodeFeatures>,
}

struct Table<T: ?Sized> {
    entries: HashSet<Arc<T>>,
    swept: usize,
}

impl<T: ?Sized> Default for Table<T> {
    fn default() -> Self {
        Self {
            entries: HashSet::new(),
            swept: 0,
        }
    }
}

impl<T: ?Sized + Eq + Hash> Table<T> {
    fn get(&self, value: &T) -> Option<Arc<T>> {
        self.entries.get(value).cloned()
    }

    fn insert(&mut self, value: Arc<T>) -> Arc<T> {
        if self.entries.len() >= self.swept.saturating_mul(2).max(1024) {
            self.entries.retain(|e| Arc::strong_count(e) > 1);
            self.swept = self.entries.len();
        }
        self.entries.insert(Arc::clone(&value));
        value
    }
}

static TABLES: LazyLock<Mutex<Tables>> = LazyLock::new(|| Mutex::new(Tables::default()));

fn tables() -> std::sync::MutexGuard<'static, Tables> {
    TABLES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How many strings, features and feature sets are interned (swept or not).
pub fn interned() -> (usize, usize, usize) {
    let tables = tables();
    (
        tables.texts.entries.len(),
        tables.features.entries.len(),
        tables.sets.entries.len(),
    )
}

fn intern_texts(tables: &mut Tables, texts: impl Iterator<Item = Text>) -> Vec<Text> {
    texts
        .map(|t| match tables.texts.get(&t) {
            Some(known) => known,
            None => tables.texts.insert(t),
        })
        .collect()
}

/// The shared copy of `feature` (its strings interned when it is new).
fn intern_feature(feature: Feature) -> Arc<Feature> {
    let mut tables = tables();
    if let Some(known) = tables.features.get(&feature) {
        return known;
    }
    let pairs = |tables: &mut Tables, elements: &[(Text, Text)]| -> Attributes {
        elements
            .iter()
            .map(|(k, v)| {
                let mut both = intern_texts(tables, [k.clone(), v.clone()].into_iter());
                let v = both.pop().unwrap_or_default();
                let k = both.pop().unwrap_or_default();
                (k, v)
            })
            .collect()
    };
    let feature = match feature {
        Feature::Flags(names) => {
            Feature::Flags(intern_texts(&mut tables, names.iter().cloned()).into_boxed_slice())
        }
        Feature::Attributes(elements) => Feature::Attributes(pairs(&mut tables, &elements)),
        Feature::Instances(instances) => {
            Feature::Instances(instances.iter().map(|i| pairs(&mut tables, i)).collect())
        }
    };
    tables.features.insert(Arc::new(feature))
}

/// The shared copy of `set`.
fn intern_features(set: NodeFeatures) -> Arc<NodeFeatures> {
    let mut tables = tables();
    if let Some(known) = tables.sets.get(&set) {
        return known;
    }
    let names = intern_texts(&mut tables, set.features.iter().map(|(n, _)| n.clone()));
    let features = names
        .into_iter()
        .zip(set.features.iter().map(|(_, f)| Arc::clone(f)))
        .collect();
    let truncated = intern_texts(&mut tables, set.truncated.iter().cloned()).into_boxed_slice();
    tables.sets.insert(Arc::new(NodeFeatures {
        features,
        truncated,
    }))
}

/// Sweeps the tables now: what only they hold is freed.
pub fn sweep() {
    let mut tables = tables();
    let Tables {
        texts,
        features,
        sets,
    } = &mut *tables;
    // Sets hold features, features hold texts: free in that order.
    for _ in 0..2 {
        sets.entries.retain(|e| Arc::strong_count(e) > 1);
        features.entries.retain(|e| Arc::strong_count(e) > 1);
        texts.entries.retain(|e| Arc::strong_count(e) > 1);
    }
    sets.swept = sets.entries.len();
    features.swept = features.entries.len();
    texts.swept = texts.entries.len();
}

// ---------------------------------------------------------------------------------------------
// Reading, bounded while deserializing.

/// A name a spec can write (longer ones are dropped).
fn nameable(name: &str) -> bool {
    name.len() <= limits::KEY_CHARS
}

/// `text` cut to [`MAX_VALUE_BYTES`] at a character boundary.
fn cut(text: &str) -> &str {
    if text.len() <= MAX_VALUE_BYTES {
        return text;
    }
    let mut end = MAX_VALUE_BYTES;
    while !text.is_char_boundary(end) {
        end = end.saturating_sub(1);
    }
    text.get(..end).unwrap_or_default()
}

/// A string, cut to [`MAX_VALUE_BYTES`] (borrowed from the input when it can be); any other
/// value reads as `None`.
struct Value(Option<Text>);

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Value;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E>(self, s: &str) -> Result<Value, E> {
                Ok(Value(Some(cut(s).into())))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Value, E> {
                Ok(Value(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Value, E> {
                Ok(Value(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Value, E> {
                Ok(Value(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Value, E> {
                Ok(Value(None))
            }
            fn visit_unit<E>(self) -> Result<Value, E> {
                Ok(Value(None))
            }
            fn visit_none<E>(self) -> Result<Value, E> {
                Ok(Value(None))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
                d.deserialize_any(self)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Value(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Value(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// A map key, borrowed when it can be (serde's borrowed `Cow`).
#[derive(Deserialize)]
#[serde(transparent)]
struct Key<'a>(#[serde(borrow)] std::borrow::Cow<'a, str>);

/// What the elements of one feature are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Flags,
    Attributes,
    Instances,
}

/// The features of one object while it is read.
#[derive(Default)]
struct Reading {
    budget: Budget,
    /// Per kind, name → feature (flags first when one name is of several kinds).
    flags: BTreeMap<Text, Feature>,
    attributes: BTreeMap<Text, Feature>,
    instances: BTreeMap<Text, Feature>,
    truncated: BTreeSet<Text>,
}

impl Reading {
    fn truncate(&mut self, name: &str) {
        if self.truncated.len() < MAX_FEATURES {
            self.truncated.insert(name.into());
        }
    }

    fn finish(self) -> NodeFeatures {
        let Self {
            flags,
            mut attributes,
            mut instances,
            truncated,
            ..
        } = self;
        let mut all: BTreeMap<Text, Feature> = flags;
        for (name, feature) in std::mem::take(&mut attributes) {
            all.entry(name).or_insert(feature);
        }
        for (name, feature) in std::mem::take(&mut instances) {
            all.entry(name).or_insert(feature);
        }
        let features: Vec<(Text, Arc<Feature>)> = all
            .into_iter()
            .map(|(name, feature)| (name, intern_feature(feature)))
            .collect();
        NodeFeatures {
            features: features.into_boxed_slice(),
            truncated: truncated.into_iter().collect(),
        }
    }
}

/// Drains the rest of a map.
fn drain<'de, A: MapAccess<'de>>(map: &mut A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Drains the rest of a sequence.
fn drain_seq<'de, A: SeqAccess<'de>>(seq: &mut A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// A visitor's answers to what is not the map it reads: nothing (a list is drained when it is
/// not read either).
macro_rules! tolerant {
    ($expecting:literal, drains lists) => {
        tolerant!($expecting);
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            drain_seq(&mut seq)
        }
    };
    ($expecting:literal) => {
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str($expecting)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_none<E>(self) -> Result<(), E> {
            Ok(())
        }
    };
}

/// A seed read by its own visitor, whatever the value is.
macro_rules! seed {
    ($name:ident) => {
        impl<'de> DeserializeSeed<'de> for $name<'_> {
            type Value = ();
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
                d.deserialize_any(self)
            }
        }
    };
}

/// `spec.features`: `{flags, attributes, instances}`.
struct FeaturesSeed<'r>(&'r mut Reading);

seed!(FeaturesSeed);

impl<'de> Visitor<'de> for FeaturesSeed<'_> {
    type Value = ();
    tolerant!("NodeFeature features", drains lists);
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let kind = match key.0.as_ref() {
                "flags" => Kind::Flags,
                "attributes" => Kind::Attributes,
                "instances" => Kind::Instances,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            map.next_value_seed(KindSeed {
                reading: self.0,
                kind,
            })?;
        }
        Ok(())
    }
}

/// One kind's features: name → `{elements}`.
struct KindSeed<'r> {
    reading: &'r mut Reading,
    kind: Kind,
}

seed!(KindSeed);

impl<'de> Visitor<'de> for KindSeed<'_> {
    type Value = ();
    tolerant!("features by name", drains lists);
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let name = key.0.to_lowercase();
            if !nameable(&name) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let mut read = FeatureRead {
                kind: self.kind,
                room: self.reading.budget.room(),
                items: 0,
                over: false,
                flags: Vec::new(),
                attributes: Vec::new(),
                instances: Vec::new(),
            };
            map.next_value_seed(FeatureSeed(&mut read))?;
            let items = read.items;
            let feature = read.finish();
            match feature {
                Some(feature) if self.reading.budget.admit(items) => {
                    let into = match self.kind {
                        Kind::Flags => &mut self.reading.flags,
                        Kind::Attributes => &mut self.reading.attributes,
                        Kind::Instances => &mut self.reading.instances,
                    };
                    into.insert(name.into(), feature);
                }
                _ => self.reading.truncate(&name),
            }
        }
        Ok(())
    }
}

/// One feature while it is read.
struct FeatureRead {
    kind: Kind,
    /// Items it may hold.
    room: usize,
    items: usize,
    /// It held more than `room`: what was read is dropped, the rest skipped.
    over: bool,
    flags: Vec<Text>,
    attributes: Vec<(Text, Text)>,
    instances: Vec<Attributes>,
}

impl FeatureRead {
    /// Counts `n` more items; false once past the room.
    fn take(&mut self, n: usize) -> bool {
        if self.over {
            return false;
        }
        self.items = self.items.saturating_add(n);
        if self.items > self.room {
            self.over = true;
            self.flags = Vec::new();
            self.attributes = Vec::new();
            self.instances = Vec::new();
            return false;
        }
        true
    }

    fn finish(self) -> Option<Feature> {
        if self.over {
            return None;
        }
        Some(match self.kind {
            Kind::Flags => {
                let mut names = self.flags;
                names.sort_unstable();
                names.dedup();
                Feature::Flags(names.into_boxed_slice())
            }
            Kind::Attributes => Feature::Attributes(sorted(self.attributes)),
            Kind::Instances => Feature::Instances(self.instances.into_boxed_slice()),
        })
    }
}

/// Attributes sorted by name, the last of a repeated name kept.
fn sorted(mut pairs: Vec<(Text, Text)>) -> Attributes {
    pairs.reverse();
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    pairs.dedup_by(|a, b| a.0 == b.0);
    pairs.into_boxed_slice()
}

/// `{elements: ...}` of one feature.
struct FeatureSeed<'f>(&'f mut FeatureRead);

seed!(FeatureSeed);

impl<'de> Visitor<'de> for FeatureSeed<'_> {
    type Value = ();
    tolerant!("a feature", drains lists);
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if key.0 == "elements" {
                map.next_value_seed(ElementsSeed(&mut *self.0))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// A feature's `elements`: a map (flags: name → `{}`; attributes: name → value) or a list
/// (instances: `[{attributes: {...}}]`).
struct ElementsSeed<'f>(&'f mut FeatureRead);

seed!(ElementsSeed);

impl<'de> Visitor<'de> for ElementsSeed<'_> {
    type Value = ();
    tolerant!("a feature's elements");
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let read = self.0;
        match read.kind {
            Kind::Flags => {
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    map.next_value::<IgnoredAny>()?;
                    if read.take(1) && nameable(&key.0) {
                        read.flags.push(key.0.as_ref().into());
                    }
                }
            }
            Kind::Attributes => {
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    if !read.take(1) {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    }
                    let Value(value) = map.next_value()?;
                    if let (true, Some(value)) = (nameable(&key.0), value) {
                        read.attributes.push((key.0.as_ref().into(), value));
                    }
                }
            }
            Kind::Instances => drain(&mut map)?,
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let read = self.0;
        if read.kind != Kind::Instances {
            return drain_seq(&mut seq);
        }
        loop {
            let mut instance = InstanceRead {
                attributes: Vec::new(),
                room: read.room.saturating_sub(read.items),
                over: false,
            };
            if seq
                .next_element_seed(InstanceSeed(&mut instance))?
                .is_none()
            {
                return Ok(());
            }
            let items = if instance.over {
                usize::MAX
            } else {
                instance.attributes.len().max(1)
            };
            if read.take(items) {
                read.instances.push(sorted(instance.attributes));
            }
        }
    }
}

/// One instance while it is read: at most `room` attributes (past it, `over`, and the rest is
/// skipped).
struct InstanceRead {
    attributes: Vec<(Text, Text)>,
    room: usize,
    over: bool,
}

/// One instance, `{attributes: {name: value}}`.
struct InstanceSeed<'a>(&'a mut InstanceRead);

seed!(InstanceSeed);

impl<'de> Visitor<'de> for InstanceSeed<'_> {
    type Value = ();
    tolerant!("an instance", drains lists);
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if key.0 == "attributes" {
                map.next_value_seed(AttributesSeed(&mut *self.0))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// An instance's `attributes`.
struct AttributesSeed<'a>(&'a mut InstanceRead);

seed!(AttributesSeed);

impl<'de> Visitor<'de> for AttributesSeed<'_> {
    type Value = ();
    tolerant!("an instance's attributes", drains lists);
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let instance = self.0;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if instance.over || instance.attributes.len() >= instance.room {
                instance.over = true;
                instance.attributes = Vec::new();
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let Value(value) = map.next_value()?;
            if let (true, Some(value)) = (nameable(&key.0), value) {
                instance.attributes.push((key.0.as_ref().into(), value));
            }
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for NodeFeatures {
    /// Reads `spec.features`, bounded while it is read (module docs); anything but a map reads
    /// as no feature.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut reading = Reading::default();
        FeaturesSeed(&mut reading).deserialize(d)?;
        Ok(reading.finish())
    }
}

impl NodeFeatures {
    /// `spec.features` read (bounded) and interned: equal objects share one copy.
    pub fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<Self>, D::Error> {
        Self::deserialize(d).map(intern_features)
    }

    /// Interned: equal feature sets share one copy.
    pub fn interned(self) -> Arc<Self> {
        intern_features(self)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(value: serde_json::Value) -> Arc<NodeFeatures> {
        NodeFeatures::read(&value).unwrap()
    }

    /// nfd-master's `MergeInto`, objects in the order given: flags united, attributes
    /// overwritten element by element, instances appended.
    #[test]
    fn objects_merge_as_nfd_merges_them() {
        let worker = read(json!({
            "flags": {"kernel.loadedmodule": {"elements": {"kvm": {}}}},
            "attributes": {"kernel.version": {"elements": {"major": "6", "minor": "1"}}},
            "instances": {"pci.device": {"elements": [{"attributes": {"vendor": "8086"}}]}}
        }));
        let gpu = read(json!({
            "flags": {"kernel.loadedmodule": {"elements": {"nvidia": {}}}},
            "attributes": {"kernel.version": {"elements": {"minor": "2"}}},
            "instances": {"pci.device": {"elements": [{"attributes": {"vendor": "10de"}}]}}
        }));
        let merged = NodeFeatures::merge([&worker, &gpu]);
        let modules = merged.get("kernel.loadedmodule").unwrap();
        assert!(modules.has_flag("kvm") && modules.has_flag("nvidia"));
        let version = merged.get("kernel.version").unwrap();
        assert_eq!(version.attribute("major"), Some("6"));
        assert_eq!(
            version.attribute("minor"),
            Some("2"),
            "the later object wins"
        );
        let Some(Feature::Instances(devices)) = merged.get("pci.device") else {
            panic!("instances");
        };
        let vendors: Vec<_> = devices.iter().map(|d| attribute(d, "vendor")).collect();
        assert_eq!(vendors, [Some("8086"), Some("10de")]);
        // The other order: the worker's minor wins.
        let reversed = NodeFeatures::merge([&gpu, &worker]);
        assert_eq!(
            reversed.get("kernel.version").unwrap().attribute("minor"),
            Some("1")
        );
        // One object is itself; equal merges are one copy.
        assert!(Arc::ptr_eq(&NodeFeatures::merge([&worker]), &worker));
        assert!(Arc::ptr_eq(&merged, &NodeFeatures::merge([&worker, &gpu])));
    }

    /// Features equal in content are one copy, whatever object they come from; objects equal in
    /// content are one copy.
    #[test]
    fn equal_features_are_stored_once() {
        let config: serde_json::Map<String, serde_json::Value> = (0..1500)
            .map(|i| (format!("CONFIG_{i}"), json!("y")))
            .collect();
        let node = |name: &str| {
            read(json!({"attributes": {
                "kernel.config": {"elements": config.clone()},
                "system.name": {"elements": {"nodename": name}}
            }}))
        };
        let (a, b) = (node("a"), node("b"));
        assert!(!Arc::ptr_eq(&a, &b));
        let shared = |n: &NodeFeatures| {
            n.features
                .iter()
                .find(|(k, _)| &**k == "kernel.config")
                .map(|(_, f)| Arc::clone(f))
                .unwrap()
        };
        assert!(Arc::ptr_eq(&shared(&a), &shared(&b)));
        assert!(Arc::ptr_eq(&a, &node("a")));
        assert_ne!(
            a.get("system.name").unwrap().attribute("nodename"),
            b.get("system.name").unwrap().attribute("nodename")
        );
        // What nothing holds is freed by a sweep.
        let before = interned();
        drop((a, b));
        sweep();
        assert!(interned().1 <= before.1);
    }

    /// Bounds while reading the bytes: a feature past its bound is out and truncated, the node's
    /// features stop at their count; wrong shapes read as nothing, never as an error.
    #[test]
    fn reading_is_bounded_and_tolerant() {
        let many: serde_json::Map<String, serde_json::Value> = (0..=MAX_FEATURE_ITEMS)
            .map(|i| (format!("F{i}"), json!({})))
            .collect();
        let features: serde_json::Map<String, serde_json::Value> = (0..MAX_FEATURES + 10)
            .map(|i| (format!("f.{i}"), json!({"elements": {"x": {}}})))
            .collect();
        let mut wide = json!({"flags": features});
        wide["flags"]["cpu.cpuid"] = json!({"elements": many});
        let bytes = serde_json::to_vec(&wide).unwrap();
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let read = NodeFeatures::read(&mut de).unwrap();
        assert!(read.is_truncated("cpu.cpuid"));
        assert_eq!(read.iter().count(), MAX_FEATURES);
        let instances: Vec<serde_json::Value> = (0..=MAX_FEATURE_ITEMS)
            .map(|i| json!({"attributes": {"vendor": format!("{i}")}}))
            .collect();
        let devices = NodeFeatures::from_spec_features(
            &json!({"instances": {"pci.device": {"elements": instances}}}),
        );
        assert!(devices.is_truncated("pci.device"));
        for odd in [
            json!(5),
            json!([1, 2]),
            json!({"flags": 3, "attributes": [1], "instances": {"x": {"elements": {"a": "b"}}}}),
            json!({"attributes": {"kernel.version": {"elements": {"major": 6, "minor": "1"}}}}),
        ] {
            let read = NodeFeatures::from_spec_features(&odd);
            assert!(read
                .get("kernel.version")
                .is_none_or(|f| f.attribute("major").is_none()));
        }
        let upper = NodeFeatures::from_spec_features(
            &json!({"flags": {"CPU.CPUID": {"elements": {"AVX": {}}}}}),
        );
        assert!(upper.get("cpu.cpuid").unwrap().has_flag("AVX"));
    }
}
