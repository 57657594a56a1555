//! A refused credential renewed once: a kubelet plugin's cached answer and a cloud token the
//! registry refuses are asked for again, and a credential refused after renewal is a clear error.

use noe_credentials::exec::ExecLimits;
use noe_credentials::provider::{parse_provider_config, ProviderSource};
use noe_credentials::Credential;
use noe_test_support::{provider_config, ProviderPlugins};

/// The fetches that walk a lookup's credentials, each renewing a refused one.
#[derive(Clone, Copy, Debug)]
enum Fetch {
    Lookup,
    Inspect,
    Artifact,
}

/// A cached plugin answer the registry refuses (a real htpasswd registry) is dropped and the
/// plugin asked again, once: its second answer serves the fetch. One always refused is an
/// error naming the provider, after exactly one more run. A lookup, `noe inspect`'s fetch and
/// image selection's artifact fetch each renew.
#[tokio::test]
async fn a_refused_plugin_answer_is_renewed_once() {
    let registry = noe_test_support::Registry::builder()
        .htpasswd("ci", "right")
        .start()
        .await
        .unwrap();
    let pusher = registry.pusher().unwrap();
    noe_test_support::push_image(
        &pusher,
        "app",
        Some("1"),
        "linux/arm64",
        noe_test_support::Flavor::Oci,
    )
    .await
    .unwrap();
    let artifact = noe_test_support::compat_artifact(
        noe_test_support::ORAS_DEFAULT_ARTIFACT_TYPE,
        noe_core::selection::OCIFIT_MEDIA_TYPE,
        b"{}",
        None,
        None,
    );
    noe_test_support::push_artifact(&pusher, "compat", &artifact, Some("1"))
        .await
        .unwrap();
    let host = registry.host();
    let fetches = [Fetch::Lookup, Fetch::Inspect, Fetch::Artifact];
    for (fetch, (passwords, resolves)) in fetches
        .into_iter()
        .flat_map(|f| [(f, ("stale right", true)), (f, ("stale stale", false))])
    {
        let resolver = noe_registry::Resolver::new(
            noe_registry::Config {
                insecure_registries: vec![host.clone()],
                allow_cidrs: noe_test_support::loopback_cidrs(),
                ..noe_registry::Config::default()
            },
            &prometheus::Registry::new(),
        )
        .unwrap();
        let fx = ProviderPlugins::new().unwrap();
        // The n-th run answers the n-th word of `passwords` (the last one after that).
        fx.raw_plugin(
            "p",
            &format!(
                r#"cat > /dev/null
echo run >> "{log}"
n=$(wc -l < "{log}")
set -- {passwords}
[ "$n" -gt 1 ] && shift
cat <<EOF
{{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Registry","cacheDuration":"1h","auth":{{"{host}":{{"username":"ci","password":"$1"}}}}}}
EOF"#,
                log = fx.log("runs").display(),
            ),
        )
        .unwrap();
        let source = ProviderSource::new(
            fx.bin(),
            parse_provider_config(&provider_config(&[("p", &host, "0s", "v1")])).unwrap(),
            ExecLimits::default(),
        );
        let image = match fetch {
            Fetch::Lookup | Fetch::Inspect => format!("{host}/app:1"),
            Fetch::Artifact => format!("{host}/compat:1"),
        };
        let candidates = source.candidates(&image).await;
        assert_eq!(candidates.len(), 1, "{candidates:?}");
        assert!(candidates[0].renewal.is_some());
        let runs = || fx.lines("runs");
        let result = match fetch {
            Fetch::Lookup => resolver
                .resolve(&image, &candidates)
                .await
                .map(|resolution| resolution.credential_source.clone()),
            Fetch::Inspect => resolver
                .inspect(
                    &resolver.routed(&image).await.unwrap(),
                    &candidates,
                    &noe_registry::inspect::Want::default(),
                )
                .await
                .map(|inspection| {
                    assert_eq!(inspection.resolution.platforms.len(), 1);
                    inspection.resolution.credential_source
                }),
            Fetch::Artifact => noe_registry::artifacts::Artifacts::new(resolver.clone())
                .explicit(
                    &resolver.routed(&image).await.unwrap(),
                    noe_core::selection::OCIFIT_MEDIA_TYPE,
                    &candidates,
                    None,
                )
                .await
                .map(|fetched| {
                    assert_eq!(fetched.digest, artifact.digest);
                    Some("credential-provider:p".to_owned())
                }),
        };
        assert_eq!(runs(), 2, "{fetch:?} {passwords}: one renewal");
        match result {
            Ok(source_used) => {
                assert!(resolves, "{fetch:?} {passwords}");
                assert_eq!(source_used.as_deref(), Some("credential-provider:p"));
                // The renewed answer is the cached one now.
                let now = source.candidates(&image).await;
                assert_eq!(
                    now[0].credential,
                    Credential::Basic {
                        username: "ci".into(),
                        password: "right".into(),
                    }
                );
                assert_eq!(runs(), 2);
            }
            Err(error) => {
                assert!(!resolves, "{fetch:?} {passwords}: {error}");
                let message = error.to_string();
                assert!(
                    message.starts_with("credential-provider: registry login:"),
                    "{fetch:?}: {message}"
                );
                assert!(
                    matches!(
                        error,
                        noe_registry::Error::Renewal {
                            provider: "credential-provider",
                            ..
                        }
                    ),
                    "{fetch:?}: {error:?}"
                );
            }
        }
    }
}

/// ECR tokens refused by the registry (an ECR host name served by a real registry).
mod cloud {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use base64::Engine as _;
    use noe_cloud::{CloudCredentials, Config, Env, Metrics, Provider};
    use noe_credentials::containerd::ContainerdSource;
    use noe_credentials::Sources;
    use noe_registry::hosts::ContainerdHosts;
    use noe_registry::{Error, Resolver};
    use noe_test_support::{push_image, Flavor, Registry, TestCa};

    use noe_test_support::cloud::{Fake, Reply, Seen};

    const ECR_HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
    const RIGHT: &str = "ecr-password";

    /// An STS answering `AssumeRoleWithWebIdentity` with credentials valid far ahead.
    fn sts(_: &Seen) -> Reply {
        Reply::new(
            200,
            r#"<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
      <AssumeRoleWithWebIdentityResult>
        <Credentials>
          <SessionToken>FwoGZXIvYXdzEXAMPLEsessiontoken</SessionToken>
          <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY</SecretAccessKey>
          <Expiration>2099-01-01T00:00:00Z</Expiration>
          <AccessKeyId>ASIAIOSFODNN7EXAMPLE</AccessKeyId>
        </Credentials>
      </AssumeRoleWithWebIdentityResult>
    </AssumeRoleWithWebIdentityResponse>"#,
        )
        .header("content-type", "text/xml")
    }

    /// An ECR API answering `GetAuthorizationToken` with `password(n)` for its n-th request
    /// (from 0), valid for 12 hours.
    fn ecr(
        count: Arc<AtomicUsize>,
        password: impl Fn(usize) -> &'static str + Send + Sync + 'static,
    ) -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
        move |request| {
            if request.header("x-amz-target") != Some(noe_cloud::ecr::TARGET) {
                return Reply::new(400, r#"{"__type":"UnknownOperationException"}"#);
            }
            let n = count.fetch_add(1, Ordering::SeqCst);
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("AWS:{}", password(n)));
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let expires_at = now + 43_200;
            Reply::new(
                    200,
                    format!(
                        r#"{{"authorizationData":[{{"authorizationToken":"{token}","expiresAt":{expires_at},"proxyEndpoint":"https://{ECR_HOST}"}}]}}"#
                    ),
                )
                .header("content-type", "application/x-amz-json-1.1")
        }
    }

    struct Setup {
        registry: Registry,
        resolver: Resolver,
        metrics: prometheus::Registry,
        sources: Sources,
        tokens: Arc<AtomicUsize>,
        _fakes: (Fake, Fake),
        _dirs: (tempfile::TempDir, tempfile::TempDir),
    }

    /// A real CNCF registry (TLS with a test CA, htpasswd `AWS`/[`RIGHT`]) holding `app:1` and
    /// `app:2`, reached under [`ECR_HOST`] (a containerd `hosts.toml` whose server is its
    /// loopback address); IRSA on loopback STS and ECR fakes whose tokens `password` gives.
    async fn setup(
        password: impl Fn(usize) -> &'static str + Send + Sync + 'static,
    ) -> anyhow::Result<Setup> {
        let ca = TestCa::new()?;
        let registry = Registry::builder()
            .tls(&ca)
            .tls_name(ECR_HOST)
            .htpasswd("AWS", RIGHT)
            .start()
            .await?;
        let pusher = registry.pusher()?;
        for tag in ["1", "2"] {
            push_image(&pusher, "app", Some(tag), "linux/arm64", Flavor::Oci).await?;
        }
        let containerd = tempfile::tempdir()?;
        let host_dir = containerd.path().join("certs.d").join(ECR_HOST);
        std::fs::create_dir_all(&host_dir)?;
        std::fs::write(
            host_dir.join("hosts.toml"),
            format!("server = \"https://{}\"\n", registry.host()),
        )?;
        let metrics = prometheus::Registry::new();
        let resolver = Resolver::new(
            noe_registry::Config {
                extra_ca_pem: Some(ca.cert_pem().into_bytes()),
                hosts: Some(Arc::new(ContainerdHosts::new(ContainerdSource::new(vec![
                    containerd.path().to_owned(),
                ])))),
                allow_cidrs: noe_test_support::loopback_cidrs(),
                ..noe_registry::Config::default()
            },
            &metrics,
        )?;

        let tokens = Arc::new(AtomicUsize::new(0));
        let sts = Fake::start(None, sts).await?;
        let ecr = Fake::start(None, ecr(tokens.clone(), password)).await?;
        let identity = tempfile::tempdir()?;
        let token_file = identity.path().join("token");
        std::fs::write(&token_file, "eyJhbGciOiJSUzI1NiJ9.projected-sa-token.sig\n")?;
        let env = [
            (
                "AWS_ROLE_ARN",
                "arn:aws:iam::123456789012:role/noe".to_owned(),
            ),
            (
                "AWS_WEB_IDENTITY_TOKEN_FILE",
                token_file.display().to_string(),
            ),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_ENDPOINT_URL_STS", sts.url()),
            ("AWS_ENDPOINT_URL_ECR", ecr.url()),
        ];
        let config = Config {
            providers: vec![Provider::Ecr],
            env: Env::from_pairs(env.map(|(k, v)| (k.to_owned(), v))),
            timeout: Duration::from_secs(5),
            clock: noe_core::clock::Clock::system(),
        };
        let cloud =
            CloudCredentials::new(config, noe_cloud::http_client(None)?, Metrics::new(None)?)?;
        Ok(Setup {
            registry,
            resolver,
            metrics,
            sources: Sources::none().with_cloud(Arc::new(cloud)),
            tokens,
            _fakes: (sts, ecr),
            _dirs: (containerd, identity),
        })
    }

    fn renewals(metrics: &prometheus::Registry, result: &str) -> f64 {
        metrics
            .gather()
            .iter()
            .filter(|family| family.name() == "noe_registry_credential_renewals_total")
            .flat_map(|family| family.get_metric())
            .filter(|m| {
                let has = |name: &str, value: &str| {
                    m.get_label()
                        .iter()
                        .any(|l| l.name() == name && l.value() == value)
                };
                has("provider", "ecr") && has("result", result)
            })
            .map(|m| m.get_counter().get_value())
            .sum()
    }

    /// The first ECR token is refused by the registry: concurrent lookups holding it share one
    /// renewal, then both images resolve with the renewed token.
    #[tokio::test]
    async fn a_refused_ecr_token_is_renewed_once_and_the_image_resolves() -> anyhow::Result<()> {
        let setup = setup(|n| if n == 0 { "stale-password" } else { RIGHT }).await?;
        let images = [format!("{ECR_HOST}/app:1"), format!("{ECR_HOST}/app:2")];
        let first = setup.sources.candidates(&images[0]).await;
        let second = setup.sources.candidates(&images[1]).await;
        assert_eq!(first.len(), 1, "{first:?}");
        assert!(first[0].renewal.is_some(), "a cloud token is renewable");
        assert_eq!(setup.tokens.load(Ordering::SeqCst), 1, "one token, cached");

        let (a, b) = tokio::join!(
            setup.resolver.resolve(&images[0], &first),
            setup.resolver.resolve(&images[1], &second),
        );
        for resolution in [a?, b?] {
            let platforms: Vec<String> = resolution
                .platforms
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(platforms, ["linux/arm64"]);
            assert!(
                resolution
                    .credential_source
                    .as_deref()
                    .is_some_and(|s| s.starts_with("cloud:ecr via IRSA")),
                "{resolution:?}"
            );
        }
        assert_eq!(
            setup.tokens.load(Ordering::SeqCst),
            2,
            "exactly one refresh"
        );
        assert_eq!(renewals(&setup.metrics, "renewed"), 2.0, "one per lookup");
        assert_eq!(renewals(&setup.metrics, "refused"), 0.0);
        // The renewed token is what the chain gives from now on.
        let now = setup.sources.candidates(&images[0]).await;
        assert_ne!(now[0].credential, first[0].credential);
        assert_eq!(setup.tokens.load(Ordering::SeqCst), 2);
        assert!(setup.registry.is_tls());
        Ok(())
    }

    /// Every ECR token is refused: one renewal, then a clear `ecr: ...` error, no loop.
    #[tokio::test]
    async fn an_ecr_token_refused_after_renewal_is_a_clear_error() -> anyhow::Result<()> {
        let setup = setup(|_| "always-wrong").await?;
        let image = format!("{ECR_HOST}/app:1");
        let candidates = setup.sources.candidates(&image).await;
        let error = match setup.resolver.resolve(&image, &candidates).await {
            Ok(resolution) => anyhow::bail!("resolved with a wrong token: {resolution:?}"),
            Err(error) => error,
        };
        let message = error.to_string();
        assert!(
            matches!(
                error,
                Error::Renewal {
                    provider: "ecr",
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(
            message.starts_with(&format!("ecr: registry login: {ECR_HOST} refused")),
            "{message}"
        );
        assert!(message.contains("HTTP 401"), "{message}");
        assert!(
            !message.contains("always-wrong"),
            "never the token: {message}"
        );
        assert_eq!(
            setup.tokens.load(Ordering::SeqCst),
            2,
            "one refresh, no loop"
        );
        assert_eq!(renewals(&setup.metrics, "refused"), 1.0);
        assert_eq!(renewals(&setup.metrics, "renewed"), 0.0);
        Ok(())
    }
}
