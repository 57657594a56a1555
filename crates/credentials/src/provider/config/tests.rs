use super::*;

const YAML_V1: &str = r#"
apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: ecr-credential-provider
    matchImages:
      - "*.dkr.ecr.*.amazonaws.com"
      - "*.dkr.ecr.*.amazonaws.com.cn"
    defaultCacheDuration: "12h"
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    args: [get-credentials]
    env:
      - name: AWS_PROFILE
        value: hunter2-profile
"#;

#[test]
fn parses_yaml_v1() {
    let config = parse_provider_config(YAML_V1).unwrap();
    assert!(config.skipped.is_empty());
    let p = &config.providers[0];
    assert_eq!(p.name, "ecr-credential-provider");
    assert_eq!(p.match_images.len(), 2);
    assert_eq!(p.default_cache_duration, Duration::from_secs(12 * 3600));
    assert_eq!(p.api_version, "credentialprovider.kubelet.k8s.io/v1");
    assert_eq!(p.args, ["get-credentials"]);
    assert_eq!(
        p.env,
        [("AWS_PROFILE".to_owned(), "hunter2-profile".to_owned())]
    );
    assert!(!format!("{config:?}").contains("hunter2"));
}

#[test]
fn parses_json_and_each_config_version() {
    for (config_version, exec_version) in [
        ("v1", "v1"),
        ("v1beta1", "v1beta1"),
        ("v1alpha1", "v1alpha1"),
    ] {
        let json = format!(
            r#"{{"apiVersion":"kubelet.config.k8s.io/{config_version}","kind":"CredentialProviderConfig","providers":[{{"name":"p","matchImages":["gcr.io"],"defaultCacheDuration":"0s","apiVersion":"credentialprovider.kubelet.k8s.io/{exec_version}"}}]}}"#
        );
        let config = parse_provider_config(&json).unwrap();
        assert_eq!(config.providers.len(), 1, "{json}");
        assert_eq!(config.providers[0].default_cache_duration, Duration::ZERO);
    }
}

#[test]
fn rejects_bad_documents() {
    assert!(matches!(
        parse_provider_config("apiVersion: v1\nkind: Pod\n"),
        Err(ConfigError::ApiVersion { .. })
    ));
    assert!(matches!(
        parse_provider_config("apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n"),
        Err(ConfigError::Kind { .. })
    ));
    assert!(matches!(
        parse_provider_config("providers: [hunter2"),
        Err(ConfigError::Malformed { .. })
    ));
    let err = parse_provider_config("providers: [hunter2").unwrap_err();
    assert!(!format!("{err} {err:?}").contains("hunter2"));
    assert_eq!(
        parse_provider_config("  \n").unwrap(),
        CredentialProviderConfig::default()
    );
}

