//! Kubelet credential provider plugins as real executables (shell scripts) speaking the exec
//! protocol.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use noe_credentials::exec::ExecLimits;
use noe_credentials::provider::{parse_provider_config, ProviderSource};
use noe_credentials::Credential;
use noe_test_support::{
    provider_config as config, provider_response as response, ProviderPlugins as Fixture,
};

/// The provider source of the configuration `yaml` over the plugins of `fx`.
fn provider_source(fx: &Fixture, yaml: &str) -> ProviderSource {
    ProviderSource::new(
        fx.bin(),
        parse_provider_config(yaml).unwrap(),
        ExecLimits {
            timeout: Duration::from_millis(700),
            max_output: 64 * 1024,
        },
    )
}

fn basic(user: &str, password: &str) -> Credential {
    Credential::Basic {
        username: user.into(),
        password: password.into(),
    }
}

#[tokio::test]
async fn each_exec_api_version_round_trips() {
    for version in ["v1", "v1beta1", "v1alpha1"] {
        let fx = Fixture::new().unwrap();
        fx.plugin("p", &response("Image", None, &["*.example.com"]))
            .unwrap();
        let source = provider_source(&fx, &config(&[("p", "*.example.com", "0s", version)]));
        let got = source.candidates("reg.example.com/team/app:1").await;
        assert_eq!(got.len(), 1, "{version}");
        assert_eq!(got[0].source, "credential-provider:p");
        assert_eq!(got[0].credential, basic("user-p", "pw-*.example.com"));
        let runs = fx.runs("p");
        assert_eq!(
            runs,
            [serde_json::json!({
                "apiVersion": format!("credentialprovider.kubelet.k8s.io/{version}"),
                "kind": "CredentialProviderRequest",
                "image": "reg.example.com/team/app:1",
            })]
        );
    }
}

#[tokio::test]
async fn env_is_passed_to_the_plugin() {
    let fx = Fixture::new().unwrap();
    fx.raw_plugin(
        "p",
        r#"cat >/dev/null
[ "$PLUGIN_MODE" = test ] || exit 1
printf '{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","auth":{"x.io":{"username":"env","password":"ok"}}}'"#,
    ).unwrap();
    let source = provider_source(&fx, &config(&[("p", "x.io", "0s", "v1")]));
    assert_eq!(
        source.candidates("x.io/a:1").await[0].credential,
        basic("env", "ok")
    );
}

#[tokio::test]
async fn plugin_not_run_when_match_images_do_not_match() {
    let fx = Fixture::new().unwrap();
    fx.plugin("p", &response("Global", Some("1h"), &["*.example.com"]))
        .unwrap();
    let source = provider_source(&fx, &config(&[("p", "*.example.com", "0s", "v1")]));
    // Same label count required: a.b.example.com has one label too many.
    for image in [
        "example.com/a:1",
        "a.b.example.com/a:1",
        "reg.example.com:5000/a:1",
        "docker.io/library/nginx:latest",
    ] {
        assert!(source.candidates(image).await.is_empty(), "{image}");
    }
    assert!(fx.runs("p").is_empty());
}

#[tokio::test]
async fn response_auth_keys_are_patterns_most_specific_first() {
    let fx = Fixture::new().unwrap();
    fx.plugin(
        "p",
        &response(
            "Image",
            None,
            &[
                "*.example.com",
                "reg.example.com",
                "reg.example.com/team",
                "other.io",
                "reg.example.com/else",
            ],
        ),
    )
    .unwrap();
    let source = provider_source(&fx, &config(&[("p", "*.example.com", "0s", "v1")]));
    let got: Vec<Credential> = source
        .candidates("reg.example.com/team/app:1")
        .await
        .into_iter()
        .map(|c| c.credential)
        .collect();
    assert_eq!(
        got,
        [
            basic("user-p", "pw-reg.example.com/team"),
            basic("user-p", "pw-reg.example.com"),
            basic("user-p", "pw-*.example.com"),
        ]
    );
}

