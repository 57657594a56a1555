//! `noe inspect --upgrades[=ARCH,...]`: for each architecture an image does not run on, its
//! upgrade path (docs/configuration.md, "Upgrade paths"), searched with the credentials the
//! image was resolved with. Text: one `upgrade:` line per architecture; JSON: `"upgrades"`,
//! per architecture the path (`{"image","current","first","newest","newestSupports",
//! "requests"}`) or why there is none (`{"image","reason"}`).

use std::io::Write;

use noe_core::upgrade::Upgrade;
use noe_core::{Platform, Support};
use noe_registry::upgrade::Upgrades;

use super::{printable, Asking};
use crate::app::App;
use crate::config::Output;

/// The OS upgrade paths are searched for.
const OS: &str = "linux";

/// One architecture: `None` when the image runs on it already.
pub type ForArch = (String, Option<Upgrade>);

/// The upgrade paths of `image` (whose platforms are `platforms`) for `archs`.
pub async fn of(
    app: &App,
    finder: &Upgrades,
    asking: Asking<'_>,
    image: &str,
    platforms: &[Platform],
    archs: &[String],
) -> Vec<ForArch> {
    let support = Support::of(platforms);
    let mut out = Vec::with_capacity(archs.len());
    for arch in archs {
        let target = Platform::new(OS, arch.as_str(), None);
        if support.as_ref().is_some_and(|s| s.runs_on(&target)) {
            out.push((arch.clone(), None));
            continue;
        }
        let upgrade = match app.resolver.routed(image).await {
            Ok(routed) => {
                let candidates = asking.candidates(&routed).await;
                finder.find(&routed, None, &candidates, &target).await
            }
            Err(error) => Upgrade {
                image: image.to_owned(),
                outcome: Err(noe_core::upgrade::NoPath::Tags {
                    kind: error.kind().to_owned(),
                    message: noe_webhook::resolve::one_line(&error),
                }),
            },
        };
        out.push((arch.clone(), Some(upgrade)));
    }
    out
}

/// `"upgrades"`: per architecture, the path or why there is none.
fn json(upgrades: &[ForArch]) -> serde_json::Value {
    upgrades
        .iter()
        .map(|(arch, upgrade)| {
            let value = match upgrade {
                Some(upgrade) => serde_json::to_value(upgrade).unwrap_or_default(),
                None => serde_json::json!({"reason": format!("runs on {OS}/{arch} already")}),
            };
            (arch.clone(), value)
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// Prints `record` (the image's record as printed without `--upgrades`) with the upgrade
/// paths: text lines before the blank line that ends the block (`upgrade:     arm64: 1.25.3
/// (newest 1.27.1)`, and what is not known), or the JSON object's `upgrades`.
pub fn print(
    out: &mut impl Write,
    output: Output,
    record: Vec<u8>,
    upgrades: &[ForArch],
) -> std::io::Result<()> {
    match output {
        Output::Text => {
            let block = String::from_utf8_lossy(&record);
            let block = block.trim_end_matches('\n');
            if !block.is_empty() {
                writeln!(out, "{block}")?;
            }
            for line in lines(upgrades) {
                writeln!(out, "{line}")?;
            }
            writeln!(out)
        }
        Output::Json => {
            let mut value: serde_json::Value =
                serde_json::from_slice(&record).unwrap_or_else(|_| serde_json::json!({}));
            value["upgrades"] = json(upgrades);
            let line = serde_json::to_string(&value).map_err(std::io::Error::other)?;
            writeln!(out, "{line}")
        }
    }
}

fn lines(upgrades: &[ForArch]) -> Vec<String> {
    let mut out = Vec::new();
    for (arch, upgrade) in upgrades {
        let Some(upgrade) = upgrade else {
            out.push(format!("upgrade:     {arch}: runs already"));
            continue;
        };
        out.push(format!(
            "upgrade:     {arch}: {}",
            printable(&upgrade.short())
        ));
        if let Ok(path) = &upgrade.outcome {
            if let Some(unknown) = &path.unknown {
                out.push(format!("             {}", printable(unknown)));
            }
            out.push(format!(
                "             from {}; {} registry requests",
                printable(&path.current),
                path.requests
            ));
        }
    }
    out
}