#[test]
fn skips_invalid_providers_and_keeps_the_rest() {
    let yaml = r#"
apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: ../evil
    matchImages: ["gcr.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: no-match
    matchImages: []
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: bad-duration
    matchImages: ["gcr.io"]
    defaultCacheDuration: forever
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: bad-version
    matchImages: ["gcr.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v2
  - name: sa-token
    matchImages: ["gcr.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    tokenAttributes:
      serviceAccountTokenAudience: my-audience
      requireServiceAccount: true
  - name: good
    matchImages: ["gcr.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: twice
    matchImages: ["a.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: twice
    matchImages: ["b.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: typo
    matchImage: ["gcr.io"]
    matchImages: ["gcr.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: with space
    matchImages: ["gcr.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: bad-pattern
    matchImages: ["gcr.io", "%zz%.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: no-duration
    matchImages: ["gcr.io"]
    apiVersion: credentialprovider.kubelet.k8s.io/v1
"#;
    let config = parse_provider_config(yaml).unwrap();
    assert_eq!(
        config
            .providers
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>(),
        ["good"]
    );
    assert!(matches!(
        config.skipped.as_slice(),
        [
            ProviderSkip::InvalidName { .. },
            ProviderSkip::NoMatchImages { .. },
            ProviderSkip::InvalidCacheDuration { .. },
            ProviderSkip::ApiVersion { .. },
            ProviderSkip::InvalidTokenAttributes { .. },
            ProviderSkip::DuplicateName { .. },
            ProviderSkip::DuplicateName { .. },
            ProviderSkip::UnknownField { .. },
            ProviderSkip::InvalidName { .. },
            ProviderSkip::InvalidMatchImage { .. },
            ProviderSkip::NoCacheDuration { .. },
        ]
    ));
}

#[test]
fn token_attributes_as_the_kubelet_validates_them() {
    let provider = |version: &str, attributes: &str| {
        format!(
                "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n  - name: p\n    matchImages: [\"*.azurecr.io\"]\n    defaultCacheDuration: 1m\n    apiVersion: credentialprovider.kubelet.k8s.io/{version}\n    tokenAttributes: {attributes}\n"
            )
    };
    let good = provider(
            "v1",
            "{serviceAccountTokenAudience: api://AzureADTokenExchange, requireServiceAccount: true, requiredServiceAccountAnnotationKeys: [azure.workload.identity/client-id], optionalServiceAccountAnnotationKeys: [azure.workload.identity/tenant-id], cacheType: ServiceAccount}",
        );
    let config = parse_provider_config(&good).unwrap();
    assert_eq!(
        config.providers[0].token_attributes,
        Some(TokenAttributes {
            audience: "api://AzureADTokenExchange".into(),
            require_service_account: true,
            required_annotation_keys: vec!["azure.workload.identity/client-id".into()],
            optional_annotation_keys: vec!["azure.workload.identity/tenant-id".into()],
            cache_type: TokenCacheType::ServiceAccount,
        })
    );
    let cases = [
            ("v1beta1", "{serviceAccountTokenAudience: a, requireServiceAccount: true, cacheType: Token}", "only credentialprovider.kubelet.k8s.io/v1"),
            ("v1", "{requireServiceAccount: true, cacheType: Token}", "serviceAccountTokenAudience is required"),
            ("v1", "{serviceAccountTokenAudience: a, cacheType: Token}", "requireServiceAccount is required"),
            ("v1", "{serviceAccountTokenAudience: a, requireServiceAccount: true}", "cacheType is required"),
            ("v1", "{serviceAccountTokenAudience: a, requireServiceAccount: true, cacheType: Pod}", "not Token or ServiceAccount"),
            ("v1", "{serviceAccountTokenAudience: a, requireServiceAccount: false, requiredServiceAccountAnnotationKeys: [k], cacheType: Token}", "must be true"),
            ("v1", "{serviceAccountTokenAudience: a, requireServiceAccount: true, requiredServiceAccountAnnotationKeys: [k], optionalServiceAccountAnnotationKeys: [k], cacheType: Token}", "listed twice"),
            ("v1", "{serviceAccountTokenAudience: a, requireServiceAccount: true, optionalServiceAccountAnnotationKeys: [\"bad key\"], cacheType: Token}", "not a valid annotation key"),
            ("v1", "{serviceAccountTokenAudience: a, requireServiceAccount: true, cacheType: Token, audience: b}", "unknown field"),
        ];
    for (version, attributes, reason) in cases {
        let config = parse_provider_config(&provider(version, attributes)).unwrap();
        assert!(config.providers.is_empty(), "{attributes}");
        let skipped = config.skipped[0].to_string();
        assert!(skipped.contains(reason), "{attributes}: {skipped}");
    }
    for (key, valid) in [
        ("k", true),
        ("eks.amazonaws.com/role-arn", true),
        ("a.b/c_d.e-f", true),
        ("/k", false),
        ("A.b/k", false),
        ("k/", false),
        ("-k", false),
        ("a/b/c", false),
    ] {
        assert_eq!(is_qualified_name(key), valid, "{key}");
    }
}

#[test]
fn match_image_validity() {
    for good in [
        "gcr.io",
        "*.gcr.io",
        "registry.io:8080/team",
        "*.dkr.ecr.*.amazonaws.com",
        "reg[0-9].io",
        "registry.io/%41pp",
        "127.0.0.1:5000",
    ] {
        assert!(valid_match_image(good), "{good}");
    }
    for bad in [
        "",
        "%invalid%",
        "gcr .io",
        "gcr.io:",
        "gcr.io:80a",
        "reg[.io",
        "a\u{7}.io",
        "/path-only",
    ] {
        assert!(!valid_match_image(bad), "{bad}");
    }
}

#[test]
fn unknown_top_level_fields_refuse_the_config() {
    let yaml =
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nprovider: []\n";
    assert!(matches!(
        parse_provider_config(yaml),
        Err(ConfigError::UnknownField { field }) if field == "provider"
    ));
}