#[tokio::test]
async fn cache_key_image() {
    let fx = Fixture::new().unwrap();
    fx.plugin("p", &response("Image", Some("1h"), &["*.example.com"]))
        .unwrap();
    let source = provider_source(&fx, &config(&[("p", "*.example.com", "0s", "v1")]));
    source.candidates("reg.example.com/app:1").await;
    source.candidates("reg.example.com/app:2").await;
    source.candidates("reg.example.com/app@sha256:00").await;
    assert_eq!(fx.runs("p").len(), 1, "same repository: cached");
    source.candidates("reg.example.com/other:1").await;
    assert_eq!(fx.runs("p").len(), 2, "another repository: run again");
}

#[tokio::test]
async fn cache_key_registry() {
    let fx = Fixture::new().unwrap();
    fx.plugin("p", &response("Registry", Some("1h"), &["*.example.com"]))
        .unwrap();
    let source = provider_source(&fx, &config(&[("p", "*.example.com", "0s", "v1")]));
    source.candidates("reg.example.com/app:1").await;
    source.candidates("reg.example.com/other:1").await;
    assert_eq!(fx.runs("p").len(), 1, "same registry: cached");
    let got = source.candidates("two.example.com/app:1").await;
    assert_eq!(fx.runs("p").len(), 2, "another registry: run again");
    assert_eq!(got.len(), 1);
}

#[tokio::test]
async fn cache_key_global() {
    let fx = Fixture::new().unwrap();
    fx.plugin("p", &response("Global", Some("1h"), &["*.example.com"]))
        .unwrap();
    let source = provider_source(&fx, &config(&[("p", "*.example.com", "0s", "v1")]));
    source.candidates("reg.example.com/app:1").await;
    let got = source.candidates("two.example.com/other:1").await;
    assert_eq!(fx.runs("p").len(), 1, "global: cached for every image");
    assert_eq!(got.len(), 1);
}

#[tokio::test]
async fn cache_duration_zero_and_default_and_expiry() {
    // cacheDuration 0 in the response: never cached, even with a default duration.
    let fx = Fixture::new().unwrap();
    fx.plugin("p", &response("Global", Some("0s"), &["*.example.com"]))
        .unwrap();
    let source = provider_source(&fx, &config(&[("p", "*.example.com", "1h", "v1")]));
    source.candidates("reg.example.com/app:1").await;
    source.candidates("reg.example.com/app:1").await;
    assert_eq!(fx.runs("p").len(), 2);

    // No cacheDuration: the provider's defaultCacheDuration applies (0 = no cache).
    let fx = Fixture::new().unwrap();
    fx.plugin("p", &response("Global", None, &["*.example.com"]))
        .unwrap();
    let source = provider_source(&fx, &config(&[("p", "*.example.com", "0s", "v1")]));
    source.candidates("reg.example.com/app:1").await;
    source.candidates("reg.example.com/app:1").await;
    assert_eq!(fx.runs("p").len(), 2);

    // A short duration expires (on the source's clock, moved by hand).
    let fx = Fixture::new().unwrap();
    fx.plugin("p", &response("Global", None, &["*.example.com"]))
        .unwrap();
    let clock = noe_core::clock::Clock::manual();
    let source = provider_source(&fx, &config(&[("p", "*.example.com", "300ms", "v1")]))
        .with_clock(clock.clone());
    source.candidates("reg.example.com/app:1").await;
    clock.advance(Duration::from_millis(299));
    source.candidates("reg.example.com/app:1").await;
    assert_eq!(fx.runs("p").len(), 1);
    clock.advance(Duration::from_millis(1));
    source.candidates("reg.example.com/app:1").await;
    assert_eq!(fx.runs("p").len(), 2);
}

