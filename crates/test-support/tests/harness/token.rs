use std::time::Duration;

use noe_test_support::media_types::ACCEPT_ALL;
use noe_test_support::{
    decode_claims, push_standard_fixtures, Access, Registry, TestCa, TokenFields, TokenServer,
};

/// Asks the realm for a pull token with optional Basic credentials.
async fn get_token(
    client: &reqwest::Client,
    tokens: &TokenServer,
    repository: &str,
    basic: Option<(&str, &str)>,
) -> reqwest::Response {
    let mut request = client.get(tokens.realm()).query(&[
        ("service", tokens.service()),
        ("scope", &format!("repository:{repository}:pull")),
    ]);
    if let Some((user, password)) = basic {
        request = request.basic_auth(user, Some(password));
    }
    request.send().await.unwrap()
}

async fn token_of(response: reqwest::Response) -> String {
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    body["token"].as_str().unwrap().to_owned()
}

async fn get_manifest(
    client: &reqwest::Client,
    registry: &Registry,
    repository: &str,
    token: Option<&str>,
) -> reqwest::Response {
    let mut request = client
        .get(format!(
            "{}/v2/{repository}/manifests/v1",
            registry.base_url()
        ))
        .header("accept", ACCEPT_ALL);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn registry_accepts_tokens_from_the_token_server() {
    let tokens = TokenServer::builder()
        .user("alice", "s3cret")
        .user_with_access("mallory", "pw", &["fixtures/oci-*"])
        .refresh_token("alice-identity-token", "alice")
        .anonymous_pull("fixtures/oci-single")
        .start()
        .await
        .unwrap();
    let registry = Registry::builder()
        .token_auth(&tokens)
        .start()
        .await
        .unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let client = registry.http_client().unwrap();
    let private = &fixtures.docker_single.repository;

    // Without a token: the challenge names our realm and service.
    let response = get_manifest(&client, &registry, private, None).await;
    assert_eq!(response.status(), 401);
    let challenge = response.headers()["www-authenticate"].to_str().unwrap();
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains(&format!("realm=\"{}\"", tokens.realm())),
        "{challenge}"
    );
    assert!(
        challenge.contains("service=\"noe-test-registry\""),
        "{challenge}"
    );
    assert!(
        challenge.contains(&format!("scope=\"repository:{private}:pull\"")),
        "{challenge}"
    );

    // Basic credentials at the realm give a token the registry accepts.
    let token =
        token_of(get_token(&client, &tokens, private, Some(("alice", "s3cret"))).await).await;
    let claims = decode_claims(&token).unwrap();
    assert_eq!(claims["sub"], "alice");
    assert_eq!(claims["access"][0]["actions"][0], "pull");
    let response = get_manifest(&client, &registry, private, Some(&token)).await;
    assert_eq!(response.status(), 200);

    // A wrong password is refused by the token server.
    let response = get_token(&client, &tokens, private, Some(("alice", "wrong"))).await;
    assert_eq!(response.status(), 401);

    // Anonymous: a token without access for a private repository (Docker Hub style) ...
    let token = token_of(get_token(&client, &tokens, private, None).await).await;
    let response = get_manifest(&client, &registry, private, Some(&token)).await;
    assert_eq!(response.status(), 401);
    // ... and a working one for a public repository.
    let public = &fixtures.oci_single.repository;
    let token = token_of(get_token(&client, &tokens, public, None).await).await;
    let response = get_manifest(&client, &registry, public, Some(&token)).await;
    assert_eq!(response.status(), 200);

    // Identity tokens: OAuth2 refresh-token POST.
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", "alice-identity-token"),
        ("service", "noe-test-registry"),
        ("scope", &format!("repository:{private}:pull")),
        ("client_id", "noe"),
    ];
    let response = client
        .post(tokens.realm())
        .form(&form)
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = response.json().await.unwrap();
    let token = body["access_token"].as_str().unwrap();
    assert_eq!(body["expires_in"], 300);
    let response = get_manifest(&client, &registry, private, Some(token)).await;
    assert_eq!(response.status(), 200);
    let mut bad_form = form;
    bad_form[1].1 = "unknown";
    let response = client
        .post(tokens.realm())
        .form(&bad_form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);

    // Password grant.
    let form = [
        ("grant_type", "password"),
        ("username", "alice"),
        ("password", "s3cret"),
        ("service", "noe-test-registry"),
        ("scope", &format!("repository:{private}:pull")),
        ("client_id", "noe"),
    ];
    let response = client
        .post(tokens.realm())
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    // A user restricted to other repositories gets a token without access.
    let token = token_of(get_token(&client, &tokens, private, Some(("mallory", "pw"))).await).await;
    assert_eq!(
        decode_claims(&token).unwrap()["access"][0]["actions"],
        serde_json::json!([])
    );
    let response = get_manifest(&client, &registry, private, Some(&token)).await;
    assert_eq!(response.status(), 401);

    // Every request is recorded, secrets redacted.
    let requests = tokens.requests();
    assert_eq!(requests.len(), 8, "{requests:#?}");
    assert_eq!(requests[7].user.as_deref(), Some("mallory"));
    assert!(requests[0].authorization);
    assert_eq!(requests[0].user.as_deref(), Some("alice"));
    assert_eq!(requests[0].param("service"), Some("noe-test-registry"));
    assert_eq!(requests[0].scopes, [format!("repository:{private}:pull")]);
    assert_eq!(requests[1].status, 401);
    assert_eq!(requests[1].user, None);
    assert!(!requests[2].authorization);
    assert_eq!(requests[4].param("grant_type"), Some("refresh_token"));
    assert_eq!(requests[4].param("refresh_token"), Some("<redacted>"));
    assert_eq!(requests[4].user.as_deref(), Some("alice"));
    assert_eq!(requests[5].status, 401);
    assert_eq!(requests[6].param("password"), Some("<redacted>"));
    tokens.reset_requests();
    assert_eq!(tokens.request_count(), 0);
}

