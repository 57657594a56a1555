//! `noe inspect IMAGE...`: the platforms of images, as the webhook sees them.
//!
//! Images are resolved concurrently (bounded, and per registry host) and printed in the order
//! given; with `-o json` every image gets one record, a failure `{"image","error":{"kind","message"}}`.
//! Each image's manifest is fetched (`Resolver::inspect`) for its index entries, and with
//! `--raw`, `--platform`, `--config` and `--digest` (`show.rs`) for what crane and regctl show;
//! with the server's `--shared-cache` and none of those flags, images are resolved as a replica
//! would (the shared cache may answer, without index entries).

mod show;
mod upgrades;
mod verify;

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use futures::StreamExt;
use noe_registry::inspect::{Inspection, PlatformSpec, Want};
use noe_registry::upgrade::Upgrades;
use noe_registry::{Resolution, Routed};
use noe_webhook::resolve::pull_secrets::PullSecrets;
use noe_webhook::resolve::{one_line, Credentials};

use super::hosts::Hosts;
use super::plain_http::{plain_http, plain_http_hint};
use super::progress::Progress;
use crate::app::{App, Overridden};
use crate::cli::flags::parse::ConfigError;
use crate::config::{self, InspectShow, Output};

#[derive(Clone, Debug, Args)]
pub struct InspectArgs {
    /// Image references (`nginx:1.27`, `ghcr.io/org/app@sha256:...`).
    #[arg(required = true)]
    pub images: Vec<String>,

    /// `json` prints one JSON object per image and line.
    #[arg(
        long,
        short = 'o',
        env = "NOE_OUTPUT",
        value_enum,
        default_value = "text"
    )]
    pub output: Output,

    /// Print the manifest or index exactly as served (with `--platform`, that platform's
    /// manifest; with `--config`, the config blob). Text: the bytes alone on stdout, media type
    /// and digest on stderr (one image); json: in `raw`.
    #[arg(long, env = "NOE_RAW")]
    pub raw: bool,

    /// Select one platform of an index, `os/arch[/variant][:os.version]` (`linux/arm64`,
    /// `windows/amd64:10.0.20348.2227`): its manifest digest and image config. A single image
    /// must have that platform.
    #[arg(long, env = "NOE_PLATFORM", value_name = "OS/ARCH[/VARIANT]", value_parser = PlatformSpec::parse)]
    pub platform: Option<PlatformSpec>,

    /// Print the image config summary (os, architecture, variant, os.version, os.features,
    /// created, entrypoint, cmd, user, working dir, exposed ports, labels); an index needs
    /// `--platform`.
    #[arg(long, env = "NOE_CONFIG")]
    pub config: bool,

    /// Print the digest alone (with `--platform`, that platform's manifest digest), as `crane
    /// digest` does.
    #[arg(long, env = "NOE_DIGEST")]
    pub digest: bool,

    /// Resolve as a pod running as this ServiceAccount would be (`NAMESPACE/NAME`): credential
    /// provider plugins with `tokenAttributes` get a token of that account, as the server gives
    /// them with `--credential-provider-sa-tokens` (which this implies). Needs the Kubernetes
    /// API (`--kubeconfig`, as kubectl finds one): `create serviceaccounts/token` and `get
    /// serviceaccounts` in that namespace.
    #[arg(long, env = "NOE_SERVICE_ACCOUNT", value_name = "NAMESPACE/NAME",
          value_parser = parse_service_account)]
    pub service_account: Option<(String, String)>,

    /// Verify each platform by its own program: the ELF header of what the platform's config
    /// runs, read from its layers (top down, at most --verify-max-bytes compressed bytes per
    /// platform). Exit 1 when any platform's program is of another machine (`mismatch`).
    #[arg(long, env = "NOE_VERIFY")]
    pub verify: bool,

    /// For each `--target-arch` the image does not run on, search its repository's tags for
    /// the first version that does, and the newest.
    #[arg(long, env = "NOE_UPGRADES")]
    pub upgrades: bool,

    /// With `--upgrades`: the architectures (`arm64`, `amd64`, ...), repeatable or comma
    /// separated.
    #[arg(long, env = "NOE_TARGET_ARCH", value_delimiter = ',', default_value = "arm64",
          value_parser = super::arch::parse_arch)]
    pub target_arch: Vec<String>,
}

