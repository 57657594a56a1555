//! The metadata/link-local address guard: registry hosts come from users' pod specs, so the
//! resolver refuses to connect to cloud metadata services and link-local addresses unless
//! `--allow-registry-cidrs` allows them. Checked on resolved addresses (a DNS resolver that
//! filters) and on IP-literal hosts (which never reach the resolver). Loopback stays allowed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::Error;

/// Decides which addresses may be contacted.
#[derive(Clone, Debug, Default)]
pub struct Guard {
    allow: Vec<IpNet>,
}

impl Guard {
    pub fn new(allow: Vec<IpNet>) -> Self {
        Self { allow }
    }

    /// True when `ip` is a metadata or link-local address not explicitly allowed.
    pub fn is_blocked(&self, ip: IpAddr) -> bool {
        if self.allow.iter().any(|net| net.contains(&ip)) {
            return false;
        }
        match ip {
            IpAddr::V4(v4) => blocked_v4(v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => {
                    blocked_v4(v4) && !self.allow.iter().any(|net| net.contains(&IpAddr::V4(v4)))
                }
                None => blocked_v6(v6),
            },
        }
    }

    /// Refuses an IP-literal host that is blocked; names are checked when they are resolved.
    pub fn check_host(&self, host: &str) -> Result<(), Error> {
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = literal.parse::<IpAddr>() {
            if self.is_blocked(ip) {
                return Err(Error::Blocked {
                    host: host.to_owned(),
                    address: ip,
                });
            }
        }
        Ok(())
    }

    /// A DNS resolver for reqwest that drops blocked addresses and fails when none is left.
    pub fn resolver(&self) -> Arc<GuardedResolver> {
        Arc::new(GuardedResolver {
            guard: self.clone(),
        })
    }
}

fn blocked_v4(ip: Ipv4Addr) -> bool {
    ip.is_link_local() || ip == Ipv4Addr::new(100, 100, 100, 200)
}

fn blocked_v6(ip: Ipv6Addr) -> bool {
    let link_local = (ip.segments()[0] & 0xffc0) == 0xfe80;
    let aws_metadata = ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);
    link_local || aws_metadata
}

/// The error a refused name resolution carries inside reqwest's error chain.
#[derive(Debug, thiserror::Error)]
#[error("{host} resolves only to blocked addresses (first: {address})")]
pub struct BlockedAddress {
    pub host: String,
    pub address: IpAddr,
}

/// System DNS resolution followed by the guard.
#[derive(Debug)]
pub struct GuardedResolver {
    guard: Guard,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.guard.clone();
        let host = name.as_str().to_owned();
        Box::pin(lookup(guard, host))
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn lookup(guard: Guard, host: String) -> Result<Addrs, BoxError> {
    let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
    let first = resolved.first().map(SocketAddr::ip);
    let allowed: Vec<SocketAddr> = resolved
        .into_iter()
        .filter(|addr| !guard.is_blocked(addr.ip()))
        .collect();
    match (allowed.is_empty(), first) {
        (true, Some(address)) => Err(Box::new(BlockedAddress { host, address })),
        _ => Ok(Box::new(allowed.into_iter())),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn blocked_and_allowed_addresses() {
        let guard = Guard::default();
        let cases = [
            ("169.254.169.254", true),
            ("169.254.0.1", true),
            ("100.100.100.200", true),
            ("fe80::1", true),
            ("febf::1", true),
            ("fd00:ec2::254", true),
            ("::ffff:169.254.169.254", true),
            ("::ffff:100.100.100.200", true),
            ("127.0.0.1", false),
            ("::1", false),
            ("10.0.0.1", false),
            ("100.100.100.201", false),
            ("fd00:ec2::253", false),
            ("fec0::1", false),
            ("8.8.8.8", false),
            ("::ffff:127.0.0.1", false),
        ];
        for (ip, blocked) in cases {
            assert_eq!(guard.is_blocked(ip.parse().unwrap()), blocked, "{ip}");
        }
    }

    #[test]
    fn allow_cidrs_make_exceptions_including_mapped_forms() {
        let guard = Guard::new(vec!["169.254.10.0/24".parse().unwrap()]);
        assert!(!guard.is_blocked("169.254.10.5".parse().unwrap()));
        assert!(!guard.is_blocked("::ffff:169.254.10.5".parse().unwrap()));
        assert!(guard.is_blocked("169.254.169.254".parse().unwrap()));
    }

    #[test]
    fn ip_literal_hosts() {
        let guard = Guard::default();
        assert!(matches!(
            guard.check_host("169.254.169.254"),
            Err(Error::Blocked { .. })
        ));
        assert!(guard.check_host("[fe80::1]").is_err());
        assert!(guard.check_host("127.0.0.1").is_ok());
        assert!(guard.check_host("registry.example").is_ok());
    }

    #[tokio::test]
    async fn resolver_refuses_names_resolving_only_to_blocked_addresses() {
        // The system resolver answers an address-shaped name with that address, no network.
        let refused = match Guard::default()
            .resolver()
            .resolve("169.254.169.254".parse().unwrap())
            .await
        {
            Ok(_) => panic!("resolved to a metadata address"),
            Err(error) => error,
        };
        let blocked = refused.downcast_ref::<BlockedAddress>().unwrap();
        assert_eq!(
            blocked.address,
            "169.254.169.254".parse::<IpAddr>().unwrap()
        );
        let allowed = Guard::new(vec!["169.254.169.254/32".parse().unwrap()]).resolver();
        assert!(allowed
            .resolve("169.254.169.254".parse().unwrap())
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn resolver_keeps_loopback() {
        let resolver = Guard::default().resolver();
        let addrs: Vec<_> = resolver
            .resolve("localhost".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
    }
}
