//! Routing and answers of the scripted API server: list (with `limit`/`continue` pages), watch
//! (newline-delimited events, bookmarks, `410 Gone` below the history), get, create, replace
//! and merge-patch with `resourceVersion` preconditions (`409`), delete with a `uid`
//! precondition, and the pod eviction subresource.

use std::time::Duration;

use bytes::BytesMut;
use futures::stream::{self, StreamExt as _};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::Value;
use tokio::sync::broadcast;

use super::fault::RecordedRequest;
use super::query::Query;
use super::select::Selection;
use super::status::{json_response, reason, status, status_body};
use super::store::{lock, Change, Key, Resource, Shared, Stored};
use super::validate;
use crate::serve::{read_body, response, ResBody};

/// Request bodies larger than this are read as empty (the apiserver's own cap is 3 MiB).
const BODY_LIMIT: usize = 4 * 1024 * 1024;
/// The longest watch when the client asks for none.
const DEFAULT_WATCH: Duration = Duration::from_secs(290);
/// The largest page (`limit`) served.
const MAX_PAGE: usize = 5000;

/// The manager of an update that is not an apply: `fieldManager`, else `unknown`.
fn updater(query: &Query) -> &str {
    query
        .get("fieldManager")
        .filter(|m| !m.is_empty())
        .unwrap_or("unknown")
}

/// `PATCH` with `application/apply-patch+yaml` (see `apply.rs`).
fn server_side_apply(
    state: &Shared,
    target: &Target,
    name: &str,
    request: &RecordedRequest,
    query: &Query,
) -> http::Response<ResBody> {
    let Some(manager) = query.get("fieldManager").filter(|m| !m.is_empty()) else {
        return invalid("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch");
    };
    let applied = &request.body;
    if !applied.is_object()
        || applied["kind"].as_str() != Some(target.resource.kind())
        || applied["apiVersion"].as_str() != Some(target.resource.api_version())
    {
        return status(
            400,
            "the applied configuration must name this object's apiVersion and kind",
        );
    }
    if applied["metadata"]["name"].as_str() != Some(name) {
        return status(
            400,
            "the name of the object (metadata.name) does not match the name on the URL",
        );
    }
    let key = key_of(target, name);
    let mut inner = lock(state);
    let current: Option<Value> = inner
        .get(target.resource, &key)
        .and_then(|stored| serde_json::from_slice(&stored.json).ok());
    let wanted_version = applied["metadata"]["resourceVersion"]
        .as_str()
        .filter(|rv| !rv.is_empty());
    if let Some(wanted) = wanted_version {
        let now = current
            .as_ref()
            .and_then(|object| object["metadata"]["resourceVersion"].as_str());
        if now != Some(wanted) {
            drop(inner);
            return conflict(target.resource.kind(), name);
        }
    }
    let created = current.is_none();
    let object = match super::apply::apply(current.as_ref(), applied, manager, query.flag("force"))
    {
        Ok(object) => object,
        Err((code, message)) => {
            drop(inner);
            return status(code, &message);
        }
    };
    match inner.put(target.resource, &key.0, object) {
        Ok(stored) => json_response(if created { 201 } else { 200 }, stored.json),
        Err(message) => status(422, &message),
    }
}

/// What a path names.
#[derive(Debug)]
struct Target {
    resource: Resource,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

fn parse_path(path: &str) -> Option<Target> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => ("", rest),
        ["apis", group, "v1", rest @ ..] => (*group, rest),
        ["apis", group @ "nfd.k8s-sigs.io", "v1alpha1", rest @ ..] => (*group, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", namespace, rest @ ..] if !rest.is_empty() => {
            (Some((*namespace).to_owned()), rest)
        }
        rest => (None, rest),
    };
    let (plural, name, subresource) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some((*name).to_owned()), None),
        [plural, name, sub] => (*plural, Some((*name).to_owned()), Some((*sub).to_owned())),
        _ => return None,
    };
    let resource = match (group, plural) {
        ("", "nodes") => Resource::Nodes,
        ("", "pods") => Resource::Pods,
        ("", "namespaces") => Resource::Namespaces,
        ("coordination.k8s.io", "leases") => Resource::Leases,
        ("events.k8s.io", "events") => Resource::Events,
        ("apps", "deployments") => Resource::Deployments,
        ("apps", "statefulsets") => Resource::StatefulSets,
        ("apps", "daemonsets") => Resource::DaemonSets,
        ("apps", "replicasets") => Resource::ReplicaSets,
        ("", "replicationcontrollers") => Resource::ReplicationControllers,
        ("batch", "jobs") => Resource::Jobs,
        ("batch", "cronjobs") => Resource::CronJobs,
        ("", "secrets") => Resource::Secrets,
        ("", "serviceaccounts") => Resource::ServiceAccounts,
        ("nfd.k8s-sigs.io", "nodefeatures") => Resource::NodeFeatures,
        ("", "configmaps") => Resource::ConfigMaps,
        _ => return None,
    };
    if resource.namespaced() == namespace.is_none() && name.is_some() {
        return None;
    }
    Some(Target {
        resource,
        namespace,
        name,
        subresource,
    })
}

