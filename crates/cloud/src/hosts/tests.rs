use super::*;

fn ecr_target(region: &str, endpoint: EcrEndpoint) -> Option<Target> {
    Some(Target::Ecr {
        region: region.into(),
        endpoint,
    })
}

#[test]
fn hosts_match_their_provider_only() {
    use EcrEndpoint::*;
    let acr = |cloud| Some(Target::Acr { cloud });
    let cases: &[(&str, Option<Target>)] = &[
        // ECR, every documented host form.
        (
            "123456789012.dkr.ecr.us-east-1.amazonaws.com",
            ecr_target("us-east-1", Standard),
        ),
        (
            "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn",
            ecr_target("cn-north-1", China),
        ),
        (
            "123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com",
            ecr_target("us-gov-west-1", Fips),
        ),
        (
            "123456789012.dkr-ecr.eu-west-3.on.aws",
            ecr_target("eu-west-3", DualStack),
        ),
        (
            "123456789012.dkr-ecr-fips.us-east-2.on.aws",
            ecr_target("us-east-2", DualStackFips),
        ),
        // Not ECR private registries.
        ("public.ecr.aws", None),
        ("api.ecr.us-east-1.amazonaws.com", None),
        ("12345678901.dkr.ecr.us-east-1.amazonaws.com", None),
        ("1234567890123.dkr.ecr.us-east-1.amazonaws.com", None),
        ("abcdefghijkl.dkr.ecr.us-east-1.amazonaws.com", None),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com:443", None),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com.", None),
        ("123456789012.DKR.ecr.us-east-1.amazonaws.com", None),
        (
            "123456789012.dkr.ecr.us-east-1.amazonaws.com.evil.example",
            None,
        ),
        (
            "evil.example.123456789012.dkr.ecr.us-east-1.amazonaws.com",
            None,
        ),
        ("123456789012.dkr.ecr..amazonaws.com", None),
        ("123456789012.dkr.ecr.1us.amazonaws.com", None),
        ("123456789012.dkr.ecr.us_east.amazonaws.com", None),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.org", None),
        // Artifact Registry and GCR.
        ("gcr.io", Some(Target::Gcp)),
        ("eu.gcr.io", Some(Target::Gcp)),
        ("marketplace.gcr.io", Some(Target::Gcp)),
        ("us-docker.pkg.dev", Some(Target::Gcp)),
        ("europe-west1-docker.pkg.dev", Some(Target::Gcp)),
        ("a.b.gcr.io", None),
        ("-docker.pkg.dev", None),
        ("us-python.pkg.dev", None),
        ("pkg.dev", None),
        ("evilgcr.io", None),
        ("gcr.io.evil.example", None),
        ("gcr.io:5000", None),
        // ACR, public and sovereign clouds.
        ("myregistry.azurecr.io", acr(AzureCloud::Public)),
        ("contoso01.azurecr.cn", acr(AzureCloud::China)),
        ("contoso01.azurecr.us", acr(AzureCloud::UsGovernment)),
        ("abcd.azurecr.io", None),
        ("my-registry.azurecr.io", None),
        ("myregistry.azurecr.de", None),
        ("myregistry.eastus.data.azurecr.io", None),
        ("azurecr.io", None),
        ("myregistry.azurecr.io.evil.example", None),
        // Everything else.
        ("", None),
        ("docker.io", None),
        ("localhost:5000", None),
        ("127.0.0.1", None),
        ("[::1]:443", None),
    ];
    for (host, want) in cases {
        assert_eq!(&match_host(host), want, "{host}");
    }
}

#[test]
fn overlong_hosts_match_nothing() {
    let long = format!("{}.azurecr.io", "a".repeat(300));
    assert_eq!(match_host(&long), None);
    let label = format!("123456789012.dkr.ecr.{}.amazonaws.com", "a".repeat(64));
    assert_eq!(match_host(&label), None);
}

#[test]
fn api_endpoints_follow_the_registry_flavour() {
    let cases = [
        (
            EcrEndpoint::Standard,
            "https://api.ecr.us-east-1.amazonaws.com/",
        ),
        (
            EcrEndpoint::China,
            "https://api.ecr.us-east-1.amazonaws.com.cn/",
        ),
        (
            EcrEndpoint::Fips,
            "https://ecr-fips.us-east-1.amazonaws.com/",
        ),
        (EcrEndpoint::DualStack, "https://ecr.us-east-1.api.aws/"),
        (
            EcrEndpoint::DualStackFips,
            "https://ecr-fips.us-east-1.api.aws/",
        ),
    ];
    for (endpoint, want) in cases {
        assert_eq!(endpoint.api_url("us-east-1"), want);
    }
}

#[test]
fn provider_flag_values_round_trip() {
    for provider in Provider::ALL {
        assert_eq!(provider.as_str().parse::<Provider>(), Ok(provider));
    }
    assert!("aws".parse::<Provider>().is_err());
}
