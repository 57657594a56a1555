//! Image layers written by the tests themselves: tar archives (the `tar` crate's writer, GNU
//! headers) of small synthetic ELF headers, scripts, links, whiteouts and opaque markers, plain
//! or gzip or zstd, and runnable images of them pushed to the real registry (verification).

use anyhow::Context as _;
use serde_json::{json, Value};

use crate::image::{media_types, platform_json, Descriptor, Flavor};
use crate::push::{sha256_digest, Pusher};

/// One entry of a layer.
#[derive(Clone, Debug)]
pub enum LayerEntry {
    /// A regular file (`mode` 0o755 for programs).
    File {
        path: String,
        mode: u32,
        bytes: Vec<u8>,
    },
    Dir(String),
    Symlink {
        path: String,
        target: String,
    },
    /// A hard link to `target` (a path in the archive or in a lower layer).
    Hardlink {
        path: String,
        target: String,
    },
    /// `.wh.NAME`: hides `path` in the layers below.
    Whiteout(String),
    /// `.wh..wh..opq`: hides the directory's contents in the layers below.
    Opaque(String),
}

impl LayerEntry {
    /// An executable file.
    pub fn program(path: &str, bytes: Vec<u8>) -> Self {
        Self::File {
            path: path.to_owned(),
            mode: 0o755,
            bytes,
        }
    }

    /// A file of mode 0644.
    pub fn data(path: &str, bytes: &[u8]) -> Self {
        Self::File {
            path: path.to_owned(),
            mode: 0o644,
            bytes: bytes.to_vec(),
        }
    }

    pub fn symlink(path: &str, target: &str) -> Self {
        Self::Symlink {
            path: path.to_owned(),
            target: target.to_owned(),
        }
    }

    pub fn hardlink(path: &str, target: &str) -> Self {
        Self::Hardlink {
            path: path.to_owned(),
            target: target.to_owned(),
        }
    }
}

/// The first 64 bytes of an ELF program of `arch` (`amd64`, `arm64`, ...: the table of
/// docs/architecture.md "Verification").
pub fn elf_program(arch: &str) -> anyhow::Result<Vec<u8>> {
    let platform = noe_core::Platform::new("linux", arch, None);
    let machine = noe_core::binary::Machine::expected(&platform)
        .with_context(|| format!("no ELF machine for {arch}"))?;
    Ok(noe_core::binary::elf::synthetic_header(machine))
}

/// A `#!` script running `line` (e.g. `#!/bin/sh`).
pub fn script(line: &str) -> Vec<u8> {
    format!("{line}\nexec \"$@\"\n").into_bytes()
}

/// A tar archive of `entries`, in order, without the leading `/`.
pub fn tar_archive(entries: &[LayerEntry]) -> anyhow::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let header = |kind: tar::EntryType, mode: u32, size: u64| {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_mode(mode);
        header.set_size(size);
        header.set_mtime(0);
        header
    };
    let relative = |path: &str| path.trim_start_matches('/').to_owned();
    for entry in entries {
        match entry {
            LayerEntry::File { path, mode, bytes } => builder.append_data(
                &mut header(tar::EntryType::Regular, *mode, bytes.len() as u64),
                relative(path),
                &bytes[..],
            )?,
            LayerEntry::Dir(path) => builder.append_data(
                &mut header(tar::EntryType::Directory, 0o755, 0),
                relative(path),
                &[][..],
            )?,
            LayerEntry::Symlink { path, target } => builder.append_link(
                &mut header(tar::EntryType::Symlink, 0o777, 0),
                relative(path),
                target,
            )?,
            LayerEntry::Hardlink { path, target } => builder.append_link(
                &mut header(tar::EntryType::Link, 0o755, 0),
                relative(path),
                relative(target),
            )?,
            LayerEntry::Whiteout(path) => {
                let path = relative(path);
                let whiteout = match path.rsplit_once('/') {
                    Some((dir, name)) => format!("{dir}/.wh.{name}"),
                    None => format!(".wh.{path}"),
                };
                builder.append_data(
                    &mut header(tar::EntryType::Regular, 0o644, 0),
                    whiteout,
                    &[][..],
                )?
            }
            LayerEntry::Opaque(dir) => builder.append_data(
                &mut header(tar::EntryType::Regular, 0o644, 0),
                format!("{}/.wh..wh..opq", relative(dir)),
                &[][..],
            )?,
        }
    }
    Ok(builder.into_inner()?)
}

/// How a layer blob is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

/// A layer blob and its descriptor's fields.
#[derive(Clone, Debug)]
pub struct LayerBlob {
    pub bytes: Vec<u8>,
    pub media_type: String,
    pub digest: String,
    /// The size its descriptor states (a lying one for tests).
    pub size: usize,
    /// Descriptor `urls` (a foreign layer).
    pub urls: Vec<String>,
}

impl LayerBlob {
    /// A layer of `entries`, compressed.
    pub fn new(entries: &[LayerEntry], compression: Compression) -> anyhow::Result<Self> {
        let tar = tar_archive(entries)?;
        Self::from_tar(&tar, compression)
    }

    /// `tar` (any bytes) compressed as a layer.
    pub fn from_tar(tar: &[u8], compression: Compression) -> anyhow::Result<Self> {
        let (bytes, media_type) = match compression {
            Compression::None => (tar.to_vec(), "application/vnd.oci.image.layer.v1.tar"),
            Compression::Gzip => (gzip(tar)?, media_types::OCI_LAYER),
            Compression::Zstd => (
                zstd::stream::encode_all(tar, 3)?,
                "application/vnd.oci.image.layer.v1.tar+zstd",
            ),
        };
        Ok(Self::raw(bytes, media_type))
    }