/// Answers one request and records it.
pub(crate) async fn handle(
    state: Shared,
    request: http::Request<Incoming>,
) -> http::Response<ResBody> {
    let (parts, body) = request.into_parts();
    let method = parts.method.as_str().to_owned();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().unwrap_or_default().to_owned();
    let content_type = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let body = read_body(body, BODY_LIMIT).await;
    let json: Value = serde_json::from_slice(&body)
        .ok()
        .or_else(|| {
            // Server-side apply bodies may be YAML.
            let yaml = content_type.as_deref() == Some(super::APPLY_PATCH);
            yaml.then(|| yaml_serde::from_slice(&body).ok()).flatten()
        })
        .unwrap_or(Value::Null);
    let mut record = RecordedRequest {
        method,
        path,
        query,
        content_type,
        body: json,
        status: 0,
        received: std::time::Instant::now(),
    };
    let watching = record.method == "GET" && Query::parse(&record.query).flag("watch");
    let held = lock(&state)
        .holds
        .iter()
        .find(|hold| hold.matches(&record.method, &record.path, watching))
        .map(super::hold::Hold::wait);
    if let Some(held) = held {
        held.await;
    }
    let response = answer(&state, &record);
    record.status = response.status().as_u16();
    lock(&state).record(record);
    response
}

fn answer(state: &Shared, request: &RecordedRequest) -> http::Response<ResBody> {
    let watching = request.method == "GET" && Query::parse(&request.query).flag("watch");
    let watch_fault = watching
        .then(|| lock(state).take_fault("WATCH", &request.path))
        .flatten();
    if let Some(fault) = watch_fault {
        let status = status_body(fault.status, reason(fault.status), &fault.message);
        let line = format!(
            "{}\n",
            serde_json::json!({"type": "ERROR", "object": status})
        );
        return json_response(200, line);
    }
    if let Some(fault) = lock(state).take_fault(&request.method, &request.path) {
        if let Some(seconds) = fault.retry_after {
            let body = status_body(fault.status, reason(fault.status), &fault.message);
            let seconds = seconds.to_string();
            let headers = [
                ("content-type", "application/json"),
                ("retry-after", seconds.as_str()),
            ];
            return response(fault.status, &headers, body.to_string());
        }
        return status(fault.status, &fault.message);
    }
    if request.method == "POST" && request.path == "/apis/authentication.k8s.io/v1/tokenreviews" {
        let answered = super::token_review::answer(&lock(state).tokens, &request.body);
        return match answered {
            Ok(review) => json_response(201, review.to_string()),
            Err(message) => status(400, &message),
        };
    }
    let Some(target) = parse_path(&request.path) else {
        return status(404, &format!("the server could not find {}", request.path));
    };
    let query = Query::parse(&request.query);
    match (
        request.method.as_str(),
        &target.name,
        target.subresource.as_deref(),
    ) {
        ("GET", None, None) if query.flag("watch") => watch(state, &target, &query),
        ("GET", None, None) => list(state, &target, &query),
        ("GET", Some(name), None) => get(state, &target, name),
        ("GET", Some(name), Some("log")) if target.resource == Resource::Pods => {
            super::logs::answer(state, &key_of(&target, name), &query)
        }
        ("POST", None, None) => create(state, &target, &request.body),
        ("POST", Some(name), Some("eviction")) if target.resource == Resource::Pods => {
            evict(state, &target, name, &request.body)
        }
        ("POST", Some(name), Some("token")) if target.resource == Resource::ServiceAccounts => {
            token_request(state, &target, name, &request.body)
        }
        ("PUT", Some(name), None) => replace(state, &target, name, &request.body, &query),
        ("PATCH", Some(name), None)
            if request.content_type.as_deref() == Some(super::APPLY_PATCH) =>
        {
            server_side_apply(state, &target, name, request, &query)
        }
        ("PATCH", Some(name), None) => patch(state, &target, name, request, &query),
        ("DELETE", Some(name), None) => delete(state, &target, name, &request.body),
        _ => status(405, "method not scripted"),
    }
}

