//! Pull secrets read through `kube::Client` over a scripted API (tower-test), answering Secret
//! and Status JSON written from the Kubernetes API reference.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use base64::Engine as _;
use http::{Request, Response};
use kube::client::Body;
use noe_credentials::Credential;
use noe_webhook::resolve::pull_secrets::{FailureReason, PullSecretFailure, PullSecrets};

pub(super) fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// What the fake API answers for a path: (HTTP status, JSON body), or `None` to never answer.
pub(super) type Script = HashMap<String, Option<(u16, serde_json::Value)>>;

/// The scripted API: the paths requested so far, and the task answering them. The task ends
/// when the client is dropped; [`Api::finish`] awaits it, so a failed assertion inside it fails
/// the test (as kube-rs's own tests await their mock server).
pub(super) struct Api {
    seen: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl Api {
    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// Call after dropping every clone of the client.
    pub(super) async fn finish(self) {
        tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .expect("the scripted API ends once the client is dropped")
            .expect("the scripted API saw only what it expected");
    }
}

/// A kube client whose requests are answered from `script`.
pub(super) fn scripted_client(script: Script) -> (kube::Client, Api) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = Arc::clone(&seen);
    let task = tokio::spawn(async move {
        let mut handle = Box::pin(handle);
        let mut parked = Vec::new();
        // Ends when the client (and so the service) is dropped.
        while let Some((request, respond)) = handle.next_request().await {
            assert_eq!(
                request.method(),
                http::Method::GET,
                "pull secrets are only read"
            );
            let path = request.uri().to_string();
            recorded.lock().unwrap().push(path.clone());
            match script.get(&path) {
                Some(Some((status, body))) => respond.send_response(
                    Response::builder()
                        .status(*status)
                        .header("content-type", "application/json")
                        .body(Body::from(serde_json::to_vec(body).unwrap()))
                        .unwrap(),
                ),
                // Never answer: the caller's timeout must fire. Keep the responder alive.
                Some(None) => parked.push(respond),
                None => respond.send_response(
                    Response::builder()
                        .status(404)
                        .body(Body::from(
                            serde_json::to_vec(&status(404, "NotFound", "unscripted")).unwrap(),
                        ))
                        .unwrap(),
                ),
            }
        }
    });
    (kube::Client::new(service, "default"), Api { seen, task })
}

pub(super) fn secret(
    namespace: &str,
    name: &str,
    type_: &str,
    key: &str,
    payload: &str,
) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": "6a0b2d0c-3c0e-4a57-9a62-0c3c2b0f4c11",
            "resourceVersion": "4242",
            "creationTimestamp": "2024-05-01T10:00:00Z"
        },
        "type": type_,
        "data": { key: b64(payload) }
    })
}

/// A `Status` as the API server returns it for a failed GET.
fn status(code: u16, reason: &str, name: &str) -> serde_json::Value {
    let message = match reason {
        "NotFound" => format!("secrets \"{name}\" not found"),
        "Forbidden" => format!(
            "secrets \"{name}\" is forbidden: User \"system:serviceaccount:noe:noe\" cannot get resource \"secrets\" in API group \"\" in the namespace \"team\""
        ),
        _ => "Internal error occurred: etcdserver: request timed out".to_owned(),
    };
    serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": { "name": name, "kind": "secrets" },
        "code": code
    })
}

pub(super) fn path(namespace: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/secrets/{name}")
}

