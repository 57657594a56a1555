//! The HTML rendering (`-o html`): one self-contained file a platform team shows to the people
//! who decide. Inline CSS, inline SVG and one small inline script; nothing fetched when it is
//! viewed (a Content-Security-Policy allows only that style and that script, by their
//! SHA-256); readable without the script (the tables are plain tables, already sorted) and
//! printable.
//!
//! Per target architecture: the headline (workloads, replicas, CPU and memory requests:
//! ready, blocked, unknown) as figures with a stacked bar; the readiness of each namespace as
//! a chart, and as a table; the blocking images ranked by what they hold back, with their
//! upgrade paths. The platforms the cluster's learned store left out, with their evidence and
//! the workloads they concern. Then every workload in a table the script makes sortable (column buttons)
//! and filterable (text, verdict), its state kept in the address's `#fragment`. Every figure
//! is a `<data>` element whose `value` is the JSON report's (`data-figure` names it), so the
//! page and `-o json` can be compared. Every string from the cluster, a file or a registry
//! is escaped ([`escape::html`](super::escape::html)): a name is text, never markup.

mod svg;

use std::fmt::Write as _;
use std::io::Write;

use super::super::{ArchSummary, Item, Report, Requests};
use super::escape::push_html;
use crate::report::quantity::{Cpu, Memory};
use crate::upgrade::Upgrade;

const CSS: &str = include_str!("html/report.css");
const SCRIPT: &str = include_str!("html/report.js");
/// `base64(sha256(CSS))`, for the Content-Security-Policy (a test checks it).
const CSS_SHA256: &str = "sha256-UeQDU0XEBmQn0RnIq7LGH2pqaEHbsYXr+Qdw5VoJQTw=";
/// `base64(sha256(SCRIPT))`, for the Content-Security-Policy (a test checks it).
const SCRIPT_SHA256: &str = "sha256-BB2N4p875vA9Sx22oWYjNt0y79I0effCyG7vllOMHCE=";
/// Bytes buffered before they are written out.
const CHUNK: usize = 64 * 1024;
/// Workloads named per learned correction (the others are counted).
const MAX_LEARNED_WORKLOADS: usize = 20;

/// What the page says about how it was made.
#[derive(Clone, Debug, Default)]
pub struct Meta {
    /// When the report was generated (RFC 3339, UTC).
    pub generated: String,
    /// The kubeconfig context, or the files read.
    pub source: String,
    /// The command line.
    pub command: String,
}

/// A buffer written out in chunks.
struct Out<W: Write> {
    buf: String,
    out: W,
}

impl<W: Write> Out<W> {
    fn flush_if_full(&mut self) -> std::io::Result<()> {
        if self.buf.len() >= CHUNK {
            self.out.write_all(self.buf.as_bytes())?;
            self.buf.clear();
        }
        Ok(())
    }

    fn finish(mut self) -> std::io::Result<()> {
        self.out.write_all(self.buf.as_bytes())?;
        self.out.flush()
    }
}

/// CPU for people: `250m`, `12.5 cores`.
fn cpu_words(cpu: Cpu) -> String {
    match cpu.0 {
        m if m < 1000 => format!("{m}m"),
        m if m.is_multiple_of(1000) => format!("{} cores", m / 1000),
        m => format!("{}.{} cores", m / 1000, (m % 1000) / 100),
    }
}

/// Memory for people: `512 MiB`, `11.5 GiB`.
fn memory_words(memory: Memory) -> String {
    const UNITS: [(&str, u32); 5] = [
        ("PiB", 50),
        ("TiB", 40),
        ("GiB", 30),
        ("MiB", 20),
        ("KiB", 10),
    ];
    for (unit, power) in UNITS {
        let size = 1u128 << power;
        if memory.0 >= size {
            let tenths = memory.0.saturating_mul(10) / size;
            return if tenths.is_multiple_of(10) {
                format!("{} {unit}", tenths / 10)
            } else {
                format!("{}.{} {unit}", tenths / 10, tenths % 10)
            };
        }
    }
    format!("{} B", memory.0)
}

