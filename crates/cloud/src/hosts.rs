//! Which registry host belongs to which cloud provider: a pure function, table-tested.
//!
//! A provider's credential goes only to the hosts matched here for that provider, so the patterns
//! are strict: whole DNS labels, no port, lowercase ASCII, the account or registry name in its
//! documented shape. `public.ecr.aws` is anonymous and matches nothing.

use std::fmt;
use std::str::FromStr;

/// A cloud whose registries the webhook can authenticate to with its own workload identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Provider {
    /// Amazon ECR.
    Ecr,
    /// Google Artifact Registry and Container Registry.
    Gcp,
    /// Azure Container Registry.
    Acr,
}

impl Provider {
    /// Every provider, in flag order.
    pub const ALL: [Provider; 3] = [Provider::Ecr, Provider::Gcp, Provider::Acr];

    /// The flag value and metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ecr => "ecr",
            Self::Gcp => "gcp",
            Self::Acr => "acr",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Provider {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "ecr" => Ok(Self::Ecr),
            "gcp" => Ok(Self::Gcp),
            "acr" => Ok(Self::Acr),
            other => Err(format!(
                "unknown cloud credential provider {:?} (expected ecr, gcp or acr)",
                other.chars().take(32).collect::<String>()
            )),
        }
    }
}

/// The flavour of an ECR registry host, which decides the API endpoint to ask for its token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EcrEndpoint {
    /// `<account>.dkr.ecr.<region>.amazonaws.com`
    Standard,
    /// `<account>.dkr.ecr.<region>.amazonaws.com.cn`
    China,
    /// `<account>.dkr.ecr-fips.<region>.amazonaws.com`
    Fips,
    /// `<account>.dkr-ecr.<region>.on.aws` (IPv4 and IPv6)
    DualStack,
    /// `<account>.dkr-ecr-fips.<region>.on.aws`
    DualStackFips,
}

impl EcrEndpoint {
    /// The ECR API endpoint (where `GetAuthorizationToken` goes) for `region`.
    pub fn api_url(self, region: &str) -> String {
        match self {
            Self::Standard => format!("https://api.ecr.{region}.amazonaws.com/"),
            Self::China => format!("https://api.ecr.{region}.amazonaws.com.cn/"),
            Self::Fips => format!("https://ecr-fips.{region}.amazonaws.com/"),
            Self::DualStack => format!("https://ecr.{region}.api.aws/"),
            Self::DualStackFips => format!("https://ecr-fips.{region}.api.aws/"),
        }
    }
}

/// The Azure cloud of an ACR host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AzureCloud {
    /// `*.azurecr.io`
    Public,
    /// `*.azurecr.cn` (Azure operated by 21Vianet)
    China,
    /// `*.azurecr.us` (Azure Government)
    UsGovernment,
}

impl AzureCloud {
    /// The Entra scope of the token that the registry's `/oauth2/exchange` accepts (the
    /// cloud's Resource Manager audience).
    pub fn scope(self) -> &'static str {
        match self {
            Self::Public => "https://management.azure.com/.default",
            Self::China => "https://management.chinacloudapi.cn/.default",
            Self::UsGovernment => "https://management.usgovcloudapi.net/.default",
        }
    }
}

/// What a registry host is, for the provider that owns it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// An ECR private registry in `region`.
    Ecr {
        region: String,
        endpoint: EcrEndpoint,
    },
    /// Artifact Registry (`*-docker.pkg.dev`) or GCR (`gcr.io`, `*.gcr.io`).
    Gcp,
    /// An Azure container registry.
    Acr { cloud: AzureCloud },
}

impl Target {
    /// The provider owning the host.
    pub fn provider(&self) -> Provider {
        match self {
            Self::Ecr { .. } => Provider::Ecr,
            Self::Gcp => Provider::Gcp,
            Self::Acr { .. } => Provider::Acr,
        }
    }
}

/// The longest host considered (a DNS name is at most 253 characters).
const MAX_HOST: usize = 253;

/// The provider and target of registry `host` (no scheme, no path), or `None` when no cloud
/// provider owns it. A host with a port, upper case or a trailing dot matches nothing: the
/// clouds' registries are reached on 443 under their lowercase names.
pub fn match_host(host: &str) -> Option<Target> {
    if host.is_empty() || host.len() > MAX_HOST || !host.bytes().all(is_host_byte) {
        return None;
    }
    let labels: Vec<&str> = host.split('.').collect();
    if labels.iter().any(|l| l.is_empty() || l.len() > 63) {
        return None;
    }
    match labels.as_slice() {
        [account, "dkr", "ecr", region, "amazonaws", "com"] => {
            ecr(account, region, EcrEndpoint::Standard)
        }
        [account, "dkr", "ecr", region, "amazonaws", "com", "cn"] => {
            ecr(account, region, EcrEndpoint::China)
        }
        [account, "dkr", "ecr-fips", region, "amazonaws", "com"] => {
            ecr(account, region, EcrEndpoint::Fips)
        }
        [account, "dkr-ecr", region, "on", "aws"] => ecr(account, region, EcrEndpoint::DualStack),
        [account, "dkr-ecr-fips", region, "on", "aws"] => {
            ecr(account, region, EcrEndpoint::DualStackFips)
        }
        ["gcr", "io"] => Some(Target::Gcp),
        [prefix, "gcr", "io"] if is_name(prefix) => Some(Target::Gcp),
        [location, "pkg", "dev"] => {
            let region = location.strip_suffix("-docker")?;
            is_name(region).then_some(Target::Gcp)
        }
        [name, "azurecr", tld] if is_acr_name(name) => {
            let cloud = match *tld {
                "io" => AzureCloud::Public,
                "cn" => AzureCloud::China,
                "us" => AzureCloud::UsGovernment,
                _ => return None,
            };
            Some(Target::Acr { cloud })
        }
        _ => None,
    }
}

fn ecr(account: &str, region: &str, endpoint: EcrEndpoint) -> Option<Target> {
    let account_ok = account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit());
    (account_ok && is_region(region)).then(|| Target::Ecr {
        region: region.to_owned(),
        endpoint,
    })
}

/// An AWS region name: lowercase letters, digits and dashes, starting with a letter
/// (`us-east-1`, `cn-north-1`, `us-gov-west-1`).
pub fn is_region(region: &str) -> bool {
    (2..=32).contains(&region.len())
        && region.starts_with(|c: char| c.is_ascii_lowercase())
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn is_name(label: &str) -> bool {
    !label.is_empty()
        && !label.starts_with('-')
        && !label.ends_with('-')
        && label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// ACR registry names are 5 to 50 alphanumerics; the host is their lowercase form.
fn is_acr_name(label: &str) -> bool {
    (5..=50).contains(&label.len())
        && label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

fn is_host_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'
}

#[cfg(test)]
mod tests {
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
}
