//! `noe report`: which workloads of a cluster or a file could run on a target architecture, and
//! how much capacity could move (docs/configuration.md, "noe report").
//!
//! The workloads come from a cluster (listed page by page, [`source`]) or from files (YAML
//! streams, JSON `List`s, `kubectl get -o json` output); each unique image (with the pull
//! secrets of its pods when connected) is resolved once with the server's resolver,
//! credentials and limits, `--concurrency` at a time ([`images`]); the verdicts, totals and
//! renderings are `noe_core::report`'s, pure.
//! Exit codes ([`Exit`]): 0 the report is complete and no workload has a `--fail-on` verdict,
//! 1 some workload has one, 2 the command cannot run (flags, files, no API access), 3 part of
//! the source could not be read (a list refused, an object that is not valid): the report is
//! partial.

mod images;
mod meta;
mod source;
mod upgrades;

use std::io::Write as _;
use std::path::PathBuf;

use clap::Args;
use noe_core::report::{Item, Report, Verdict};
use noe_webhook::admission::gate::selector::Selector;
use noe_webhook::resolve::one_line;

use super::Exit;
use crate::app::App;
use crate::config::{self, ReportFormat};
use meta::html_meta;
use upgrades::Searches;

/// Images resolved at the same time by default.
pub const DEFAULT_CONCURRENCY: usize = 16;
/// Most `--target-arch` values.
const MAX_TARGETS: usize = 16;

#[derive(Clone, Debug, Args)]
pub struct ReportArgs {
    /// Read workloads from this file instead of a cluster (YAML documents, a JSON `List`,
    /// `kubectl get -o json` output; `-` = stdin). Repeatable.
    #[arg(long, short = 'f', env = "NOE_FILE", value_name = "FILE")]
    pub file: Vec<PathBuf>,

    /// Only this namespace (default: the kubeconfig context's namespace; with files, every
    /// namespace of the files).
    #[arg(
        long,
        short = 'n',
        env = "NOE_NAMESPACE",
        conflicts_with = "all_namespaces"
    )]
    pub namespace: Option<String>,

    /// Every namespace of the cluster.
    #[arg(long, short = 'A', env = "NOE_ALL_NAMESPACES")]
    pub all_namespaces: bool,

    /// Only the objects whose labels match this label selector (`kubectl -l` syntax).
    #[arg(long, short = 'l', env = "NOE_SELECTOR", value_parser = parse_selector)]
    pub selector: Option<(String, Selector)>,

    /// Also show where each workload's pods run now, per node architecture (lists pods and
    /// nodes).
    #[arg(long, env = "NOE_INCLUDE_PODS")]
    pub include_pods: bool,

    /// Architecture to assess readiness for (`arm64`, `amd64`, ...). Repeatable or comma
    /// separated.
    #[arg(long, env = "NOE_TARGET_ARCH", value_delimiter = ',', default_value = "arm64",
          value_parser = super::arch::parse_arch)]
    pub target_arch: Vec<String>,

    /// Images resolved at the same time.
    #[arg(long, env = "NOE_CONCURRENCY", default_value_t = DEFAULT_CONCURRENCY,
          value_parser = parse_concurrency)]
    pub concurrency: usize,

    /// `table`, `json` (the `ReadinessReport`), `csv`, `markdown` or `html` (one
    /// self-contained page).
    #[arg(
        long,
        short = 'o',
        env = "NOE_OUTPUT",
        value_enum,
        default_value = "table"
    )]
    pub output: ReportFormat,

    /// Exit 1 when some workload has one of these verdicts for a target architecture
    /// (`blocked`, `unknown`; comma separated or repeatable).
    #[arg(long, env = "NOE_FAIL_ON", value_delimiter = ',', value_enum)]
    pub fail_on: Vec<FailOn>,

    /// Verify each image's platforms by its own programs (as `noe inspect --verify`): a
    /// platform whose program is of another machine does not count as support, and the image
    /// lists it under `corrections` (JSON).
    #[arg(long, env = "NOE_VERIFY")]
    pub verify: bool,

    /// For each image that blocks a target architecture, search its repository's tags for the
    /// first version that runs on it, and the newest (`--upgrades=false`: no tag is listed).
    #[arg(long, env = "NOE_UPGRADES", action = clap::ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_value = "true", default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub upgrades: bool,

    #[command(flatten)]
    pub learned: super::learned::LearnedSourceArgs,
}

