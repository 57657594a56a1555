//! Hostile answers from the identity services not covered above: Entra ID's token endpoint,
//! ACR's `/oauth2/exchange` and EKS Pod Identity's container credentials endpoint. Each answer
//! (100 MB, endless, dripped, a redirect, XML for JSON, a DTD, absurd or past expiries, huge or
//! mistyped fields, an error that echoes what it was sent) must end in a clear error naming the
//! provider and the step, within the configured timeout, with a bounded message that carries
//! none of the secrets sent; a redirect is never followed.

use std::time::{Duration, Instant};

use noe_cloud::{CloudCredentials, Config, Env, Metrics, Provider};
use noe_core::clock::Clock;
use noe_test_support::TestCa;

use super::{ecr_handler, epoch, start, ACR_HOST, CLIENT_ID, FEDERATED_TOKEN, TENANT};
use noe_test_support::cloud::{Fake, Reply, Stream};

/// The configured timeout of each request in these tests.
const TIMEOUT: Duration = Duration::from_secs(2);
/// What a hostile service may cost, whatever it does: the timeout and a margin.
const BOUND: Duration = Duration::from_secs(8);
/// The longest error message accepted (bounded excerpts).
const MAX_MESSAGE: usize = 600;
const POD_IDENTITY_TOKEN: &str = "pod-identity-agent-token-SECRET";
const ENTRA_ACCESS_TOKEN: &str = "entra-access-token-SECRET";

/// The hostile answers every service gets, and what the error must say (a fragment).
fn common_cases(other: &Fake) -> Vec<(&'static str, Reply, &'static str)> {
    let dtd = r#"<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd"><!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><x>&e;&b;</x>"#;
    vec![
        (
            "100 MB declared",
            Reply::streaming(200, "{", Stream::Endless)
                .header("content-length", (100u64 << 20).to_string())
                .header("content-type", "application/json"),
            "larger than 64 KiB",
        ),
        (
            "endless chunked",
            Reply::streaming(200, "{", Stream::Endless).header("content-type", "application/json"),
            "larger than 64 KiB",
        ),
        (
            "a drip",
            Reply::streaming(200, "{", Stream::Drip(Duration::from_millis(200)))
                .header("content-type", "application/json"),
            "no answer within",
        ),
        (
            "a redirect",
            Reply::new(307, "").header("location", format!("{}/steal", other.url())),
            "307",
        ),
        (
            "XML for JSON",
            Reply::new(
                200,
                "<Credentials><AccessKeyId>x</AccessKeyId></Credentials>",
            )
            .header("content-type", "text/xml"),
            "malformed",
        ),
        (
            "a DTD",
            Reply::new(200, dtd).header("content-type", "application/xml"),
            "malformed",
        ),
        (
            "not UTF-8",
            Reply::new(200, vec![0xff, 0xfe, 0, 0x7b, 0x22]),
            "malformed",
        ),
        ("empty", Reply::new(200, ""), "malformed"),
        ("JSON array", Reply::new(200, "[]"), "malformed"),
        (
            "a 500 with a page of HTML",
            Reply::new(500, format!("<html>{}</html>", "x".repeat(60_000))),
            "500",
        ),
    ]
}

/// A fake service that gives `reply` to the first request and a 500 to any other.
async fn answering_once(tls: Option<rustls::ServerConfig>, reply: Reply) -> anyhow::Result<Fake> {
    let reply = std::sync::Mutex::new(Some(reply));
    Fake::start(tls, move |_| {
        reply
            .lock()
            .ok()
            .and_then(|mut r| r.take())
            .unwrap_or_else(|| Reply::new(500, "asked twice"))
    })
    .await
}

/// Runs `fetch` within [`BOUND`]; its error as text, checked for bounds and secrets.
async fn failed<T: std::fmt::Debug>(
    case: &str,
    fetch: impl std::future::Future<Output = Option<Result<T, noe_cloud::Error>>>,
    provider: &str,
    secrets: &[&str],
) -> String {
    let started = Instant::now();
    let outcome = tokio::time::timeout(BOUND, fetch)
        .await
        .unwrap_or_else(|_| panic!("{case}: no end within {BOUND:?}"));
    let error = match outcome {
        Some(Err(error)) => error.to_string(),
        other => panic!("{case}: not an error: {other:?}"),
    };
    assert!(started.elapsed() < BOUND, "{case}: {:?}", started.elapsed());
    assert!(
        error.starts_with(&format!("{provider}: ")),
        "{case}: {error}"
    );
    assert!(
        error.len() <= MAX_MESSAGE,
        "{case}: {} bytes: {error}",
        error.len()
    );
    assert!(
        !error.chars().any(char::is_control),
        "{case}: control characters: {error:?}"
    );
    for secret in secrets {
        assert!(!error.contains(secret), "{case}: leaks {secret}: {error}");
    }
    error
}