#[tokio::test]
async fn token_auth_combines_with_tls() {
    let ca = TestCa::new().unwrap();
    let tokens = TokenServer::builder()
        .user("bob", "pw")
        .fields(TokenFields::AccessTokenOnly)
        .omit_expires_in()
        .tls(ca.loopback_cert().unwrap())
        .start()
        .await
        .unwrap();
    assert!(tokens.realm().starts_with("https://127.0.0.1:"));
    let registry = Registry::builder()
        .token_auth(&tokens)
        .tls(&ca)
        .start()
        .await
        .unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let client = registry.http_client().unwrap();
    let repository = &fixtures.oci_index.repository;
    let response = get_token(&client, &tokens, repository, Some(("bob", "pw"))).await;
    let body: serde_json::Value = response.json().await.unwrap();
    assert!(body.get("token").is_none());
    assert!(body.get("expires_in").is_none());
    let token = body["access_token"].as_str().unwrap();
    let response = get_manifest(&client, &registry, repository, Some(token)).await;
    assert_eq!(response.status(), 200);

    // A token minted directly works too.
    let token = tokens
        .issue_token("carol", &[Access::repository(repository, &["pull"])])
        .unwrap();
    let response = get_manifest(&client, &registry, repository, Some(&token)).await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn a_hanging_token_server_records_and_never_answers() {
    let tokens = TokenServer::builder().start().await.unwrap();
    tokens.set_hang(true);
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let error = get_token_err(&client, &tokens).await;
    assert!(error.is_timeout(), "{error:?}");
    assert_eq!(tokens.request_count(), 1);
    assert_eq!(tokens.requests()[0].status, 0);

    tokens.set_hang(false);
    let response = client
        .get(tokens.realm())
        .query(&[
            ("service", "noe-test-registry"),
            ("scope", "repository:a:pull"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

async fn get_token_err(client: &reqwest::Client, tokens: &TokenServer) -> reqwest::Error {
    client
        .get(tokens.realm())
        .query(&[("service", "noe-test-registry")])
        .send()
        .await
        .unwrap_err()
}

#[tokio::test]
async fn bad_token_requests_are_refused() {
    let tokens = TokenServer::builder().user("u", "p").start().await.unwrap();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let cases: Vec<(reqwest::RequestBuilder, u16)> = vec![
        (
            client.get(tokens.realm()).query(&[("service", "other")]),
            400,
        ),
        (client.get(tokens.realm()), 400),
        (
            client.post(tokens.realm()).form(&[
                ("grant_type", "client_credentials"),
                ("service", "noe-test-registry"),
            ]),
            400,
        ),
        (
            client.post(tokens.realm()).form(&[
                ("grant_type", "password"),
                ("username", "u"),
                ("password", "p"),
                ("service", "noe-test-registry"),
            ]),
            400, // no client_id
        ),
        (
            client.get(format!("http://{}/elsewhere", tokens.addr())),
            404,
        ),
        (
            client
                .get(tokens.realm())
                .query(&[("service", "noe-test-registry")])
                .header("authorization", "Bearer something"),
            401,
        ),
    ];
    for (i, (request, status)) in cases.into_iter().enumerate() {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), status, "case {i}");
    }
}
