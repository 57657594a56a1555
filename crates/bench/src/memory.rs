//! RSS of `noe` holding N cached lookups. The images are served by a minimal in-process registry
//! that answers every manifest GET with the same two-platform OCI index (a real registry would
//! need N pushes); each lookup is one GET, as for any index.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::bail;
use bytes::Bytes;
use futures::stream::{self, StreamExt as _};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::noe::{admit, start_noe, Tls};
use crate::Options;
use noe_test_support::pod_review;

const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const IMAGES_PER_POD: u32 = 100;

fn index() -> Bytes {
    let entry = |arch: &str, hex: char| {
        serde_json::json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": format!("sha256:{}", hex.to_string().repeat(64)),
            "size": 1234,
            "platform": {"os": "linux", "architecture": arch},
        })
    };
    let body = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [entry("amd64", 'a'), entry("arm64", 'b')],
    });
    Bytes::from(body.to_string())
}

/// Serves `index()` for every manifest GET until dropped (the task ends with the runtime).
async fn manifest_server() -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let body = index();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let body = body.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                    let body = body.clone();
                    async move {
                        let mut response = Response::new(Full::new(Bytes::new()));
                        if request.uri().path().contains("/manifests/") {
                            *response.body_mut() = Full::new(body);
                            response.headers_mut().insert(
                                http::header::CONTENT_TYPE,
                                http::HeaderValue::from_static(OCI_INDEX),
                            );
                        } else if request.uri().path() != "/v2/" {
                            *response.status_mut() = StatusCode::NOT_FOUND;
                        }
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    Ok(addr)
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let registry = manifest_server().await?;
    let tls = Tls::new()?;
    let client = tls.client()?;
    let noe = start_noe(
        &options.noe,
        &tls,
        &[
            format!("--insecure-registries={registry}"),
            format!("--cache-max-entries={}", options.entries.max(1)),
            // The fill sends up to 400 lookups at once to one host: no client-side rate limit.
            "--registry-qps=0".to_owned(),
        ],
    )
    .await?;
    let (idle_rss, _) = noe.rss_kib()?;
    let started = Instant::now();
    let pods = options.entries.div_ceil(IMAGES_PER_POD);
    let results: Vec<anyhow::Result<()>> = stream::iter(0..pods)
        .map(|pod| {
            let client = client.clone();
            let addr = noe.addr;
            async move {
                let images: Vec<String> = (0..IMAGES_PER_POD)
                    .map(|i| pod * IMAGES_PER_POD + i)
                    .map(|n| format!("{registry}/team{}/app{n}:v1.{n}", n % 100))
                    .collect();
                let answer =
                    admit(&client, addr, &pod_review(&format!("mem-{pod}"), &images)).await?;
                if answer["response"]["patch"].is_null() {
                    bail!("pod {pod} not patched: {answer}");
                }
                Ok(())
            }
        })
        .buffer_unordered(4)
        .collect()
        .await;
    let failed = results.iter().filter(|r| r.is_err()).count();
    if let Some(Err(error)) = results.iter().find(|r| r.is_err()) {
        eprintln!("noe-bench: {failed} admissions failed, first: {error:#}");
    }
    let fill = started.elapsed();
    // Let the cache settle and the idle connections close before reading RSS.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let entries = noe
        .metric("noe_registry_cache_entries")
        .await
        .unwrap_or(-1.0);
    let (rss, hwm) = noe.rss_kib()?;
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!("## Memory with cached lookups");
    println!();
    println!(
        "{pods} admissions of pods with {IMAGES_PER_POD} distinct images each ({} s to fill, {failed} failed).",
        fill.as_secs()
    );
    println!();
    println!("| cached entries (gauge) | RSS idle MiB | RSS filled MiB | peak RSS MiB | target |");
    println!("|---:|---:|---:|---:|---|");
    println!(
        "| {entries:.0} | {:.1} | {:.1} | {:.1} | < 64 MiB |",
        mib(idle_rss),
        mib(rss),
        mib(hwm)
    );
    println!();
    Ok(())
}
