//! The report's renderings: JSON (the `report.noe.adevinta.com/v1` `ReadinessReport` contract,
//! streamed: [`json`](mod@json)), an aligned table, CSV (RFC 4180, its header built from the same columns as its rows),
//! Markdown and one self-contained HTML page ([`html`]). Strings from a cluster, a file or a registry are hostile: each rendering escapes
//! them its own way ([`escape`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{Item, Report, Tally};

pub mod escape;
pub mod html;
mod json;

pub use escape::printable;

impl Report {
    /// The columns of the table, CSV and Markdown renderings: `(heading, csv header)`.
    pub(crate) fn columns(&self) -> Vec<(String, String)> {
        let mut columns: Vec<(String, String)> = [
            ("NAMESPACE", "namespace"),
            ("KIND", "kind"),
            ("NAME", "name"),
            ("REPLICAS", "replicas"),
            ("CPU", "cpu_request"),
            ("MEMORY", "memory_request"),
            ("TOTAL CPU", "total_cpu"),
            ("TOTAL MEMORY", "total_memory"),
        ]
        .into_iter()
        .map(|(h, c)| (h.to_owned(), c.to_owned()))
        .collect();
        for arch in &self.targets {
            columns.push((arch.to_uppercase(), arch.clone()));
        }
        columns.push(("BLOCKING".into(), "blocking".into()));
        if self.upgrades {
            columns.push(("UPGRADE".into(), "upgrade".into()));
        }
        columns.push(("UNKNOWN".into(), "unknown".into()));
        if self.has_learned() {
            columns.push(("LEARNED".into(), "learned".into()));
        }
        if self.include_pods {
            columns.push(("RUNNING ON".into(), "running_on".into()));
        }
        columns
    }

    /// One item's cells, in the order of [`Report::columns`].
    fn cells(&self, item: &Item) -> Vec<String> {
        let w = &item.workload;
        let or_unknown = |value: Option<String>| value.unwrap_or_else(|| "?".to_owned());
        let mut cells = vec![
            w.namespace.clone(),
            w.kind.clone(),
            w.name.clone(),
            or_unknown(w.replicas.map(|n| n.to_string())),
            w.requests.cpu.to_string(),
            w.requests.memory.to_string(),
            or_unknown(item.total.map(|t| t.cpu.to_string())),
            or_unknown(item.total.map(|t| t.memory.to_string())),
        ];
        for arch in &self.targets {
            cells.push(item.verdict(arch).map_or("", |v| v.as_str()).to_owned());
        }
        let blocking: Vec<String> = item
            .blocking
            .iter()
            .filter(|(_, images)| !images.is_empty())
            .map(|(arch, images)| format!("{arch}: {}", images.join(" ")))
            .collect();
        cells.push(blocking.join("; "));
        if self.upgrades {
            cells.push(self.upgrade_cell(item));
        }
        let unknown: Vec<String> = item
            .images
            .iter()
            .filter_map(|entry| match &entry.answer {
                Err(failure) => Some(format!("{} ({})", entry.image, failure.kind)),
                Ok(platforms)
                    if platforms.is_empty()
                        && entry.kind == crate::images::ImageKind::Container =>
                {
                    Some(format!("{} (no_platforms)", entry.image))
                }
                Ok(_) => None,
            })
            .collect();
        cells.push(unknown.join(" "));
        if self.has_learned() {
            let learned: Vec<String> = item
                .images
                .iter()
                .flat_map(|entry| entry.learned.iter().map(|c| learned_words(&entry.image, c)))
                .collect();
            cells.push(learned.join("; "));
        }
        if self.include_pods {
            let running: Vec<String> = item
                .running_on
                .iter()
                .flatten()
                .map(|(arch, pods)| format!("{arch}={pods}"))
                .collect();
            cells.push(running.join(" "));
        }
        cells
    }

    /// The upgrade paths of an item's blocking images in a few words: `1.25.3 (newest
    /// 1.27.1)` for one image and one target architecture; each path after its image when
    /// several images block, after its architecture when several are assessed.
    fn upgrade_cell(&self, item: &Item) -> String {
        let mut parts = Vec::new();
        for (arch, upgrades) in &item.upgrades {
            if upgrades.is_empty() {
                continue;
            }
            let paths: Vec<String> = if upgrades.len() == 1 {
                upgrades.iter().map(|u| u.short()).collect()
            } else {
                upgrades
                    .iter()
                    .map(|u| format!("{} → {}", u.image, u.short()))
                    .collect()
            };
            let paths = paths.join(", ");
            parts.push(if self.targets.len() > 1 {
                format!("{arch}: {paths}")
            } else {
                paths
            });
        }
        parts.join("; ")
    }

    /// CSV: a header row, then one row per item, the same columns.
    pub fn csv(&self) -> String {
        let mut out = String::new();
        let header: Vec<String> = self.columns().into_iter().map(|(_, c)| c).collect();
        push_csv_row(&mut out, &header);
        for item in &self.items {
            push_csv_row(&mut out, &self.cells(item));
        }
        out
    }

    /// An aligned table, then the summary and the errors.
    pub fn table(&self) -> String {
        let header: Vec<String> = self.columns().into_iter().map(|(h, _)| h).collect();
        let rows: Vec<Vec<String>> = std::iter::once(header)
            .chain(
                self.items
                    .iter()
                    .map(|item| self.cells(item).iter().map(|c| printable(c)).collect()),
            )
            .collect();
        let mut widths: Vec<usize> = Vec::new();
        for row in &rows {
            for (i, cell) in row.iter().enumerate() {
                let width = cell.chars().count();
                match widths.get_mut(i) {
                    Some(w) => *w = (*w).max(width),
                    None => widths.push(width),
                }
            }
        }
        let mut out = String::new();
        for row in &rows {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let width = widths.get(i).copied().unwrap_or_default();
                let _ = write!(line, "{cell:<width$}");
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&self.summary_text("", printable));
        out
    }

