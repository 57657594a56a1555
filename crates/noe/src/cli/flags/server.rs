//! Flags of the serving process: addresses, certificates, shutdown, metrics.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

use clap::Args;

#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Server")]
pub struct ServerArgs {
    /// Directory holding `tls.crt` and `tls.key`; reloaded when they change.
    #[arg(long, default_value = "./")]
    pub cert_dir: PathBuf,

    /// Serve with a generated self-signed certificate (local trials only).
    #[arg(long)]
    pub dev_self_signed_cert: bool,

    /// HTTPS admission endpoint (`/mutate`); `:8443` means all interfaces.
    #[arg(long, default_value = ":8443", value_parser = parse_addr)]
    pub webhook_addr: SocketAddr,

    /// Plain HTTP `/metrics`.
    #[arg(long, default_value = ":8080", value_parser = parse_addr)]
    pub metrics_addr: SocketAddr,

    /// Plain HTTP `/healthz` and `/readyz`.
    #[arg(long, default_value = ":8081", value_parser = parse_addr)]
    pub health_probe_addr: SocketAddr,

    /// Read each pod's namespace label `arch.noe.adevinta.com/preferred` (a cached GET of the
    /// Namespace; needs `get namespaces`): the namespace's preferred arch, after the pod's label.
    #[arg(long)]
    pub namespace_preference: bool,

    /// Check the images of debug containers added to a running pod (`pods/ephemeralcontainers`)
    /// against its node's platform (a cached GET of the Node; needs `get nodes`).
    #[arg(long)]
    pub check_ephemeral_containers: bool,

    /// After SIGTERM: report not ready at once, keep answering for this long (Go duration) while the
    /// endpoint is removed, then drain. SIGINT and SIGHUP drain at once.
    #[arg(long, default_value = "5s", value_parser = super::parse::duration)]
    pub shutdown_delay: std::time::Duration,

    /// Distinct `namespace` label values of the metrics at most; later namespaces are counted as
    /// `_other`.
    #[arg(long, default_value_t = 1000)]
    pub metrics_max_namespaces: usize,

    /// HTTPS lookup endpoint for policy engines (`/gatekeeper/v1/platforms`,
    /// `/kyverno/v1/platforms`), on the webhook's certificate; off when empty. Needs
    /// `--lookup-client-ca` and/or `--lookup-token-audience`.
    #[arg(long, value_parser = parse_addr)]
    pub lookup_addr: Option<SocketAddr>,

    /// PEM CA bundle: lookup callers presenting a client certificate it verifies are admitted
    /// (Gatekeeper presents its webhook certificate: trust its `ca.crt`).
    #[arg(long)]
    pub lookup_client_ca: Option<PathBuf>,

    /// Lookup callers presenting a Bearer token the Kubernetes API accepts for this audience
    /// (TokenReview; needs `create tokenreviews`) are admitted (Kyverno ≥1.18:
    /// `kyverno-svc.kyverno.io` unless changed).
    #[arg(long)]
    pub lookup_token_audience: Option<String>,

    /// TokenReviews of Bearer tokens not seen before, per second at most (bursts of as many);
    /// beyond, such a token gets 503 with `Retry-After: 1`. Tokens accepted before are never
    /// held back, and a token that is not a JWT for `--lookup-token-audience` or has expired is
    /// refused without a review.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub lookup_token_review_qps: u32,

    /// Longest a lookup request takes (Go duration, at most 2s); keys not answered by then
    /// get a `timeout:` error. A caller's shorter `?timeout=` wins.
    #[arg(long, default_value = "2s", value_parser = super::parse::positive_duration)]
    pub lookup_deadline: std::time::Duration,

    /// `background`: after a cold lookup, verify each platform of the image by its own program
    /// (its ELF header, read from its layers) off the admission path, and treat a platform
    /// whose program is of another machine as absent in later decisions. `off`: trust what
    /// registries claim.
    #[arg(long, value_enum, default_value = "off")]
    pub verify_binaries: VerifyBinaries,
}

/// `--verify-binaries`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum VerifyBinaries {
    #[default]
    Off,
    Background,
}

impl ServerArgs {
    /// The server's typed configuration.
    pub fn settings(&self) -> crate::config::ServerSettings {
        let cert = if self.dev_self_signed_cert {
            crate::config::CertSource::SelfSigned
        } else {
            crate::config::CertSource::Dir(self.cert_dir.clone())
        };
        crate::config::ServerSettings {
            cert,
            addresses: noe_webhook::server::Addresses {
                webhook: self.webhook_addr,
                metrics: self.metrics_addr,
                health: self.health_probe_addr,
            },
            facts: crate::config::FactSettings {
                namespace_preference: self.namespace_preference,
                ephemeral_containers: self.check_ephemeral_containers,
            },
            shutdown_delay: self.shutdown_delay,
            metrics_max_namespaces: self.metrics_max_namespaces,
            verify_binaries: self.verify_binaries == VerifyBinaries::Background,
            lookup: self.lookup_addr.map(|addr| crate::config::LookupSettings {
                addr,
                client_ca: self.lookup_client_ca.clone(),
                token_audience: self.lookup_token_audience.clone().filter(|a| !a.is_empty()),
                deadline: self.lookup_deadline,
                token_review_qps: self.lookup_token_review_qps,
            }),
        }
    }
}

/// `host:port`, `[v6]:port`, or Go's `:port` (all interfaces, IPv6 and IPv4 where possible).
pub fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    let invalid = || format!("invalid address {text:?} (expected :PORT, HOST:PORT or [V6]:PORT)");
    if let Some(port) = text.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| invalid())?;
        return Ok(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if let Some((host, port)) = text.rsplit_once(':') {
        let port: u16 = port.parse().map_err(|_| invalid())?;
        if host == "localhost" {
            return Ok(SocketAddr::new(IpAddr::from([127, 0, 0, 1]), port));
        }
    }
    Err(invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let ok: &[(&str, &str)] = &[
            (":8443", "[::]:8443"),
            ("127.0.0.1:8443", "127.0.0.1:8443"),
            ("0.0.0.0:80", "0.0.0.0:80"),
            ("[::1]:9000", "[::1]:9000"),
            ("localhost:8081", "127.0.0.1:8081"),
            (":0", "[::]:0"),
        ];
        for (text, want) in ok {
            assert_eq!(
                parse_addr(text).map(|a| a.to_string()),
                Ok(want.to_string()),
                "{text}"
            );
        }
        for bad in ["", "8443", ":x", "host:", "example.com:80", ":70000"] {
            assert!(parse_addr(bad).is_err(), "{bad:?}");
        }
    }
}
