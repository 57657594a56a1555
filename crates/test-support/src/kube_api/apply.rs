//! Server-side apply (`PATCH` with `Content-Type: application/apply-patch+yaml`), as the
//! apiserver does it for the fields noe-rs applies (a ConfigMap's `data` and `binaryData`, and
//! `metadata.labels`/`annotations`; any other top-level field is one leaf):
//!
//! - `fieldManager` is required (`422`), `force` optional;
//! - the object is created when it does not exist; a `metadata.resourceVersion` in the applied
//!   configuration is a precondition (`409`);
//! - a field another manager owns with another value is a conflict (`409`, the apiserver's
//!   message) unless `force`, which takes it over;
//! - a field the manager applied before and omits now is removed, unless another manager owns
//!   it too;
//! - ownership is written to `metadata.managedFields` (`FieldsV1`), and updates that are not
//!   applies (`PUT`, merge patches) drop the ownership of the fields they remove and give the
//!   fields they change to their own manager (`fieldManager`, else `unknown`), operation
//!   `Update`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

/// The maps whose keys are leaves.
const MAPS: [&str; 4] = [
    "data",
    "binaryData",
    "metadata.labels",
    "metadata.annotations",
];
/// What is never a managed field.
const UNMANAGED: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// `(manager, operation)` → the leaf paths it owns.
type Owners = BTreeMap<(String, String), BTreeSet<String>>;

fn get<'v>(object: &'v Value, dotted: &str) -> Option<&'v Value> {
    dotted
        .split('.')
        .try_fold(object, |value, key| value.get(key))
}

