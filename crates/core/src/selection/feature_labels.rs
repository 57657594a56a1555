//! Which NFD feature becomes which node label (nfd-worker's defaults), so a feature term can be
//! written as node selector requirements the scheduler checks. NFD's semantics are kept in the
//! translation: `NotIn` becomes `Exists ∧ NotIn` (NFD's `NotIn` is false on a missing element),
//! `IsTrue` becomes `In [true]`. What no label says — features nfd-worker never labels, flags on
//! its default blacklist, `DoesNotExist` (a label may be missing because it was filtered, not
//! because the feature is), `matchName`, `type: version` — has no translation: such a term is
//! told only by the node's `NodeFeature`, else it is unknown.

use super::rule::{FeatureTerm, LabelOp, LabelReq, NfdExpr, NfdOp, Patterns, Rule};
use super::SelectionError;

/// The prefix of nfd-worker's built-in labels.
pub const PREFIX: &str = "feature.node.kubernetes.io/";

/// cpuid flags nfd-worker does not label by default (`attributeBlacklist`).
const CPUID_BLACKLIST: &[&str] = &[
    "AVX10",
    "BMI1",
    "BMI2",
    "CLMUL",
    "CMOV",
    "CX16",
    "ERMS",
    "F16C",
    "HTT",
    "LZCNT",
    "MMX",
    "MMXEXT",
    "NX",
    "POPCNT",
    "RDRAND",
    "RDSEED",
    "RDTSCP",
    "SGX",
    "SGXLC",
    "SSE",
    "SSE2",
    "SSE3",
    "SSE4.1",
    "SSE4.2",
    "SSSE3",
    "TDX_GUEST",
];

/// `kernel.config` options nfd-worker labels by default (`configOpts`).
const KCONFIG_LABELLED: &[&str] = &["NO_HZ", "NO_HZ_IDLE", "NO_HZ_FULL", "PREEMPT"];

/// PCI device classes nfd-worker labels by default (`deviceClassWhitelist`, prefixes).
const PCI_CLASSES: &[&str] = &["03", "0b40", "12"];

/// At most this many device labels one instance term may expand to.
const MAX_DEVICE_LABELS: usize = 16;

/// The label of an attribute feature's element, or `None` when nfd-worker does not label it.
fn attribute_label(feature: &str, element: &str) -> Option<String> {
    let stem = match feature {
        "cpu.model" if matches!(element, "vendor_id" | "family" | "id" | "hypervisor") => {
            "cpu-model."
        }
        "cpu.cstate" => "cpu-cstate.",
        "cpu.pstate" => "cpu-pstate.",
        "cpu.security"
            if !matches!(
                element,
                "tdx.total_keys" | "sgx.epc" | "sev.encrypted_state_ids" | "sev.asids"
            ) =>
        {
            "cpu-security."
        }
        "cpu.sst" if element == "bf.enabled" => {
            return Some(format!("{PREFIX}cpu-power.sst_bf.enabled"))
        }
        "cpu.topology" if element == "hardware_multithreading" => {
            return Some(format!("{PREFIX}cpu-hardware_multithreading"))
        }
        "cpu.cpuid" if element == "AVX10_VERSION" => "cpu-cpuid.",
        "kernel.version" if matches!(element, "full" | "major" | "minor" | "revision") => {
            "kernel-version."
        }
        "system.osrelease"
            if matches!(
                element,
                "ID" | "VERSION_ID" | "VERSION_ID.major" | "VERSION_ID.minor"
            ) =>
        {
            "system-os_release."
        }
        "memory.numa" if element == "is_numa" => return Some(format!("{PREFIX}memory-numa")),
        "local.label" | "local.feature" => {
            return Some(if element.contains('/') {
                element.to_owned()
            } else {
                format!("{PREFIX}{element}")
            })
        }
        _ => return None,
    };
    Some(format!("{PREFIX}{stem}{element}"))
}

fn req(
    key: &str,
    op: LabelOp,
    values: &[String],
    patterns: &mut Patterns,
) -> Result<Rule, SelectionError> {
    LabelReq::new(key, op, values.to_vec(), patterns).map(Rule::Label)
}

/// An attribute expression on `key`, with NFD's meaning, as label requirements.
fn attribute(key: &str, e: &NfdExpr, p: &mut Patterns) -> Result<Option<Rule>, SelectionError> {
    if e.version {
        return Ok(None);
    }
    let v = &e.values;
    let mut one = |op, i: usize| req(key, op, v.get(i..=i).unwrap_or_default(), p);
    Ok(Some(match e.op {
        NfdOp::Gt => one(LabelOp::Gt, 0)?,
        NfdOp::Ge => one(LabelOp::Ge, 0)?,
        NfdOp::Lt => one(LabelOp::Lt, 0)?,
        NfdOp::Le => one(LabelOp::Le, 0)?,
        NfdOp::GtLt => Rule::All(vec![one(LabelOp::Gt, 0)?, one(LabelOp::Lt, 1)?]),
        NfdOp::GeLe => Rule::All(vec![one(LabelOp::Ge, 0)?, one(LabelOp::Le, 1)?]),
        NfdOp::In => req(key, LabelOp::In, v, p)?,
        NfdOp::NotIn => Rule::All(vec![
            req(key, LabelOp::Exists, &[], p)?,
            req(key, LabelOp::NotIn, v, p)?,
        ]),
        NfdOp::InRegexp => req(key, LabelOp::InRegexp, v, p)?,
        NfdOp::Exists => req(key, LabelOp::Exists, &[], p)?,
        NfdOp::DoesNotExist => return Ok(None),
        NfdOp::IsTrue => req(key, LabelOp::In, &["true".to_owned()], p)?,
        NfdOp::IsFalse => req(key, LabelOp::In, &["false".to_owned()], p)?,
    }))
}