/// A verdict that fails the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    Blocked,
    Unknown,
}

impl FailOn {
    fn verdict(self) -> Verdict {
        match self {
            Self::Blocked => Verdict::Blocked,
            Self::Unknown => Verdict::Unknown,
        }
    }
}

fn parse_selector(text: &str) -> Result<(String, Selector), String> {
    let selector = text
        .parse()
        .map_err(|error| format!("not a label selector: {error}"))?;
    Ok((text.trim().to_owned(), selector))
}

/// 1 to 1024.
fn parse_concurrency(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=1024).contains(&n) => Ok(n),
        _ => Err(format!("{text:?} is not a number from 1 to 1024")),
    }
}

impl ReportArgs {
    /// The typed settings of the report (not the registry's).
    pub fn settings(
        &self,
    ) -> Result<config::ReportSettings, crate::cli::flags::parse::ConfigError> {
        let contradiction = crate::cli::flags::parse::ConfigError::Contradiction;
        let mut targets: Vec<String> = Vec::new();
        for arch in &self.target_arch {
            if !targets.contains(arch) {
                targets.push(arch.clone());
            }
        }
        if targets.len() > MAX_TARGETS {
            return Err(contradiction(format!(
                "--target-arch: at most {MAX_TARGETS} architectures"
            )));
        }
        if let Some(namespace) = &self.namespace {
            crate::cli::flags::parse::namespace(namespace)?;
        }
        let scope = match (&self.namespace, self.all_namespaces) {
            (Some(namespace), _) => config::ReportScope::Namespace(namespace.clone()),
            (None, true) => config::ReportScope::All,
            (None, false) if self.file.is_empty() => config::ReportScope::Current,
            (None, false) => config::ReportScope::All,
        };
        Ok(config::ReportSettings {
            files: self.file.clone(),
            scope,
            selector: self.selector.clone(),
            include_pods: self.include_pods,
            targets,
            concurrency: self.concurrency,
            format: self.output,
            fail_on: self.fail_on.iter().map(|f| f.verdict()).collect(),
            verify: self.verify,
            upgrades: self.upgrades,
        })
    }
}

