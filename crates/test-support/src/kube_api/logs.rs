//! `GET pods/NAME/log` (`container`, `previous`, `limitBytes`), answered as the apiserver (and
//! the kubelet behind it) answers: `404` for a pod that does not exist; `400` without a
//! container name when the pod has several, for a container the pod does not have, and for
//! `previous=true` when the container has no previous run (`previous terminated container "C"
//! in pod "P" not found`); else `200 text/plain` with the scripted log ([`PodLog`]), cut to
//! `limitBytes`, or one that hangs or never ends, as a misbehaving node can.

use bytes::Bytes;
use futures::stream::{self, StreamExt as _};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::Value;

use super::query::Query;
use super::status::status;
use super::store::{lock, Key, PodLog, Resource, Shared};
use crate::serve::ResBody;

/// The names of the pod's containers and init containers.
fn containers(pod: &Value) -> Vec<String> {
    ["containers", "initContainers"]
        .iter()
        .flat_map(|list| pod["spec"][*list].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

pub(crate) fn answer(state: &Shared, key: &Key, query: &Query) -> http::Response<ResBody> {
    let inner = lock(state);
    let Some(stored) = inner.get(Resource::Pods, key) else {
        drop(inner);
        return status(404, &format!("pods {:?} not found", key.1));
    };
    let pod: Value = serde_json::from_slice(&stored.json).unwrap_or(Value::Null);
    let names = containers(&pod);
    let container = match query.get("container") {
        Some(container) => container.to_owned(),
        None if names.len() == 1 => names.first().cloned().unwrap_or_default(),
        None => {
            drop(inner);
            return status(
                400,
                &format!(
                    "a container name must be specified for pod {}, choose one of: [{}]",
                    key.1,
                    names.join(" ")
                ),
            );
        }
    };
    if !names.contains(&container) {
        drop(inner);
        return status(
            400,
            &format!("container {container} is not valid for pod {}", key.1),
        );
    }
    let previous = query.flag("previous");
    let log = inner
        .logs
        .get(&(key.0.clone(), key.1.clone(), container.clone(), previous))
        .cloned();
    drop(inner);
    let log = match (log, previous) {
        (Some(log), _) => log,
        (None, true) => {
            return status(
                400,
                &format!(
                    "previous terminated container {container:?} in pod {:?} not found",
                    key.1
                ),
            )
        }
        (None, false) => PodLog::Text(Vec::new()),
    };
    let limit = query
        .get("limitBytes")
        .and_then(|limit| limit.parse::<usize>().ok());
    let body: ResBody = match log {
        PodLog::Text(mut bytes) => {
            if let Some(limit) = limit {
                bytes.truncate(limit);
            }
            return text(crate::serve::full(bytes));
        }
        PodLog::Hang => BodyExt::boxed(StreamBody::new(stream::pending::<
            Result<Frame<Bytes>, std::convert::Infallible>,
        >())),
        PodLog::Endless => {
            let chunk = Bytes::from(vec![b'x'; 4096]);
            BodyExt::boxed(StreamBody::new(
                stream::repeat(chunk)
                    .map(|chunk| Ok::<_, std::convert::Infallible>(Frame::data(chunk))),
            ))
        }
    };
    text(body)
}

fn text(body: ResBody) -> http::Response<ResBody> {
    let mut answer = http::Response::new(body);
    answer.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    answer
}