/// `part` of `whole` in percent, rounded; `None` of nothing.
fn percent(part: u128, whole: u128) -> Option<u128> {
    (whole > 0).then(|| part.saturating_mul(100).saturating_add(whole / 2) / whole)
}

/// A `<data>` element: `value` (the JSON report's), `shown` to people, `figure` its name.
fn data(out: &mut String, figure: &str, value: &str, shown: &str) {
    out.push_str("<data data-figure=\"");
    push_html(out, figure);
    out.push_str("\" value=\"");
    push_html(out, value);
    out.push_str("\">");
    push_html(out, shown);
    out.push_str("</data>");
}

/// One headline figure of one architecture: the ready amount big, then ready, blocked and
/// unknown with their colour and word, and the stacked bar.
struct Figure<'a> {
    title: &'a str,
    /// The JSON path under `summary.<arch>` (`workloads`, `replicas`, `requests.*.cpu`).
    key: &'a str,
    /// Per verdict (ready, blocked, unknown): (JSON value, words, amount).
    values: [(String, String, u128); 3],
}

impl Figure<'_> {
    fn write(&self, out: &mut String, arch: &str) {
        let [ready, blocked, unknown] = &self.values;
        let total = ready.2.saturating_add(blocked.2).saturating_add(unknown.2);
        out.push_str("<div class=\"figure\"><h3>");
        push_html(out, self.title);
        out.push_str("</h3><p class=\"big\">");
        let figure = |verdict: &str| self.key.replace('*', verdict);
        data(
            out,
            &format!("{arch}.{}", figure("ready")),
            &ready.0,
            &ready.1,
        );
        let share = percent(ready.2, total).map_or_else(String::new, |p| format!(" ({p}%)"));
        let _ = write!(out, "<small>ready{share}</small></p>");
        let label = format!(
            "{}: {} ready, {} blocked, {} unknown",
            self.title, ready.1, blocked.1, unknown.1
        );
        svg::bar(out, [ready.2, blocked.2, unknown.2], &label);
        out.push_str("<ul>");
        for (verdict, (value, words, _)) in ["ready", "blocked", "unknown"].iter().zip(&self.values)
        {
            let _ = write!(
                out,
                "<li><span><span class=\"key {verdict}\"></span>{}</span>",
                capitalized(verdict)
            );
            data(out, &format!("{arch}.{}", figure(verdict)), value, words);
            out.push_str("</li>");
        }
        out.push_str("</ul></div>");
    }
}

/// `n` and the noun for it: `1 image`, `2 images`.
/// One list of what could not be read, nothing when `entries` is empty: its `heading` (what,
/// how many) and `note` (HTML, as written), then each entry as `item` writes it.
fn error_list<T>(
    out: &mut String,
    entries: &[T],
    heading: &str,
    note: &str,
    item: impl Fn(&mut String, &T),
) {
    if entries.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<h3>{heading}</h3><p class=\"note\">{note}</p><ul class=\"errors\">"
    );
    for entry in entries {
        out.push_str("<li>");
        item(out, entry);
        out.push_str("</li>");
    }
    out.push_str("</ul>");
}

fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A length as a count.
fn count(len: usize) -> u64 {
    u64::try_from(len).unwrap_or(u64::MAX)
}

