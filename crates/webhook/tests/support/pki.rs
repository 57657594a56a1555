//! A throw-away CA and leaf certificates for `localhost` / `127.0.0.1`.
#![allow(dead_code)]

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

pub struct Ca {
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Ca {
    pub fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).unwrap();
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    pub fn leaf(&self) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ])
        .unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    pub fn write_leaf(&self, dir: &std::path::Path) {
        let leaf = self.leaf();
        // Written beside and renamed, as a Secret volume update appears atomically.
        let tmp = dir.join(".tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        std::fs::write(tmp.join("tls.crt"), leaf.cert_pem).unwrap();
        std::fs::write(tmp.join("tls.key"), leaf.key_pem).unwrap();
        std::fs::rename(tmp.join("tls.key"), dir.join("tls.key")).unwrap();
        std::fs::rename(tmp.join("tls.crt"), dir.join("tls.crt")).unwrap();
    }

    /// A reqwest client that trusts only these CAs and opens a new connection per request.
    pub fn client(cas: &[&Ca]) -> reqwest::Client {
        use rustls_pki_types::pem::PemObject;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut roots = rustls::RootCertStore::empty();
        for ca in cas {
            for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca.pem.as_bytes()) {
                roots.add(cert.unwrap()).unwrap();
            }
        }
        let mut config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        // Every connection verifies the certificate actually served (no session resumption).
        config.resumption = rustls::client::Resumption::disabled();
        reqwest::Client::builder()
            .use_preconfigured_tls(config)
            .pool_max_idle_per_host(0)
            .timeout(std::time::Duration::from_secs(20))
            .build()
            .unwrap()
    }
}