fn key_of(target: &Target, name: &str) -> Key {
    (
        target.namespace.clone().unwrap_or_default(),
        name.to_owned(),
    )
}

fn selection(query: &Query) -> Result<Selection, String> {
    Selection::parse(query.get("fieldSelector"), query.get("labelSelector"))
}

fn list(state: &Shared, target: &Target, query: &Query) -> http::Response<ResBody> {
    let selector = match selection(query) {
        Ok(selector) => selector,
        Err(message) => return status(400, &message),
    };
    let limit = query
        .get("limit")
        .and_then(|limit| limit.parse::<usize>().ok())
        .filter(|limit| *limit > 0)
        .unwrap_or(MAX_PAGE)
        .min(MAX_PAGE);
    let offset = query
        .get("continue")
        .and_then(|token| token.parse::<usize>().ok())
        .unwrap_or(0);
    let inner = lock(state);
    let mut body = BytesMut::new();
    let mut count = 0usize;
    let mut more = false;
    body.extend_from_slice(b"[");
    if let Some(objects) = inner.objects.get(&target.resource) {
        let matching = objects.iter().filter(|(key, stored)| {
            target.namespace.as_ref().is_none_or(|ns| key.0 == *ns) && selector.matches(key, stored)
        });
        for (_, stored) in matching.skip(offset) {
            if count == limit {
                more = true;
                break;
            }
            if count > 0 {
                body.extend_from_slice(b",");
            }
            body.extend_from_slice(&stored.json);
            count = count.saturating_add(1);
        }
    }
    body.extend_from_slice(b"]");
    let continue_token = if more {
        offset.saturating_add(count).to_string()
    } else {
        String::new()
    };
    let head = serde_json::json!({
        "kind": format!("{}List", target.resource.kind()),
        "apiVersion": target.resource.api_version(),
        "metadata": {"resourceVersion": inner.rv.to_string(), "continue": continue_token},
    })
    .to_string();
    drop(inner);
    // `{"kind":...,"metadata":{...}` + `,"items":[...]}`
    let mut out = BytesMut::with_capacity(head.len().saturating_add(body.len()).saturating_add(16));
    out.extend_from_slice(head.strip_suffix('}').unwrap_or(&head).as_bytes());
    out.extend_from_slice(b",\"items\":");
    out.extend_from_slice(&body);
    out.extend_from_slice(b"}");
    json_response(200, out.freeze())
}

fn get(state: &Shared, target: &Target, name: &str) -> http::Response<ResBody> {
    match lock(state).get(target.resource, &key_of(target, name)) {
        Some(stored) => json_response(200, stored.json.clone()),
        None => status(
            404,
            &format!("{} {name:?} not found", target.resource.kind()),
        ),
    }
}

fn create(state: &Shared, target: &Target, body: &Value) -> http::Response<ResBody> {
    let Some(name) = body["metadata"]["name"].as_str() else {
        return status(422, "metadata.name: Required value");
    };
    let key = key_of(target, name);
    let mut inner = lock(state);
    if inner.get(target.resource, &key).is_some() {
        drop(inner);
        return json_response(
            409,
            status_body(409, "AlreadyExists", &format!("{name:?} already exists")).to_string(),
        );
    }
    if target.resource == Resource::Pods {
        if let Err(message) = validate::pod_create(body) {
            drop(inner);
            return invalid(&message);
        }
    }
    let mut object = body.clone();
    if let Some(map) = object["metadata"].as_object_mut() {
        map.remove("resourceVersion");
    }
    match inner.put(target.resource, &key.0, object) {
        Ok(stored) => json_response(201, stored.json),
        Err(message) => status(422, &message),
    }
}

