//! The address guard: registry hosts come from users' pod specs (and the lookup endpoint's
//! callers), so the resolver refuses to connect to addresses that reach this pod or its node
//! rather than a registry, unless the configured allowed CIDRs (`Config::allow_cidrs`,
//! `--allow-registry-cidrs`) allow them: loopback (127.0.0.0/8, `::1`: noe's own listeners and
//! any sidecar), unspecified (0.0.0.0/8, `::`, which the kernel takes as this host), this
//! host's own addresses (the pod IP, where noe and its sidecars listen on every interface; with
//! `hostNetwork`, the node's), cloud metadata services and link-local addresses. Private ranges
//! stay allowed: registries live there. Checked on resolved addresses (a DNS resolver that
//! filters), on IP-literal hosts (which never reach the resolver), and on the names handed to an
//! HTTP(S) proxy (which resolves them itself, so they are resolved and checked here first),
//! for every request: registries, token realms and each redirect. IPv6 forms that carry an IPv4
//! address to a translator or tunnel (IPv4-mapped and -compatible, SIIT, NAT64, 6to4, Teredo)
//! are checked on that IPv4 address too.

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

    /// True when `ip` is a loopback, unspecified, link-local or metadata address, or one of
    /// this host's own, not explicitly allowed, or an IPv6 address embedding such an IPv4
    /// address.
    pub fn is_blocked(&self, ip: IpAddr) -> bool {
        if self.allows(ip) {
            return false;
        }
        // An IPv4-mapped address is that IPv4 address (the kernel connects to it).
        if let IpAddr::V6(v6) = ip {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return self.is_blocked(IpAddr::V4(v4));
            }
        }
        match ip {
            IpAddr::V4(v4) => blocked_v4(v4) || is_own(ip),
            IpAddr::V6(v6) => {
                blocked_v6(v6)
                    || is_own(ip)
                    || embedded_v4(v6)
                        .into_iter()
                        .any(|v4| carried_blocked(v4) && !self.allows(IpAddr::V4(v4)))
            }
        }
    }

    fn allows(&self, ip: IpAddr) -> bool {
        self.allow.iter().any(|net| net.contains(&ip))
    }

    /// The first blocked address among the ones `host` resolved to. Used before a name goes to
    /// a proxy: the proxy may connect to any of them, so one is enough to refuse.
    pub fn first_blocked(&self, resolved: &[IpAddr]) -> Option<IpAddr> {
        resolved.iter().copied().find(|ip| self.is_blocked(*ip))
    }

    /// Resolves `host` (a name, not an IP literal) within `timeout` and refuses it when it
    /// resolves to no address or to any blocked one: what a proxy would connect to for us.
    pub async fn check_name(
        &self,
        host: &str,
        port: u16,
        timeout: std::time::Duration,
    ) -> Result<(), NameRefused> {
        let lookup = tokio::net::lookup_host((host, port));
        let resolved: Vec<IpAddr> = match tokio::time::timeout(timeout, lookup).await {
            Ok(Ok(addrs)) => addrs.map(|a| a.ip()).collect(),
            Ok(Err(_)) | Err(_) => Vec::new(),
        };
        if resolved.is_empty() {
            return Err(NameRefused::Unresolved);
        }
        match self.first_blocked(&resolved) {
            Some(address) => Err(NameRefused::Blocked(address)),
            None => Ok(()),
        }
    }

    /// Refuses an IP-literal host that is blocked; names are checked when they are resolved.
    pub fn check_host(&self, host: &str) -> Result<(), Error> {
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = literal.parse::<IpAddr>() {
            if self.is_blocked(ip) {
                return Err(Error::Blocked {
                    host: crate::error::host_for_message(host),
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

/// Loopback, "this network" (0.0.0.0/8: 0.0.0.0 is this host), link-local (cloud metadata
/// services among them) and Alibaba Cloud's metadata address.
fn blocked_v4(ip: Ipv4Addr) -> bool {
    ip.is_loopback()
        || ip.octets()[0] == 0
        || ip.is_link_local()
        || ip == Ipv4Addr::new(100, 100, 100, 200)
}

/// What an IPv4 address carried in an IPv6 one to a translator or tunnel must not be: loopback,
/// link-local or metadata. (Not "this network": the positions NAT64 prefixes allow read zeros as
/// 0.x.y.z in most addresses.)
fn carried_blocked(ip: Ipv4Addr) -> bool {
    ip.is_loopback() || ip.is_link_local() || ip == Ipv4Addr::new(100, 100, 100, 200)
}

/// Loopback, unspecified, link-local, and AWS's IPv6 metadata address.
fn blocked_v6(ip: Ipv6Addr) -> bool {
    let link_local = (ip.segments()[0] & 0xffc0) == 0xfe80;
    let aws_metadata = ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);
    ip.is_loopback() || ip.is_unspecified() || link_local || aws_metadata
}

/// Whether `ip` is one of this host's own addresses (those of its interfaces: the pod IP): the
/// kernel routes a datagram to it through this host itself, with that address as its source,
/// so a socket connected to it takes it as its own. No packet is sent (connecting a UDP socket
/// only picks the route); an address with no route is not ours. (An address of a local range
/// route, as 127.0.0.2 on `lo`, takes the range's source address instead: loopback is refused
/// on its own.)
fn is_own(ip: IpAddr) -> bool {
    let unspecified: IpAddr = match ip {
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let Ok(socket) = std::net::UdpSocket::bind(SocketAddr::new(unspecified, 0)) else {
        return false;
    };
    // Any port: only the route matters.
    socket.connect(SocketAddr::new(ip, 9)).is_ok()
        && socket.local_addr().is_ok_and(|local| local.ip() == ip)
}

/// Why a name was not handed to a proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRefused {
    /// It resolves to no address here: nothing can be checked.
    Unresolved,
    /// It resolves to this blocked address (among others, maybe).
    Blocked(IpAddr),
}

/// The IPv4 addresses an IPv6 address carries to a translator or tunnel: IPv4-mapped
/// (`::ffff:a.b.c.d`) and IPv4-compatible (`::a.b.c.d`), SIIT (`::ffff:0:a.b.c.d`), NAT64's
/// well-known prefix `64:ff9b::/96` and local-use `64:ff9b:1::/48` (at each RFC 6052 position
/// its prefix lengths allow: /48, /56, /64, /96), 6to4 (`2002:aabb:ccdd::/48`) and Teredo
/// (`2001:0::/32`: the server, and the client with its bits inverted).
fn embedded_v4(ip: Ipv6Addr) -> Vec<Ipv4Addr> {
    let b = ip.octets();
    let v4 = |i: [usize; 4]| Ipv4Addr::new(b[i[0]], b[i[1]], b[i[2]], b[i[3]]);
    let segments = ip.segments();
    let mut found = Vec::new();
    if let Some(v4) = ip.to_ipv4() {
        // Mapped and compatible (`::` and `::1` give 0.0.0.0 and 0.0.0.1: never blocked).
        found.push(v4);
    }
    if segments[..6] == [0, 0, 0, 0, 0xffff, 0] {
        found.push(v4([12, 13, 14, 15]));
    }
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        found.push(v4([12, 13, 14, 15]));
    }
    if segments[..3] == [0x64, 0xff9b, 1] {
        found.extend([
            v4([6, 7, 9, 10]),
            v4([7, 9, 10, 11]),
            v4([9, 10, 11, 12]),
            v4([12, 13, 14, 15]),
        ]);
    }
    if segments[0] == 0x2002 {
        found.push(v4([2, 3, 4, 5]));
    }
    if segments[..2] == [0x2001, 0] {
        found.push(v4([4, 5, 6, 7]));
        found.push(Ipv4Addr::new(!b[12], !b[13], !b[14], !b[15]));
    }
    found
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
            ("127.0.0.1", true),
            ("127.10.0.1", true),
            ("0.0.0.0", true),
            ("0.1.2.3", true),
            ("::1", true),
            ("10.0.0.1", false),
            ("100.100.100.201", false),
            ("fd00:ec2::253", false),
            ("fec0::1", false),
            ("8.8.8.8", false),
            ("::ffff:127.0.0.1", true),
            ("::ffff:0.0.0.0", true),
            ("64:ff9b::7f00:1", true),
            ("192.168.1.10", false),
            ("172.16.0.1", false),
            ("fd12:3456::1", false),
            // IPv4 carried to translators and tunnels.
            ("64:ff9b::a9fe:a9fe", true),
            ("64:ff9b::169.254.0.1", true),
            ("64:ff9b::6464:64c8", true),
            ("64:ff9b::808:808", false),
            ("64:ff9b:1::a9fe:a9fe", true),
            ("64:ff9b:1:a9fe:a9:fe00::", true),
            ("64:ff9b:1:a9:fe:a9fe::", true),
            ("64:ff9b:1:0:a9:fea9:fe00:0", true),
            ("64:ff9b:1::808:808", false),
            ("::a9fe:a9fe", true),
            ("::169.254.169.254", true),
            ("::ffff:0:a9fe:a9fe", true),
            ("::ffff:0:808:808", false),
            ("2002:a9fe:a9fe::1", true),
            ("2002:6464:64c8:1::", true),
            ("2002:808:808::1", false),
            ("2001:0:a9fe:a9fe::1", true),
            ("2001:0:4136:e378:8000:63bf:5601:5601", true),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", false),
            ("2001:db8::a9fe:a9fe", false),
            ("::", true),
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
        assert!(!guard.is_blocked("64:ff9b::169.254.10.5".parse().unwrap()));
        assert!(guard.is_blocked("169.254.169.254".parse().unwrap()));
        assert!(guard.is_blocked("64:ff9b::a9fe:a9fe".parse().unwrap()));
        let nat64 = Guard::new(vec!["64:ff9b::/96".parse().unwrap()]);
        assert!(!nat64.is_blocked("64:ff9b::a9fe:a9fe".parse().unwrap()));
    }

    #[test]
    fn loopback_is_allowed_only_when_listed() {
        let guard = Guard::new(vec!["127.0.0.0/8".parse().unwrap()]);
        assert!(!guard.is_blocked("127.0.0.1".parse().unwrap()));
        assert!(!guard.is_blocked("::ffff:127.0.0.1".parse().unwrap()));
        assert!(guard.is_blocked("::1".parse().unwrap()));
        assert!(guard.is_blocked("169.254.169.254".parse().unwrap()));
    }

    /// This host's own addresses: 127.0.0.1, and the source address of its route towards a
    /// documentation address (TEST-NET-3), when it has one; no packet is sent.
    #[test]
    fn this_hosts_own_addresses() {
        assert!(is_own("127.0.0.1".parse().unwrap()));
        let outward = std::net::UdpSocket::bind("0.0.0.0:0")
            .and_then(|socket| {
                socket.connect("203.0.113.7:9")?;
                socket.local_addr()
            })
            .map(|local| local.ip());
        if let Ok(own) = outward {
            assert!(is_own(own), "{own}");
            assert!(Guard::default().is_blocked(own), "{own}");
            assert!(!Guard::new(vec![IpNet::from(own)]).is_blocked(own), "{own}");
        }
        assert!(!is_own("203.0.113.7".parse().unwrap()));
    }

    #[test]
    fn one_blocked_address_among_several_is_enough_before_a_proxy() {
        let guard = Guard::default();
        let ips =
            |list: &[&str]| -> Vec<IpAddr> { list.iter().map(|a| a.parse().unwrap()).collect() };
        assert_eq!(
            guard.first_blocked(&ips(&["10.0.0.1", "192.168.0.1"])),
            None
        );
        assert_eq!(
            guard.first_blocked(&ips(&["10.0.0.1", "127.0.0.1"])),
            Some("127.0.0.1".parse().unwrap())
        );
        assert_eq!(
            guard.first_blocked(&ips(&["10.0.0.1", "169.254.169.254"])),
            Some("169.254.169.254".parse().unwrap())
        );
    }

    #[tokio::test]
    async fn names_are_resolved_and_checked_before_a_proxy() {
        let guard = Guard::default();
        let timeout = std::time::Duration::from_secs(5);
        assert!(matches!(
            guard.check_name("localhost", 443, timeout).await,
            Err(NameRefused::Blocked(ip)) if ip.is_loopback()
        ));
        let loopback = Guard::new(vec![
            "127.0.0.0/8".parse().unwrap(),
            "::1/128".parse().unwrap(),
        ]);
        assert_eq!(loopback.check_name("localhost", 443, timeout).await, Ok(()));
        // The system resolver answers an address-shaped name with that address.
        assert_eq!(
            guard.check_name("169.254.169.254", 443, timeout).await,
            Err(NameRefused::Blocked("169.254.169.254".parse().unwrap()))
        );
        assert_eq!(
            guard.check_name("no-such-host.invalid", 443, timeout).await,
            Err(NameRefused::Unresolved)
        );
    }

    #[test]
    fn ip_literal_hosts() {
        let guard = Guard::default();
        assert!(matches!(
            guard.check_host("169.254.169.254"),
            Err(Error::Blocked { .. })
        ));
        assert!(guard.check_host("[fe80::1]").is_err());
        assert!(guard.check_host("127.0.0.1").is_err());
        assert!(guard.check_host("[::1]").is_err());
        assert!(guard.check_host("0.0.0.0").is_err());
        assert!(guard.check_host("10.1.2.3").is_ok());
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
    async fn resolver_refuses_loopback_unless_listed() {
        let refused = Guard::default()
            .resolver()
            .resolve("localhost".parse().unwrap())
            .await;
        assert!(refused.is_err(), "localhost resolved");
        let resolver = Guard::new(vec![
            "127.0.0.0/8".parse().unwrap(),
            "::1/128".parse().unwrap(),
        ])
        .resolver();
        let addrs: Vec<_> = resolver
            .resolve("localhost".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
    }
}