/// The values an `In` expression on `element` of an instance term allows, or `None`.
fn in_values<'t>(term: &'t FeatureTerm, element: &str) -> Option<&'t [String]> {
    let (_, e) = term.expressions.iter().find(|(el, _)| el == element)?;
    (e.op == NfdOp::In && !e.version).then_some(e.values.as_slice())
}

/// `pci.device` / `usb.device` terms whose expressions are exactly `In` on the label fields:
/// an OR of the device labels.
fn device(term: &FeatureTerm, patterns: &mut Patterns) -> Option<Rule> {
    let (fields, stem): (&[&str], &str) = match term.feature.as_str() {
        "pci.device" => (&["class", "vendor"], "pci-"),
        "usb.device" => (&["class", "vendor", "device"], "usb-"),
        _ => return None,
    };
    if term.expressions.len() != fields.len() {
        return None;
    }
    let mut combos: Vec<String> = vec![String::new()];
    for field in fields {
        let values = in_values(term, field)?;
        if *field == "class"
            && term.feature == "pci.device"
            && !values
                .iter()
                .all(|c| PCI_CLASSES.iter().any(|p| c.starts_with(p)))
        {
            return None;
        }
        if combos.len().saturating_mul(values.len()) > MAX_DEVICE_LABELS {
            return None;
        }
        combos = combos
            .iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    if c.is_empty() {
                        v.clone()
                    } else {
                        format!("{c}_{v}")
                    }
                })
            })
            .collect();
    }
    let labels = combos
        .into_iter()
        .map(|c| {
            LabelReq::new(
                &format!("{PREFIX}{stem}{c}.present"),
                LabelOp::Exists,
                Vec::new(),
                patterns,
            )
        })
        .map(|r| r.map(Rule::Label))
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    Some(Rule::Any(labels))
}

/// The label form of an NFD feature term, or `None` when no label says it.
pub fn translate(term: &FeatureTerm, p: &mut Patterns) -> Result<Option<Rule>, SelectionError> {
    if term.name.is_some() {
        return Ok(None);
    }
    if matches!(term.feature.as_str(), "pci.device" | "usb.device") {
        return Ok(device(term, p));
    }
    let mut all = Vec::with_capacity(term.expressions.len());
    for (element, e) in &term.expressions {
        let translated = match term.feature.as_str() {
            "cpu.cpuid" if element != "AVX10_VERSION" => {
                if CPUID_BLACKLIST.contains(&element.as_str()) {
                    None
                } else {
                    let key = format!("{PREFIX}cpu-cpuid.{element}");
                    match e.op {
                        NfdOp::Exists => Some(req(&key, LabelOp::Exists, &[], p)?),
                        NfdOp::DoesNotExist => None,
                        // Only Exists and DoesNotExist mean anything on a flag.
                        _ => Some(Rule::Any(Vec::new())),
                    }
                }
            }
            "kernel.config" if KCONFIG_LABELLED.contains(&element.as_str()) => {
                // The label is "true" when the option is y or m: only "y or m" can be told.
                let key = format!("{PREFIX}kernel-config.{element}");
                let ym = |v: &[String]| {
                    v.len() == 2 && v.iter().any(|x| x == "y") && v.iter().any(|x| x == "m")
                };
                match e.op {
                    NfdOp::In if ym(&e.values) => Some(req(&key, LabelOp::Exists, &[], p)?),
                    NfdOp::Exists => Some(req(&key, LabelOp::Exists, &[], p)?),
                    _ => None,
                }
            }
            "kernel.selinux" if element == "enabled" => {
                let key = format!("{PREFIX}kernel-selinux.enabled");
                let truthy = e.op == NfdOp::IsTrue
                    || (e.op == NfdOp::In && e.values.iter().all(|v| v == "true"));
                truthy
                    .then(|| req(&key, LabelOp::In, &["true".to_owned()], p))
                    .transpose()?
            }
            feature => match attribute_label(feature, element) {
                Some(key) => attribute(&key, e, p)?,
                None => None,
            },
        };
        match translated {
            Some(rule) => all.push(rule),
            None => return Ok(None),
        }
    }
    if all.is_empty() {
        // A term with no expression holds where the feature exists: no label says that.
        return Ok(None);
    }
    Ok(Some(Rule::All(all)))
}