/// `is` or `are`, for `n` of something.
fn is_are(n: u64) -> &'static str {
    if n == 1 {
        "is"
    } else {
        "are"
    }
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// An upgrade path as HTML: the first version that runs (or why there is none), and the
/// newest.
fn upgrade_html(out: &mut String, upgrade: &Upgrade) {
    match &upgrade.outcome {
        Ok(path) => {
            out.push_str("<span class=\"path\">");
            match (&path.first, &path.unknown) {
                (Some(first), _) => {
                    out.push_str("<span class=\"to\">");
                    push_html(out, first);
                    out.push_str("</span>");
                }
                (None, None) => out.push_str("<span class=\"none\">no version runs</span>"),
                (None, Some(_)) => out.push_str("<span class=\"none\">not known</span>"),
            }
            if path.first.as_deref() != Some(path.newest.as_str()) {
                out.push_str(" · newest ");
                push_html(out, &path.newest);
                out.push_str(match path.newest_supports {
                    Some(true) => " (runs)",
                    Some(false) => " (does not run)",
                    None => " (not known)",
                });
            }
            out.push_str("</span>");
            if let Some(unknown) = &path.unknown {
                out.push_str("<br><span class=\"note\">");
                push_html(out, unknown);
                out.push_str("</span>");
            }
            let _ = write!(
                out,
                "<br><span class=\"note\">from {}; {} registry requests</span>",
                html_text(&path.current),
                path.requests
            );
        }
        Err(no_path) => {
            out.push_str("<span class=\"note\">");
            push_html(out, &no_path.reason());
            out.push_str("</span>");
        }
    }
}

fn html_text(text: &str) -> String {
    super::escape::html(text)
}

impl Report {
    /// Writes the report as one HTML page (module docs) to `out`, in chunks.
    pub fn write_html<W: Write>(&self, meta: &Meta, out: W) -> std::io::Result<()> {
        let mut out = Out {
            buf: String::with_capacity(CHUNK + 4096),
            out,
        };
        self.head(&mut out.buf, meta);
        for (arch, summary) in &self.summary {
            self.arch_section(&mut out.buf, arch, summary);
            out.flush_if_full()?;
        }
        self.learned_section(&mut out.buf);
        self.workloads_section(&mut out)?;
        self.errors_section(&mut out.buf);
        out.buf.push_str(
            "</main><footer><p>Generated by <code>noe report</code> (noe-rs) from the <code>",
        );
        out.buf.push_str(crate::report::API_VERSION);
        out.buf.push_str("</code> report. A workload is <strong>ready</strong> when every image runs on the architecture, <strong>blocked</strong> when one does not, <strong>unknown</strong> when none blocks but an image could not be resolved (never counted as ready). Requests are one pod's CPU and memory requests × replicas.</p></footer>");
        let _ = writeln!(out.buf, "<script>{SCRIPT}</script></body></html>");
        out.finish()
    }

