//! What verification finds in images of every shape, through the real registry.

use noe_core::binary::Verdict;
use noe_test_support::{script, Compression, Flavor, LayerBlob, LayerEntry as E, RunnableImage};
use serde_json::json;

use super::support::{elf, image, image_of, summary, Setup};

#[tokio::test]
async fn the_mislabelled_index_is_a_mismatch_for_its_arm64_manifest() {
    let setup = Setup::start().await;
    let amd64 = image(
        "linux/amd64",
        &["/app"],
        json!({}),
        &[vec![E::program("app", elf("amd64"))]],
    );
    // An arm64 manifest whose /app is an x86-64 binary.
    let lying = image(
        "linux/arm64",
        &["/app"],
        json!({}),
        &[vec![E::program("app", elf("amd64"))]],
    );
    let reference = setup
        .push_index(
            "lies/app",
            "1",
            &[("linux/amd64", &amd64), ("linux/arm64", &lying)],
        )
        .await;
    let report = setup.verify(&reference).await;
    let by_platform: Vec<(String, String, String)> = report
        .platforms
        .iter()
        .map(|p| {
            (
                p.platform.to_string(),
                summary(p),
                p.report.evidence.clone(),
            )
        })
        .collect();
    assert_eq!(
        by_platform,
        [
            (
                "linux/amd64".into(),
                "verified".into(),
                "/app is an x86-64 ELF (EM_X86_64)".into()
            ),
            (
                "linux/arm64".into(),
                "mismatch".into(),
                "/app is an x86-64 ELF (EM_X86_64)".into()
            ),
        ]
    );
    assert_eq!(report.platforms[1].digest, lying.descriptor.digest);
    assert!(report.digest.starts_with("sha256:"));
    let correction = report.platforms[1]
        .report
        .correction(&report.digest, &report.platforms[1].platform)
        .unwrap();
    assert_eq!(
        setup.metric("noe_verifications_total", Some(("verdict", "mismatch"))),
        1.0
    );
    assert_eq!(
        setup.metric("noe_verifications_total", Some(("verdict", "verified"))),
        1.0
    );
    assert_eq!(setup.metric("noe_verification_duration_seconds", None), 2.0);
    assert!(setup.metric("noe_verification_bytes_total", None) > 0.0);
    assert_eq!(correction.warning("lies/app:1"), "image lies/app:1: linux/arm64 is not used: verification: /app is an x86-64 ELF (EM_X86_64)");
}

#[tokio::test]
async fn gzip_zstd_plain_and_docker_layers_are_read() {
    let setup = Setup::start().await;
    let entries = vec![
        E::Dir("usr".into()),
        E::program("usr/bin/app", elf("arm64")),
    ];
    for (tag, compression) in [
        ("gzip", Compression::Gzip),
        ("zstd", Compression::Zstd),
        ("plain", Compression::None),
    ] {
        let layer = LayerBlob::new(&entries, compression).unwrap();
        let image = image_of("linux/arm64", &["/usr/bin/app"], json!({}), vec![layer]);
        let reference = setup.push("shapes/compression", tag, &image).await;
        let verified = setup.verify_one(&reference).await;
        assert_eq!(summary(&verified), "verified", "{tag}: {verified:?}");
    }
    // Docker's manifest and layer media types.
    let layer = LayerBlob::new(&entries, Compression::Gzip).unwrap();
    let layer = LayerBlob {
        media_type: "application/vnd.docker.image.rootfs.diff.tar.gzip".into(),
        ..layer
    };
    let docker = RunnableImage::new(
        "linux/arm64",
        json!({"Cmd": ["/usr/bin/app"]}),
        vec![layer],
        Flavor::Docker,
    )
    .unwrap();
    let reference = setup.push("shapes/compression", "docker", &docker).await;
    assert_eq!(summary(&setup.verify_one(&reference).await), "verified");
}