/// `NAMESPACE/NAME`: a DNS-1123 label and a DNS-1123 subdomain, as the API names them.
fn parse_service_account(text: &str) -> Result<(String, String), String> {
    let (namespace, name) = text
        .split_once('/')
        .ok_or_else(|| "expected NAMESPACE/NAME".to_owned())?;
    if !dns_label(namespace) {
        return Err(format!("{namespace:?} is not a namespace name"));
    }
    if name.len() > 253 || !name.split('.').all(dns_label) {
        return Err(format!("{name:?} is not a service account name"));
    }
    Ok((namespace.to_owned(), name.to_owned()))
}

/// A DNS-1123 label: 1 to 63 of `a-z`, `0-9`, `-`, starting and ending alphanumeric.
fn dns_label(text: &str) -> bool {
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let bytes = text.as_bytes();
    matches!((bytes.first(), bytes.last()), (Some(&a), Some(&b)) if alnum(a) && alnum(b))
        && bytes.len() <= 63
        && bytes.iter().all(|&c| alnum(c) || c == b'-')
}

impl InspectArgs {
    /// What to show; `--raw` prints one image's bytes in text mode, `--digest` a digest alone.
    pub fn show(&self) -> Result<InspectShow, ConfigError> {
        if self.digest && (self.raw || self.config) {
            return Err(ConfigError::Contradiction(
                "--digest prints a digest alone: it does not go with --raw or --config".into(),
            ));
        }
        if self.verify && (self.raw || self.digest) {
            return Err(ConfigError::Contradiction(
                "--verify prints each platform's verdict: it does not go with --raw or --digest"
                    .into(),
            ));
        }
        if self.raw && self.output == Output::Text && self.images.len() > 1 {
            return Err(ConfigError::Contradiction(
                "--raw prints one image's bytes: give one image, or use -o json for several".into(),
            ));
        }
        if self.upgrades && (self.raw || self.digest) {
            return Err(ConfigError::Contradiction(
                "--upgrades adds to an image's record: it does not go with --raw or --digest"
                    .into(),
            ));
        }
        let mut upgrades: Vec<String> = Vec::new();
        if self.upgrades {
            for arch in &self.target_arch {
                if !upgrades.contains(arch) {
                    upgrades.push(arch.clone());
                }
            }
        }
        Ok(InspectShow {
            raw: self.raw,
            platform: self.platform.clone(),
            config: self.config,
            digest: self.digest,
            verify: self.verify,
            upgrades,
        })
    }
}

