use noe_test_support::TestCa;

#[test]
fn server_certs_carry_the_chain_and_parse_into_a_rustls_config() {
    let ca = TestCa::new().unwrap();
    let cert = ca.server_cert(&["127.0.0.1", "localhost"]).unwrap();
    let chain = cert.chain_der().unwrap();
    assert_eq!(chain.len(), 2, "leaf then CA");
    assert_eq!(chain[1], ca.cert_der());
    cert.key_der().unwrap();
    cert.server_config().unwrap();
    ca.client_config().unwrap();
    assert!(!format!("{cert:?}").contains("PRIVATE KEY"));
}

#[tokio::test]
async fn a_client_trusting_the_ca_completes_a_handshake_for_each_san() {
    use std::sync::Arc;

    let ca = TestCa::new().unwrap();
    let cert = ca.server_cert(&["127.0.0.1", "localhost"]).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cert.server_config().unwrap()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        for _ in 0..3 {
            let (stream, _) = listener.accept().await.unwrap();
            let _ = acceptor.accept(stream).await;
        }
    });
    let connector = tokio_rustls::TlsConnector::from(Arc::new(ca.client_config().unwrap()));
    for (name, ok) in [
        ("127.0.0.1", true),
        ("localhost", true),
        ("example.com", false),
    ] {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let server_name = rustls_pki_types::ServerName::try_from(name.to_owned()).unwrap();
        let result = connector.connect(server_name, stream).await;
        assert_eq!(result.is_ok(), ok, "{name}: {result:?}");
    }
    server.await.unwrap();
}