/// The Azure workload identity environment with Entra at `entra`, its token file in `dir`.
pub(crate) fn azure_env(
    entra: &Fake,
    dir: &tempfile::TempDir,
) -> anyhow::Result<Vec<(String, String)>> {
    std::fs::write(dir.path().join("azure-identity-token"), FEDERATED_TOKEN)?;
    Ok(vec![
        ("AZURE_CLIENT_ID".to_owned(), CLIENT_ID.to_owned()),
        ("AZURE_TENANT_ID".to_owned(), TENANT.to_owned()),
        (
            "AZURE_FEDERATED_TOKEN_FILE".to_owned(),
            dir.path()
                .join("azure-identity-token")
                .display()
                .to_string(),
        ),
        (
            "AZURE_AUTHORITY_HOST".to_owned(),
            format!("{}/", entra.url()),
        ),
    ])
}

/// `provider` on `env`, each request bounded by [`TIMEOUT`].
fn cloud(
    provider: Provider,
    env: &[(String, String)],
    clock: &Clock,
    client: reqwest::Client,
) -> anyhow::Result<CloudCredentials> {
    let config = Config {
        providers: vec![provider],
        env: Env::from_pairs(env.iter().cloned()),
        timeout: TIMEOUT,
        clock: clock.clone(),
    };
    Ok(CloudCredentials::new(config, client, Metrics::new(None)?)?)
}

