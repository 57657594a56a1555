//! Each provider's token exchange against loopback fakes written from the services' references
//! (STS query/XML, ECR JSON 1.1 with SigV4, the GCE metadata server, Entra's token endpoint,
//! ACR's `/oauth2/exchange`), and an ECR credential used on a real CNCF registry reached under an
//! ECR host name.

#[path = "providers/hostile.rs"]
mod hostile;

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use noe_cloud::{CloudCredentials, Config, Env, Error, Metrics, Provider, Step};
use noe_core::clock::Clock;
use noe_test_support::{Registry, TestCa};

use noe_test_support::cloud::{Fake, Reply, Seen};

const ECR_HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
const ACR_HOST: &str = "myregistry.azurecr.io";
const WEB_IDENTITY_TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.projected-sa-token.sig";
const SESSION_TOKEN: &str = "FwoGZXIvYXdzEXAMPLEsessiontoken";

/// 2027-01-15T08:00:00Z, a round time so SigV4 dates are easy to read.
fn start() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn rfc3339(t: SystemTime) -> String {
    // Only whole seconds since the start are used; format via days arithmetic.
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn epoch(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// An STS that answers `AssumeRoleWithWebIdentity` as its reference shows, credentials valid
/// for an hour from the clock's time.
fn sts_handler(clock: Clock) -> impl Fn(&Seen) -> Reply + Send + Sync {
    move |request| {
        if request.method != "POST"
            || request.form("Action").as_deref() != Some("AssumeRoleWithWebIdentity")
        {
            return Reply::new(
                400,
                "<ErrorResponse><Error><Code>InvalidAction</Code></Error></ErrorResponse>",
            );
        }
        let expiration = rfc3339(clock.wall() + Duration::from_secs(3600));
        Reply::new(
            200,
            format!(
                r#"<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <SessionToken>{SESSION_TOKEN}</SessionToken>
      <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY</SecretAccessKey>
      <Expiration>{expiration}</Expiration>
      <AccessKeyId>ASIAIOSFODNN7EXAMPLE</AccessKeyId>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>"#
            ),
        )
        .header("content-type", "text/xml")
    }
}

/// An ECR API that checks the JSON 1.1 operation and answers `AWS:<password>` until the time
/// `expires` gives (from the clock's time).
fn ecr_handler(
    clock: Clock,
    password: &'static str,
    expires: impl Fn(SystemTime) -> f64 + Send + Sync + 'static,
) -> impl Fn(&Seen) -> Reply + Send + Sync {
    move |request| {
        let target = request.header("x-amz-target");
        let content_type = request.header("content-type");
        if target != Some(noe_cloud::ecr::TARGET)
            || content_type != Some(noe_cloud::ecr::CONTENT_TYPE)
        {
            return Reply::new(400, r#"{"__type":"UnknownOperationException"}"#);
        }
        if request.header("authorization").is_none() {
            return Reply::new(
                403,
                r#"{"__type":"MissingAuthenticationTokenException","message":"Missing Authentication Token"}"#,
            );
        }
        let token = base64::engine::general_purpose::STANDARD.encode(format!("AWS:{password}"));
        let expires_at = expires(clock.wall());
        Reply::new(
            200,
            format!(
                r#"{{"authorizationData":[{{"authorizationToken":"{token}","expiresAt":{expires_at},"proxyEndpoint":"https://{ECR_HOST}"}}]}}"#
            ),
        )
        .header("content-type", "application/x-amz-json-1.1")
    }
}

fn plain_client() -> anyhow::Result<reqwest::Client> {
    let ca = TestCa::new()?;
    Ok(reqwest::Client::builder()
        .use_preconfigured_tls(ca.client_config()?)
        .redirect(reqwest::redirect::Policy::none())
        .build()?)
}

struct Aws {
    sts: Fake,
    ecr: Fake,
    clock: Clock,
    _dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

/// STS and ECR fakes and the IRSA environment pointing at them.
async fn aws(expires: impl Fn(SystemTime) -> f64 + Send + Sync + 'static) -> anyhow::Result<Aws> {
    let clock = Clock::manual_at(start());
    let sts = Fake::start(None, sts_handler(clock.clone())).await?;
    let ecr = Fake::start(None, ecr_handler(clock.clone(), "ecr-password", expires)).await?;
    let dir = tempfile::tempdir()?;
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{WEB_IDENTITY_TOKEN}\n"))?;
    let env = vec![
        (
            "AWS_ROLE_ARN".into(),
            "arn:aws:iam::123456789012:role/noe".into(),
        ),
        (
            "AWS_WEB_IDENTITY_TOKEN_FILE".into(),
            token_file.display().to_string(),
        ),
        ("AWS_REGION".into(), "us-east-1".into()),
        ("AWS_ENDPOINT_URL_STS".into(), sts.url()),
        ("AWS_ENDPOINT_URL_ECR".into(), ecr.url()),
    ];
    Ok(Aws {
        sts,
        ecr,
        clock,
        _dir: dir,
        env,
    })
}

fn credentials(
    providers: &[Provider],
    env: &[(String, String)],
    clock: &Clock,
    client: reqwest::Client,
) -> anyhow::Result<CloudCredentials> {
    let config = Config {
        providers: providers.to_vec(),
        env: Env::from_pairs(env.iter().cloned()),
        timeout: Duration::from_secs(5),
        clock: clock.clone(),
    };
    Ok(CloudCredentials::new(config, client, Metrics::new(None)?)?)
}

async fn credential(
    cloud: &CloudCredentials,
    host: &str,
) -> anyhow::Result<noe_cloud::CloudCredential> {
    match cloud.credential_for(host).await {
        Some(result) => Ok(result?),
        None => anyhow::bail!("{host}: no provider"),
    }
}

#[tokio::test]
async fn ecr_irsa_signs_get_authorization_token_and_caches_until_expiry() -> anyhow::Result<()> {
    let aws = aws(|now| (epoch(now) + 3600) as f64).await?;
    let cloud = credentials(&[Provider::Ecr], &aws.env, &aws.clock, plain_client()?)?;

    let got = credential(&cloud, ECR_HOST).await?;
    assert_eq!(
        (got.username.as_str(), got.password()),
        ("AWS", "ecr-password")
    );
    assert_eq!(
        got.source(),
        "cloud:ecr via IRSA role arn:aws:iam::123456789012:role/noe, AssumeRoleWithWebIdentity, GetAuthorizationToken"
    );
    assert!(!format!("{got:?}").contains("ecr-password"));

    // STS got the projected token, unsigned, as the query protocol wants it.
    let sts = aws.sts.seen();
    assert_eq!(sts.len(), 1);
    assert_eq!(
        sts[0].form("WebIdentityToken").as_deref(),
        Some(WEB_IDENTITY_TOKEN)
    );
    assert_eq!(
        sts[0].form("RoleArn").as_deref(),
        Some("arn:aws:iam::123456789012:role/noe")
    );
    assert_eq!(sts[0].form("Version").as_deref(), Some("2011-06-15"));
    assert!(sts[0].form("RoleSessionName").is_some());
    assert!(sts[0].header("authorization").is_none());

    // ECR got a SigV4 request with the STS credentials, scoped to the registry's region.
    let ecr = aws.ecr.seen();
    assert_eq!(ecr.len(), 1);
    assert_eq!(ecr[0].method, "POST");
    assert_eq!(ecr[0].body, b"{}");
    assert_eq!(ecr[0].header("x-amz-security-token"), Some(SESSION_TOKEN));
    assert_eq!(ecr[0].header("x-amz-date"), Some("20270115T080000Z"));
    let authorization = ecr[0].header("authorization").unwrap_or_default();
    assert!(
        authorization.starts_with(
            "AWS4-HMAC-SHA256 Credential=ASIAIOSFODNN7EXAMPLE/20270115/us-east-1/ecr/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-amz-target, Signature="
        ),
        "{authorization}"
    );

    // Cached: no request until shortly before expiry.
    aws.clock.advance(Duration::from_secs(3600 - 301));
    assert_eq!(
        credential(&cloud, ECR_HOST).await?.password(),
        "ecr-password"
    );
    assert_eq!((aws.sts.count(), aws.ecr.count()), (1, 1));
    // Within the refresh margin: both the AWS credentials and the ECR token are renewed.
    aws.clock.advance(Duration::from_secs(2));
    assert_eq!(
        credential(&cloud, ECR_HOST).await?.password(),
        "ecr-password"
    );
    assert_eq!((aws.sts.count(), aws.ecr.count()), (2, 2));
    let last = aws
        .ecr
        .seen()
        .pop()
        .and_then(|s| s.header("x-amz-date").map(str::to_owned));
    assert_eq!(last.as_deref(), Some("20270115T085501Z"));
    assert_eq!(
        cloud
            .metrics()
            .requests(Provider::Ecr, Step::GetAuthorizationToken, true),
        2
    );
    Ok(())
}

#[tokio::test]
async fn sts_403_names_provider_and_step_and_is_not_retried_at_once() -> anyhow::Result<()> {
    let clock = Clock::manual_at(start());
    let sts = Fake::start(None, |_| {
        Reply::new(
            403,
            r#"<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message></Error><RequestId>x</RequestId></ErrorResponse>"#,
        )
    })
    .await?;
    let ecr = Fake::start(
        None,
        ecr_handler(clock.clone(), "never", |now| epoch(now) as f64 + 3600.0),
    )
    .await?;
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("token"), WEB_IDENTITY_TOKEN)?;
    let env = vec![
        (
            "AWS_ROLE_ARN".to_owned(),
            "arn:aws:iam::123456789012:role/noe".to_owned(),
        ),
        (
            "AWS_WEB_IDENTITY_TOKEN_FILE".to_owned(),
            dir.path().join("token").display().to_string(),
        ),
        ("AWS_ENDPOINT_URL_STS".to_owned(), sts.url()),
        ("AWS_ENDPOINT_URL_ECR".to_owned(), ecr.url()),
    ];
    let cloud = credentials(&[Provider::Ecr], &env, &clock, plain_client()?)?;
    let error = cloud.credential_for(ECR_HOST).await.and_then(Result::err);
    let message = error.as_ref().map(ToString::to_string).unwrap_or_default();
    assert_eq!(
        message,
        "ecr: AssumeRoleWithWebIdentity: HTTP 403: AccessDenied: Not authorized to perform sts:AssumeRoleWithWebIdentity"
    );
    assert!(matches!(
        error,
        Some(Error::Status {
            status: 403,
            step: Step::AssumeRoleWithWebIdentity,
            ..
        })
    ));
    assert!(!message.contains(WEB_IDENTITY_TOKEN));
    assert_eq!(ecr.count(), 0, "no ECR request without AWS credentials");
    // The failure is remembered briefly: a burst of lookups makes one STS request.
    assert!(cloud
        .credential_for(ECR_HOST)
        .await
        .is_some_and(|r| r.is_err()));
    assert_eq!(sts.count(), 1);
    clock.advance(noe_cloud::cache::FAILURE_TTL);
    assert!(cloud
        .credential_for(ECR_HOST)
        .await
        .is_some_and(|r| r.is_err()));
    assert_eq!(sts.count(), 2);
    assert_eq!(
        cloud
            .metrics()
            .requests(Provider::Ecr, Step::AssumeRoleWithWebIdentity, false),
        2
    );
    Ok(())
}

#[tokio::test]
async fn clock_skewed_expiry_is_used_briefly_and_absurd_expiry_is_capped() -> anyhow::Result<()> {
    // ECR's expiresAt already past by our clock (our clock runs ahead of AWS's).
    let aws = aws(|now| epoch(now) as f64 - 1000.0).await?;
    let cloud = credentials(&[Provider::Ecr], &aws.env, &aws.clock, plain_client()?)?;
    assert_eq!(
        credential(&cloud, ECR_HOST).await?.password(),
        "ecr-password"
    );
    // Not fetched again on every lookup ...
    aws.clock.advance(Duration::from_secs(20));
    credential(&cloud, ECR_HOST).await?;
    assert_eq!(aws.ecr.count(), 1);
    // ... but soon.
    aws.clock.advance(Duration::from_secs(11));
    credential(&cloud, ECR_HOST).await?;
    assert_eq!(aws.ecr.count(), 2);

    // An expiresAt ten years away is believed for at most twelve hours.
    let far = aws_far().await?;
    let cloud = credentials(&[Provider::Ecr], &far.env, &far.clock, plain_client()?)?;
    credential(&cloud, ECR_HOST).await?;
    far.clock.advance(Duration::from_secs(11 * 3600));
    credential(&cloud, ECR_HOST).await?;
    assert_eq!(far.ecr.count(), 1);
    far.clock.advance(Duration::from_secs(3600));
    credential(&cloud, ECR_HOST).await?;
    assert_eq!(far.ecr.count(), 2);
    Ok(())
}

async fn aws_far() -> anyhow::Result<Aws> {
    aws(|now| (epoch(now) + 10 * 365 * 86_400) as f64).await
}

#[tokio::test]
async fn ecr_pod_identity_sends_the_agent_token() -> anyhow::Result<()> {
    let clock = Clock::manual_at(start());
    let agent = Fake::start(None, {
        let clock = clock.clone();
        move |request| {
            if request.header("authorization") != Some("pod-identity-token") {
                return Reply::new(401, "");
            }
            let expiration = rfc3339(clock.wall() + Duration::from_secs(6 * 3600));
            Reply::new(
                200,
                format!(r#"{{"AccessKeyId":"ASIAPODIDENTITY","SecretAccessKey":"s","Token":"pod-session","AccountId":"123456789012","Expiration":"{expiration}"}}"#),
            )
        }
    })
    .await?;
    let ecr = Fake::start(
        None,
        ecr_handler(clock.clone(), "pod-password", |now| {
            epoch(now) as f64 + 43_200.0
        }),
    )
    .await?;
    let dir = tempfile::tempdir()?;
    std::fs::write(
        dir.path().join("eks-pod-identity-token"),
        "pod-identity-token",
    )?;
    let env = vec![
        (
            "AWS_CONTAINER_CREDENTIALS_FULL_URI".to_owned(),
            format!("{}/v1/credentials", agent.url()),
        ),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE".to_owned(),
            dir.path()
                .join("eks-pod-identity-token")
                .display()
                .to_string(),
        ),
        ("AWS_ENDPOINT_URL_ECR".to_owned(), ecr.url()),
    ];
    let cloud = credentials(&[Provider::Ecr], &env, &clock, plain_client()?)?;
    let host = "123456789012.dkr-ecr.eu-west-3.on.aws";
    assert_eq!(credential(&cloud, host).await?.password(), "pod-password");
    let signed = ecr
        .seen()
        .pop()
        .and_then(|s| s.header("authorization").map(str::to_owned))
        .unwrap_or_default();
    assert!(
        signed.contains("Credential=ASIAPODIDENTITY/20270115/eu-west-3/ecr/aws4_request"),
        "{signed}"
    );
    assert_eq!(
        agent.seen().first().map(|s| s.path.clone()).as_deref(),
        Some("/v1/credentials")
    );
    Ok(())
}

#[tokio::test]
async fn gcp_metadata_server_token() -> anyhow::Result<()> {
    let clock = Clock::manual_at(start());
    let metadata = Fake::start(None, |request| {
        if request.header("metadata-flavor") != Some("Google") {
            return Reply::new(403, "Missing Metadata-Flavor:Google header.");
        }
        if request.path != "/computeMetadata/v1/instance/service-accounts/default/token" {
            return Reply::new(404, "not found");
        }
        Reply::new(
            200,
            r#"{"access_token":"ya29.gke-token","expires_in":3599,"token_type":"Bearer"}"#,
        )
        .header("metadata-flavor", "Google")
        .header("content-type", "application/json")
    })
    .await?;
    let env = vec![("GCE_METADATA_HOST".to_owned(), metadata.addr().to_string())];
    let cloud = credentials(&[Provider::Gcp], &env, &clock, plain_client()?)?;
    for host in ["europe-west1-docker.pkg.dev", "gcr.io", "eu.gcr.io"] {
        let got = credential(&cloud, host).await?;
        assert_eq!(
            (got.username.as_str(), got.password()),
            ("oauth2accesstoken", "ya29.gke-token")
        );
    }
    assert_eq!(metadata.count(), 1, "one token for every Google registry");
    clock.advance(Duration::from_secs(3599 - 299));
    credential(&cloud, "gcr.io").await?;
    assert_eq!(metadata.count(), 2);
    Ok(())
}

#[tokio::test]
async fn gcp_answer_without_the_metadata_flavor_is_refused() -> anyhow::Result<()> {
    let clock = Clock::manual_at(start());
    let impostor = Fake::start(None, |_| {
        Reply::new(200, r#"{"access_token":"x","expires_in":3599}"#)
    })
    .await?;
    let env = vec![("GCE_METADATA_HOST".to_owned(), impostor.addr().to_string())];
    let cloud = credentials(&[Provider::Gcp], &env, &clock, plain_client()?)?;
    let error = cloud.credential_for("gcr.io").await.and_then(Result::err);
    assert!(
        matches!(
            &error,
            Some(Error::Malformed {
                provider: Provider::Gcp,
                step: Step::MetadataToken,
                ..
            })
        ),
        "{error:?}"
    );
    Ok(())
}

struct Azure {
    entra: Fake,
    exchange: Fake,
    clock: Clock,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

const TENANT: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";
const CLIENT_ID: &str = "11111111-2222-3333-4444-555555555555";
const FEDERATED_TOKEN: &str = "eyJ.azure-federated-sa-token.sig";

/// Entra's token endpoint (plain HTTP through `AZURE_AUTHORITY_HOST`) and ACR's exchange over
/// TLS under the registry names, pinned to loopback.
async fn azure(registries: &[&str]) -> anyhow::Result<Azure> {
    let clock = Clock::manual_at(start());
    let entra = Fake::start(None, |request| {
        let expected = [
            ("grant_type", "client_credentials"),
            ("client_id", CLIENT_ID),
            ("scope", "https://management.azure.com/.default"),
            ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
            ("client_assertion", FEDERATED_TOKEN),
        ];
        if request.path != format!("/{TENANT}/oauth2/v2.0/token")
            || expected.iter().any(|(k, v)| request.form(k).as_deref() != Some(v))
        {
            return Reply::new(400, r#"{"error":"invalid_request","error_description":"AADSTS900144"}"#);
        }
        Reply::new(200, r#"{"token_type":"Bearer","expires_in":3599,"ext_expires_in":3599,"access_token":"entra-access-token"}"#)
    })
    .await?;
    let ca = TestCa::new()?;
    let cert = ca.server_cert(registries)?;
    let exchange = Fake::start(Some(cert.server_config()?), |request| {
        let service = request.form("service").unwrap_or_default();
        let host = request.header("host").unwrap_or_default().to_owned();
        if request.path != "/oauth2/exchange"
            || request.form("grant_type").as_deref() != Some("access_token")
            || request.form("access_token").as_deref() != Some("entra-access-token")
            || request.form("tenant").as_deref() != Some(TENANT)
            || service != host
        {
            return Reply::new(400, r#"{"errors":[{"code":"UNAUTHORIZED"}]}"#);
        }
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let claims = format!(
            r#"{{"exp":{},"aud":"{service}"}}"#,
            1_800_000_000 + 3 * 3600
        );
        Reply::new(
            200,
            format!(
                r#"{{"refresh_token":"{}.{}.sig"}}"#,
                b64(r#"{"alg":"RS256"}"#),
                b64(&claims)
            ),
        )
    })
    .await?;
    let mut builder = reqwest::Client::builder()
        .use_preconfigured_tls(ca.client_config()?)
        .redirect(reqwest::redirect::Policy::none());
    for name in registries {
        builder = builder.resolve(name, exchange.addr());
    }
    let dir = tempfile::tempdir()?;
    let env = hostile::azure_env(&entra, &dir)?;
    Ok(Azure {
        entra,
        exchange,
        clock,
        client: builder.build()?,
        _dir: dir,
        env,
    })
}

#[tokio::test]
async fn acr_workload_identity_exchanges_an_entra_token_per_registry() -> anyhow::Result<()> {
    let other = "otherregistry.azurecr.io";
    let azure = azure(&[ACR_HOST, other]).await?;
    let cloud = credentials(
        &[Provider::Acr],
        &azure.env,
        &azure.clock,
        azure.client.clone(),
    )?;
    let got = credential(&cloud, ACR_HOST).await?;
    assert_eq!(got.username, "00000000-0000-0000-0000-000000000000");
    assert!(got.password().ends_with(".sig"));
    credential(&cloud, other).await?;
    credential(&cloud, ACR_HOST).await?;
    assert_eq!(
        azure.entra.count(),
        1,
        "one Entra token for both registries"
    );
    let services: Vec<String> = azure
        .exchange
        .seen()
        .iter()
        .filter_map(|s| s.form("service"))
        .collect();
    assert_eq!(
        services,
        [ACR_HOST, other],
        "one exchange per registry, cached"
    );
    // The refresh token's own expiry (3 hours) decides its refresh; the Entra token (1 hour)
    // is fetched again only when an exchange needs it.
    azure.clock.advance(Duration::from_secs(3 * 3600 - 299));
    credential(&cloud, ACR_HOST).await?;
    assert_eq!((azure.entra.count(), azure.exchange.count()), (2, 3));
    Ok(())
}

#[tokio::test]
async fn a_credential_never_goes_to_another_providers_host() -> anyhow::Result<()> {
    let aws = aws(|now| epoch(now) as f64 + 3600.0).await?;
    let azure = azure(&[ACR_HOST]).await?;
    let metadata = Fake::start(None, |_| {
        Reply::new(200, r#"{"access_token":"ya29","expires_in":3599}"#)
            .header("metadata-flavor", "Google")
    })
    .await?;
    let mut env = aws.env.clone();
    env.extend(azure.env.iter().cloned());
    env.push(("GCE_METADATA_HOST".to_owned(), metadata.addr().to_string()));

    // Only ECR enabled: Google and Azure hosts get nothing, and nothing is asked.
    let ecr_only = credentials(&[Provider::Ecr], &env, &aws.clock, azure.client.clone())?;
    for host in [
        "gcr.io",
        ACR_HOST,
        "docker.io",
        "ghcr.io",
        "public.ecr.aws",
        "123456789012.dkr.ecr.us-east-1.amazonaws.com.evil.example",
    ] {
        assert!(ecr_only.credential_for(host).await.is_none(), "{host}");
        assert_eq!(ecr_only.provider_for(host), None, "{host}");
    }
    assert_eq!(
        aws.sts.count()
            + aws.ecr.count()
            + metadata.count()
            + azure.entra.count()
            + azure.exchange.count(),
        0
    );

    // All enabled: each host gets its own provider's credential.
    let all = credentials(
        &[Provider::Ecr, Provider::Gcp, Provider::Acr],
        &env,
        &aws.clock,
        azure.client.clone(),
    )?;
    let cases = [
        (ECR_HOST, Provider::Ecr, "AWS"),
        ("gcr.io", Provider::Gcp, "oauth2accesstoken"),
        (
            ACR_HOST,
            Provider::Acr,
            "00000000-0000-0000-0000-000000000000",
        ),
    ];
    for (host, provider, username) in cases {
        let got = credential(&all, host).await?;
        assert_eq!(
            (got.provider, got.username.as_str()),
            (provider, username),
            "{host}"
        );
    }
    for host in [
        "docker.io",
        "quay.io",
        "evil.azurecr.io.example",
        "gcr.io.evil.example",
        "localhost:5000",
    ] {
        assert!(all.credential_for(host).await.is_none(), "{host}");
    }
    // The exchange (which carries the Entra token) went to the ACR host only.
    let hosts: Vec<String> = azure
        .exchange
        .seen()
        .iter()
        .filter_map(|s| s.header("host").map(str::to_owned))
        .collect();
    assert_eq!(hosts, [ACR_HOST]);
    Ok(())
}

#[tokio::test]
async fn enabled_provider_without_identity_is_a_configuration_error() -> anyhow::Result<()> {
    let clock = Clock::manual_at(start());
    let error = credentials(&[Provider::Acr], &[], &clock, plain_client()?).err();
    let message = error.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        message.starts_with("acr: not configured: no Azure workload identity"),
        "{message}"
    );
    let error = credentials(&[Provider::Ecr], &[], &clock, plain_client()?).err();
    assert!(error.is_some_and(|e| e.to_string().starts_with("ecr: not configured")));
    Ok(())
}

/// The ECR credential works on a real CNCF registry (TLS with the test CA, htpasswd with the
/// ECR user and password) reached under an ECR host name pinned to its loopback address.
#[tokio::test]
async fn ecr_credential_pulls_from_a_real_registry_under_an_ecr_host_name() -> anyhow::Result<()> {
    let ca = TestCa::new()?;
    let registry = Registry::builder()
        .tls(&ca)
        .tls_name(ECR_HOST)
        .htpasswd("AWS", "ecr-password")
        .start()
        .await?;
    let aws = aws(|now| epoch(now) as f64 + 43_200.0).await?;
    let cloud = credentials(&[Provider::Ecr], &aws.env, &aws.clock, plain_client()?)?;
    let got = credential(&cloud, ECR_HOST).await?;

    let addr: SocketAddr = registry.addr();
    let client = reqwest::Client::builder()
        .use_preconfigured_tls(ca.client_config()?)
        .resolve(ECR_HOST, addr)
        .build()?;
    let url = format!("https://{ECR_HOST}:{}/v2/", addr.port());
    let anonymous = client.get(&url).send().await?;
    assert_eq!(anonymous.status(), 401);
    let authenticated = client
        .get(&url)
        .basic_auth(&got.username, Some(got.password()))
        .send()
        .await?;
    assert_eq!(authenticated.status(), 200);
    Ok(())
}