/// The leaf paths of `object` and their values: `data.KEY`, `metadata.labels.KEY`, ...
fn leaves(object: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for map in MAPS {
        if let Some(fields) = get(object, map).and_then(Value::as_object) {
            for (key, value) in fields {
                out.insert(format!("{map}.{key}"), value.clone());
            }
        }
    }
    if let Some(fields) = object.as_object() {
        for (key, value) in fields {
            if !UNMANAGED.contains(&key.as_str()) && !MAPS.contains(&key.as_str()) {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    out
}

/// Writes or removes a leaf.
fn set(object: &mut Value, path: &str, value: Option<Value>) {
    let (parent, key) = match MAPS.iter().find(|map| path.starts_with(&format!("{map}."))) {
        Some(map) => (*map, &path[map.len().saturating_add(1)..]),
        None => ("", path),
    };
    let mut target = &mut *object;
    for part in parent.split('.').filter(|p| !p.is_empty()) {
        if !target[part].is_object() {
            target[part] = Value::Object(Map::new());
        }
        target = &mut target[part];
    }
    if let Some(map) = target.as_object_mut() {
        match value {
            Some(value) => {
                map.insert(key.to_owned(), value);
            }
            None => {
                map.remove(key);
            }
        }
    }
}

/// `FieldsV1` of a set of leaf paths: `{"f:data": {"f:KEY": {}}}`.
fn fields_v1(paths: &BTreeSet<String>) -> Value {
    let mut out = Value::Object(Map::new());
    for path in paths {
        let (parent, key) = match MAPS.iter().find(|map| path.starts_with(&format!("{map}."))) {
            Some(map) => (*map, &path[map.len().saturating_add(1)..]),
            None => ("", path.as_str()),
        };
        let mut target = &mut out;
        for part in parent.split('.').filter(|p| !p.is_empty()) {
            let name = format!("f:{part}");
            if !target[name.as_str()].is_object() {
                target[name.as_str()] = json!({});
            }
            target = &mut target[name.as_str()];
        }
        target[format!("f:{key}").as_str()] = json!({});
    }
    out
}

/// The leaf paths of `FieldsV1`.
fn paths_of(fields: &Value) -> BTreeSet<String> {
    fn walk(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
        let Some(map) = value.as_object() else { return };
        for (name, inner) in map {
            let Some(name) = name.strip_prefix("f:") else {
                continue;
            };
            let path = if prefix.is_empty() {
                name.to_owned()
            } else {
                format!("{prefix}.{name}")
            };
            if MAPS.contains(&path.as_str()) || path == "metadata" {
                walk(inner, &path, out);
            } else {
                out.insert(path);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(fields, "", &mut out);
    out
}

fn owners(object: &Value) -> Owners {
    let mut out = Owners::new();
    for entry in object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let manager = entry["manager"].as_str().unwrap_or_default().to_owned();
        let operation = entry["operation"].as_str().unwrap_or("Update").to_owned();
        out.entry((manager, operation))
            .or_default()
            .extend(paths_of(&entry["fieldsV1"]));
    }
    out
}

fn write_owners(object: &mut Value, owners: &Owners, api_version: &str) {
    let entries: Vec<Value> = owners
        .iter()
        .filter(|(_, paths)| !paths.is_empty())
        .map(|((manager, operation), paths)| {
            json!({
                "manager": manager,
                "operation": operation,
                "apiVersion": api_version,
                "time": "2026-11-01T10:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": fields_v1(paths),
            })
        })
        .collect();
    object["metadata"]["managedFields"] = Value::from(entries);
}

/// The object after `applied` by `manager`, or `Err((status, message))`.
pub(crate) fn apply(
    current: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
) -> Result<Value, (u16, String)> {
    let api_version = applied["apiVersion"].as_str().unwrap_or("v1").to_owned();
    let mut object = current.cloned().unwrap_or_else(|| {
        json!({
            "apiVersion": applied["apiVersion"],
            "kind": applied["kind"],
            "metadata": {
                "name": applied["metadata"]["name"],
                "namespace": applied["metadata"]["namespace"],
            },
        })
    });
    let mut owners = owners(&object);
    let now = leaves(&object);
    let wanted = leaves(applied);
    let me = (manager.to_owned(), "Apply".to_owned());
    let mut conflicts = Vec::new();
    for (path, value) in &wanted {
        for (owner, paths) in &owners {
            if *owner != me && paths.contains(path) && now.get(path) != Some(value) {
                conflicts.push((owner.0.clone(), path.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        let list: Vec<String> = conflicts
            .iter()
            .map(|(owner, path)| format!("conflict with {owner:?} using {api_version}: .{path}"))
            .collect();
        let count = conflicts.len();
        let noun = if count == 1 { "conflict" } else { "conflicts" };
        return Err((
            409,
            format!("Apply failed with {count} {noun}: {}", list.join("\n")),
        ));
    }
    for (owner, path) in &conflicts {
        for ((name, _), paths) in owners.iter_mut() {
            if name == owner {
                paths.remove(path);
            }
        }
    }
    let before = owners.remove(&me).unwrap_or_default();
    for path in before.difference(&wanted.keys().cloned().collect()) {
        let shared = owners.values().any(|paths| paths.contains(path));
        if !shared {
            set(&mut object, path, None);
        }
    }
    for (path, value) in &wanted {
        set(&mut object, path, Some(value.clone()));
    }
    owners.insert(me, wanted.keys().cloned().collect());
    write_owners(&mut object, &owners, &api_version);
    Ok(object)
}

/// Ownership after an update that is not an apply, from `old` to `new`: removed fields are
/// owned by no one, changed and added ones by `manager` (operation `Update`).
pub(crate) fn updated(old: &Value, new: &mut Value, manager: &str) {
    let mut owners = owners(old);
    if owners.is_empty() && new["metadata"]["managedFields"].is_array() {
        // The update wrote its own managedFields: kept as written.
        return;
    }
    let before = leaves(old);
    let after = leaves(new);
    for paths in owners.values_mut() {
        paths.retain(|path| after.contains_key(path));
    }
    let changed: BTreeSet<String> = after
        .iter()
        .filter(|(path, value)| before.get(*path) != Some(*value))
        .map(|(path, _)| path.clone())
        .collect();
    if !changed.is_empty() {
        for paths in owners.values_mut() {
            paths.retain(|path| !changed.contains(path));
        }
        owners
            .entry((manager.to_owned(), "Update".to_owned()))
            .or_default()
            .extend(changed);
    }
    let api_version = new["apiVersion"].as_str().unwrap_or("v1").to_owned();
    write_owners(new, &owners, &api_version);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "store", "namespace": "noe"}, "data": data})
    }

    #[test]
    fn apply_creates_removes_what_it_omits_and_conflicts_with_other_owners() {
        let first = apply(None, &cm(json!({"a": "1", "b": "2"})), "noe", false).unwrap();
        assert_eq!(first["data"], json!({"a": "1", "b": "2"}));
        assert_eq!(
            first["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:a": {}, "f:b": {}}})
        );
        // Omitting `a` removes it; `c` is added.
        let second = apply(Some(&first), &cm(json!({"b": "2", "c": "3"})), "noe", false).unwrap();
        assert_eq!(second["data"], json!({"b": "2", "c": "3"}));
        // A person's edit takes `c` (Update); noe's apply of another value conflicts...
        let mut edited = second.clone();
        edited["data"]["c"] = json!("edited");
        updated(&second, &mut edited, "kubectl-edit");
        let (code, message) = apply(
            Some(&edited),
            &cm(json!({"b": "2", "c": "4"})),
            "noe",
            false,
        )
        .unwrap_err();
        assert_eq!(code, 409);
        assert_eq!(
            message,
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.c"
        );
        // ...unless forced; and a key another manager owns is not removed by omission.
        let forced = apply(Some(&edited), &cm(json!({"b": "2", "c": "4"})), "noe", true).unwrap();
        assert_eq!(forced["data"]["c"], "4");
        let mut added = forced.clone();
        added["data"]["d"] = json!("by hand");
        updated(&forced, &mut added, "kubectl-edit");
        let omitted = apply(Some(&added), &cm(json!({"b": "2"})), "noe", false).unwrap();
        assert_eq!(omitted["data"], json!({"b": "2", "d": "by hand"}));
        // A merge patch removing `b` leaves no owner of it.
        let mut removed = omitted.clone();
        removed["data"].as_object_mut().unwrap().remove("b");
        updated(&omitted, &mut removed, "unknown");
        assert!(!owners(&removed)
            .values()
            .any(|paths| paths.contains("data.b")));
    }
}
