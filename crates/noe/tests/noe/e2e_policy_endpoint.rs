//! The policy engines' lookup endpoint end to end: the `noe` server started in-process from a
//! command line with `--lookup-addr`, the real registry with the standard fixtures behind it,
//! clients speaking TLS 1.3 only (as Gatekeeper does) with real client certificates from a test
//! CA generated here, and Bearer tokens checked by the scripted API's TokenReview.

use std::sync::Arc;
use std::time::{Duration, Instant};

use noe_test_support::{DelayProxy, KubeApi, TestCa};
use serde_json::{json, Value};

use super::harness::{start_server, Harness};

const AUDIENCE: &str = "kyverno-svc.kyverno.io";
const KYVERNO_USER: &str = "system:serviceaccount:kyverno:kyverno-admission-controller";

struct Endpoint {
    url: String,
    metrics: String,
    gatekeeper_ca: TestCa,
    serving_ca_pem: String,
    api: KubeApi,
    _running: noe::serve::Serving,
}

/// A TLS-1.3-only client trusting the serving CA, presenting `client` when given.
pub(super) fn client(serving_ca_pem: &str, client: Option<&TestCa>) -> reqwest::Client {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(serving_ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_root_certificates(roots);
    let config = match client {
        Some(ca) => {
            let cert = ca
                .client_cert("gatekeeper-webhook-service.gatekeeper-system.svc")
                .unwrap();
            builder
                .with_client_auth_cert(cert.chain_der().unwrap(), cert.key_der().unwrap())
                .unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    reqwest::Client::builder()
        .use_preconfigured_tls(config)
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

async fn start(h: &Harness, extra: &[String]) -> Endpoint {
    let gatekeeper_ca = TestCa::with_name("gatekeeper-ca").unwrap();
    let ca_file = h.cert_dir.path().join("gatekeeper-ca.crt");
    std::fs::write(&ca_file, gatekeeper_ca.cert_pem()).unwrap();
    let api = KubeApi::start().await.unwrap();
    api.accept_token(&kyverno_token(), KYVERNO_USER, &[AUDIENCE]);
    api.accept_token(&other_audience(), KYVERNO_USER, &["someone-else"]);
    let kubeconfig = h.cert_dir.path().join("kubeconfig.yaml");
    std::fs::write(&kubeconfig, api.kubeconfig_yaml()).unwrap();
    let mut argv: Vec<String> = h
        .base_flags()
        .into_iter()
        .filter(|flag| !flag.starts_with("--kubeconfig"))
        .collect();
    argv.extend([
        format!("--kubeconfig={}", kubeconfig.display()),
        "--lookup-addr=127.0.0.1:0".to_owned(),
        format!("--lookup-client-ca={}", ca_file.display()),
        format!("--lookup-token-audience={AUDIENCE}"),
    ]);
    argv.extend(extra.iter().cloned());
    let running = start_server(argv).await;
    let lookup = running.lookup_addr.expect("--lookup-addr serves");
    let serving_ca_pem = std::fs::read_to_string(h.cert_dir.path().join("tls.crt")).unwrap();
    Endpoint {
        url: format!("https://localhost:{}", lookup.port()),
        metrics: format!("http://{}/metrics", running.metrics_addr),
        gatekeeper_ca,
        serving_ca_pem,
        api,
        _running: running,
    }
}

/// Kyverno's projected token for the endpoint's audience (the scripted API accepts it).
fn kyverno_token() -> String {
    token(KYVERNO_USER, &[AUDIENCE])
}

/// A token the scripted API accepts, but for another audience only.
fn other_audience() -> String {
    token(KYVERNO_USER, &["someone-else"])
}

/// The same token each time for the same claims (the scripted API accepts tokens by their text).
fn token(subject: &str, audiences: &[&str]) -> String {
    static EXP: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    let exp = *EXP.get_or_init(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        i64::try_from(now).unwrap() + 3600
    });
    noe_test_support::service_account_token(subject, audiences, exp)
}

fn provider_request(keys: &[String]) -> Value {
    json!({
        "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
        "kind": "ProviderRequest",
        "request": {"keys": keys},
    })
}

async fn post(
    client: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> (u16, Value) {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .body(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(json!({ "raw": text })),
    )
}

fn token_reviews(api: &KubeApi) -> usize {
    api.requests()
        .iter()
        .filter(|r| r.path == "/apis/authentication.k8s.io/v1/tokenreviews")
        .count()
}

#[tokio::test]
async fn gatekeeper_over_mutual_tls_1_3_answers_every_key() {
    let h = Harness::start().await;
    let e = start(&h, &[]).await;
    let gatekeeper = client(&e.serving_ca_pem, Some(&e.gatekeeper_ca));
    let url = format!("{}/gatekeeper/v1/platforms", e.url);
    let index = &h.fixtures.oci_index;
    let keys = vec![
        index.reference(),
        h.missing_image(),
        "Not/A:Reference:At:All".to_owned(),
        index.reference(),
    ];
    let (status, answer) = post(&gatekeeper, &url, None, provider_request(&keys).to_string()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["apiVersion"], "externaldata.gatekeeper.sh/v1beta1");
    assert_eq!(answer["kind"], "ProviderResponse");
    assert_eq!(answer["response"]["idempotent"], true);
    assert!(answer["response"].get("systemError").is_none(), "{answer}");
    let items = answer["response"]["items"].as_array().unwrap();
    let echoed: Vec<&str> = items.iter().map(|i| i["key"].as_str().unwrap()).collect();
    assert_eq!(echoed, keys.iter().map(String::as_str).collect::<Vec<_>>());
    let value = &items[0]["value"];
    assert_eq!(value["digest"], index.digest.as_str());
    let platforms: Vec<&str> = value["platforms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    for want in ["linux/amd64", "linux/arm64", "linux/arm/v7"] {
        assert!(platforms.contains(&want), "{platforms:?}");
    }
    assert_eq!(items[3]["value"], *value);
    let error = |i: usize| items[i]["error"].as_str().unwrap_or_default().to_owned();
    assert!(error(1).starts_with("notfound: "), "{}", error(1));
    assert!(error(2).starts_with("invalid: "), "{}", error(2));

    // Warm now: the same keys from the cache, the same answer.
    let (_, again) = post(
        &gatekeeper,
        &url,
        None,
        provider_request(&keys[..1]).to_string(),
    )
    .await;
    assert_eq!(again["response"]["items"][0]["value"], *value);

    // A certificate from another CA does not get through the handshake.
    let stranger = client(
        &e.serving_ca_pem,
        Some(&TestCa::with_name("stranger").unwrap()),
    );
    let refused = stranger
        .post(&url)
        .body(provider_request(&keys).to_string())
        .send()
        .await;
    assert!(refused.is_err(), "{refused:?}");

    let metrics = reqwest::get(&e.metrics)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(r#"noe_lookup_requests_total{caller="gatekeeper",result="partial"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"noe_lookup_requests_total{caller="gatekeeper",result="ok"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains("noe_lookup_duration_seconds_bucket{caller=\"gatekeeper\""));
    assert_eq!(
        token_reviews(&e.api),
        0,
        "a certificate needs no TokenReview"
    );
}

#[tokio::test]
async fn kyverno_with_a_reviewed_token_and_nothing_for_anyone_else() {
    let h = Harness::start().await;
    let e = start(&h, &[]).await;
    let anonymous = client(&e.serving_ca_pem, None);
    let url = format!("{}/kyverno/v1/platforms", e.url);
    let images =
        json!({"images": [h.fixtures.docker_list.reference(), h.fixtures.oci_single.reference()]});

    let (status, answer) = post(&anonymous, &url, None, images.to_string()).await;
    assert_eq!(status, 401, "{answer}");
    assert!(answer.get("images").is_none(), "{answer}");
    // A token for another audience, and one for ours the API does not know: one review
    // (what the token says of its audience is read first).
    let made_up = token("system:serviceaccount:shop:web", &[AUDIENCE]);
    for token in [other_audience(), made_up] {
        let (status, answer) = post(&anonymous, &url, Some(&token), images.to_string()).await;
        assert_eq!(status, 403, "{token}: {answer}");
        assert!(!answer.to_string().contains("arm64"), "{answer}");
    }
    assert_eq!(token_reviews(&e.api), 1);

    for _ in 0..3 {
        let (status, answer) =
            post(&anonymous, &url, Some(&kyverno_token()), images.to_string()).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["common"], json!(["linux/arm64"]));
        assert_eq!(answer["architectures"], json!(["arm64"]));
        assert_eq!(answer["complete"], true);
        let list = &answer["images"][h.fixtures.docker_list.reference()];
        assert_eq!(list["digest"], h.fixtures.docker_list.digest.as_str());
        assert_eq!(list["error"], "");
    }
    assert_eq!(token_reviews(&e.api), 2, "the verdict is cached");
    let review = e
        .api
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/tokenreviews"))
        .unwrap();
    assert_eq!(review.body["spec"]["audiences"], json!([AUDIENCE]));

    // Bounds: 257 images, and a body of 1 MiB + 1.
    let many: Vec<String> = (0..257).map(|i| format!("example.test/i{i}:v1")).collect();
    let (status, answer) = post(
        &anonymous,
        &url,
        Some(&kyverno_token()),
        json!({ "images": many }).to_string(),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"], "257 keys, at most 256 per request");
    let huge = format!(r#"{{"images":["{}"]}}"#, "a".repeat(1024 * 1024 + 1 - 15));
    assert_eq!(huge.len(), 1024 * 1024 + 1);
    let (status, _) = post(&anonymous, &url, Some(&kyverno_token()), huge).await;
    assert_eq!(status, 413);

    let metrics = reqwest::get(&e.metrics)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for (result, count) in [
        ("unauthenticated", 1),
        ("forbidden", 2),
        ("ok", 3),
        ("invalid", 1),
        ("too_large", 1),
    ] {
        let line =
            format!(r#"noe_lookup_requests_total{{caller="kyverno",result="{result}"}} {count}"#);
        assert!(metrics.contains(&line), "{line}\n{metrics}");
    }
}

/// A flood of Bearer tokens against the scripted API's TokenReview, counting reviews: 300
/// random strings, 100 tokens for another audience and 100 expired ones cost no review at all;
/// 200 distinct tokens for our audience that the API does not know cost at most 20 reviews a
/// second (bursts of 20), the rest refused at once with 503 and `Retry-After`; a rejected
/// token asked again costs none; Kyverno's token, accepted before, is answered throughout
/// without a review of its own. Each refusal is counted by class.
#[tokio::test]
async fn a_flood_of_unknown_tokens_costs_few_token_reviews() {
    let h = Harness::start().await;
    let e = start(&h, &[]).await;
    let anonymous = client(&e.serving_ca_pem, None);
    let url = format!("{}/kyverno/v1/platforms", e.url);
    let body = json!({"images": [h.fixtures.oci_single.reference()]}).to_string();
    let (status, answer) = post(&anonymous, &url, Some(&kyverno_token()), body.clone()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(token_reviews(&e.api), 1);

    let now = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap();
    let mut unfit: Vec<String> = (0u64..300)
        .map(|i| format!("{:016x}{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15), !i))
        .collect();
    unfit.extend(
        (0..100).map(|i| token(&format!("system:serviceaccount:a:{i}"), &["someone-else"])),
    );
    unfit.extend((0..100).map(|i| {
        noe_test_support::service_account_token(
            &format!("system:serviceaccount:e:{i}"),
            &[AUDIENCE],
            now - 3600,
        )
    }));
    for token in &unfit {
        let (status, _) = post(&anonymous, &url, Some(token), body.clone()).await;
        assert_eq!(status, 403, "{token}");
    }
    assert_eq!(
        token_reviews(&e.api),
        1,
        "no review for tokens no review could accept"
    );

    let started = Instant::now();
    let (mut rejected, mut throttled) = (0, 0);
    for i in 0..200 {
        let unknown = token(&format!("system:serviceaccount:flood:{i}"), &[AUDIENCE]);
        let response = anonymous
            .post(&url)
            .bearer_auth(&unknown)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        match response.status().as_u16() {
            403 => rejected += 1,
            503 => {
                assert_eq!(response.headers()["retry-after"], "1");
                throttled += 1;
            }
            other => panic!("{other}"),
        }
        if i % 10 == 0 {
            let (status, answer) =
                post(&anonymous, &url, Some(&kyverno_token()), body.clone()).await;
            assert_eq!(status, 200, "{answer}");
        }
    }
    let elapsed = started.elapsed();
    let reviews = token_reviews(&e.api) - 1;
    eprintln!("200 unknown tokens in {elapsed:?}: {reviews} reviews, {throttled} throttled");
    let bound = 20 + (20.0 * elapsed.as_secs_f64()).ceil() as usize;
    assert_eq!(reviews, rejected, "one review per token rejected");
    assert!(
        reviews <= bound,
        "{reviews} reviews in {elapsed:?}: more than {bound}"
    );
    assert!(
        throttled > 0 && rejected + throttled == 200,
        "{rejected} {throttled}"
    );
    // Remembered: asked again, no review.
    let first = token("system:serviceaccount:flood:0", &[AUDIENCE]);
    let (status, _) = post(&anonymous, &url, Some(&first), body.clone()).await;
    assert_eq!(status, 403);
    assert_eq!(token_reviews(&e.api), reviews + 1);

    let metrics = reqwest::get(&e.metrics)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for (reason, count) in [
        ("malformed", 300),
        ("audience", 100),
        ("expired", 100),
        ("rejected", rejected + 1),
        ("throttled", throttled),
    ] {
        let line = format!(r#"noe_lookup_token_refusals_total{{reason="{reason}"}} {count}"#);
        assert!(metrics.contains(&line), "{line}\n{metrics}");
    }
    let line = format!(r#"noe_lookup_token_reviews_total{{result="rejected"}} {rejected}"#);
    assert!(metrics.contains(&line), "{line}\n{metrics}");
}

/// A registry 5 s away: the caller's `?timeout=500ms` (under `--lookup-deadline=1s`) ends the
/// cold key with a `timeout:` error of its own, while the warm key keeps its answer.
#[tokio::test]
async fn a_slow_registry_times_out_per_key_within_the_deadline() {
    let h = Harness::start().await;
    let slow = DelayProxy::start(h.registry.addr(), Duration::from_secs(5))
        .await
        .unwrap();
    let insecure = format!(
        "--insecure-registries={},{}",
        h.registry.host(),
        slow.host()
    );
    let e = start(&h, &[insecure, "--lookup-deadline=1s".to_owned()]).await;
    let gatekeeper = client(&e.serving_ca_pem, Some(&e.gatekeeper_ca));
    let warm = h.fixtures.oci_index.reference();
    let cold = format!(
        "{}/{}:{}",
        slow.host(),
        h.fixtures.docker_list.repository,
        h.fixtures.docker_list.tag
    );
    let base = format!("{}/gatekeeper/v1/platforms", e.url);
    let (status, _) = post(
        &gatekeeper,
        &base,
        None,
        provider_request(std::slice::from_ref(&warm)).to_string(),
    )
    .await;
    assert_eq!(status, 200);

    for (url, bound) in [
        (format!("{base}?timeout=500ms"), Duration::from_millis(500)),
        (base.clone(), Duration::from_secs(1)),
    ] {
        let started = Instant::now();
        let (status, answer) = post(
            &gatekeeper,
            &url,
            None,
            provider_request(&[warm.clone(), cold.clone()]).to_string(),
        )
        .await;
        let took = started.elapsed();
        assert_eq!(status, 200, "{answer}");
        assert!(took < bound + Duration::from_millis(400), "{url}: {took:?}");
        let items = &answer["response"]["items"];
        assert_eq!(
            items[0]["value"]["digest"],
            h.fixtures.oci_index.digest.as_str()
        );
        let error = items[1]["error"].as_str().unwrap_or_default();
        assert!(error.starts_with("timeout: "), "{answer}");
    }
}

/// `--lookup-addr` with no way to admit a caller is refused at start.
#[tokio::test]
async fn an_endpoint_nobody_could_use_does_not_start() {
    let h = Harness::start().await;
    let mut argv = h.base_flags();
    argv.push("--lookup-addr=127.0.0.1:0".to_owned());
    let args = noe::cli::Args::try_parse_normalized(argv.into_iter().map(Into::into)).unwrap();
    let noe::cli::Run::Serve(config) = args.to_run().unwrap() else {
        panic!("not a server command line")
    };
    let error = noe::serve::start(config).await.unwrap_err().to_string();
    assert!(
        error.contains("--lookup-client-ca and/or --lookup-token-audience"),
        "{error}"
    );
}