#[tokio::test]
async fn concurrent_lookups_run_the_plugin_once() {
    let fx = Fixture::new().unwrap();
    fx.plugin("p", &response("Registry", Some("1h"), &["*.example.com"]))
        .unwrap();
    let source = provider_source(&fx, &config(&[("p", "*.example.com", "0s", "v1")]));
    let lookups = (0..8).map(|i| {
        let source = source.clone();
        async move {
            source
                .candidates(&format!("reg.example.com/app{i}:1"))
                .await
        }
    });
    let results = futures::future::join_all(lookups).await;
    assert!(results.iter().all(|r| r.len() == 1));
    assert_eq!(fx.runs("p").len(), 1);
}

#[tokio::test]
async fn invalid_cache_key_type_discards_the_response() {
    let fx = Fixture::new().unwrap();
    fx.plugin("p", &response("Repository", Some("1h"), &["*.example.com"]))
        .unwrap();
    let source = provider_source(&fx, &config(&[("p", "*.example.com", "0s", "v1")]));
    assert!(source.candidates("reg.example.com/app:1").await.is_empty());
    assert_eq!(fx.runs("p").len(), 1);
}

#[tokio::test]
async fn hanging_plugin_times_out_and_next_provider_answers() {
    let fx = Fixture::new().unwrap();
    fx.raw_plugin("hang", "exec sleep 30").unwrap();
    fx.plugin("good", &response("Image", None, &["*.example.com"]))
        .unwrap();
    let source = provider_source(
        &fx,
        &config(&[
            ("hang", "*.example.com", "0s", "v1"),
            ("good", "*.example.com", "0s", "v1"),
        ]),
    );
    let started = Instant::now();
    let got = source.candidates("reg.example.com/app:1").await;
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].source, "credential-provider:good");
}

#[tokio::test]
async fn bad_outputs_give_no_credentials() {
    let cases = [
        ("garbage", "echo 'password: hunter2'"),
        ("exit1", "cat >/dev/null; echo '{}'; exit 1"),
        ("huge", "head -c 200000 /dev/zero"),
        (
            "wrongkind",
            r#"printf '{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"Status","cacheKeyType":"Image"}'"#,
        ),
        (
            "wrongversion",
            r#"printf '{"apiVersion":"v1","kind":"CredentialProviderResponse","cacheKeyType":"Image"}'"#,
        ),
        (
            "nullauth",
            r#"printf '{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","auth":null}'"#,
        ),
    ];
    for (name, body) in cases {
        let fx = Fixture::new().unwrap();
        fx.raw_plugin(name, body).unwrap();
        let source = provider_source(&fx, &config(&[(name, "*.example.com", "0s", "v1")]));
        assert!(
            source.candidates("reg.example.com/app:1").await.is_empty(),
            "{name}"
        );
    }
    // A missing binary is not fatal either.
    let fx = Fixture::new().unwrap();
    let source = provider_source(&fx, &config(&[("absent", "*.example.com", "0s", "v1")]));
    assert!(source.candidates("reg.example.com/app:1").await.is_empty());
}

