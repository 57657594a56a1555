//! Collects writes against a raw document and emits minimal, non-overlapping operations.

use json_patch::jsonptr::PointerBuf;
use serde_json::{Map, Value};

use super::{add, pointer, remove, replace, Op};

/// One pending operation.
#[derive(Debug)]
enum Entry {
    /// An operation whose target's parents all exist.
    Direct(Op),
    /// An `add` of a value at `path`, which is absent or null in the document; later writes below
    /// `path` are merged into `value`. The path is kept encoded, as the operation will carry it.
    Create { path: PointerBuf, value: Value },
}

/// Records writes against `doc` (the raw object, never modified) and builds the patch.
#[derive(Debug)]
pub struct PatchBuilder<'a> {
    doc: &'a Value,
    entries: Vec<Entry>,
}

/// Looks a path up; `None` when absent. Array elements are addressed by decimal index.
fn lookup<'v>(doc: &'v Value, segments: &[&str]) -> Option<&'v Value> {
    let mut current = doc;
    for segment in segments {
        current = match current {
            Value::Object(map) => map.get(*segment)?,
            Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

fn present(value: Option<&Value>) -> bool {
    !matches!(value, None | Some(Value::Null))
}

/// `value` as an object, replacing anything else with `{}`.
fn ensure_object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    match value {
        Value::Object(map) => map,
        _ => unreachable!("replaced by an object just above"),
    }
}

/// The object at `rel` inside `root`, creating objects on the way.
fn object_at<'v>(root: &'v mut Value, rel: &[&str]) -> &'v mut Map<String, Value> {
    let mut current = root;
    for segment in rel {
        current = ensure_object(current)
            .entry(*segment)
            .or_insert(Value::Null);
    }
    ensure_object(current)
}

impl<'a> PatchBuilder<'a> {
    /// A builder for patches against `doc`.
    pub fn new(doc: &'a Value) -> Self {
        Self {
            doc,
            entries: Vec::new(),
        }
    }

    /// The raw document the patch applies to.
    pub fn doc(&self) -> &'a Value {
        self.doc
    }

    /// The shortest prefix of `path` that is absent or null in the document.
    fn missing_prefix(&self, path: &[&str]) -> Option<usize> {
        // One walk down the document (looking each prefix up from the root again would make a
        // path of n segments cost n² map probes).
        let mut current = self.doc;
        for (index, segment) in path.iter().enumerate() {
            match lookup(current, std::slice::from_ref(segment)) {
                Some(next) if present(Some(next)) => current = next,
                _ => return Some(index.saturating_add(1)),
            }
        }
        None
    }

    /// Merges `write` (applied to the value at `rel` below the created path) into the pending
    /// creation at `anchor`, or starts one.
    fn create(&mut self, anchor: &[&str], rel: &[&str], write: impl FnOnce(&mut Value)) {
        let position = self
            .entries
            .iter()
            .position(|e| matches!(e, Entry::Create { path, .. } if same_path(path, anchor)));
        let index = match position {
            Some(index) => index,
            None => {
                self.entries.push(Entry::Create {
                    path: pointer(anchor),
                    value: Value::Null,
                });
                self.entries.len() - 1
            }
        };
        if let Some(Entry::Create { value, .. }) = self.entries.get_mut(index) {
            write_at(value, rel, write);
        }
    }

    /// Sets the object member at `path` (last segment = key): `replace` when it holds a value,
    /// else `add` (creating absent or null parents whole).
    pub fn set(&mut self, path: &[&str], value: Value) {
        match self.missing_prefix(path) {
            None => self
                .entries
                .push(Entry::Direct(replace(pointer(path), value))),
            Some(len) => {
                let (anchor, rel) = path.split_at(len);
                self.create(anchor, rel, |slot| *slot = value);
            }
        }
    }

    /// Appends `value` to the array at `path`: `add …/-` when the array exists, else the array is
    /// created (with every value appended to it in this patch).
    pub fn append(&mut self, path: &[&str], value: Value) {
        match self.missing_prefix(path) {
            None => {
                let mut target = pointer(path);
                target.push_back("-");
                self.entries.push(Entry::Direct(add(target, value)));
            }
            Some(len) => {
                let (anchor, rel) = path.split_at(len);
                self.create(anchor, rel, |slot| match slot {
                    Value::Array(items) => items.push(value),
                    other => *other = Value::Array(vec![value]),
                });
            }
        }
    }

    /// Replaces the existing value at `path` (object member or array element).
    pub fn replace(&mut self, path: &[&str], value: Value) {
        self.entries
            .push(Entry::Direct(replace(pointer(path), value)));
    }

    /// Removes the existing value at `path`. Remove array elements from the highest index down.
    pub fn remove(&mut self, path: &[&str]) {
        self.entries.push(Entry::Direct(remove(pointer(path))));
    }

    /// How many operations were recorded so far.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no operation was recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The operations, in the order their first write was recorded.
    pub fn finish(self) -> Vec<Op> {
        self.entries
            .into_iter()
            .map(|entry| match entry {
                Entry::Direct(op) => op,
                Entry::Create { path, value } => add(path, value),
            })
            .collect()
    }
}

