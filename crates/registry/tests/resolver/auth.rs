//! Basic (htpasswd) and Bearer (token server) auth against the real registry: credentials in
//! order, fall-through on refusal, anonymous last, identity and registry tokens, token caching.

use noe_credentials::{Credential, CredentialCandidate};
use noe_registry::cache::Scope;
use noe_registry::{Config, Error};
use noe_test_support::{
    push_image, push_standard_fixtures, Access, Flavor, Registry, TokenFields, TokenServer,
};

use super::support::{platforms, resolver, resolver_with, sorted};

fn basic(source: &str, username: &str, password: &str) -> CredentialCandidate {
    CredentialCandidate::new(
        source,
        Credential::Basic {
            username: username.into(),
            password: password.into(),
        },
    )
}

#[tokio::test]
async fn htpasswd_registry_with_credentials_in_order() {
    let registry = Registry::builder()
        .htpasswd("alice", "s3cret")
        .start()
        .await
        .unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let resolver = resolver(&[registry.host()]);
    let image = fixtures.oci_single.reference();

    // Anonymous: denied cleanly, one request.
    registry.reset_requests();
    let error = resolver.resolve(&image, &[]).await.unwrap_err();
    assert!(
        matches!(error, Error::Unauthorized { status: 401, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains(&image), "{error}");
    assert_eq!(registry.request_count(), 1);

    // A wrong credential falls through to the next candidate.
    let candidates = [
        basic("wrong", "alice", "nope"),
        basic("right", "alice", "s3cret"),
    ];
    registry.reset_requests();
    // Another credential scope (the anonymous failure above is cached for no scope).
    let resolution = resolver
        .resolve_in(&image, Some(Scope::of("pod")), &candidates)
        .await
        .unwrap();
    assert_eq!(resolution.credential_source.as_deref(), Some("right"));
    assert_eq!(
        platforms(&resolution),
        sorted(&fixtures.oci_single.platforms)
    );
    let summary: Vec<String> = registry.requests().iter().map(|r| r.summary()).collect();
    // wrong: GET with Basic (challenge cached) 401, not retried; right: manifest + config.
    assert_eq!(summary.len(), 3, "{summary:?}");

    // The challenge is cached per registry: another repository goes straight to Basic.
    registry.reset_requests();
    let resolution = resolver
        .resolve(&fixtures.oci_index.reference(), &candidates[1..])
        .await
        .unwrap();
    assert_eq!(
        platforms(&resolution),
        sorted(&fixtures.oci_index.platforms)
    );
    assert_eq!(registry.request_count(), 1);
}

/// A token server and a registry trusting it; `alice` may pull, anonymous may pull `public/*`.
async fn token_setup() -> (TokenServer, Registry) {
    let tokens = TokenServer::builder()
        .user("alice", "s3cret")
        .refresh_token("identity-token", "alice")
        .anonymous_pull("public/*")
        .start()
        .await
        .unwrap();
    let registry = Registry::builder()
        .token_auth(&tokens)
        .start()
        .await
        .unwrap();
    (tokens, registry)
}

fn token_resolver(tokens: &TokenServer, registry: &Registry) -> noe_registry::Resolver {
    // The realm is plain HTTP on loopback: list it as insecure so credentials may go there.
    resolver(&[registry.host(), tokens.addr().to_string()])
}

#[tokio::test]
async fn token_auth_with_basic_credentials_and_counts() {
    let (tokens, registry) = token_setup().await;
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let resolver = token_resolver(&tokens, &registry);
    let alice = [basic("alice", "alice", "s3cret")];

    registry.reset_requests();
    tokens.reset_requests();
    let resolution = resolver
        .resolve(&fixtures.oci_index.reference(), &alice)
        .await
        .unwrap();
    assert_eq!(
        platforms(&resolution),
        sorted(&fixtures.oci_index.platforms)
    );
    assert_eq!(resolution.credential_source.as_deref(), Some("alice"));
    let summary: Vec<String> = registry.requests().iter().map(|r| r.summary()).collect();
    println!(
        "token-auth index, first on this registry: {summary:?} + {} token",
        tokens.request_count()
    );
    assert_eq!(summary.len(), 2, "challenge probe + manifest: {summary:?}");
    let token_requests = tokens.requests();
    assert_eq!(token_requests.len(), 1);
    let request = &token_requests[0];
    assert_eq!(request.method, "GET");
    assert!(request.authorization);
    assert_eq!(request.param("service"), Some(tokens.service()));
    assert_eq!(
        request.param("scope"),
        Some("repository:fixtures/oci-index:pull")
    );

    // Challenge cached per registry: a new repository costs one token + one manifest.
    registry.reset_requests();
    tokens.reset_requests();
    resolver
        .resolve(&fixtures.docker_list.reference(), &alice)
        .await
        .unwrap();
    assert_eq!(registry.request_count(), 1);
    assert_eq!(tokens.request_count(), 1);

    // Token cached per (registry, repository, identity): another tag of the same repository
    // needs no token request.
    tokens.reset_requests();
    resolver
        .resolve(&fixtures.docker_list.digest_reference(), &alice)
        .await
        .unwrap();
    assert_eq!(tokens.request_count(), 0);
}

#[tokio::test]
async fn token_auth_anonymous_denied_and_wrong_credentials_fall_through() {
    let (tokens, registry) = token_setup().await;
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let resolver = token_resolver(&tokens, &registry);
    let image = fixtures.oci_index.reference();

    registry.reset_requests();
    let error = resolver.resolve(&image, &[]).await.unwrap_err();
    assert!(error.is_auth(), "{error:?}");
    assert!(error.to_string().contains(&image), "{error}");
    // Probe (401, challenge cached), anonymous token, retry (401).
    assert_eq!(registry.request_count(), 2);
    assert_eq!(tokens.request_count(), 1);

    // Challenge known: one fresh anonymous token, one refused GET, no pointless retry.
    registry.reset_requests();
    tokens.reset_requests();
    let other = fixtures.docker_list.reference();
    assert!(resolver.resolve(&other, &[]).await.unwrap_err().is_auth());
    assert_eq!(registry.request_count(), 1);
    assert_eq!(tokens.request_count(), 1);

    let candidates = [
        basic("wrong", "alice", "nope"),
        basic("right", "alice", "s3cret"),
    ];
    // Another credential scope (the anonymous failure above is cached for no scope).
    let resolution = resolver
        .resolve_in(&image, Some(Scope::of("pod")), &candidates)
        .await
        .unwrap();
    assert_eq!(resolution.credential_source.as_deref(), Some("right"));
    let statuses: Vec<u16> = tokens.requests().iter().map(|r| r.status).collect();
    assert!(statuses.contains(&401), "{statuses:?}");
}

#[tokio::test]
async fn identity_token_is_exchanged_with_a_refresh_token_post() {
    let (tokens, registry) = token_setup().await;
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let resolver = token_resolver(&tokens, &registry);
    let candidate =
        CredentialCandidate::new("id", Credential::IdentityToken("identity-token".into()));
    tokens.reset_requests();
    let resolution = resolver
        .resolve(&fixtures.oci_single.reference(), &[candidate])
        .await
        .unwrap();
    assert_eq!(resolution.credential_source.as_deref(), Some("id"));
    assert_eq!(
        platforms(&resolution),
        sorted(&fixtures.oci_single.platforms)
    );
    let requests = tokens.requests();
    assert_eq!(requests.len(), 1);
    let post = &requests[0];
    assert_eq!(post.method, "POST");
    assert_eq!(post.param("grant_type"), Some("refresh_token"));
    // The token server records the secret redacted; it answered 200, so it accepted it.
    assert!(post.param("refresh_token").is_some());
    assert_eq!(post.status, 200);
    assert_eq!(post.param("service"), Some(tokens.service()));
    assert_eq!(
        post.param("scope"),
        Some("repository:fixtures/oci-single:pull")
    );
    assert!(post.param("client_id").is_some());
}

#[tokio::test]
async fn registry_token_is_sent_as_bearer_directly() {
    let (tokens, registry) = token_setup().await;
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let resolver = token_resolver(&tokens, &registry);
    let token = tokens
        .issue_token(
            "alice",
            &[Access::repository("fixtures/oci-index", &["pull"])],
        )
        .unwrap();
    let candidate = CredentialCandidate::new("regtoken", Credential::RegistryToken(token));
    tokens.reset_requests();
    registry.reset_requests();
    let resolution = resolver
        .resolve(&fixtures.oci_index.reference(), &[candidate])
        .await
        .unwrap();
    assert_eq!(resolution.credential_source.as_deref(), Some("regtoken"));
    assert_eq!(tokens.request_count(), 0);
    assert_eq!(registry.request_count(), 1);
}

#[tokio::test]
async fn anonymous_pull_where_the_token_server_allows_it() {
    let (tokens, registry) = token_setup().await;
    let pusher = registry.pusher().unwrap();
    noe_test_support::push_image(
        &pusher,
        "public/app",
        Some("1"),
        "linux/arm64",
        noe_test_support::Flavor::Oci,
    )
    .await
    .unwrap();
    let resolver = token_resolver(&tokens, &registry);
    let resolution = resolver
        .resolve(&registry.reference("public/app", "1"), &[])
        .await
        .unwrap();
    assert_eq!(platforms(&resolution), ["linux/arm64"]);
    assert_eq!(resolution.credential_source, None);
    let request = &tokens.requests()[0];
    assert!(!request.authorization);
}

#[tokio::test]
async fn credentials_never_go_to_a_plain_http_realm() {
    let (tokens, registry) = token_setup().await;
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    // The registry is insecure but the realm's host is not listed.
    let resolver = resolver(&[registry.host()]);
    let error = resolver
        .resolve(
            &fixtures.oci_index.reference(),
            &[basic("alice", "alice", "s3cret")],
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("plain HTTP"), "{error}");
    assert!(tokens.requests().iter().all(|r| !r.authorization));
}

#[tokio::test]
async fn private_registries_are_never_tried_anonymously() {
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let resolver = resolver_with(Config {
        insecure_registries: vec![registry.host()],
        private_registries: vec![registry.host()],
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    });
    registry.reset_requests();
    let error = resolver
        .resolve(&fixtures.oci_index.reference(), &[])
        .await
        .unwrap_err();
    assert!(matches!(error, Error::NoCredentials { .. }), "{error:?}");
    assert_eq!(registry.request_count(), 0);
}

#[tokio::test]
async fn tokens_in_either_field_and_expiry_honoured() {
    for fields in [TokenFields::TokenOnly, TokenFields::AccessTokenOnly] {
        let tokens = TokenServer::builder()
            .user("alice", "s3cret")
            .fields(fields)
            .expires_in(300)
            .start()
            .await
            .unwrap();
        let registry = Registry::builder()
            .token_auth(&tokens)
            .start()
            .await
            .unwrap();
        let fixtures = push_standard_fixtures(&registry).await.unwrap();
        let clock = noe_core::clock::Clock::manual();
        let resolver = resolver_with(Config {
            insecure_registries: vec![registry.host(), tokens.addr().to_string()],
            clock: clock.clone(),
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        });
        let alice = [basic("alice", "alice", "s3cret")];
        let fixture = &fixtures.docker_single;
        tokens.reset_requests();
        let resolution = resolver
            .resolve(&fixture.reference(), &alice)
            .await
            .unwrap();
        assert_eq!(
            platforms(&resolution),
            sorted(&fixture.platforms),
            "{fields:?}"
        );
        assert_eq!(tokens.request_count(), 1, "{fields:?}");
        // The token is kept 290 s (300 less the margin): within it, the same repository reuses
        // it (the reference with tag and digest is another cache entry: it reaches the
        // registry) ...
        clock.advance(std::time::Duration::from_millis(289_999));
        let both = format!("{}@{}", fixture.reference(), fixture.digest);
        resolver.resolve(&both, &alice).await.unwrap();
        assert_eq!(tokens.request_count(), 1, "{fields:?}");
        // ... after it, the same repository needs a new one.
        clock.advance(std::time::Duration::from_millis(1));
        resolver
            .resolve(&fixture.digest_reference(), &alice)
            .await
            .unwrap();
        assert_eq!(tokens.request_count(), 2, "{fields:?}");
    }
}

/// One unauthenticated challenge probe per registry: concurrent first lookups (two tags of one
/// repository, and another repository) wait for the first one's 401 instead of each sending
/// theirs, then each asks for its token.
#[tokio::test]
async fn concurrent_first_lookups_share_one_challenge_probe() {
    let (tokens, registry) = token_setup().await;
    let pusher = registry.pusher().unwrap();
    for (repository, tag, platform) in [
        ("team/app", "a", "linux/amd64"),
        ("team/app", "b", "linux/arm64"),
        ("team/other", "c", "linux/s390x"),
    ] {
        push_image(&pusher, repository, Some(tag), platform, Flavor::Oci)
            .await
            .unwrap();
    }
    let resolver = token_resolver(&tokens, &registry);
    let alice = [basic("alice", "alice", "s3cret")];
    registry.reset_requests();
    tokens.reset_requests();
    let images = [
        registry.reference("team/app", "a"),
        registry.reference("team/app", "b"),
        registry.reference("team/other", "c"),
    ];
    let results =
        futures::future::join_all(images.iter().map(|image| resolver.resolve(image, &alice))).await;
    let archs: Vec<String> = results
        .into_iter()
        .map(|r| r.unwrap().platforms[0].architecture.clone())
        .collect();
    assert_eq!(archs, ["amd64", "arm64", "s390x"]);
    let summary: Vec<String> = registry.requests().iter().map(|r| r.summary()).collect();
    let probes = registry
        .requests()
        .iter()
        .filter(|r| r.status == 401)
        .count();
    assert_eq!(probes, 1, "{summary:?}");
    // One token per repository (the two tags of team/app share theirs).
    assert_eq!(tokens.request_count(), 2);
    // The probe, then a manifest and a config blob per image.
    assert_eq!(summary.len(), 1 + 3 + 3, "{summary:?}");
}