/// Images resolved at the same time.
const CONCURRENCY: usize = 8;
/// Prints each image's resolution, in the order given, resolving them concurrently; exit 1 (one
/// line per failure on stderr, and with `-o json` a record with `error`) when any image cannot
/// be resolved, 2 when the registry configuration cannot be used.
pub async fn run(config: config::Inspect) -> ExitCode {
    let config::Inspect {
        images,
        output,
        show,
        registry,
        service_account,
        kube,
    } = config;
    // With the server's shared cache, plain inspect resolves as a replica would.
    let fetch = show.asks_registry() || registry.resolver.shared_cache.is_none();
    let want = Want {
        platform: show.platform.clone(),
        config: show.config,
        digest_only: show.digest,
    };
    let app = match App::build(registry).await {
        Ok(app) => app,
        Err(error) => {
            eprintln!("noe: {}", one_line(&error));
            return super::Exit::Unusable.into();
        }
    };
    let credentials = match &service_account {
        None => app.credentials(None),
        Some((namespace, name)) => match account_credentials(&app, &kube, namespace, name).await {
            Ok(credentials) => credentials,
            Err(reason) => {
                eprintln!("noe: --service-account {namespace}/{name}: {reason}");
                return super::Exit::Unusable.into();
            }
        },
    };
    let account = service_account
        .as_ref()
        .map(|(namespace, name)| (namespace.as_str(), name.as_str()));
    let hosts = Hosts::default();
    let read = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let progress = if show.verify {
        Progress::verifying(images.len(), read.clone())
    } else {
        Progress::new(images.len(), "images")
    };
    let verifying = show.verify.then_some(noe_registry::verify::Options {
        background: false,
        progress: Some(read),
    });
    let (app, hosts) = (&app, &hosts);
    let finder = (!show.upgrades.is_empty()).then(|| Upgrades::new(app.resolver.clone()));
    let (show, finder) = (&show, finder.as_ref());
    let mut answers = futures::stream::iter(&images)
        .map(|image| {
            let fetch = fetch.then_some(&want);
            let asking = Asking {
                credentials: &credentials,
                account,
            };
            let registry_only = show.asks_registry() || show.verify;
            let verifying = verifying.as_ref();
            async move {
                let (image, answer, routed) =
                    inspect(app, hosts, asking, image, fetch, registry_only).await;
                let verified = match (verifying, &routed) {
                    (Some(options), Some(routed)) if answer.is_ok() => {
                        Some(verify::verify(app, asking, routed, options).await)
                    }
                    _ => None,
                };
                let upgrades = match (finder, &answer) {
                    (Some(finder), Ok(found)) => {
                        upgrades::of(
                            app,
                            finder,
                            asking,
                            image,
                            found.platforms(),
                            &show.upgrades,
                        )
                        .await
                    }
                    _ => Vec::new(),
                };
                (image, answer, verified, upgrades)
            }
        })
        .buffered(CONCURRENCY);
    let mut failed = false;
    let mut stdout = std::io::stdout().lock();
    while let Some((image, answer, verified, upgrades)) = answers.next().await {
        failed |= answer.is_err() || verified.as_ref().is_some_and(verify::fails);
        let printed = progress.done(|| {
            print(
                &mut stdout,
                output,
                show,
                image,
                &answer,
                verified.as_ref(),
                &upgrades,
            )
        });
        if printed.is_err() {
            return ExitCode::FAILURE;
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The credentials of a pod running as `namespace/name` (`--service-account`): the account is
/// read first, so a missing API, account or permission is said at once.
async fn account_credentials(
    app: &App,
    kube: &config::KubeSettings,
    namespace: &str,
    name: &str,
) -> Result<Credentials, String> {
    use noe_credentials::ServiceAccounts as _;
    let client = crate::app::kube_client(kube)
        .await
        .map_err(|error| format!("needs the Kubernetes API: {}", one_line(&error)))?;
    let pull_secrets = PullSecrets::new(client).with_service_account_tokens();
    if let Some(accounts) = pull_secrets.service_accounts() {
        accounts
            .get(namespace, name)
            .await
            .map_err(|error| one_line(&error))?;
    }
    Ok(app.credentials(Some(pull_secrets)))
}

/// Whose credentials an image is resolved with.
#[derive(Clone, Copy)]
struct Asking<'a> {
    credentials: &'a Credentials,
    /// `--service-account`: (namespace, name).
    account: Option<(&'a str, &'a str)>,
}

impl Asking<'_> {
    async fn candidates(&self, routed: &Routed) -> Vec<noe_credentials::CredentialCandidate> {
        match self.account {
            Some((namespace, name)) => {
                self.credentials
                    .candidates_as(routed, None, namespace, Some(name))
                    .await
            }
            None => self.credentials.candidates(routed, None).await,
        }
    }
}

/// What one image resolved to.
enum Found {
    /// A `--platform-overrides` entry answered: no registry contacted.
    Overridden(Overridden),
    Resolved(Arc<Resolution>),
    /// The manifest was fetched for inspection.
    Inspected(Box<Inspection>),
}

impl Found {
    /// The image's platforms.
    fn platforms(&self) -> &[noe_core::Platform] {
        match self {
            Self::Overridden(found) => &found.matched.platforms,
            Self::Resolved(resolution) => &resolution.platforms,
            Self::Inspected(inspection) => &inspection.resolution.platforms,
        }
    }
}

/// Why one image could not be resolved: a class of [`noe_registry::Error::kind`] and a message.
#[derive(Debug)]
struct Failure {
    kind: &'static str,
    message: String,
}

/// Resolves one image: an override, or the registry (failing at once when its host already
/// timed out in this run); with `fetch`, its manifest is fetched for inspection.
/// `registry_only` (the flags that look at what the registry serves) asks it even for an image
/// an override answers. The image routed, when it was.
async fn inspect<'a>(
    app: &App,
    hosts: &Hosts,
    asking: Asking<'_>,
    image: &'a str,
    fetch: Option<&Want>,
    registry_only: bool,
) -> (&'a str, Result<Found, Failure>, Option<Routed>) {
    // A reference that does not parse fails below, with the usual message.
    if !registry_only {
        if let Ok(Some(found)) = app.platform_override(image).await {
            return (image, Ok(Found::Overridden(found)), None);
        }
    }
    let host = app
        .resolver
        .target(image)
        .ok()
        .map(|target| target.registry);
    if let Some(host) = &host {
        if let Err(first) = hosts.enter(host).await {
            let failure = Failure {
                kind: "timeout",
                message: format!("not tried: {host} timed out earlier in this run ({first})"),
            };
            return (image, Err(failure), None);
        }
    }
    let failure = |error: noe_registry::Error| Failure {
        kind: error.kind(),
        message: describe(&error),
    };
    let (answer, routed) = match app.resolver.routed(image).await {
        Err(error) => (Err(failure(error)), None),
        Ok(routed) => {
            let candidates = asking.candidates(&routed).await;
            let answer = match fetch {
                Some(want) => match app.resolver.inspect(&routed, &candidates, want).await {
                    Ok(inspection) => show::picked(image, want, inspection).map(Found::Inspected),
                    Err(error) => Err(failure(error)),
                },
                None => app
                    .resolver
                    .resolve_routed(&routed, None, &candidates)
                    .await
                    .map(Found::Resolved)
                    .map_err(failure),
            };
            (answer, Some(routed))
        }
    };
    if let Some(host) = &host {
        let timeout = match &answer {
            Err(failure) if failure.kind == "timeout" => Some(failure.message.as_str()),
            _ => None,
        };
        hosts.leave(host, timeout);
    }
    (image, answer, routed)
}