    /// A blob as given, with `media_type`.
    pub fn raw(bytes: Vec<u8>, media_type: &str) -> Self {
        Self {
            digest: sha256_digest(&bytes),
            size: bytes.len(),
            media_type: media_type.to_owned(),
            bytes,
            urls: Vec::new(),
        }
    }

    fn descriptor(&self) -> Value {
        let mut value = json!({
            "mediaType": self.media_type,
            "digest": self.digest,
            "size": self.size,
        });
        if !self.urls.is_empty() {
            value["urls"] = json!(self.urls);
        }
        value
    }
}

/// gzip of `bytes` (default level).
pub fn gzip(bytes: &[u8]) -> anyhow::Result<Vec<u8>> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes)?;
    Ok(encoder.finish()?)
}

/// A runnable image: layers (bottom first), a config with the program to run, the manifest.
#[derive(Clone, Debug)]
pub struct RunnableImage {
    pub layers: Vec<LayerBlob>,
    pub config: Vec<u8>,
    pub manifest: Vec<u8>,
    pub descriptor: Descriptor,
}

impl RunnableImage {
    /// An image of `platform` (`os/arch[/variant]`) whose config's `config` object is `run`
    /// (`{"Entrypoint": [...], "Cmd": [...], "Env": [...], "WorkingDir": ...}`), of `layers`
    /// bottom first.
    pub fn new(
        platform: &str,
        run: Value,
        layers: Vec<LayerBlob>,
        flavor: Flavor,
    ) -> anyhow::Result<Self> {
        let mut config = platform_json(platform)?;
        config["config"] = run;
        // Not the uncompressed digests a builder writes: nothing here reads them.
        let diff_ids: Vec<&str> = layers.iter().map(|l| l.digest.as_str()).collect();
        config["rootfs"] = json!({"type": "layers", "diff_ids": diff_ids});
        let config_type = match flavor {
            Flavor::Oci => media_types::OCI_CONFIG,
            Flavor::Docker => media_types::DOCKER_CONFIG,
        };
        let config = serde_json::to_vec(&config)?;
        let config_digest = sha256_digest(&config);
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": flavor.manifest_type(),
            "config": {"mediaType": config_type, "digest": config_digest, "size": config.len()},
            "layers": layers.iter().map(LayerBlob::descriptor).collect::<Vec<_>>(),
        }))?;
        let descriptor = Descriptor {
            media_type: flavor.manifest_type().to_owned(),
            digest: sha256_digest(&manifest),
            size: manifest.len(),
            config_digest: Some(config_digest),
        };
        Ok(Self {
            layers,
            config,
            manifest,
            descriptor,
        })
    }

    /// Pushes its blobs (foreign ones too, unless `urls` are set) and manifest (by `tag`,
    /// else by digest).
    pub async fn push(
        &self,
        pusher: &Pusher,
        repository: &str,
        tag: Option<&str>,
    ) -> anyhow::Result<Descriptor> {
        pusher.push_blob(repository, &self.config).await?;
        for layer in self.layers.iter().filter(|l| l.urls.is_empty()) {
            pusher.push_blob(repository, &layer.bytes).await?;
        }
        pusher
            .push_manifest(
                repository,
                tag.unwrap_or(&self.descriptor.digest),
                &self.descriptor.media_type,
                &self.manifest,
            )
            .await?;
        Ok(self.descriptor.clone())
    }
}

/// What [`push_mislabelled_index`] pushed.
#[derive(Clone, Debug)]
pub struct Mislabelled {
    /// The index.
    pub index: Descriptor,
    /// The honest `linux/amd64` manifest.
    pub amd64: Descriptor,
    /// The `linux/arm64` manifest whose `/app` is an x86-64 binary.
    pub arm64: Descriptor,
}

/// Pushes the image that lies about its platforms: an OCI index of `linux/amd64` and
/// `linux/arm64` whose arm64 manifest runs `/app`, an x86-64 ELF (the amd64 one runs the same
/// file, honestly). `seed` makes its layers' bytes (and so its digests) differ per call.
pub async fn push_mislabelled_index(
    pusher: &Pusher,
    repository: &str,
    tag: &str,
    seed: &str,
) -> anyhow::Result<Mislabelled> {
    let layer = |note: &str| -> anyhow::Result<LayerBlob> {
        LayerBlob::new(
            &[
                LayerEntry::data("etc/image", format!("{seed} {note}").as_bytes()),
                LayerEntry::program("app", elf_program("amd64")?),
            ],
            Compression::Gzip,
        )
    };
    let run = json!({"Entrypoint": ["/app"]});
    let amd64 = RunnableImage::new(
        "linux/amd64",
        run.clone(),
        vec![layer("amd64")?],
        Flavor::Oci,
    )?;
    let arm64 = RunnableImage::new("linux/arm64", run, vec![layer("arm64")?], Flavor::Oci)?;
    let amd64 = amd64.push(pusher, repository, None).await?;
    let arm64 = arm64.push(pusher, repository, None).await?;
    let entries = [
        crate::IndexEntry::new(&amd64, Some("linux/amd64")),
        crate::IndexEntry::new(&arm64, Some("linux/arm64")),
    ];
    let (body, index) = crate::build_index(Flavor::Oci, &entries)?;
    pusher
        .push_manifest(repository, tag, &index.media_type, &body)
        .await?;
    Ok(Mislabelled {
        index,
        amd64,
        arm64,
    })
}