/// Whether `pointer` addresses the unescaped `segments`.
fn same_path(pointer: &PointerBuf, segments: &[&str]) -> bool {
    pointer.count() == segments.len()
        && pointer
            .tokens()
            .zip(segments)
            .all(|(token, segment)| token.decoded() == *segment)
}

/// Applies `write` to the slot at `rel` inside `root` (objects created on the way).
fn write_at(root: &mut Value, rel: &[&str], write: impl FnOnce(&mut Value)) {
    match rel.split_last() {
        None => write(root),
        Some((last, parents)) => {
            let map = object_at(root, parents);
            let slot = map.entry(*last).or_insert(Value::Null);
            write(slot);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn values(ops: Vec<Op>) -> Vec<Value> {
        ops.iter()
            .map(|op| serde_json::to_value(op).unwrap())
            .collect()
    }

    #[test]
    fn absent_parent_is_created_whole_with_every_write() {
        let doc = json!({"spec": {"containers": []}});
        let mut b = PatchBuilder::new(&doc);
        b.set(
            &["spec", "nodeSelector", "kubernetes.io/arch"],
            json!("arm64"),
        );
        b.set(&["spec", "nodeSelector", "team"], json!("a"));
        b.append(&["spec", "tolerations"], json!({"key": "x"}));
        b.append(&["spec", "tolerations"], json!({"key": "y"}));
        assert_eq!(
            values(b.finish()),
            vec![
                json!({"op": "add", "path": "/spec/nodeSelector",
                       "value": {"kubernetes.io/arch": "arm64", "team": "a"}}),
                json!({"op": "add", "path": "/spec/tolerations",
                       "value": [{"key": "x"}, {"key": "y"}]}),
            ]
        );
    }

    #[test]
    fn null_parent_counts_as_absent_and_present_parent_gets_single_keys() {
        let doc = json!({"metadata": {"annotations": null},
                         "spec": {"nodeSelector": {"a": "b"}, "tolerations": []}});
        let mut b = PatchBuilder::new(&doc);
        b.set(&["metadata", "annotations", "a/b~c"], json!("v"));
        b.set(&["spec", "nodeSelector", "k/x"], json!("1"));
        b.set(&["spec", "nodeSelector", "a"], json!("c"));
        b.append(&["spec", "tolerations"], json!({"key": "x"}));
        assert_eq!(
            values(b.finish()),
            vec![
                json!({"op": "add", "path": "/metadata/annotations", "value": {"a/b~c": "v"}}),
                json!({"op": "add", "path": "/spec/nodeSelector/k~1x", "value": "1"}),
                json!({"op": "replace", "path": "/spec/nodeSelector/a", "value": "c"}),
                json!({"op": "add", "path": "/spec/tolerations/-", "value": {"key": "x"}}),
            ]
        );
    }

    #[test]
    fn deep_creation_merges_siblings() {
        let doc = json!({"spec": {"affinity": {"podAntiAffinity": {}}}});
        let mut b = PatchBuilder::new(&doc);
        let na = ["spec", "affinity", "nodeAffinity"];
        let req = [
            &na[..],
            &[
                "requiredDuringSchedulingIgnoredDuringExecution",
                "nodeSelectorTerms",
            ],
        ]
        .concat();
        let pref = [
            &na[..],
            &["preferredDuringSchedulingIgnoredDuringExecution"],
        ]
        .concat();
        b.append(&req, json!({"matchExpressions": []}));
        b.append(&pref, json!({"weight": 50}));
        assert_eq!(
            values(b.finish()),
            vec![
                json!({"op": "add", "path": "/spec/affinity/nodeAffinity", "value": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": []}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50}]}})
            ]
        );
    }

    #[test]
    fn array_elements_are_addressed_by_index() {
        let doc = json!({"terms": [{"a": 1}, {"b": [1]}]});
        let mut b = PatchBuilder::new(&doc);
        b.append(&["terms", "0", "b"], json!(2));
        b.append(&["terms", "1", "b"], json!(2));
        assert_eq!(
            values(b.finish()),
            vec![
                json!({"op": "add", "path": "/terms/0/b", "value": [2]}),
                json!({"op": "add", "path": "/terms/1/b/-", "value": 2}),
            ]
        );
    }
}