/// The error in one line, with what to do about a registry that answered plain HTTP.
fn describe(error: &noe_registry::Error) -> String {
    let text = one_line(error);
    match (plain_http(error), error.registry()) {
        (true, Some(host)) => format!("{text} ({})", plain_http_hint(host)),
        _ => text,
    }
}

/// Prints one image's answer: its record on stdout (`-o json`: a failure too, with `error`),
/// and a failure's one line on stderr; with `--verify`, each platform's verdict in the record.
fn print(
    stdout: &mut impl Write,
    output: Output,
    show: &InspectShow,
    image: &str,
    answer: &Result<Found, Failure>,
    verified: Option<&Result<noe_registry::verify::ImageReport, Failure>>,
    upgrades: &[upgrades::ForArch],
) -> std::io::Result<()> {
    if verified.is_none() && upgrades.is_empty() {
        return print_answer(stdout, output, show, image, answer);
    }
    let mut record = Vec::new();
    print_answer(&mut record, output, show, image, answer)?;
    if let Some(verified) = verified {
        let mut verified_record = Vec::new();
        verify::print(&mut verified_record, output, image, record, verified)?;
        record = verified_record;
    }
    if upgrades.is_empty() {
        return stdout.write_all(&record);
    }
    upgrades::print(stdout, output, record, upgrades)
}