#[tokio::test]
async fn loads_yaml_and_json_config_files() {
    let fx = Fixture::new().unwrap();
    fx.plugin("p", &response("Image", None, &["*.example.com"]))
        .unwrap();
    let yaml = fx.path().join("config.yaml");
    std::fs::write(&yaml, config(&[("p", "*.example.com", "0s", "v1")])).unwrap();
    let json = fx.path().join("config.json");
    std::fs::write(
        &json,
        r#"{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"CredentialProviderConfig","providers":[{"name":"p","matchImages":["*.example.com"],"defaultCacheDuration":"0s","apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1","args":["user-p"]}]}"#,
    )
    .unwrap();
    let empty = fx.path().join("empty.json");
    std::fs::write(&empty, "").unwrap();
    for path in [&yaml, &json] {
        let source = ProviderSource::load(fx.bin(), path, ExecLimits::default())
            .await
            .unwrap();
        assert_eq!(source.provider_names().collect::<Vec<_>>(), ["p"]);
        assert_eq!(
            source.candidates("reg.example.com/app:1").await[0].credential,
            basic("user-p", "pw-*.example.com")
        );
    }
    let source = ProviderSource::load(fx.bin(), &empty, ExecLimits::default())
        .await
        .unwrap();
    assert_eq!(source.provider_names().count(), 0);
    assert!(
        ProviderSource::load(fx.bin(), Path::new("/nonexistent/x"), ExecLimits::default())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_plugin_answer_says_until_when_it_is_good_and_which_hosts_it_serves() {
    use noe_credentials::{Request, Source};
    use std::time::SystemTime;

    let fx = Fixture::new().unwrap();
    fx.plugin(
        "hour",
        &response("Registry", Some("1h"), &["*.example.com"]),
    )
    .unwrap();
    fx.plugin("once", &response("Image", Some("0s"), &["once.io:5000"]))
        .unwrap();
    let source = provider_source(
        &fx,
        &config(&[
            ("hour", "*.example.com/team", "0s", "v1"),
            ("once", "once.io:5000", "0s", "v1"),
        ]),
    );
    let before = SystemTime::now();
    let got = source
        .credentials(Request::new("reg.example.com/team/app:1"))
        .await;
    assert_eq!(got.len(), 1);
    let expires = got[0].expires.expect("a cached answer has an expiry");
    let left = expires.duration_since(before).unwrap();
    assert!(
        left > Duration::from_secs(3500) && left <= Duration::from_secs(3601),
        "{left:?}"
    );
    // Asked again: the cached answer keeps its expiry (one identity, one cache key).
    let again = source
        .credentials(Request::new("reg.example.com/team/app:2"))
        .await;
    assert_eq!(again, got);
    assert_eq!(fx.runs("hour").len(), 1);
    // An answer not to be cached is good for this lookup only.
    let once = source.credentials(Request::new("once.io:5000/app:1")).await;
    assert_eq!(once.len(), 1);
    assert!(once[0].expires.unwrap() <= SystemTime::now());

    assert_eq!(source.kind(), "credential-provider");
    for (host, served) in [
        ("reg.example.com", true),
        ("a.b.example.com", false),
        ("once.io:5000", true),
        ("once.io", false),
        ("docker.io", false),
    ] {
        assert_eq!(source.serves(host), served, "{host}");
    }
}

/// The webhook's service-account API, scripted: accounts by name with their annotations, a
/// token per request (counted), for the audience asked.
#[derive(Debug, Default)]
struct Accounts {
    annotated: Vec<(&'static str, &'static str, &'static str)>,
    gets: std::sync::atomic::AtomicUsize,
    tokens: std::sync::Mutex<Vec<String>>,
}

impl noe_credentials::ServiceAccounts for Accounts {
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> futures::future::BoxFuture<
        'a,
        Result<
            std::sync::Arc<noe_credentials::ServiceAccountInfo>,
            noe_credentials::ServiceAccountError,
        >,
    > {
        self.gets.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Box::pin(async move {
            if name == "ghost" {
                return Err(noe_credentials::ServiceAccountError {
                    namespace: namespace.into(),
                    name: name.into(),
                    reason: "not found".into(),
                });
            }
            let annotations = self
                .annotated
                .iter()
                .filter(|(account, _, _)| *account == name)
                .map(|(_, k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            Ok(std::sync::Arc::new(noe_credentials::ServiceAccountInfo {
                uid: format!("uid-{name}"),
                annotations,
            }))
        })
    }

    fn token<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        audience: &'a str,
    ) -> futures::future::BoxFuture<
        'a,
        Result<noe_credentials::ServiceAccountToken, noe_credentials::ServiceAccountError>,
    > {
        let mut tokens = self.tokens.lock().unwrap();
        let token = format!("tok.{namespace}.{name}.{audience}.{}", tokens.len());
        tokens.push(token.clone());
        Box::pin(async move {
            Ok(noe_credentials::ServiceAccountToken {
                token,
                expires: std::time::SystemTime::now() + Duration::from_secs(600),
            })
        })
    }
}

/// A plugin that insists on what the kubelet sends a provider with `tokenAttributes`: it
/// exits non-zero unless the request carries a `serviceAccountToken` for the audience and the
/// `serviceAccountAnnotations` it expects, and answers with the token in the password.
fn token_plugin(fx: &Fixture, name: &str, annotations: &str) {
    fx.raw_plugin(
        name,
        &format!(
            r#"req=$(cat)
printf '%s\n' "$req" >> "{log}"
token=$(printf '%s' "$req" | sed -n 's/.*"serviceAccountToken":"\(tok\.[^"]*\.sts\.amazonaws\.com\.[0-9]*\)".*/\1/p')
[ -n "$token" ] || {{ echo "no serviceAccountToken for the audience" >&2; exit 3; }}
printf '%s' "$req" | grep -qF '"serviceAccountAnnotations":{annotations}' || {{ echo "annotations missing" >&2; exit 4; }}
printf '{{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Registry","cacheDuration":"1h","auth":{{"*.dkr.ecr.*.amazonaws.com":{{"username":"AWS","password":"pw-%s"}}}}}}' "$token"
"#,
            log = fx.log(name).display(),
        ),
    ).unwrap();
}

const TOKEN_PROVIDER: &str = r#"apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: ecr
    matchImages: ["*.dkr.ecr.*.amazonaws.com"]
    defaultCacheDuration: 1h
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    tokenAttributes:
      serviceAccountTokenAudience: sts.amazonaws.com
      requireServiceAccount: true
      requiredServiceAccountAnnotationKeys: [eks.amazonaws.com/role-arn]
      optionalServiceAccountAnnotationKeys: [eks.amazonaws.com/sts-regional-endpoints, absent.example/key]
      cacheType: CACHE_TYPE
"#;

const ECR_IMAGE: &str = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/app:1";

fn accounts() -> Accounts {
    Accounts {
        annotated: vec![
            (
                "app",
                "eks.amazonaws.com/role-arn",
                "arn:aws:iam::1:role/app",
            ),
            ("app", "eks.amazonaws.com/sts-regional-endpoints", "true"),
            ("app", "unrelated", "x"),
            (
                "other",
                "eks.amazonaws.com/role-arn",
                "arn:aws:iam::1:role/other",
            ),
        ],
        ..Accounts::default()
    }
}

#[tokio::test]
async fn a_token_provider_gets_the_pods_service_account_token_and_annotations() {
    use noe_credentials::{PodIdentity, Request, Source};

    let fx = Fixture::new().unwrap();
    token_plugin(
        &fx,
        "ecr",
        r#"{"eks.amazonaws.com/role-arn":"arn:aws:iam::1:role/app","eks.amazonaws.com/sts-regional-endpoints":"true"}"#,
    );
    let config =
        parse_provider_config(&TOKEN_PROVIDER.replace("CACHE_TYPE", "ServiceAccount")).unwrap();
    let source =
        ProviderSource::with_service_account_tokens(fx.bin(), config, ExecLimits::default(), true);
    let accounts = accounts();
    let pod = |account: Option<&'static str>| PodIdentity {
        namespace: "team",
        service_account: account,
        accounts: &accounts,
    };
    let got = source
        .credentials(Request::for_pod(ECR_IMAGE, Some(pod(Some("app")))))
        .await;
    assert_eq!(
        got.len(),
        1,
        "the plugin refused its request: {:?}",
        fx.runs("ecr")
    );
    assert_eq!(
        got[0].credential,
        basic("AWS", "pw-tok.team.app.sts.amazonaws.com.0")
    );
    assert_eq!(
        got[0].source,
        "credential-provider:ecr as serviceaccount team/app"
    );
    assert!(
        got[0].scoped,
        "a pod's own credential is cached for its scope only"
    );
    let runs = fx.runs("ecr");
    assert_eq!(runs.len(), 1);
    assert_eq!(
        runs[0]["serviceAccountToken"],
        "tok.team.app.sts.amazonaws.com.0"
    );
    assert_eq!(
        runs[0]["serviceAccountAnnotations"],
        serde_json::json!({
            "eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/app",
            "eks.amazonaws.com/sts-regional-endpoints": "true",
        })
    );

    // cacheType ServiceAccount: the same account finds the answer cached, without a token.
    let again = source
        .credentials(Request::for_pod(
            "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/other:2",
            Some(pod(Some("app"))),
        ))
        .await;
    assert_eq!(again.len(), 1);
    assert_eq!(accounts.tokens.lock().unwrap().len(), 1);
    assert_eq!(fx.runs("ecr").len(), 1);

    // Another account of the namespace is another cache key, and another token.
    token_plugin(
        &fx,
        "ecr",
        r#"{"eks.amazonaws.com/role-arn":"arn:aws:iam::1:role/other"}"#,
    );
    let other = source
        .credentials(Request::for_pod(ECR_IMAGE, Some(pod(Some("other")))))
        .await;
    assert_eq!(other.len(), 1, "{:?}", fx.runs("ecr"));
    assert_eq!(
        other[0].credential,
        basic("AWS", "pw-tok.team.other.sts.amazonaws.com.1")
    );

    // No credential, and the plugin is not run: a required annotation missing, no service
    // account (one is required), an account that cannot be read, no pod at all.
    let runs_before = fx.runs("ecr").len();
    for pod in [
        Some(pod(Some("bare"))),
        Some(pod(None)),
        Some(pod(Some("ghost"))),
        None,
    ] {
        let none = source.credentials(Request::for_pod(ECR_IMAGE, pod)).await;
        assert!(none.is_empty(), "{pod:?}: {none:?}");
    }
    assert_eq!(fx.runs("ecr").len(), runs_before);
    assert_eq!(accounts.tokens.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn cache_type_token_keys_the_answer_by_token_and_without_the_flag_the_provider_is_skipped() {
    use noe_credentials::{PodIdentity, Request, Source};

    let fx = Fixture::new().unwrap();
    token_plugin(
        &fx,
        "ecr",
        r#"{"eks.amazonaws.com/role-arn":"arn:aws:iam::1:role/app","eks.amazonaws.com/sts-regional-endpoints":"true"}"#,
    );
    let yaml = TOKEN_PROVIDER.replace("CACHE_TYPE", "Token");
    let accounts = accounts();
    let pod = PodIdentity {
        namespace: "team",
        service_account: Some("app"),
        accounts: &accounts,
    };

    let off = ProviderSource::new(
        fx.bin(),
        parse_provider_config(&yaml).unwrap(),
        ExecLimits::default(),
    );
    assert_eq!(off.provider_names().count(), 0);
    assert!(off
        .credentials(Request::for_pod(ECR_IMAGE, Some(pod)))
        .await
        .is_empty());

    let source = ProviderSource::with_service_account_tokens(
        fx.bin(),
        parse_provider_config(&yaml).unwrap(),
        ExecLimits::default(),
        true,
    );
    for expected in [
        "pw-tok.team.app.sts.amazonaws.com.0",
        "pw-tok.team.app.sts.amazonaws.com.1",
    ] {
        let got = source
            .credentials(Request::for_pod(ECR_IMAGE, Some(pod)))
            .await;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].credential, basic("AWS", expected));
        // Not cached past the token (10 minutes), whatever the plugin's cacheDuration says.
        let left = got[0]
            .expires
            .unwrap()
            .duration_since(std::time::SystemTime::now())
            .unwrap();
        assert!(left <= Duration::from_secs(600), "{left:?}");
    }
    // Each lookup asked for a token first; a new token is a new cache key (the scripted API
    // hands out a new token each time; the webhook's caches one per account and audience).
    assert_eq!(fx.runs("ecr").len(), 2);
}