    /// A Markdown table, then the summary as a list.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let header: Vec<String> = self.columns().into_iter().map(|(h, _)| h).collect();
        push_markdown_row(&mut out, &header);
        let rule: Vec<String> = header.iter().map(|_| "---".to_owned()).collect();
        push_markdown_row(&mut out, &rule);
        for item in &self.items {
            push_markdown_row(&mut out, &self.cells(item));
        }
        out.push('\n');
        out.push_str(&self.summary_text("- ", escape::markdown));
        out
    }

    /// Whether a learned correction left a platform out of some image (the renderings then
    /// show them: a `learned` column, a summary list, an HTML section).
    pub(crate) fn has_learned(&self) -> bool {
        self.items
            .iter()
            .any(|item| item.images.iter().any(|entry| !entry.learned.is_empty()))
    }

    /// Each learned correction applied, with its image and the workloads whose image it is
    /// (in the report's order), in image order.
    pub(crate) fn learned(&self) -> Vec<Learned<'_>> {
        let mut seen: BTreeMap<(&str, &str, String), Learned<'_>> = BTreeMap::new();
        for item in &self.items {
            for entry in &item.images {
                for correction in &entry.learned {
                    let key = (
                        entry.image.as_str(),
                        correction.digest.as_str(),
                        correction.platform.to_string(),
                    );
                    let learned = seen.entry(key).or_insert(Learned {
                        image: &entry.image,
                        correction,
                        workloads: Vec::new(),
                    });
                    // An image twice in one workload counts it once.
                    if !learned
                        .workloads
                        .last()
                        .is_some_and(|last| std::ptr::eq(*last, item))
                    {
                        learned.workloads.push(item);
                    }
                }
            }
        }
        seen.into_values().collect()
    }

    /// The summary per architecture and the errors, one line each (`bullet` before each
    /// top-level line), every string from the cluster or a registry through `escape`.
    fn summary_text(&self, bullet: &str, escape: fn(&str) -> String) -> String {
        let mut out = String::new();
        let line = |tally: &Tally| {
            format!(
                "{} ready, {} blocked, {} unknown; movable {} CPU, {} memory",
                tally.workloads.ready,
                tally.workloads.blocked,
                tally.workloads.unknown,
                tally.movable.cpu,
                tally.movable.memory
            )
        };
        let indent = if bullet.is_empty() { "  " } else { "  - " };
        for (arch, summary) in &self.summary {
            let _ = writeln!(out, "{bullet}{}: {}", escape(arch), line(&summary.all));
            for (namespace, tally) in &summary.namespaces {
                let _ = writeln!(
                    out,
                    "{indent}namespace {}: {}",
                    escape(namespace),
                    line(tally)
                );
            }
            for blocker in &summary.blocking_images {
                let upgrade = match &blocker.upgrade {
                    Some(upgrade) => format!("; upgrade: {}", escape(&upgrade.short())),
                    None => String::new(),
                };
                let _ = writeln!(
                    out,
                    "{indent}blocked by {} ({} workloads, {} replicas, {} CPU{upgrade})",
                    escape(&blocker.image),
                    blocker.workloads,
                    blocker.replicas,
                    blocker.requests.cpu,
                );
            }
        }
        let learned = self.learned();
        if !learned.is_empty() {
            let _ = writeln!(
                out,
                "{bullet}{} platforms left out as learned on the cluster's nodes (the learned store):",
                learned.len()
            );
            for line in &learned {
                let _ = writeln!(
                    out,
                    "{indent}{} ({} workloads)",
                    escape(&line.correction.warning(line.image)),
                    line.workloads.len()
                );
            }
        }
        if !self.image_errors.is_empty() {
            let _ = writeln!(
                out,
                "{bullet}{} images could not be resolved:",
                self.image_errors.len()
            );
            for error in &self.image_errors {
                let _ = writeln!(
                    out,
                    "{indent}{}: {}: {} ({} workloads)",
                    escape(&error.image),
                    escape(&error.failure.kind),
                    escape(&error.failure.message),
                    error.workloads
                );
            }
        }
        if !self.source_errors.is_empty() {
            let _ = writeln!(
                out,
                "{bullet}{} sources could not be read:",
                self.source_errors.len()
            );
            for error in &self.source_errors {
                let _ = writeln!(
                    out,
                    "{indent}{}: {}",
                    escape(&error.source),
                    escape(&error.message)
                );
            }
        }
        out
    }
}

/// A learned correction of the report, for its summary and its HTML section.
pub(crate) struct Learned<'a> {
    pub(crate) image: &'a str,
    pub(crate) correction: &'a crate::truth::Correction,
    /// The workloads with that image, each once.
    pub(crate) workloads: Vec<&'a Item>,
}

/// A learned correction of `image` in a cell: `app:1: linux/arm64 (exec-format-error: pod
/// shop/web-1 container app on node arm-1 at ...: exec /app: exec format error)`.
fn learned_words(image: &str, correction: &crate::truth::Correction) -> String {
    format!(
        "{image}: {} ({}: {})",
        correction.platform, correction.source, correction.evidence
    )
}

fn push_csv_row(out: &mut String, cells: &[String]) {
    for (i, cell) in cells.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        escape::csv_field(out, cell);
    }
    out.push_str("\r\n");
}

fn push_markdown_row(out: &mut String, cells: &[String]) {
    out.push('|');
    for cell in cells {
        out.push(' ');
        out.push_str(&escape::markdown(cell));
        out.push_str(" |");
    }
    out.push('\n');
}