fn print_answer(
    stdout: &mut impl Write,
    output: Output,
    show: &InspectShow,
    image: &str,
    answer: &Result<Found, Failure>,
) -> std::io::Result<()> {
    match (answer, output) {
        (Ok(Found::Inspected(inspection)), _) => show::print(stdout, output, show, inspection),
        (Ok(Found::Overridden(found)), Output::Json) => json_line(stdout, &found.json()),
        (Ok(Found::Overridden(found)), Output::Text) => found.write_text(stdout),
        (Ok(Found::Resolved(resolution)), Output::Json) => {
            json_line(stdout, &serde_json::to_value(&**resolution)?)
        }
        (Ok(Found::Resolved(resolution)), Output::Text) => write_text(stdout, resolution),
        (Err(failure), _) => {
            let reason = printable(&failure.message);
            let shown = printable(image);
            if reason.contains(shown.as_str()) {
                eprintln!("noe: {reason}");
            } else {
                eprintln!("noe: {shown}: {reason}");
            }
            match output {
                Output::Json => json_line(
                    stdout,
                    &serde_json::json!({
                        "image": image,
                        "error": {"kind": failure.kind, "message": failure.message},
                    }),
                ),
                Output::Text => Ok(()),
            }
        }
    }
}

fn json_line(out: &mut impl Write, value: &serde_json::Value) -> std::io::Result<()> {
    let line = serde_json::to_string(value).map_err(std::io::Error::other)?;
    writeln!(out, "{line}")
}

/// `text` with control characters escaped, so a registry cannot write to the terminal.
fn printable(text: &str) -> String {
    if text.chars().any(char::is_control) {
        text.chars()
            .flat_map(|c| {
                if c.is_control() {
                    c.escape_default().collect::<Vec<_>>()
                } else {
                    vec![c]
                }
            })
            .collect()
    } else {
        text.to_owned()
    }
}

fn write_text(out: &mut impl Write, resolution: &Resolution) -> std::io::Result<()> {
    write_fields(out, resolution)?;
    writeln!(out)
}

/// The resolution's lines, without the blank line that ends an image's block.
fn write_fields(out: &mut impl Write, resolution: &Resolution) -> std::io::Result<()> {
    let registry = resolution
        .resolved
        .split_once('/')
        .map_or(resolution.resolved.as_str(), |(host, _)| host);
    let platforms: Vec<String> = resolution
        .platforms
        .iter()
        .map(|platform| printable(&platform.to_string()))
        .collect();
    writeln!(out, "image:       {}", printable(&resolution.image))?;
    writeln!(out, "resolved:    {}", printable(&resolution.resolved))?;
    writeln!(out, "registry:    {}", printable(registry))?;
    writeln!(out, "mediaType:   {}", printable(&resolution.media_type))?;
    writeln!(out, "digest:      {}", printable(&resolution.digest))?;
    writeln!(
        out,
        "credential:  {}",
        printable(
            resolution
                .credential_source
                .as_deref()
                .unwrap_or("anonymous")
        )
    )?;
    writeln!(out, "platforms:   {}", platforms.join(" "))?;
    writeln!(out, "answeredBy:  {}", resolution.answered_by.as_str())
}

impl Overridden {
    /// The `--output json` line: the usual keys (no digest, media type or credential: no
    /// registry was contacted) and `override`.
    fn json(&self) -> serde_json::Value {
        let resolution = self.matched.resolution(&self.reference);
        let mut json = serde_json::to_value(&resolution).unwrap_or_default();
        json["credentialSource"] = serde_json::json!("none");
        json["override"] = serde_json::json!({
            "file": self.file.display().to_string(),
            "entry": self.matched.entry,
            "pattern": self.matched.pattern,
        });
        json
    }

    fn write_text(&self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(
            out,
            "image:       {}",
            printable(&self.reference.to_string())
        )?;
        writeln!(
            out,
            "override:    {} entry {} (pattern {}): no registry contacted",
            printable(&self.file.display().to_string()),
            self.matched.entry,
            printable(&self.matched.pattern)
        )?;
        writeln!(out, "platforms:   {}", self.matched.platforms_text())?;
        writeln!(out)
    }
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("linux/amd64"), "linux/amd64");
        assert_eq!(printable("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
        assert_eq!(printable("tab\there"), "tab\\there");
    }
}
