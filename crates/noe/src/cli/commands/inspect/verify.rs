//! `noe inspect --verify`: each platform proven by its own program (docs/architecture.md
//! "Verification"), printed inside the image's record: a `verify:` line per platform in text,
//! `"verification": [...]` in JSON. A mismatch fails the run (a CI gate); an unverifiable
//! platform does not.

use std::io::Write;

use noe_core::binary::Verdict;
use noe_registry::verify::{ImageReport, Options};
use noe_registry::Routed;
use serde_json::{json, Value};

use super::{describe, printable, Asking, Failure};
use crate::app::App;
use crate::config::Output;

/// Verifies every platform of `routed` with the credentials `asking` has for it.
pub(super) async fn verify(
    app: &App,
    asking: Asking<'_>,
    routed: &Routed,
    options: &Options,
) -> Result<ImageReport, Failure> {
    let candidates = asking.candidates(routed).await;
    app.resolver
        .verify(routed, &candidates, options)
        .await
        .map_err(|error| Failure {
            kind: error.kind(),
            message: describe(&error),
        })
}

/// Whether the run fails for it: a platform's program of another machine, or no verification.
pub(super) fn fails(verified: &Result<ImageReport, Failure>) -> bool {
    match verified {
        Ok(report) => report
            .platforms
            .iter()
            .any(|p| p.report.verdict == Verdict::Mismatch),
        Err(_) => true,
    }
}

/// `verify: linux/arm64 mismatch: /app is an x86-64 ELF (EM_X86_64)`, and for an unverifiable
/// platform `verify: linux/amd64 unverifiable (not-elf): /app.jar is not an ELF program`.
pub(super) fn lines(report: &ImageReport) -> Vec<String> {
    report
        .platforms
        .iter()
        .map(|platform| {
            let verdict = match platform.report.reason {
                Some(reason) => format!("{} ({reason})", platform.report.verdict),
                None => platform.report.verdict.to_string(),
            };
            format!(
                "verify: {} {verdict}: {}",
                printable(&platform.platform.to_string()),
                printable(&platform.report.evidence)
            )
        })
        .collect()
}

/// The `verification` array of the JSON record.
pub(super) fn json(report: &ImageReport) -> Value {
    report
        .platforms
        .iter()
        .map(|platform| {
            let report = &platform.report;
            json!({
                "platform": platform.platform.to_string(),
                "digest": platform.digest,
                "verdict": report.verdict.as_str(),
                "program": report.program,
                "machine": report.machine.map(|m| m.name()),
                "reason": report.reason.map(|r| r.as_str()),
                "evidence": report.evidence,
                "bytes": platform.bytes,
            })
        })
        .collect()
}

/// Prints `record` (the image's record as printed without `--verify`) with the verdicts:
/// text lines before the blank line that ends the block, or the JSON object's `verification`
/// (`verificationError` when the image's manifest could not be read for it).
pub(super) fn print(
    out: &mut impl Write,
    output: Output,
    image: &str,
    record: Vec<u8>,
    verified: &Result<ImageReport, Failure>,
) -> std::io::Result<()> {
    if let Err(failure) = verified {
        eprintln!(
            "noe: {}: verify: {}",
            printable(image),
            printable(&failure.message)
        );
    }
    match output {
        Output::Text => {
            let block = String::from_utf8_lossy(&record);
            let block = block.strip_suffix("\n\n").map_or(block.as_ref(), |b| b);
            if !block.is_empty() {
                writeln!(out, "{}", block.trim_end_matches('\n'))?;
            }
            match verified {
                Ok(report) => {
                    for line in lines(report) {
                        writeln!(out, "{line}")?;
                    }
                }
                Err(failure) => writeln!(out, "verify: failed: {}", printable(&failure.message))?,
            }
            writeln!(out)
        }
        Output::Json => {
            let mut value: Value = serde_json::from_slice(&record).unwrap_or_else(|_| json!({}));
            match verified {
                Ok(report) => value["verification"] = json(report),
                Err(failure) => {
                    value["verificationError"] =
                        json!({"kind": failure.kind, "message": failure.message});
                }
            }
            let line = serde_json::to_string(&value).map_err(std::io::Error::other)?;
            writeln!(out, "{line}")
        }
    }
}