    fn head(&self, out: &mut String, meta: &Meta) {
        let targets = self.targets.join(", ");
        let _ = write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
             style-src '{CSS_SHA256}'; script-src '{SCRIPT_SHA256}'; img-src 'none'; \
             base-uri 'none'; form-action 'none'\">\
             <meta name=\"generator\" content=\"noe report\"><title>Readiness for "
        );
        push_html(out, &targets);
        let _ = write!(out, "</title><style>{CSS}</style></head><body><header>");
        out.push_str("<h1>Readiness for ");
        push_html(out, &targets);
        out.push_str("</h1>");
        let workloads = self.items.len();
        let replicas: u64 = self
            .items
            .iter()
            .map(|i| i.workload.replicas.unwrap_or_default())
            .fold(0, u64::saturating_add);
        let _ = write!(
            out,
            "<p class=\"lead\">{workloads} workloads, {replicas} replicas, assessed for {}.</p>",
            html_text(&targets)
        );
        out.push_str("<dl class=\"meta\"><dt>Generated</dt><dd><time datetime=\"");
        push_html(out, &meta.generated);
        out.push_str("\">");
        push_html(out, &meta.generated);
        out.push_str("</time></dd><dt>Source</dt><dd>");
        push_html(out, &meta.source);
        out.push_str("</dd><dt>Command</dt><dd><code>");
        push_html(out, &meta.command);
        out.push_str("</code></dd></dl>");
        if self.targets.len() > 1 {
            out.push_str("<nav class=\"archs\" aria-label=\"Architectures\">");
            for arch in &self.targets {
                let _ = write!(out, "<a href=\"#arch-{}\">", html_text(arch));
                push_html(out, arch);
                out.push_str("</a>");
            }
            if self.has_learned() {
                out.push_str("<a href=\"#learned\">Learned</a>");
            }
            out.push_str("<a href=\"#all-workloads\">Workloads</a></nav>");
        }
        out.push_str("</header><main>");
    }

    fn arch_section(&self, out: &mut String, arch: &str, summary: &ArchSummary) {
        let a = html_text(arch);
        let _ = write!(
            out,
            "<section id=\"arch-{a}\" aria-labelledby=\"h-{a}\"><h2 id=\"h-{a}\">{a}</h2>"
        );
        let all = &summary.all;
        let w = &all.workloads;
        let _ = write!(
            out,
            "<p class=\"lead\">{} of {} workloads can run on {a} now, with {} CPU and {} of memory requested",
            w.ready,
            w.all(),
            cpu_words(all.requests.ready.cpu),
            memory_words(all.requests.ready.memory),
        );
        match summary.blocking_images.len() {
            0 => out.push('.'),
            1 => {
                let _ = write!(
                    out,
                    "; {} {} blocked by one image.",
                    w.blocked,
                    is_are(w.blocked)
                );
            }
            n => {
                let _ = write!(
                    out,
                    "; {} {} blocked by {n} images.",
                    w.blocked,
                    is_are(w.blocked)
                );
            }
        }
        if w.unknown > 0 {
            let _ = write!(
                out,
                " {} could not be assessed (an image could not be resolved).",
                w.unknown
            );
        }
        out.push_str("</p>");
        let counts = |c: &crate::report::Counts| {
            [c.ready, c.blocked, c.unknown].map(|n| (n.to_string(), n.to_string(), u128::from(n)))
        };
        let r = &all.requests;
        let by = [r.ready, r.blocked, r.unknown];
        let cpu = by.map(|q: Requests| (q.cpu.to_string(), cpu_words(q.cpu), q.cpu.0));
        let memory =
            by.map(|q: Requests| (q.memory.to_string(), memory_words(q.memory), q.memory.0));
        out.push_str("<div class=\"figures\">");
        for figure in [
            Figure {
                title: "Workloads",
                key: "workloads.*",
                values: counts(&all.workloads),
            },
            Figure {
                title: "Replicas",
                key: "replicas.*",
                values: counts(&all.replicas),
            },
            Figure {
                title: "CPU requests",
                key: "requests.*.cpu",
                values: cpu,
            },
            Figure {
                title: "Memory requests",
                key: "requests.*.memory",
                values: memory,
            },
        ] {
            figure.write(out, arch);
        }
        out.push_str("</div>");

        let _ = write!(
            out,
            "<h3>Readiness per namespace</h3><p class=\"legend\"><span><span class=\"key ready\"></span>ready</span><span><span class=\"key blocked\"></span>blocked</span><span><span class=\"key unknown\"></span>unknown</span></p>"
        );
        if summary.namespaces.is_empty() {
            out.push_str("<p class=\"empty\">No workloads.</p>");
        } else {
            svg::namespaces(out, &format!("ns-{a}"), arch, summary.namespaces.iter());
            let _ = write!(
                out,
                "<details><summary>All {} namespaces as a table</summary><div class=\"scroll\"><table><caption>Workloads per namespace for {a}</caption><thead><tr><th scope=\"col\">Namespace</th><th scope=\"col\" class=\"num\">Ready</th><th scope=\"col\" class=\"num\">Blocked</th><th scope=\"col\" class=\"num\">Unknown</th><th scope=\"col\" class=\"num\">Movable CPU</th><th scope=\"col\" class=\"num\">Movable memory</th></tr></thead><tbody>",
                summary.namespaces.len()
            );
            for (namespace, tally) in &summary.namespaces {
                out.push_str("<tr><th scope=\"row\">");
                push_html(out, namespace);
                let w = &tally.workloads;
                let _ = write!(
                    out,
                    "</th><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                    w.ready,
                    w.blocked,
                    w.unknown,
                    cpu_words(tally.movable.cpu),
                    memory_words(tally.movable.memory)
                );
            }
            out.push_str("</tbody></table></div></details>");
        }

        let _ = write!(out, "<h3>What blocks {a}</h3>");
        if summary.blocking_images.is_empty() {
            let _ = write!(out, "<p class=\"empty\">No image blocks {a}.</p>");
        } else {
            let upgrade_head = if self.upgrades {
                "<th scope=\"col\">Upgrade to</th>"
            } else {
                ""
            };
            let _ = write!(
                out,
                "<div class=\"scroll\"><table class=\"blockers\"><caption>Images that do not run on {a}, ranked by the CPU requests they hold back (a workload blocked by two images counts for each)</caption><thead><tr><th scope=\"col\">Image</th><th scope=\"col\" class=\"num\">Workloads</th><th scope=\"col\" class=\"num\">Replicas</th><th scope=\"col\" class=\"num\">CPU requests</th><th scope=\"col\" class=\"num\">Memory requests</th>{upgrade_head}</tr></thead><tbody>"
            );
            for (rank, blocker) in summary.blocking_images.iter().enumerate() {
                out.push_str("<tr><th scope=\"row\" class=\"img\"><code>");
                push_html(out, &blocker.image);
                out.push_str("</code></th><td class=\"num\">");
                let key = format!("{arch}.blockingImages.{rank}");
                let workloads = blocker.workloads.to_string();
                data(out, &format!("{key}.workloads"), &workloads, &workloads);
                out.push_str("</td><td class=\"num\">");
                let replicas = blocker.replicas.to_string();
                data(out, &format!("{key}.replicas"), &replicas, &replicas);
                out.push_str("</td><td class=\"num\">");
                let q = blocker.requests;
                data(
                    out,
                    &format!("{key}.requests.cpu"),
                    &q.cpu.to_string(),
                    &cpu_words(q.cpu),
                );
                out.push_str("</td><td class=\"num\">");
                data(
                    out,
                    &format!("{key}.requests.memory"),
                    &q.memory.to_string(),
                    &memory_words(q.memory),
                );
                out.push_str("</td>");
                if self.upgrades {
                    out.push_str("<td>");
                    match &blocker.upgrade {
                        Some(upgrade) => upgrade_html(out, upgrade),
                        None => out.push_str("<span class=\"note\">not searched</span>"),
                    }
                    out.push_str("</td>");
                }
                out.push_str("</tr>");
            }
            out.push_str("</tbody></table></div>");
        }
        out.push_str("</section>");
    }

    /// The platforms the cluster's learned store left out, with their evidence and the
    /// workloads whose image they concern (nothing when none).
    fn learned_section(&self, out: &mut String) {
        let learned = self.learned();
        if learned.is_empty() {
            return;
        }
        let _ = write!(
            out,
            "<section id=\"learned\" aria-labelledby=\"h-learned\"><h2 id=\"h-learned\">Learned on the cluster's nodes</h2><p class=\"lead\">{} left out of every verdict above: the learned store holds them proven false for the digest each image resolves to (an <code>exec format error</code> seen on a node of that platform, or the image's own programs). A rebuilt image (a new digest) is trusted again; <code>noe learned forget</code> removes an entry.</p>",
            counted(count(learned.len()), "platform is", "platforms are")
        );
        out.push_str("<div class=\"scroll\"><table class=\"learned\"><caption>Learned corrections, by image</caption><thead><tr><th scope=\"col\">Image</th><th scope=\"col\">Platform left out</th><th scope=\"col\">Source</th><th scope=\"col\">Evidence</th><th scope=\"col\">Workloads</th></tr></thead><tbody>");
        for line in &learned {
            out.push_str("<tr><th scope=\"row\" class=\"img\"><code>");
            push_html(out, line.image);
            out.push_str("</code></th><td>");
            push_html(out, &line.correction.platform.to_string());
            out.push_str("</td><td>");
            push_html(out, line.correction.source.as_str());
            out.push_str("</td><td>");
            push_html(out, &line.correction.evidence);
            out.push_str("</td><td>");
            for (at, item) in line
                .workloads
                .iter()
                .take(MAX_LEARNED_WORKLOADS)
                .enumerate()
            {
                if at > 0 {
                    out.push_str("<br>");
                }
                let w = &item.workload;
                push_html(out, &w.namespace);
                out.push('/');
                push_html(out, &w.name);
                out.push_str(" <span class=\"note\">");
                push_html(out, &w.kind);
                out.push_str("</span>");
            }
            let more = line.workloads.len().saturating_sub(MAX_LEARNED_WORKLOADS);
            if more > 0 {
                let _ = write!(out, "<br><span class=\"note\">and {more} more</span>");
            }
            out.push_str("</td></tr>");
        }
        out.push_str("</tbody></table></div></section>");
    }

    fn workloads_section<W: Write>(&self, out: &mut Out<W>) -> std::io::Result<()> {
        let o = &mut out.buf;
        o.push_str("<section id=\"all-workloads\" aria-labelledby=\"h-workloads\"><h2 id=\"h-workloads\">Workloads</h2>");
        o.push_str("<form id=\"controls\" class=\"controls\" role=\"search\" hidden><label>Filter<input id=\"q\" type=\"search\" placeholder=\"namespace, name, image…\" autocomplete=\"off\"></label>");
        let columns = 6;
        for (i, arch) in self.targets.iter().enumerate() {
            let a = html_text(arch);
            let _ = write!(
                o,
                "<label>{a}<select name=\"{a}\" data-col=\"{}\"><option value=\"\">any verdict</option><option>ready</option><option>blocked</option><option>unknown</option></select></label>",
                columns + i
            );
        }
        let _ = write!(
            o,
            "<output id=\"shown\" aria-live=\"polite\">{} workloads</output></form>",
            self.items.len()
        );
        o.push_str("<div class=\"scroll\"><table id=\"workloads\"><caption>Every workload, by total CPU requests (most first); CPU and memory are requests × replicas</caption><thead><tr>");
        let head = |o: &mut String, key: &str, label: &str, num: bool| {
            let class = if num { " class=\"num\"" } else { "" };
            let kind = if num { "num" } else { "text" };
            let _ = write!(
                o,
                "<th scope=\"col\"{class} data-key=\"{}\" data-type=\"{kind}\" aria-sort=\"none\"><button type=\"button\">{}</button></th>",
                html_text(key),
                html_text(label)
            );
        };
        head(o, "namespace", "Namespace", false);
        head(o, "kind", "Kind", false);
        head(o, "name", "Name", false);
        head(o, "replicas", "Replicas", true);
        head(o, "cpu", "CPU", true);
        head(o, "memory", "Memory", true);
        for arch in &self.targets {
            head(o, arch, arch, false);
        }
        o.push_str(
            "<th scope=\"col\">Images that block, or are not known</th></tr></thead><tbody>",
        );
        for item in &self.items {
            self.row(&mut out.buf, item);
            out.flush_if_full()?;
        }
        out.buf.push_str("</tbody></table></div></section>");
        Ok(())
    }

    fn row(&self, o: &mut String, item: &Item) {
        let w = &item.workload;
        o.push_str("<tr><td>");
        push_html(o, &w.namespace);
        o.push_str("</td><td>");
        push_html(o, &w.kind);
        o.push_str("</td><th scope=\"row\">");
        push_html(o, &w.name);
        o.push_str("</th>");
        match w.replicas {
            Some(n) => {
                let _ = write!(o, "<td class=\"num\">{n}</td>");
            }
            None => o.push_str("<td class=\"num\">?</td>"),
        }
        match item.total {
            Some(total) => {
                let _ = write!(
                    o,
                    "<td class=\"num\" data-v=\"{}\">{}</td><td class=\"num\" data-v=\"{}\">{}</td>",
                    total.cpu.0, total.cpu, total.memory.0, total.memory
                );
            }
            None => o.push_str("<td class=\"num\">?</td><td class=\"num\">?</td>"),
        }
        for arch in &self.targets {
            match item.verdict(arch) {
                Some(verdict) => {
                    let v = verdict.as_str();
                    let _ = write!(o, "<td><span class=\"verdict {v}\">{v}</span></td>");
                }
                None => o.push_str("<td></td>"),
            }
        }
        o.push_str("<td class=\"img\">");
        let several = self.targets.len() > 1;
        let mut first = true;
        let mut line = |o: &mut String| {
            if !first {
                o.push_str("<br>");
            }
            first = false;
        };
        for (arch, images) in item.blocking.iter().filter(|(_, i)| !i.is_empty()) {
            let upgrades = item.upgrades(arch);
            for (at, image) in images.iter().enumerate() {
                line(o);
                if several {
                    push_html(o, arch);
                    o.push_str(": ");
                }
                o.push_str("<code>");
                push_html(o, image);
                o.push_str("</code>");
                if let Some(upgrade) = upgrades.get(at) {
                    o.push_str(" <span class=\"note\">→ ");
                    push_html(o, &upgrade.short());
                    o.push_str("</span>");
                }
            }
        }
        for entry in &item.images {
            if let Err(failure) = &entry.answer {
                line(o);
                o.push_str("<code>");
                push_html(o, &entry.image);
                o.push_str("</code> <span class=\"note\">not resolved: ");
                push_html(o, &failure.kind);
                o.push_str("</span>");
            }
        }
        o.push_str("</td></tr>");
    }

    fn errors_section(&self, out: &mut String) {
        if self.image_errors.is_empty() && self.source_errors.is_empty() {
            return;
        }
        out.push_str("<section id=\"errors\" aria-labelledby=\"h-errors\"><h2 id=\"h-errors\">What could not be read</h2>");
        error_list(
            out,
            &self.image_errors,
            &format!(
                "{} could not be resolved",
                counted(count(self.image_errors.len()), "image", "images")
            ),
            "Their workloads are <strong>unknown</strong> unless another image blocks them.",
            |out, error| {
                out.push_str("<code>");
                push_html(out, &error.image);
                out.push_str("</code> — ");
                push_html(out, &error.failure.kind);
                out.push_str(": ");
                push_html(out, &error.failure.message);
                let _ = write!(
                    out,
                    " ({})",
                    counted(error.workloads, "workload", "workloads")
                );
            },
        );
        error_list(
            out,
            &self.source_errors,
            &format!(
                "{} could not be read",
                counted(count(self.source_errors.len()), "source", "sources")
            ),
            "The report is partial.",
            |out, error| {
                push_html(out, &error.source);
                out.push_str(": ");
                push_html(out, &error.message);
            },
        );
        out.push_str("</section>");
    }

    /// The page as a string, for tests.
    #[cfg(test)]
    pub(crate) fn html_string(&self, meta: &Meta) -> String {
        let mut out = Vec::new();
        let _ = self.write_html(meta, &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use sha2::Digest as _;

    fn csp_hash(text: &str) -> String {
        let digest = sha2::Sha256::digest(text.as_bytes());
        format!(
            "sha256-{}",
            base64::engine::general_purpose::STANDARD.encode(digest)
        )
    }

    /// The Content-Security-Policy names the inline style and script by their hashes: an
    /// edit of either needs its hash here.
    #[test]
    fn the_policy_names_the_inline_style_and_script() {
        assert_eq!(CSS_SHA256, csp_hash(CSS), "CSS_SHA256 for report.css");
        assert_eq!(
            SCRIPT_SHA256,
            csp_hash(SCRIPT),
            "SCRIPT_SHA256 for report.js"
        );
    }

    #[test]
    fn quantities_in_words() {
        assert_eq!(cpu_words(Cpu(250)), "250m");
        assert_eq!(cpu_words(Cpu(12_000)), "12 cores");
        assert_eq!(cpu_words(Cpu(12_550)), "12.5 cores");
        assert_eq!(memory_words(Memory(512)), "512 B");
        assert_eq!(memory_words(Memory(768 << 20)), "768 MiB");
        assert_eq!(memory_words(Memory((23 << 30) / 2)), "11.5 GiB");
        assert_eq!(percent(1, 3), Some(33));
        assert_eq!(percent(2, 3), Some(67));
        assert_eq!(percent(0, 0), None);
    }
}