/// Entra ID's token endpoint answering each hostile answer, through the production client
/// (`noe_cloud::http_client`: no redirect followed).
#[tokio::test]
async fn hostile_entra_answers_end_in_bounded_errors() -> anyhow::Result<()> {
    let other = Fake::start(None, |_| Reply::new(200, r#"{"access_token":"stolen"}"#)).await?;
    let echo = format!(
        r#"{{"error":"invalid_client","error_description":"AADSTS700016: assertion {FEDERATED_TOKEN} not accepted"}}"#
    );
    let mut cases = common_cases(&other);
    cases.extend([
        (
            "an error echoing the assertion",
            Reply::new(400, echo),
            "invalid_client",
        ),
        (
            "expires_in quoting the assertion",
            Reply::new(
                200,
                format!(r#"{{"access_token":"t","expires_in":"{FEDERATED_TOKEN}"}}"#),
            ),
            "malformed",
        ),
        (
            "expires_in as text",
            Reply::new(200, r#"{"access_token":"t","expires_in":"3599"}"#),
            "malformed",
        ),
        (
            "expires_in negative",
            Reply::new(200, r#"{"access_token":"t","expires_in":-1}"#),
            "malformed",
        ),
        (
            "expires_in beyond u64",
            Reply::new(
                200,
                r#"{"access_token":"t","expires_in":18446744073709551616}"#,
            ),
            "malformed",
        ),
        (
            "expires_in beyond f64",
            Reply::new(200, r#"{"access_token":"t","expires_in":1e400}"#),
            "malformed",
        ),
        (
            "a 40 KiB token",
            Reply::new(
                200,
                format!(
                    r#"{{"access_token":"{}","expires_in":3599}}"#,
                    "a".repeat(40 << 10)
                ),
            ),
            "too long",
        ),
        (
            "a token that is a number",
            Reply::new(200, r#"{"access_token":42}"#),
            "malformed",
        ),
    ]);
    let client = noe_cloud::http_client(None)?;
    for (case, reply, says) in cases {
        let entra = answering_once(None, reply).await?;
        let dir = tempfile::tempdir()?;
        let env = azure_env(&entra, &dir)?;
        let clock = Clock::manual_at(start());
        let cloud = cloud(Provider::Acr, &env, &clock, client.clone())?;
        let error = failed(
            case,
            cloud.credential_for(ACR_HOST),
            "acr",
            &[FEDERATED_TOKEN],
        )
        .await;
        assert!(error.contains("Entra"), "{case}: {error}");
        assert!(error.contains(says), "{case}: {error}");
        assert_eq!(entra.count(), 1, "{case}: asked once");
    }
    assert_eq!(other.count(), 0, "a redirect is never followed");
    Ok(())
}

/// ACR's `/oauth2/exchange` (TLS under the registry's name) answering each hostile answer, after
/// a good Entra token: the Entra token it was sent never shows in the error.
#[tokio::test]
async fn hostile_acr_exchange_answers_end_in_bounded_errors() -> anyhow::Result<()> {
    let other = Fake::start(None, |_| Reply::new(200, r#"{"refresh_token":"stolen"}"#)).await?;
    let echo = format!(
        r#"{{"errors":[{{"code":"UNAUTHORIZED","message":"token {ENTRA_ACCESS_TOKEN} refused"}}]}}"#
    );
    let mut cases = common_cases(&other);
    cases.extend([
        (
            "an error echoing the Entra token",
            Reply::new(401, echo),
            "401",
        ),
        (
            "a 40 KiB refresh token",
            Reply::new(
                200,
                format!(r#"{{"refresh_token":"{}"}}"#, "r".repeat(40 << 10)),
            ),
            "too long",
        ),
        (
            "an empty refresh token",
            Reply::new(200, r#"{"refresh_token":""}"#),
            "empty",
        ),
    ]);
    let entra = Fake::start(None, |_| {
        Reply::new(
            200,
            format!(r#"{{"token_type":"Bearer","expires_in":3599,"access_token":"{ENTRA_ACCESS_TOKEN}"}}"#),
        )
    })
    .await?;
    let ca = TestCa::new()?;
    for (case, reply, says) in cases {
        let exchange =
            answering_once(Some(ca.server_cert(&[ACR_HOST])?.server_config()?), reply).await?;
        // The production client's settings (no redirect), with the test CA and the registry's
        // name pinned to the fake.
        let client = reqwest::Client::builder()
            .use_preconfigured_tls(ca.client_config()?)
            .redirect(reqwest::redirect::Policy::none())
            .resolve(ACR_HOST, exchange.addr())
            .build()?;
        let dir = tempfile::tempdir()?;
        let env = azure_env(&entra, &dir)?;
        let clock = Clock::manual_at(start());
        let cloud = cloud(Provider::Acr, &env, &clock, client)?;
        let error = failed(
            case,
            cloud.credential_for(ACR_HOST),
            "acr",
            &[FEDERATED_TOKEN, ENTRA_ACCESS_TOKEN],
        )
        .await;
        assert!(error.contains("exchange"), "{case}: {error}");
        assert!(error.contains(says), "{case}: {error}");
        assert_eq!(exchange.count(), 1, "{case}: asked once");
    }
    assert_eq!(other.count(), 0, "a redirect is never followed");
    Ok(())
}

/// The EKS Pod Identity environment with the agent at `agent`, ECR at `ecr`.
fn pod_identity_env(
    agent: &Fake,
    ecr: &Fake,
    dir: &tempfile::TempDir,
) -> anyhow::Result<Vec<(String, String)>> {
    let token = dir.path().join("eks-pod-identity-token");
    std::fs::write(&token, POD_IDENTITY_TOKEN)?;
    Ok(vec![
        (
            "AWS_CONTAINER_CREDENTIALS_FULL_URI".to_owned(),
            format!("{}/v1/credentials", agent.url()),
        ),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE".to_owned(),
            token.display().to_string(),
        ),
        ("AWS_ENDPOINT_URL_ECR".to_owned(), ecr.url()),
    ])
}

const POD_IDENTITY_HOST: &str = "123456789012.dkr.ecr.us-west-2.amazonaws.com";

fn pod_credentials(expiration: &str) -> String {
    format!(
        r#"{{"AccessKeyId":"ASIAPODIDENTITY","SecretAccessKey":"pod-secret-SECRET","Token":"pod-session-SECRET","AccountId":"123456789012","Expiration":"{expiration}"}}"#
    )
}

/// The Pod Identity agent answering each hostile answer, through the production client.
#[tokio::test]
async fn hostile_pod_identity_answers_end_in_bounded_errors() -> anyhow::Result<()> {
    let other = Fake::start(None, |_| {
        Reply::new(200, pod_credentials("2099-01-01T00:00:00Z"))
    })
    .await?;
    let ecr = Fake::start(None, |_| Reply::new(500, "ECR must not be asked")).await?;
    let echo = format!(r#"{{"message":"token {POD_IDENTITY_TOKEN} is not valid"}}"#);
    let mut cases = common_cases(&other);
    cases.extend([
        ("an error echoing the agent token", Reply::new(401, echo), "401"),
        (
            "Expiration with an offset",
            Reply::new(200, pod_credentials("2027-01-15T08:00:00+05:00")),
            "malformed",
        ),
        (
            "Expiration not a time",
            Reply::new(200, pod_credentials("NaN")),
            "malformed",
        ),
        (
            "Expiration past year 9999",
            Reply::new(200, pod_credentials("99999-01-01T00:00:00Z")),
            "malformed",
        ),
        (
            "no secret",
            Reply::new(200, r#"{"AccessKeyId":"ASIA","Token":"t","Expiration":"2099-01-01T00:00:00Z"}"#),
            "malformed",
        ),
        (
            "a 60 KiB AccessKeyId",
            Reply::new(200, format!(
                r#"{{"AccessKeyId":"{}","SecretAccessKey":"s","Token":"t","Expiration":"2099-01-01T00:00:00Z"}}"#,
                "A".repeat(60 << 10)
            )),
            "malformed",
        ),
    ]);
    let client = noe_cloud::http_client(None)?;
    for (case, reply, says) in cases {
        let agent = answering_once(None, reply).await?;
        let dir = tempfile::tempdir()?;
        let env = pod_identity_env(&agent, &ecr, &dir)?;
        let clock = Clock::manual_at(start());
        let cloud = cloud(Provider::Ecr, &env, &clock, client.clone())?;
        let error = failed(
            case,
            cloud.credential_for(POD_IDENTITY_HOST),
            "ecr",
            &[
                POD_IDENTITY_TOKEN,
                "pod-secret-SECRET",
                "pod-session-SECRET",
            ],
        )
        .await;
        assert!(error.contains("Pod Identity"), "{case}: {error}");
        assert!(error.contains(says), "{case}: {error}");
        assert_eq!(agent.count(), 1, "{case}: asked once");
    }
    assert_eq!(
        other.count() + ecr.count(),
        0,
        "a redirect is never followed, ECR never asked"
    );
    Ok(())
}

/// Expirations from the agent that are valid but absurd: one in 2001 (our clock ahead of
/// AWS's) is used for a minute, not fetched again on every lookup; one in 9999 is not fetched
/// again when the next ECR token is. ECR's tokens last a minute here, so each lookup past it
/// asks for the agent's credentials again.
#[tokio::test]
async fn pod_identity_expirations_past_and_far_are_bounded() -> anyhow::Result<()> {
    for (expiration, agent_calls) in [("2001-01-01T00:00:00Z", 2), ("9999-12-31T23:59:59Z", 1)] {
        let agent =
            Fake::start(None, move |_| Reply::new(200, pod_credentials(expiration))).await?;
        let clock = Clock::manual_at(start());
        let ecr = Fake::start(
            None,
            ecr_handler(clock.clone(), "pod-password", |now| {
                epoch(now) as f64 + 60.0
            }),
        )
        .await?;
        let dir = tempfile::tempdir()?;
        let env = pod_identity_env(&agent, &ecr, &dir)?;
        let cloud = cloud(Provider::Ecr, &env, &clock, noe_cloud::http_client(None)?)?;
        for _ in 0..20 {
            let got = cloud.credential_for(POD_IDENTITY_HOST).await;
            assert!(matches!(got, Some(Ok(_))), "{expiration}: {got:?}");
        }
        assert_eq!(
            (agent.count(), ecr.count()),
            (1, 1),
            "{expiration}: asked once for 20 lookups"
        );
        clock.advance(Duration::from_secs(61));
        let got = cloud.credential_for(POD_IDENTITY_HOST).await;
        assert!(matches!(got, Some(Ok(_))), "{expiration}: {got:?}");
        assert_eq!(
            (agent.count(), ecr.count()),
            (agent_calls, 2),
            "{expiration}"
        );
    }
    Ok(())
}
