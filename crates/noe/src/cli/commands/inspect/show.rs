//! How an inspected image is printed: its resolution with the index entries (or the config
//! digest of a single image), the selected platform and its config summary, `--raw` bytes as
//! served, `--digest` alone. Text for people, one JSON object per image for programs.

use std::io::Write;

use noe_registry::inspect::{Child, ImageConfig, Inspection, Pick, Selected, Served, Want};

use super::{json_line, printable, write_fields, Failure};
use crate::config::{InspectShow, Output};

/// The inspection, or why what was asked for is not there: no entry of the platform asked for
/// (naming those there), an index given `--config` without `--platform`, an artifact's config.
pub(super) fn picked(
    image: &str,
    want: &Want,
    inspection: Inspection,
) -> Result<Box<Inspection>, Failure> {
    let available = match &inspection.pick {
        Some(Pick::Missing { available }) => available,
        Some(Pick::Selected(selected)) if want.config && selected.config.is_none() => {
            return Err(Failure {
                kind: "platform_not_found",
                message: format!(
                    "{image}: the {} entry is an artifact: it has no image config",
                    selected.platform
                ),
            });
        }
        _ => return Ok(Box::new(inspection)),
    };
    let listed: Vec<String> = available.iter().map(ToString::to_string).collect();
    let there = if listed.is_empty() {
        "it has no runnable platform (an artifact?)".to_owned()
    } else {
        format!("available: {}", listed.join(" "))
    };
    let nested = want.platform.as_ref().is_some_and(|spec| {
        inspection
            .resolution
            .platforms
            .iter()
            .any(|p| spec.matches(p))
            && !available.iter().any(|p| spec.matches(p))
    });
    let message = match &want.platform {
        Some(spec) if nested => format!(
            "{image}: {spec} is in a nested index or an entry without a platform: inspect that entry by digest (REPOSITORY@sha256:..., listed under manifests) with --platform ({there})"
        ),
        Some(spec) => format!("{image}: no platform {spec} ({there})"),
        None => format!("{image} is an index: --config needs --platform ({there})"),
    };
    Err(Failure {
        kind: "platform_not_found",
        message,
    })
}

/// Prints one inspected image as `show` asks.
pub(super) fn print(
    out: &mut impl Write,
    output: Output,
    show: &InspectShow,
    inspection: &Inspection,
) -> std::io::Result<()> {
    let selected = match &inspection.pick {
        Some(Pick::Selected(selected)) => Some(&**selected),
        _ => None,
    };
    if show.digest {
        let digest = selected.map_or(&inspection.manifest.digest, |s| &s.manifest.digest);
        return match output {
            Output::Text => writeln!(out, "{}", printable(digest)),
            Output::Json => json_line(
                out,
                &serde_json::json!({
                    "image": inspection.resolution.image,
                    "digest": digest,
                }),
            ),
        };
    }
    let raw = show.raw.then(|| raw_of(show, inspection, selected));
    match output {
        Output::Text => match raw {
            Some(Some(served)) => {
                out.write_all(&served.raw)?;
                out.flush()?;
                eprintln!("mediaType:   {}", printable(&served.media_type));
                eprintln!("digest:      {}", printable(&served.digest));
                Ok(())
            }
            Some(None) => {
                eprintln!(
                    "noe: {}: the platform selected is an artifact: it has no image config",
                    printable(&inspection.resolution.image)
                );
                Ok(())
            }
            None => write_text(out, inspection, selected),
        },
        Output::Json => {
            let mut json = record(inspection, selected)?;
            if let Some(raw) = raw {
                json["raw"] = raw.map_or(serde_json::Value::Null, |served| {
                    String::from_utf8_lossy(&served.raw).into_owned().into()
                });
            }
            json_line(out, &json)
        }
    }
}

/// What `--raw` prints: the config blob with `--config`, else the selected platform's manifest,
/// else the top-level manifest or index. `None`: the selected platform has no image config.
fn raw_of<'a>(
    show: &InspectShow,
    inspection: &'a Inspection,
    selected: Option<&'a Selected>,
) -> Option<&'a Served> {
    match selected {
        Some(selected) if show.config => selected.config.as_ref().map(|c| &c.served),
        Some(selected) => Some(&selected.manifest),
        None => Some(&inspection.manifest),
    }
}

