//! A throw-away certificate authority for TLS tests.

use std::sync::Arc;

use anyhow::Context as _;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A test certificate authority (ECDSA P-256) that issues server and client certificates.
///
/// ```no_run
/// # fn main() -> anyhow::Result<()> {
/// let ca = noe_test_support::TestCa::new()?;
/// let cert = ca.server_cert(&["127.0.0.1", "localhost"])?;
/// std::fs::write("/tmp/tls.crt", &cert.cert_pem)?;
/// std::fs::write("/tmp/tls.key", &cert.key_pem)?;
/// std::fs::write("/tmp/ca.crt", ca.cert_pem())?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct TestCa {
    issuer: Arc<CertifiedIssuer<'static, KeyPair>>,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

/// A certificate issued by [`TestCa`]: PEM chain (leaf then CA) and PKCS#8 key.
#[derive(Clone)]
pub struct ServerCert {
    /// Leaf certificate followed by the CA certificate, PEM.
    pub cert_pem: String,
    /// The leaf's private key, PKCS#8 PEM.
    pub key_pem: String,
}

impl std::fmt::Debug for ServerCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerCert")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

impl TestCa {
    /// Creates a new CA with a fresh key. The common name is `noe-rs test CA`.
    pub fn new() -> anyhow::Result<Self> {
        Self::with_name("noe-rs test CA")
    }

    /// Creates a new CA with the given common name (handy to tell two CAs apart).
    pub fn with_name(common_name: &str) -> anyhow::Result<Self> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().context("generating the CA key")?;
        let issuer = CertifiedIssuer::self_signed(params, key).context("self-signing the CA")?;
        Ok(Self {
            issuer: Arc::new(issuer),
        })
    }

    /// The CA certificate, PEM. Trust this in clients.
    pub fn cert_pem(&self) -> String {
        self.issuer.pem()
    }

    /// The CA certificate, DER.
    pub fn cert_der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    /// Issues a server certificate for the given subject alternative names; IP literals become
    /// IP SANs, everything else DNS SANs. The first name is also the common name.
    pub fn server_cert(&self, sans: &[&str]) -> anyhow::Result<ServerCert> {
        self.issue(sans, false)
    }

    /// Issues a client certificate (TLS client authentication, mTLS) with `common_name` as its
    /// common name and only SAN. Certificates of this CA serve both ends: [`ServerCert`] holds
    /// the chain and key either way.
    pub fn client_cert(&self, common_name: &str) -> anyhow::Result<ServerCert> {
        self.issue(&[common_name], false)
    }

    /// Like [`TestCa::server_cert`] but valid only during the year 2000 (for rejection tests).
    pub fn expired_server_cert(&self, sans: &[&str]) -> anyhow::Result<ServerCert> {
        self.issue(sans, true)
    }

    fn issue(&self, sans: &[&str], expired: bool) -> anyhow::Result<ServerCert> {
        let names: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
        let mut params = CertificateParams::new(names)?;
        if expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        }
        if let Some(first) = sans.first() {
            params.distinguished_name.push(DnType::CommonName, *first);
        }
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().context("generating the server key")?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .context("signing the server certificate")?;
        Ok(ServerCert {
            cert_pem: format!("{}{}", cert.pem(), self.issuer.pem()),
            key_pem: key.serialize_pem(),
        })
    }

    /// The default server certificate for loopback: SANs `127.0.0.1`, `localhost`, `::1`.
    pub fn loopback_cert(&self) -> anyhow::Result<ServerCert> {
        self.server_cert(&["127.0.0.1", "localhost", "::1"])
    }

    /// A rustls client config trusting only this CA.
    pub fn client_config(&self) -> anyhow::Result<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.cert_der())?;
        Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
    }
}

impl ServerCert {
    /// The certificate chain as DER.
    pub fn chain_der(&self) -> anyhow::Result<Vec<CertificateDer<'static>>> {
        CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .context("parsing the certificate chain")
    }

    /// The leaf certificate as DER (compare with what a server actually presents).
    pub fn leaf_der(&self) -> anyhow::Result<CertificateDer<'static>> {
        self.chain_der()?
            .into_iter()
            .next()
            .context("empty certificate chain")
    }

    /// The private key as DER.
    pub fn key_der(&self) -> anyhow::Result<PrivateKeyDer<'static>> {
        PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).context("parsing the private key")
    }

    /// A rustls server config serving this certificate (ALPN h2 and http/1.1).
    pub fn server_config(&self) -> anyhow::Result<rustls::ServerConfig> {
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(self.chain_der()?, self.key_der()?)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}