#[tokio::test]
async fn layouts_of_real_images_are_followed() {
    let setup = Setup::start().await;
    let debian_base = vec![
        E::symlink("bin", "usr/bin"),
        E::Dir("usr".into()),
        E::Dir("usr/bin".into()),
        E::program("usr/bin/dash", elf("amd64")),
        E::symlink("usr/bin/sh", "dash"),
        E::program("usr/bin/env", elf("amd64")),
    ];
    type Case<'a> = (
        &'a str,
        &'a [&'a str],
        serde_json::Value,
        Vec<Vec<E>>,
        &'a str,
        &'a str,
    );
    let cases: Vec<Case<'_>> = vec![
        // The entrypoint only in a lower layer.
        (
            "lower",
            &["/app"],
            json!({}),
            vec![
                vec![E::program("app", elf("amd64"))],
                vec![E::data("etc/motd", b"hi")],
            ],
            "verified",
            "/app",
        ),
        // A whiteout above hides it.
        (
            "whiteout",
            &["/app"],
            json!({}),
            vec![
                vec![E::program("app", elf("amd64"))],
                vec![E::Whiteout("app".into())],
            ],
            "unverifiable: not-found",
            "/app",
        ),
        // An opaque directory above hides the lower one's contents.
        (
            "opaque",
            &["/opt/app"],
            json!({}),
            vec![
                vec![E::program("opt/app", elf("amd64"))],
                vec![
                    E::Dir("opt".into()),
                    E::Opaque("opt".into()),
                    E::data("opt/README", b""),
                ],
            ],
            "unverifiable: not-found",
            "/opt/app",
        ),
        // A chain of symlinks, absolute then relative, across layers.
        (
            "symlinks",
            &["/app"],
            json!({}),
            vec![
                vec![E::program("opt/real/app", elf("amd64"))],
                vec![
                    E::symlink("app", "/usr/local/bin/app"),
                    E::symlink("usr/local/bin/app", "../../../opt/real/app"),
                ],
            ],
            "verified",
            "/opt/real/app",
        ),
        // A loop of symlinks.
        (
            "loop",
            &["/app"],
            json!({}),
            vec![vec![E::symlink("app", "/b"), E::symlink("b", "/app")]],
            "unverifiable: not-found",
            "/app",
        ),
        // A hard link to a file of a lower layer.
        (
            "hardlink",
            &["/usr/bin/app"],
            json!({}),
            vec![
                vec![E::program("opt/app", elf("amd64"))],
                vec![E::hardlink("usr/bin/app", "opt/app")],
            ],
            "verified",
            "/opt/app",
        ),
        // A shell script through Debian's /bin -> usr/bin, its interpreter in the base layer.
        (
            "shebang",
            &["/usr/local/bin/docker-entrypoint.sh"],
            json!({}),
            vec![
                debian_base.clone(),
                vec![E::program(
                    "usr/local/bin/docker-entrypoint.sh",
                    script("#!/bin/sh"),
                )],
            ],
            "verified",
            "/usr/local/bin/docker-entrypoint.sh",
        ),
        // `#!/usr/bin/env python3` through PATH.
        (
            "env",
            &["/srv/run.py"],
            json!({"Env": ["PATH=/usr/local/bin:/usr/bin"]}),
            vec![
                debian_base.clone(),
                vec![
                    E::program("usr/local/bin/python3", elf("amd64")),
                    E::program("srv/run.py", script("#!/usr/bin/env python3")),
                ],
            ],
            "verified",
            "/srv/run.py",
        ),
        // A bare name through the config's PATH.
        (
            "path",
            &["server"],
            json!({"Env": ["PATH=/opt/bin:/usr/bin"], "WorkingDir": "/srv"}),
            vec![
                debian_base.clone(),
                vec![E::program("opt/bin/server", elf("amd64"))],
            ],
            "verified",
            "/opt/bin/server",
        ),
        // The default PATH when the config has none.
        (
            "default-path",
            &["dash"],
            json!({}),
            vec![debian_base.clone()],
            "verified",
            "/usr/bin/dash",
        ),
        // A JAR is no ELF program.
        (
            "jar",
            &["/app.jar"],
            json!({}),
            vec![vec![E::program("app.jar", b"PK\x03\x04 zip".to_vec())]],
            "unverifiable: not-elf",
            "/app.jar",
        ),
    ];
    for (tag, entrypoint, extra, layers, expected, program) in cases {
        let built = image("linux/amd64", entrypoint, extra, &layers);
        let reference = setup.push("shapes/layouts", tag, &built).await;
        let verified = setup.verify_one(&reference).await;
        assert_eq!(
            (
                summary(&verified).as_str(),
                verified.report.program.as_deref()
            ),
            (expected, Some(program)),
            "{tag}: {}",
            verified.report.evidence
        );
    }
}