/// The JSON record: the resolution's keys, `manifests` (an index's entries) or `configDigest`
/// (a single image), and `selected` with `--platform` or `--config`.
fn record(
    inspection: &Inspection,
    selected: Option<&Selected>,
) -> std::io::Result<serde_json::Value> {
    let mut json = serde_json::to_value(&inspection.resolution)?;
    if let Some(digest) = &inspection.config_digest {
        json["configDigest"] = digest.as_str().into();
    } else if inspection.children_total > 0 {
        json["manifests"] = serde_json::to_value(&inspection.children)?;
        if inspection.children_total > inspection.children.len() {
            json["manifestsTotal"] = inspection.children_total.into();
        }
    }
    if let Some(selected) = selected {
        let mut picked = serde_json::json!({
            "platform": selected.platform.to_string(),
            "digest": selected.manifest.digest,
            "mediaType": selected.manifest.media_type,
        });
        if let Some(config) = &selected.config {
            let mut summary = serde_json::to_value(&config.summary)?;
            summary["digest"] = config.served.digest.as_str().into();
            summary["mediaType"] = config.served.media_type.as_str().into();
            picked["config"] = summary;
        }
        json["selected"] = picked;
    }
    Ok(json)
}

fn write_text(
    out: &mut impl Write,
    inspection: &Inspection,
    selected: Option<&Selected>,
) -> std::io::Result<()> {
    write_fields(out, &inspection.resolution)?;
    match (&inspection.config_digest, selected) {
        (Some(digest), None) => writeln!(out, "config:      {}", printable(digest))?,
        (Some(_), Some(_)) => {}
        (None, _) => write_children(out, inspection)?,
    }
    if let Some(selected) = selected {
        writeln!(
            out,
            "platform:    {}",
            printable(&selected.platform.to_string())
        )?;
        writeln!(
            out,
            "manifest:    {} {}",
            printable(&selected.manifest.digest),
            printable(&selected.manifest.media_type)
        )?;
        match &selected.config {
            Some(config) => {
                writeln!(out, "config:      {}", printable(&config.served.digest))?;
                write_config(out, &config.summary)?;
            }
            None => writeln!(out, "config:      none (an artifact)")?,
        }
    }
    writeln!(out)
}

/// An index's entries, one line each: platform (or what the entry is), digest.
fn write_children(out: &mut impl Write, inspection: &Inspection) -> std::io::Result<()> {
    if inspection.children_total == 0 {
        return Ok(());
    }
    writeln!(out, "manifests:")?;
    for child in &inspection.children {
        writeln!(
            out,
            "  {:<24} {}{}",
            printable(&child_label(child)),
            printable(&child.digest),
            child
                .os_version
                .as_deref()
                .map(|v| format!(" os.version={}", printable(v)))
                .unwrap_or_default()
        )?;
    }
    let more = inspection
        .children_total
        .saturating_sub(inspection.children.len());
    if more > 0 {
        writeln!(out, "  ... {more} more entries not listed")?;
    }
    Ok(())
}

fn child_label(child: &Child) -> String {
    match (&child.platform, child.attestation) {
        (_, true) => "attestation".to_owned(),
        (Some(platform), false) => platform.to_string(),
        (None, false) => {
            let media_type = child.media_type.as_deref().unwrap_or_default();
            if noe_registry::manifest::is_index(media_type) {
                "(nested index)".to_owned()
            } else {
                "(no platform)".to_owned()
            }
        }
    }
}

/// The config summary, indented under `config:`; absent fields are left out.
fn write_config(out: &mut impl Write, config: &ImageConfig) -> std::io::Result<()> {
    let list = |items: &[String]| serde_json::to_string(items).unwrap_or_default();
    let mut field = |name: &str, value: &str| -> std::io::Result<()> {
        writeln!(out, "  {:<14}{}", format!("{name}:"), printable(value))
    };
    let joined = |items: &[String]| (!items.is_empty()).then(|| items.join(" "));
    let fields = [
        ("os", Some(config.os.clone())),
        ("architecture", Some(config.architecture.clone())),
        ("variant", config.variant.clone()),
        ("os.version", config.os_version.clone()),
        ("os.features", joined(&config.os_features)),
        ("created", config.created.clone()),
        ("entrypoint", config.entrypoint.as_deref().map(list)),
        ("cmd", config.cmd.as_deref().map(list)),
        ("user", config.user.clone()),
        ("workingDir", config.working_dir.clone()),
        ("exposedPorts", joined(&config.exposed_ports)),
        ("stopSignal", config.stop_signal.clone()),
    ];
    for (name, value) in fields {
        if let Some(value) = value {
            field(name, &value)?;
        }
    }
    for (key, value) in &config.labels {
        field("label", &format!("{key}={value}"))?;
    }
    if config.truncated {
        field(
            "truncated",
            "long strings or lists were cut (--raw --config shows the blob)",
        )?;
    }
    Ok(())
}