/// Lists, resolves, renders; `Err` with a one-line reason when it cannot run at all.
pub(crate) async fn run(config: config::Report) -> Result<Exit, String> {
    let config::Report {
        settings,
        kube,
        registry,
        learned,
    } = config;
    let mut app = App::build(registry)
        .await
        .map_err(|error| one_line(&error))?;
    let client = if settings.files.is_empty() || learned.is_some() {
        Some(
            crate::app::kube_client(&kube)
                .await
                .map_err(|error| one_line(&error))?,
        )
    } else {
        None
    };
    // What the cluster's nodes taught (the learned store) counts as in the server, and is
    // listed as "learned".
    if let (Some(client), Some(source)) = (&client, &learned) {
        if let Some(view) = super::learned::read_for_run(client.clone(), source).await? {
            app = app.with_corrections(std::sync::Arc::new(view));
        }
    }
    let collected = match &client {
        Some(client) if settings.files.is_empty() => {
            source::from_cluster(client, &settings).await?
        }
        _ => source::from_files(&settings)?,
    };
    let source::Collected {
        workloads,
        placement,
        errors,
        pull_secrets,
        ..
    } = collected;
    let secrets =
        images::load_secrets(&workloads, pull_secrets.as_ref(), settings.concurrency).await;
    // The upgrade searches start as the images' answers come, beside the other lookups.
    let (searches, jobs) = Searches::new(&workloads, &secrets, &settings.targets);
    let lookups = {
        let (app, workloads, secrets, settings) = (&app, &workloads, &secrets, &settings);
        async move {
            let answered = |image: &str, scope, pod: Option<&_>, answer: &_| {
                if settings.upgrades {
                    searches.answered(image, scope, pod, answer);
                }
            };
            let looked = images::resolve_all(
                app,
                workloads,
                secrets,
                settings.concurrency,
                settings.verify,
                &answered,
            )
            .await;
            drop(searches);
            looked
        }
    };
    let (looked, found) = tokio::join!(lookups, Searches::run(&app, jobs, settings.concurrency));
    let mut items: Vec<Item> = workloads
        .into_iter()
        .zip(looked)
        .map(|(workload, looked)| {
            let (answers, proven): (Vec<_>, Vec<_>) = looked.into_iter().unzip();
            let mut item = Item::new(workload, answers, &settings.targets);
            for (entry, proven) in item.images.iter_mut().zip(proven) {
                entry.corrections = proven.corrections;
                entry.learned = proven.learned;
            }
            item
        })
        .collect();
    if settings.upgrades {
        Searches::attach(&mut items, &secrets, &found);
    }
    let placement = settings.include_pods.then_some(&placement);
    let mut report = Report::new(settings.targets.clone(), items, placement, errors);
    if settings.upgrades {
        report = report.with_upgrades();
    }
    let stdout = std::io::stdout().lock();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout);
    let written = match settings.format {
        ReportFormat::Json => report.write_json(&mut out),
        ReportFormat::Table => out.write_all(report.table().as_bytes()),
        ReportFormat::Csv => out.write_all(report.csv().as_bytes()),
        ReportFormat::Markdown => out.write_all(report.markdown().as_bytes()),
        ReportFormat::Html => report.write_html(&html_meta(&settings, &kube), &mut out),
    };
    written
        .and_then(|()| out.flush())
        .map_err(|error| format!("cannot write the report: {error}"))?;
    Ok(if report.any(&settings.fail_on) {
        Exit::Failed
    } else if !report.source_errors.is_empty() {
        Exit::Incomplete
    } else {
        Exit::Passed
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::cli::{Args, Run};

    fn settings(argv: &[&str]) -> Result<config::ReportSettings, String> {
        let argv = std::iter::once("noe")
            .chain(argv.iter().copied())
            .map(Into::into);
        let args = Args::try_parse_normalized(argv).map_err(|e| e.to_string())?;
        match args.to_run().map_err(|e| e.to_string())? {
            Run::Report(report) => Ok(report.settings),
            _ => Err("not a report".into()),
        }
    }

    #[test]
    fn flags_become_settings() {
        let plain = settings(&["report"]).unwrap();
        assert_eq!(plain.scope, config::ReportScope::Current);
        assert_eq!(plain.targets, ["arm64"]);
        assert_eq!(plain.concurrency, DEFAULT_CONCURRENCY);
        assert_eq!(plain.format, ReportFormat::Table);
        assert!(plain.fail_on.is_empty());
        let files = settings(&["report", "-f", "a.yaml", "-f=-"]).unwrap();
        assert_eq!(files.scope, config::ReportScope::All);
        assert_eq!(files.files.len(), 2);
        let full = settings(&[
            "report",
            "-n",
            "shop",
            "--target-arch=arm64,amd64",
            "--target-arch",
            "arm64",
            "--fail-on=blocked,unknown",
            "-o",
            "csv",
            "--concurrency=4",
            "-l",
            "app in (a,b)",
        ])
        .unwrap();
        assert_eq!(full.scope, config::ReportScope::Namespace("shop".into()));
        assert_eq!(full.targets, ["arm64", "amd64"]);
        assert_eq!(full.fail_on, [Verdict::Blocked, Verdict::Unknown]);
        assert_eq!(full.format, ReportFormat::Csv);
        assert_eq!(full.concurrency, 4);
        assert_eq!(full.selector.unwrap().0, "app in (a,b)");
        for bad in [
            &["report", "--target-arch=ARM64"][..],
            &["report", "--target-arch="],
            &["report", "--concurrency=0"],
            &["report", "--fail-on=ready"],
            &["report", "-n", "Shop"],
            &["report", "-n", "a", "-A"],
            &["report", "-l", "a in (b"],
            &["report", "--preferred-arch=arm64"],
        ] {
            assert!(settings(bad).is_err(), "{bad:?}");
        }
    }
}
