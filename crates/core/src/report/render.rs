//! The report's renderings: JSON (the `report.noe.adevinta.com/v1` `ReadinessReport` contract,
//! streamed: [`json`](mod@json)), an aligned table, CSV (RFC 4180, its header built from the same columns as its rows) and
//! Markdown. Strings from a cluster or a file are hostile: control characters are escaped in
//! the text renderings, CSV fields are quoted, Markdown cells have `|` escaped.

use std::fmt::Write as _;

use super::{Item, Report, Tally};

mod json;

impl Report {
    /// The columns of the table, CSV and Markdown renderings: `(heading, csv header)`.
    fn columns(&self) -> Vec<(String, String)> {
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
        columns.push(("UNKNOWN".into(), "unknown".into()));
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
        out.push_str(&self.summary_text(""));
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
        out.push_str(&self.summary_text("- "));
        out
    }

    /// The summary per architecture and the errors, one line each (`bullet` before each
    /// top-level line).
    fn summary_text(&self, bullet: &str) -> String {
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
            let _ = writeln!(out, "{bullet}{}: {}", printable(arch), line(&summary.all));
            for (namespace, tally) in &summary.namespaces {
                let _ = writeln!(
                    out,
                    "{indent}namespace {}: {}",
                    printable(namespace),
                    line(tally)
                );
            }
            for (image, workloads) in &summary.blocking_images {
                let _ = writeln!(
                    out,
                    "{indent}blocked by {} ({workloads} workloads)",
                    printable(image)
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
                    printable(&error.image),
                    error.failure.kind,
                    printable(&error.failure.message),
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
                    printable(&error.source),
                    printable(&error.message)
                );
            }
        }
        out
    }
}

/// `text` with control characters escaped, so a cluster's strings cannot write to a terminal.
pub fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    text.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

fn push_csv_row(out: &mut String, cells: &[String]) {
    for (i, cell) in cells.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if cell.contains([',', '"', '\n', '\r']) {
            out.push('"');
            out.push_str(&cell.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(cell);
        }
    }
    out.push_str("\r\n");
}

fn push_markdown_row(out: &mut String, cells: &[String]) {
    out.push('|');
    for cell in cells {
        out.push(' ');
        out.push_str(&printable(cell).replace('|', "\\|"));
        out.push_str(" |");
    }
    out.push('\n');
}