#[tokio::test]
async fn every_machine_of_the_table_is_told_apart() {
    let setup = Setup::start().await;
    let arches = [
        "amd64", "arm64", "arm", "386", "ppc64le", "s390x", "riscv64", "loong64",
    ];
    let mut images = Vec::new();
    for arch in arches {
        // Each platform's manifest carries the next architecture's binary.
        let other = arches[(arches.iter().position(|a| *a == arch).unwrap() + 1) % arches.len()];
        let platform = if arch == "arm" {
            "linux/arm/v7".to_owned()
        } else {
            format!("linux/{arch}")
        };
        images.push((
            platform,
            image(
                &format!("linux/{arch}"),
                &["/app"],
                json!({}),
                &[vec![E::program("app", elf(other))]],
            ),
            other,
        ));
    }
    let refs: Vec<(&str, &RunnableImage)> =
        images.iter().map(|(p, i, _)| (p.as_str(), i)).collect();
    let reference = setup.push_index("shapes/machines", "1", &refs).await;
    let report = setup.verify(&reference).await;
    assert_eq!(report.platforms.len(), arches.len());
    for (platform, (_, _, other)) in report.platforms.iter().zip(&images) {
        assert_eq!(platform.report.verdict, Verdict::Mismatch, "{platform:?}");
        let found = platform.report.machine.unwrap().name();
        let expected =
            noe_core::binary::Machine::expected(&noe_core::Platform::new("linux", *other, None))
                .unwrap()
                .name();
        assert_eq!(found, expected);
    }
}

#[tokio::test]
async fn an_entrypoint_in_the_top_layer_reads_that_layer_alone() {
    let setup = Setup::start().await;
    let filler = super::bounds::noise(200_000);
    let base = LayerBlob::new(&[E::data("usr/lib/big", &filler)], Compression::Gzip).unwrap();
    let top = LayerBlob::new(&[E::program("app", elf("amd64"))], Compression::Gzip).unwrap();
    let top_size = top.bytes.len() as u64;
    let top_digest = top.digest.clone();
    let built = image_of("linux/amd64", &["/app"], json!({}), vec![base, top]);
    let reference = setup.push("shapes/top", "1", &built).await;
    setup.registry.reset_requests();
    let verified = setup.verify_one(&reference).await;
    assert_eq!(summary(&verified), "verified");
    assert_eq!(verified.bytes, top_size);
    let blobs = setup.blob_gets();
    let config = built.descriptor.config_digest.clone().unwrap();
    assert_eq!(blobs.len(), 2, "{blobs:?}");
    assert!(blobs.iter().any(|b| b.ends_with(&config)));
    assert!(blobs.iter().any(|b| b.ends_with(&top_digest)));
}

#[tokio::test]
async fn windows_and_foreign_layers_are_unverifiable_without_reading_them() {
    let setup = Setup::start().await;
    let windows = image(
        "windows/amd64",
        &["C:\\app.exe"],
        json!({}),
        &[vec![E::data("Files/app.exe", b"MZ")]],
    );
    let reference = setup.push("shapes/windows", "1", &windows).await;
    setup.registry.reset_requests();
    assert_eq!(
        summary(&setup.verify_one(&reference).await),
        "unverifiable: windows"
    );
    assert!(setup
        .blob_gets()
        .iter()
        .all(|b| b.ends_with(windows.descriptor.config_digest.as_deref().unwrap())));

    // A foreign base layer (not in the registry) below a top layer that holds the program:
    // never needed. Above it, the program's layer is foreign: unverifiable.
    let mut foreign =
        LayerBlob::new(&[E::program("app", elf("amd64"))], Compression::Gzip).unwrap();
    foreign.media_type = "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip".into();
    foreign.urls = vec!["https://example.invalid/base".into()];
    let top = LayerBlob::new(&[E::program("app", elf("amd64"))], Compression::Gzip).unwrap();
    let above = image_of(
        "linux/amd64",
        &["/app"],
        json!({}),
        vec![foreign.clone(), top],
    );
    let reference = setup.push("shapes/foreign", "above", &above).await;
    assert_eq!(summary(&setup.verify_one(&reference).await), "verified");
    let etc = LayerBlob::new(&[E::data("etc/motd", b"")], Compression::Gzip).unwrap();
    let below = image_of("linux/amd64", &["/app"], json!({}), vec![foreign, etc]);
    let reference = setup.push("shapes/foreign", "below", &below).await;
    assert_eq!(
        summary(&setup.verify_one(&reference).await),
        "unverifiable: foreign-layer"
    );
}
