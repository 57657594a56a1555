//! Registry HTTP requests per unique image, counted from the real registry's access log (and the
//! token server's own record), and N concurrent admissions of one uncached image.

use anyhow::bail;
use base64::Engine as _;
use futures::future::join_all;
use noe_test_support::{push_standard_fixtures, Registry, TokenServer};

use crate::noe::{admit, start_noe, Tls};
use crate::Options;
use noe_test_support::pod_review;

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let tls = Tls::new()?;
    let client = tls.client()?;
    println!("## Registry requests per unique image");
    println!();
    println!("Counted in the access log of the real `docker-registry` (and the token server's record); each image admitted once on a fresh `noe`.");
    println!();
    println!("| image | registry requests | token requests | requests | target |");
    println!("|---|---:|---:|---|---|");

    // Anonymous registry.
    let registry = Registry::start().await?;
    let fixtures = push_standard_fixtures(&registry).await?;
    let noe = start_noe(
        &options.noe,
        &tls,
        &[format!("--insecure-registries={}", registry.host())],
    )
    .await?;
    let cases = [
        ("OCI index", &fixtures.oci_index, "1"),
        ("Docker manifest list", &fixtures.docker_list, "1"),
        ("single OCI manifest", &fixtures.oci_single, "2"),
        ("single Docker v2 manifest", &fixtures.docker_single, "2"),
        ("nested index", &fixtures.nested_index, "—"),
        (
            "index entry without platform",
            &fixtures.index_without_platform,
            "—",
        ),
    ];
    for (i, (name, fixture, target)) in cases.iter().enumerate() {
        registry.reset_requests();
        admit_one(&client, &noe, &fixture.reference(), i).await?;
        let requests = registry.requests();
        let summary: Vec<String> = requests.iter().map(|r| r.summary()).collect();
        println!(
            "| {name} | {} | 0 | {} | {target} |",
            requests.len(),
            summary.join("; ")
        );
    }
    drop(noe);

    // Private registry with token auth, credentials from a docker config file.
    let token_server = TokenServer::builder()
        .user("bench", "secret")
        .start()
        .await?;
    let private = Registry::builder()
        .token_auth(&token_server)
        .start()
        .await?;
    let private_fixtures = push_standard_fixtures(&private).await?;
    let auth = base64::engine::general_purpose::STANDARD.encode("bench:secret");
    let config = tls.dir.path().join("docker-config.json");
    std::fs::write(
        &config,
        serde_json::to_vec(&serde_json::json!({"auths": {private.host(): {"auth": auth}}}))?,
    )?;
    let noe = start_noe(
        &options.noe,
        &tls,
        &[
            format!(
                "--insecure-registries={},{}",
                private.host(),
                token_server.addr()
            ),
            format!("--docker-config-path={}", config.display()),
        ],
    )
    .await?;
    let private_cases = [
        (
            "private OCI index, first image of the registry",
            private_fixtures.oci_index.reference(),
            "1 + 1 token + 1 probe",
        ),
        (
            "private, same repository, another tag (by digest)",
            private_fixtures.oci_index.digest_reference(),
            "1",
        ),
        (
            "private single manifest, new repository",
            private_fixtures.oci_single.reference(),
            "2 + 1 token",
        ),
    ];
    for (i, (name, image, target)) in private_cases.iter().enumerate() {
        private.reset_requests();
        token_server.reset_requests();
        admit_one(&client, &noe, image, 100 + i).await?;
        let requests = private.requests();
        let summary: Vec<String> = requests.iter().map(|r| r.summary()).collect();
        println!(
            "| {name} | {} | {} | {} | {target} |",
            requests.len(),
            token_server.request_count(),
            summary.join("; ")
        );
    }
    drop(noe);
    println!();

    // Concurrent admissions of one uncached image.
    let noe = start_noe(
        &options.noe,
        &tls,
        &[format!("--insecure-registries={}", registry.host())],
    )
    .await?;
    registry.reset_requests();
    let image = fixtures.docker_list.reference();
    let admissions = (0..options.concurrent).map(|i| {
        let review = pod_review(&format!("concurrent-{i}"), std::slice::from_ref(&image));
        let client = client.clone();
        let addr = noe.addr;
        async move { admit(&client, addr, &review).await }
    });
    let answers = join_all(admissions).await;
    let patched = answers
        .iter()
        .filter(|a| a.as_ref().is_ok_and(|a| !a["response"]["patch"].is_null()))
        .count();
    let requests = registry.requests();
    let manifests = requests.iter().filter(|r| r.is_manifest()).count();
    println!("## Concurrent admissions of one uncached image");
    println!();
    println!("| concurrent admissions | patched | registry requests | manifest GETs | target |");
    println!("|---:|---:|---:|---:|---|");
    println!(
        "| {} | {patched} | {} | {manifests} | 1 upstream lookup |",
        options.concurrent,
        requests.len()
    );
    println!();
    Ok(())
}

async fn admit_one(
    client: &reqwest::Client,
    noe: &crate::noe::Process,
    image: &str,
    n: usize,
) -> anyhow::Result<()> {
    let review = pod_review(&format!("requests-{n}"), &[image.to_owned()]);
    let answer = admit(client, noe.addr, &review).await?;
    if answer["response"]["patch"].is_null() {
        bail!("{image}: not patched: {answer}");
    }
    Ok(())
}
