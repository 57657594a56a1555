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
mod tests;