/// The apiserver's bounds on `spec.expirationSeconds` of a TokenRequest.
const MIN_TOKEN_SECONDS: i64 = 600;
const MAX_TOKEN_SECONDS: i64 = 1 << 32;
/// What the apiserver grants when a TokenRequest names no expiry.
const DEFAULT_TOKEN_SECONDS: i64 = 3600;

/// `POST serviceaccounts/NAME/token` (TokenRequest, `authentication.k8s.io/v1`): `404` for a
/// missing account, `422` for an expiry outside 10 minutes..2^32 seconds (the apiserver's
/// messages), else the request with `status.token` (`sa-token.NAMESPACE.NAME.AUDIENCES.N`, N
/// counting every token issued) and `status.expirationTimestamp`.
fn token_request(
    state: &Shared,
    target: &Target,
    name: &str,
    body: &Value,
) -> http::Response<ResBody> {
    let key = key_of(target, name);
    let mut inner = lock(state);
    if inner.get(Resource::ServiceAccounts, &key).is_none() {
        drop(inner);
        return status(404, &format!("serviceaccounts {name:?} not found"));
    }
    let seconds = body["spec"]["expirationSeconds"]
        .as_i64()
        .unwrap_or(DEFAULT_TOKEN_SECONDS);
    if seconds < MIN_TOKEN_SECONDS {
        drop(inner);
        return invalid(&format!("TokenRequest.authentication.k8s.io {name:?} is invalid: spec.expirationSeconds: Invalid value: {seconds}: may not specify a duration less than 10 minutes"));
    }
    if seconds > MAX_TOKEN_SECONDS {
        drop(inner);
        return invalid(&format!("TokenRequest.authentication.k8s.io {name:?} is invalid: spec.expirationSeconds: Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds"));
    }
    let audiences: Vec<&str> = body["spec"]["audiences"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    inner.uid = inner.uid.saturating_add(1);
    let token = format!(
        "sa-token.{}.{name}.{}.{}",
        key.0,
        audiences.join(","),
        inner.uid
    );
    drop(inner);
    let expires = k8s_openapi::chrono::Utc::now()
        + k8s_openapi::chrono::TimeDelta::try_seconds(seconds).unwrap_or_default();
    let mut answer = body.clone();
    answer["apiVersion"] = "authentication.k8s.io/v1".into();
    answer["kind"] = "TokenRequest".into();
    answer["metadata"]["name"] = name.into();
    answer["metadata"]["namespace"] = key.0.clone().into();
    answer["spec"]["expirationSeconds"] = seconds.into();
    answer["status"] = serde_json::json!({
        "token": token,
        "expirationTimestamp": expires.to_rfc3339_opts(k8s_openapi::chrono::SecondsFormat::Secs, true),
    });
    json_response(201, answer.to_string())
}

fn precondition_failed(current: &Stored, wanted: &Value) -> bool {
    let Some(wanted) = wanted.as_str().filter(|rv| !rv.is_empty()) else {
        return false;
    };
    let current: Value = serde_json::from_slice(&current.json).unwrap_or(Value::Null);
    current["metadata"]["resourceVersion"].as_str() != Some(wanted)
}

fn conflict(kind: &str, name: &str) -> http::Response<ResBody> {
    status(
        409,
        &format!(
            "Operation cannot be fulfilled on {kind} {name:?}: the object has been modified; please apply your changes to the latest version and try again"
        ),
    )
}

/// `422 Invalid` with the apiserver's message.
fn invalid(message: &str) -> http::Response<ResBody> {
    status(422, message)
}

/// The apiserver's update validation of pods (KEP-3838); other kinds are not validated.
fn validate_update(resource: Resource, current: &Stored, new: &Value) -> Result<(), String> {
    if resource != Resource::Pods {
        return Ok(());
    }
    let old: Value = serde_json::from_slice(&current.json).unwrap_or(Value::Null);
    validate::pod_update(new, &old)
}

fn replace(
    state: &Shared,
    target: &Target,
    name: &str,
    body: &Value,
    query: &Query,
) -> http::Response<ResBody> {
    let key = key_of(target, name);
    let mut inner = lock(state);
    let Some(current) = inner.get(target.resource, &key) else {
        drop(inner);
        return status(404, &format!("{name:?} not found"));
    };
    if precondition_failed(current, &body["metadata"]["resourceVersion"]) {
        drop(inner);
        return conflict(target.resource.kind(), name);
    }
    if let Err(message) = validate_update(target.resource, current, body) {
        drop(inner);
        return invalid(&message);
    }
    let mut object = body.clone();
    if target.resource == Resource::ConfigMaps {
        let old: Value = serde_json::from_slice(&current.json).unwrap_or(Value::Null);
        super::apply::updated(&old, &mut object, updater(query));
    }
    match inner.put(target.resource, &key.0, object) {
        Ok(stored) => json_response(200, stored.json),
        Err(message) => status(422, &message),
    }
}

/// RFC 7386 JSON merge patch.
fn merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(fields) => {
            if !target.is_object() {
                *target = Value::Object(serde_json::Map::new());
            }
            for (key, value) in fields {
                if value.is_null() {
                    if let Some(map) = target.as_object_mut() {
                        map.remove(key);
                    }
                } else {
                    merge(&mut target[key.as_str()], value);
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn patch(
    state: &Shared,
    target: &Target,
    name: &str,
    request: &RecordedRequest,
    query: &Query,
) -> http::Response<ResBody> {
    let merge_type = matches!(
        request.content_type.as_deref(),
        Some("application/merge-patch+json" | "application/strategic-merge-patch+json")
    );
    if !merge_type {
        return status(415, "only merge patches are scripted");
    }
    let key = key_of(target, name);
    let mut inner = lock(state);
    let Some(current) = inner.get(target.resource, &key) else {
        drop(inner);
        return status(404, &format!("{name:?} not found"));
    };
    if precondition_failed(current, &request.body["metadata"]["resourceVersion"]) {
        drop(inner);
        return conflict(target.resource.kind(), name);
    }
    let old: Value = serde_json::from_slice(&current.json).unwrap_or(Value::Null);
    let mut object = old.clone();
    merge(&mut object, &request.body);
    if target.resource == Resource::ConfigMaps {
        super::apply::updated(&old, &mut object, updater(query));
    }
    if let Err(message) = validate_update(target.resource, current, &object) {
        drop(inner);
        return invalid(&message);
    }
    match inner.put(target.resource, &key.0, object) {
        Ok(stored) => json_response(200, stored.json),
        Err(message) => status(422, &message),
    }
}

fn delete(state: &Shared, target: &Target, name: &str, options: &Value) -> http::Response<ResBody> {
    let key = key_of(target, name);
    let mut inner = lock(state);
    let Some(current) = inner.get(target.resource, &key) else {
        drop(inner);
        return status(404, &format!("{name:?} not found"));
    };
    if let Some(uid) = options["preconditions"]["uid"].as_str() {
        let object: Value = serde_json::from_slice(&current.json).unwrap_or(Value::Null);
        if object["metadata"]["uid"].as_str() != Some(uid) {
            drop(inner);
            return status(
                409,
                "Precondition failed: UID in precondition does not match",
            );
        }
    }
    match inner.delete(target.resource, &key) {
        Some(stored) => json_response(200, stored.json),
        None => status(404, &format!("{name:?} not found")),
    }
}

/// The eviction subresource: the pod is deleted (honouring `deleteOptions.preconditions.uid`);
/// PodDisruptionBudget refusals are scripted with [`super::Fault::pdb_blocks_eviction`].
fn evict(state: &Shared, target: &Target, name: &str, body: &Value) -> http::Response<ResBody> {
    if body["kind"].as_str() != Some("Eviction") || body["metadata"]["name"].as_str() != Some(name)
    {
        return status(400, "the body must be a policy/v1 Eviction naming the pod");
    }
    let answer = delete(state, target, name, &body["deleteOptions"]);
    if answer.status() == http::StatusCode::OK {
        return json_response(201, status_body(201, "", "").to_string());
    }
    answer
}

fn watch(state: &Shared, target: &Target, query: &Query) -> http::Response<ResBody> {
    let selector = match selection(query) {
        Ok(selector) => selector,
        Err(message) => return status(400, &message),
    };
    let bookmarks = query.flag("allowWatchBookmarks");
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|seconds| seconds.parse::<u64>().ok())
        .map_or(DEFAULT_WATCH, Duration::from_secs)
        .min(DEFAULT_WATCH);
    let from = query
        .get("resourceVersion")
        .and_then(|rv| rv.parse::<u64>().ok())
        .unwrap_or(0);
    let resource = target.resource;
    let namespace = target.namespace.clone();
    // What a watch sends for a change: a change into its selection is `ADDED`, out of it
    // `DELETED` (as the apiserver's watch cache does), `None` when it does not concern it.
    let wanted = move |change: &Change| -> Option<&'static str> {
        if change.resource != resource {
            return None;
        }
        if change.kind == "BOOKMARK" {
            return bookmarks.then_some("BOOKMARK");
        }
        if namespace.as_ref().is_some_and(|ns| change.namespace != *ns) {
            return None;
        }
        let key = (change.namespace.clone(), change.name.clone());
        let now = selector.matches(&key, &change.object);
        let before = change
            .previous
            .as_ref()
            .map(|previous| selector.matches(&key, previous));
        match (change.kind, before, now) {
            ("MODIFIED", Some(false), true) => Some("ADDED"),
            ("MODIFIED", Some(true), false) => Some("DELETED"),
            (kind, _, true) => Some(kind),
            _ => None,
        }
    };
    let inner = lock(state);
    let timeout = inner
        .watch_lifetime
        .map_or(timeout, |lifetime| timeout.min(lifetime));
    if from != 0 && from < inner.oldest {
        drop(inner);
        let gone = status_body(410, "Expired", &format!("too old resource version: {from}"));
        let line = format!("{}\n", serde_json::json!({"type": "ERROR", "object": gone}));
        return json_response(200, line);
    }
    let replay: Vec<Change> = if from == 0 {
        // Unset or "0": synthetic ADDED events for what exists now.
        inner
            .objects
            .get(&resource)
            .into_iter()
            .flat_map(|objects| objects.iter())
            .map(|(key, stored)| Change {
                resource,
                rv: inner.rv,
                kind: "ADDED",
                namespace: key.0.clone(),
                name: key.1.clone(),
                object: stored.clone(),
                previous: None,
            })
            .filter(|change| wanted(change).is_some())
            .collect()
    } else {
        inner
            .history
            .iter()
            .filter(|change| change.rv > from)
            .filter_map(|change| {
                let kind = wanted(change)?;
                Some(Change {
                    kind,
                    ..change.clone()
                })
            })
            .collect()
    };
    let receiver = inner.changes.subscribe();
    drop(inner);
    let deadline = tokio::time::Instant::now() + timeout;
    let live = stream::unfold(receiver, move |mut receiver| {
        let wanted = wanted.clone();
        async move {
            loop {
                let next = tokio::select! {
                    () = tokio::time::sleep_until(deadline) => return None,
                    next = receiver.recv() => next,
                };
                match next {
                    Ok(change) if change.kind == "RESET" => return None,
                    Ok(change) => {
                        if let Some(kind) = wanted(&change) {
                            return Some((Change { kind, ..change }, receiver));
                        }
                    }
                    Err(
                        broadcast::error::RecvError::Lagged(_)
                        | broadcast::error::RecvError::Closed,
                    ) => return None,
                }
            }
        }
    });
    let events = stream::iter(replay).chain(live).map(|change| {
        let mut line = BytesMut::with_capacity(change.object.json.len().saturating_add(32));
        line.extend_from_slice(b"{\"type\":\"");
        line.extend_from_slice(change.kind.as_bytes());
        line.extend_from_slice(b"\",\"object\":");
        line.extend_from_slice(&change.object.json);
        line.extend_from_slice(b"}\n");
        Ok::<_, std::convert::Infallible>(Frame::data(line.freeze()))
    });
    let mut answer = http::Response::new(BodyExt::boxed(StreamBody::new(events)));
    answer.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    answer
}