fn basic(u: &str, p: &str) -> Credential {
    Credential::Basic {
        username: u.into(),
        password: p.into(),
    }
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn reads_each_secret_with_a_namespaced_get() {
    let json = format!(
        r#"{{"auths":{{"127.0.0.1:5000":{{"auth":"{}"}},"ghcr.io":{{"username":"gh","password":"ghpw","identitytoken":"refresh"}}}}}}"#,
        b64("reg:regpw")
    );
    let legacy = format!(
        r#"{{"https://index.docker.io/v1/":{{"auth":"{}","email":"a@b.c"}}}}"#,
        b64("hub:hubpw")
    );
    let script: Script = [
        (
            path("team", "regcred"),
            Some((
                200,
                secret(
                    "team",
                    "regcred",
                    "kubernetes.io/dockerconfigjson",
                    ".dockerconfigjson",
                    &json,
                ),
            )),
        ),
        (
            path("team", "legacy"),
            Some((
                200,
                secret(
                    "team",
                    "legacy",
                    "kubernetes.io/dockercfg",
                    ".dockercfg",
                    &legacy,
                ),
            )),
        ),
    ]
    .into_iter()
    .collect();
    let (client, api) = scripted_client(script);
    let secrets = PullSecrets::new(client);
    let pod = secrets
        .load("team", &names(&["regcred", "legacy", "regcred", ""]))
        .await;
    assert!(pod.failures().is_empty());
    assert_eq!(
        api.seen(),
        [path("team", "regcred"), path("team", "legacy")]
    );

    let local = pod.candidates("127.0.0.1:5000/app:1");
    assert_eq!(local.len(), 1);
    assert_eq!(local[0].source, "pull-secret:team/regcred");
    assert_eq!(local[0].credential, basic("reg", "regpw"));

    let gh = pod.candidates("ghcr.io/o/a:1");
    assert_eq!(
        gh[0].credential,
        Credential::IdentityToken("refresh".into())
    );

    let hub = pod.candidates("docker.io/library/nginx:latest");
    assert_eq!(hub.len(), 1);
    assert_eq!(hub[0].source, "pull-secret:team/legacy");
    assert_eq!(hub[0].credential, basic("hub", "hubpw"));

    assert!(pod.candidates("quay.io/x/y:1").is_empty());
    drop(secrets);
    api.finish().await;
}

/// A name that is not a DNS subdomain never becomes an API path: `../../team-a/secrets/regcred`
/// in a pod of `team-x` would otherwise read `team-a`'s secret with the webhook's cluster-wide
/// `get secrets`.
#[tokio::test]
async fn names_that_are_not_secret_names_are_malformed_and_never_sent() {
    let json = format!(r#"{{"auths":{{"ghcr.io":{{"auth":"{}"}}}}}}"#, b64("u:p"));
    let answer = |namespace: &str| {
        Some((
            200,
            secret(
                namespace,
                "regcred",
                "kubernetes.io/dockerconfigjson",
                ".dockerconfigjson",
                &json,
            ),
        ))
    };
    let traversal = "../../team-a/secrets/regcred";
    let script: Script = [
        (path("team-a", "regcred"), answer("team-a")),
        (path("team-x", traversal), answer("team-a")),
        (path("team-x", "regcred"), answer("team-x")),
    ]
    .into_iter()
    .collect();
    let (client, api) = scripted_client(script);
    let secrets = PullSecrets::new(client);
    let hostile = [
        traversal,
        "team-a/regcred",
        "Regcred",
        "regcred?watch=true",
        "-regcred",
        "a..b",
    ];
    let mut list = names(&hostile);
    list.push("regcred".to_owned());
    let pod = secrets.load("team-x", &list).await;
    assert_eq!(
        api.seen(),
        [path("team-x", "regcred")],
        "only the valid name"
    );
    let malformed: Vec<PullSecretFailure> = hostile
        .iter()
        .map(|name| PullSecretFailure {
            namespace: "team-x".to_owned(),
            name: (*name).to_owned(),
            reason: FailureReason::Malformed,
        })
        .collect();
    assert_eq!(pod.failures(), malformed);
    assert_eq!(
        pod.sources().collect::<Vec<_>>(),
        ["pull-secret:team-x/regcred"]
    );

    // A namespace that is not a namespace name reaches no path either.
    let pod = secrets.load("../team-a", &names(&["regcred"])).await;
    assert_eq!(pod.failures()[0].reason, FailureReason::Malformed);
    assert_eq!(api.seen().len(), 1, "{:?}", api.seen());
    drop(secrets);
    api.finish().await;
}

#[tokio::test]
async fn secrets_are_cached_briefly() {
    let json = format!(r#"{{"auths":{{"ghcr.io":{{"auth":"{}"}}}}}}"#, b64("u:p"));
    let script: Script = [
        (
            path("team", "regcred"),
            Some((
                200,
                secret(
                    "team",
                    "regcred",
                    "kubernetes.io/dockerconfigjson",
                    ".dockerconfigjson",
                    &json,
                ),
            )),
        ),
        (
            path("team", "missing"),
            Some((404, status(404, "NotFound", "missing"))),
        ),
    ]
    .into_iter()
    .collect();
    let (client, api) = scripted_client(script);
    let clock = noe_core::clock::Clock::manual();
    let secrets = PullSecrets::with_limits(
        client,
        Duration::from_secs(30),
        Duration::from_secs(5),
        Duration::from_secs(2),
    )
    .with_clock(clock.clone());
    let both = names(&["regcred", "missing"]);
    for _ in 0..3 {
        let pod = secrets.load("team", &both).await;
        assert_eq!(pod.candidates("ghcr.io/a:1").len(), 1);
        // A cached failure is still reported, so every admission counts it.
        assert_eq!(pod.failures().len(), 1);
    }
    assert_eq!(api.seen().len(), 2, "one GET per secret while cached");
    // The failure's lifetime (5 s) ends first: only the missing secret is asked again.
    clock.advance(Duration::from_secs(5));
    secrets.load("team", &both).await;
    assert_eq!(api.seen().len(), 3, "the failure asked again once expired");
    assert_eq!(api.seen().last().unwrap(), &path("team", "missing"));
    clock.advance(Duration::from_secs(25));
    secrets.load("team", &both).await;
    assert_eq!(
        api.seen().len(),
        5,
        "both read again once the answer expired too"
    );
    // Another namespace is another secret.
    secrets.load("other", &names(&["regcred"])).await;
    assert_eq!(api.seen().last().unwrap(), &path("other", "regcred"));
    drop(secrets);
    api.finish().await;
}

/// Time is paused: the GET that never answers ends at its 300 ms timeout, in virtual time.
#[tokio::test(start_paused = true)]
async fn failures_are_reported_and_other_secrets_still_used() {
    let good = format!(r#"{{"auths":{{"ghcr.io":{{"auth":"{}"}}}}}}"#, b64("u:p"));
    let script: Script = [
        (
            path("team", "missing"),
            Some((404, status(404, "NotFound", "missing"))),
        ),
        (
            path("team", "denied"),
            Some((403, status(403, "Forbidden", "denied"))),
        ),
        (
            path("team", "broken"),
            Some((500, status(500, "InternalError", "broken"))),
        ),
        (
            path("team", "opaque"),
            Some((
                200,
                secret("team", "opaque", "Opaque", ".dockerconfigjson", &good),
            )),
        ),
        (
            path("team", "malformed"),
            Some((
                200,
                secret(
                    "team",
                    "malformed",
                    "kubernetes.io/dockerconfigjson",
                    ".dockerconfigjson",
                    "{\"auths\": hunter2",
                ),
            )),
        ),
        (
            path("team", "wrongkey"),
            Some((
                200,
                secret(
                    "team",
                    "wrongkey",
                    "kubernetes.io/dockerconfigjson",
                    ".dockercfg",
                    &good,
                ),
            )),
        ),
        (path("team", "hangs"), None),
        (
            path("team", "good"),
            Some((
                200,
                secret(
                    "team",
                    "good",
                    "kubernetes.io/dockerconfigjson",
                    ".dockerconfigjson",
                    &good,
                ),
            )),
        ),
    ]
    .into_iter()
    .collect();
    let (client, api) = scripted_client(script);
    let secrets = PullSecrets::with_limits(
        client,
        Duration::from_secs(30),
        Duration::from_secs(5),
        Duration::from_millis(300),
    );
    let started = Instant::now();
    let pod = secrets
        .load(
            "team",
            &names(&[
                "missing",
                "denied",
                "broken",
                "opaque",
                "malformed",
                "wrongkey",
                "hangs",
                "good",
            ]),
        )
        .await;
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(300),
        "GETs run concurrently, each bounded by the timeout"
    );
    let failure = |name: &str, reason| PullSecretFailure {
        namespace: "team".into(),
        name: name.into(),
        reason,
    };
    assert_eq!(
        pod.failures(),
        [
            failure("missing", FailureReason::NotFound),
            failure("denied", FailureReason::Forbidden),
            failure("broken", FailureReason::Unavailable),
            failure("opaque", FailureReason::WrongType),
            failure("malformed", FailureReason::Malformed),
            failure("wrongkey", FailureReason::Malformed),
            failure("hangs", FailureReason::Unavailable),
        ]
    );
    assert!(
        !format!("{pod:?}").contains("hunter2"),
        "a secret's content never reaches Debug output"
    );
    let got = pod.candidates("ghcr.io/a:1");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].source, "pull-secret:team/good");
    let mut paths = api.seen();
    paths.sort();
    let mut expected: Vec<String> = [
        "broken",
        "denied",
        "good",
        "hangs",
        "malformed",
        "missing",
        "opaque",
        "wrongkey",
    ]
    .iter()
    .map(|n| path("team", n))
    .collect();
    expected.sort();
    assert_eq!(paths, expected);
    drop(secrets);
    api.finish().await;
}
