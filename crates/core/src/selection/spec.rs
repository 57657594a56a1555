//! The two artifact formats, read into [`Spec`]: ocifit-k8s's compatibilities JSON (explicit
//! mode: `matchExpressions` is a list of `{op, key, value}` on node labels, `value` a string or
//! a list, ops with Kubernetes' meaning plus `Gte`/`Lte`/`InRegexp`) and NFD's
//! image-compatibility spec (discovered mode: YAML or JSON, NFD GroupRules, `matchExpressions`
//! a map from element to expression, NFD's semantics). Every count and string is bounded while
//! it is read.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

use super::feature_labels::translate;
use super::rule::{FeatureTerm, LabelOp, LabelReq, NfdExpr, NfdOp, Patterns, Rule};
use super::{limits, SelectionError};

/// Which format a spec was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// ocifit-k8s's compatibilities JSON.
    Ocifit,
    /// NFD's image-compatibility spec.
    Nfd,
}

/// A compatibility set: what a node must have for `tag` to run there.
#[derive(Clone, Debug)]
pub struct CompatSet {
    /// ocifit: the image to substitute; NFD: a free label of the set.
    pub tag: String,
    /// Free text.
    pub description: String,
    /// Higher wins (explicit); a preferred weight (discovered).
    pub weight: i64,
    /// Every rule of the set, ANDed.
    pub rule: Rule,
}

impl CompatSet {
    /// A set as read from a spec: its texts bounded, its rules ANDed.
    fn read(
        tag: String,
        description: String,
        weight: i64,
        rules: Vec<Rule>,
    ) -> Result<Self, SelectionError> {
        Ok(Self {
            tag: bounded(tag, "tag", limits::TEXT_CHARS)?,
            description: bounded(description, "description", limits::TEXT_CHARS)?,
            weight,
            rule: Rule::All(rules),
        })
    }
}

/// A compatibility spec.
#[derive(Clone, Debug)]
pub struct Spec {
    /// The format it was read from.
    pub format: Format,
    /// The sets, in document order.
    pub sets: Vec<CompatSet>,
    /// Compiled bytes of its regular expressions (each distinct pattern once).
    pub regex_bytes: usize,
}

/// A string or a list of scalars (ocifit-k8s's `value`; numbers and booleans read as text).
#[derive(Default)]
struct Values(Vec<String>);

fn scalar(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

impl<'de> Deserialize<'de> for Values {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = serde_json::Value::deserialize(d)?;
        let out = match &value {
            serde_json::Value::Null => Vec::new(),
            serde_json::Value::Array(items) => {
                if items.len() > limits::VALUES {
                    return Err(D::Error::custom(format!(
                        "more than {} values",
                        limits::VALUES
                    )));
                }
                items
                    .iter()
                    .map(|v| scalar(v).ok_or_else(|| D::Error::custom("a value is not a scalar")))
                    .collect::<Result<_, _>>()?
            }
            other => vec![scalar(other).ok_or_else(|| D::Error::custom("value is not a scalar"))?],
        };
        Ok(Self(out))
    }
}

/// `null` read as the default (Go ignores it).
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Deserialize)]
struct OcifitSpec {
    #[serde(default, deserialize_with = "nullable")]
    compatibilities: Vec<OcifitSet>,
}

#[derive(Deserialize)]
struct OcifitSet {
    #[serde(default, deserialize_with = "nullable")]
    tag: String,
    #[serde(default, deserialize_with = "nullable")]
    description: String,
    #[serde(default, deserialize_with = "nullable")]
    weight: i64,
    #[serde(default, deserialize_with = "nullable")]
    rules: Vec<OcifitRule>,
}

#[derive(Deserialize)]
struct OcifitRule {
    #[serde(default, rename = "matchFeatures", deserialize_with = "nullable")]
    match_features: Vec<OcifitFeature>,
}

#[derive(Deserialize)]
struct OcifitFeature {
    #[serde(default, rename = "matchExpressions", deserialize_with = "nullable")]
    match_expressions: Vec<OcifitExpr>,
}

#[derive(Deserialize)]
struct OcifitExpr {
    #[serde(default, deserialize_with = "nullable")]
    op: String,
    #[serde(default, deserialize_with = "nullable")]
    key: String,
    #[serde(default)]
    value: Values,
}

#[derive(Deserialize)]
struct NfdSpec {
    #[serde(default, deserialize_with = "nullable")]
    version: String,
    #[serde(default, deserialize_with = "nullable")]
    compatibilities: Vec<NfdSet>,
}

/// An integer written as a number or as text (YAML read as text: [`super::yaml`]).
fn integer<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    use serde::de::Error;
    match Option::<serde_json::Value>::deserialize(d)? {
        None => Ok(0),
        Some(serde_json::Value::Number(n)) => n
            .as_i64()
            .ok_or_else(|| D::Error::custom("weight is not an integer")),
        Some(serde_json::Value::String(s)) => super::nodes::integer(&s)
            .ok_or_else(|| D::Error::custom(format!("weight {s:?} is not an integer"))),
        Some(_) => Err(D::Error::custom("weight is not an integer")),
    }
}

#[derive(Deserialize)]
struct NfdSet {
    #[serde(default, deserialize_with = "nullable")]
    rules: Vec<GroupRule>,
    #[serde(default, deserialize_with = "integer")]
    weight: i64,
    #[serde(default, deserialize_with = "nullable")]
    tag: String,
    #[serde(default, deserialize_with = "nullable")]
    description: String,
}

#[derive(Deserialize)]
struct GroupRule {
    #[serde(default, rename = "matchFeatures", deserialize_with = "nullable")]
    match_features: Vec<NfdTerm>,
    #[serde(default, rename = "matchAny", deserialize_with = "nullable")]
    match_any: Vec<MatchAny>,
}

#[derive(Deserialize)]
struct MatchAny {
    #[serde(default, rename = "matchFeatures", deserialize_with = "nullable")]
    match_features: Vec<NfdTerm>,
}

#[derive(Deserialize)]
struct NfdTerm {
    #[serde(default, deserialize_with = "nullable")]
    feature: String,
    #[serde(default, rename = "matchExpressions", deserialize_with = "nullable")]
    match_expressions: BTreeMap<String, NfdWireExpr>,
    #[serde(default, rename = "matchName")]
    match_name: Option<NfdWireExpr>,
}

#[derive(Deserialize)]
struct NfdWireExpr {
    #[serde(default, deserialize_with = "nullable")]
    op: String,
    #[serde(default)]
    value: Values,
    #[serde(default, rename = "type", deserialize_with = "nullable")]
    kind: String,
}

fn at_most<T>(items: &[T], what: &'static str, limit: usize) -> Result<(), SelectionError> {
    if items.len() > limit {
        return Err(SelectionError::TooMany { what, limit });
    }
    Ok(())
}

fn bounded(text: String, what: &str, limit: usize) -> Result<String, SelectionError> {
    if text.chars().count() > limit {
        return Err(SelectionError::Invalid(format!(
            "a {what} is longer than {limit} characters"
        )));
    }
    Ok(text)
}

fn checked_values(values: Vec<String>) -> Result<Vec<String>, SelectionError> {
    // A longer value can never equal a label value, but a regular expression may be longer.
    values
        .into_iter()
        .map(|v| bounded(v, "value", limits::REGEX_CHARS))
        .collect()
}

fn size_check(bytes: &[u8]) -> Result<(), SelectionError> {
    if bytes.len() > limits::SPEC_BYTES {
        return Err(SelectionError::TooLarge(limits::SPEC_BYTES));
    }
    Ok(())
}

fn ocifit_op(op: &str) -> Option<LabelOp> {
    Some(match op {
        "In" => LabelOp::In,
        "NotIn" => LabelOp::NotIn,
        "Exists" => LabelOp::Exists,
        "DoesNotExist" => LabelOp::DoesNotExist,
        "Gt" => LabelOp::Gt,
        "Lt" => LabelOp::Lt,
        "Gte" => LabelOp::Ge,
        "Lte" => LabelOp::Le,
        "InRegexp" => LabelOp::InRegexp,
        _ => return None,
    })
}

impl Spec {
    /// The spec of an artifact attached to one platform manifest of a multi-platform image:
    /// each set holds only on nodes of that platform (`kubernetes.io/os` and
    /// `kubernetes.io/arch` ANDed into its rule).
    pub fn on_platform(self, os: &str, arch: &str) -> Result<Self, SelectionError> {
        let mut none = Patterns::default();
        let mut is = |key: &str, value: &str| {
            LabelReq::new(key, LabelOp::In, vec![value.to_owned()], &mut none)
        };
        let os = is("kubernetes.io/os", os)?;
        let arch = is("kubernetes.io/arch", arch)?;
        let sets = self
            .sets
            .into_iter()
            .map(|set| CompatSet {
                rule: Rule::All(vec![
                    Rule::Label(os.clone()),
                    Rule::Label(arch.clone()),
                    set.rule,
                ]),
                ..set
            })
            .collect();
        Ok(Self { sets, ..self })
    }

    /// One image's specs (one per platform manifest) as one: its sets in order, at most
    /// [`limits::SETS`].
    pub fn union(specs: Vec<Self>) -> Result<Self, SelectionError> {
        let format = specs.first().map_or(Format::Nfd, |s| s.format);
        let regex_bytes = specs.iter().map(|s| s.regex_bytes).sum();
        let sets: Vec<CompatSet> = specs.into_iter().flat_map(|s| s.sets).collect();
        if sets.len() > limits::SETS {
            return Err(SelectionError::TooMany {
                what: "compatibility sets over the image's platforms",
                limit: limits::SETS,
            });
        }
        Ok(Self {
            format,
            sets,
            regex_bytes,
        })
    }

    /// Reads ocifit-k8s's compatibilities JSON.
    pub fn parse_ocifit(bytes: &[u8]) -> Result<Self, SelectionError> {
        size_check(bytes)?;
        let wire: OcifitSpec =
            serde_json::from_slice(bytes).map_err(|e| SelectionError::Parse(e.to_string()))?;
        at_most(&wire.compatibilities, "compatibility sets", limits::SETS)?;
        let mut patterns = Patterns::default();
        let mut sets = Vec::with_capacity(wire.compatibilities.len());
        for set in wire.compatibilities {
            at_most(&set.rules, "rules in a set", limits::RULES)?;
            let mut all = Vec::new();
            for rule in set.rules {
                at_most(&rule.match_features, "matchFeatures", limits::EXPRESSIONS)?;
                for feature in rule.match_features {
                    at_most(
                        &feature.match_expressions,
                        "expressions in a term",
                        limits::EXPRESSIONS,
                    )?;
                    for e in feature.match_expressions {
                        // ocifit-k8s evaluates any other operator as false.
                        let op = ocifit_op(&e.op).ok_or_else(|| {
                            SelectionError::Invalid(format!("unknown operator {:?}", e.op))
                        })?;
                        let key = bounded(e.key, "key", limits::KEY_CHARS)?;
                        let values = match op {
                            // ocifit-k8s reads the first value only.
                            LabelOp::Gt | LabelOp::Lt | LabelOp::Ge | LabelOp::Le => {
                                e.value.0.into_iter().take(1).collect()
                            }
                            LabelOp::Exists | LabelOp::DoesNotExist => Vec::new(),
                            _ => e.value.0,
                        };
                        all.push(Rule::Label(LabelReq::new(
                            &key,
                            op,
                            checked_values(values)?,
                            &mut patterns,
                        )?));
                    }
                }
            }
            sets.push(CompatSet::read(set.tag, set.description, set.weight, all)?);
        }
        Ok(Self {
            format: Format::Ocifit,
            sets,
            regex_bytes: patterns.bytes(),
        })
    }

    /// Reads NFD's image-compatibility spec (YAML, or JSON, which is YAML), its nesting and
    /// nodes bounded while it is read ([`super::yaml`]).
    pub fn parse_nfd(bytes: &[u8]) -> Result<Self, SelectionError> {
        size_check(bytes)?;
        let wire: NfdSpec = serde_json::from_value(super::yaml::read(bytes)?)
            .map_err(|e| SelectionError::Parse(e.to_string()))?;
        if wire.version != "v1alpha1" {
            return Err(SelectionError::Invalid(format!(
                "version {:?} (v1alpha1 expected)",
                wire.version
            )));
        }
        at_most(&wire.compatibilities, "compatibility sets", limits::SETS)?;
        let mut patterns = Patterns::default();
        let mut sets = Vec::with_capacity(wire.compatibilities.len());
        for set in wire.compatibilities {
            at_most(&set.rules, "rules in a set", limits::RULES)?;
            let rules = set
                .rules
                .into_iter()
                .map(|rule| group_rule(rule, &mut patterns))
                .collect::<Result<_, _>>()?;
            sets.push(CompatSet::read(
                set.tag,
                set.description,
                set.weight,
                rules,
            )?);
        }
        Ok(Self {
            format: Format::Nfd,
            sets,
            regex_bytes: patterns.bytes(),
        })
    }
}

/// A GroupRule: `(matchAny empty OR any matches) AND (all matchFeatures terms match)`.
fn group_rule(rule: GroupRule, patterns: &mut Patterns) -> Result<Rule, SelectionError> {
    at_most(&rule.match_any, "matchAny branches", limits::ANY)?;
    let mut all = terms(rule.match_features, patterns)?;
    if !rule.match_any.is_empty() {
        let any = rule
            .match_any
            .into_iter()
            .map(|a| terms(a.match_features, patterns).map(Rule::All))
            .collect::<Result<_, _>>()?;
        all.push(Rule::Any(any));
    }
    Ok(Rule::All(all))
}

fn expr(wire: NfdWireExpr, patterns: &mut Patterns) -> Result<NfdExpr, SelectionError> {
    let op = NfdOp::parse(&wire.op)
        .ok_or_else(|| SelectionError::Invalid(format!("unknown operator {:?}", wire.op)))?;
    let version = match wire.kind.as_str() {
        "" => false,
        "version" => true,
        other => return Err(SelectionError::Invalid(format!("unknown type {other:?}"))),
    };
    NfdExpr::new(op, checked_values(wire.value.0)?, version, patterns)
}

fn terms(features: Vec<NfdTerm>, patterns: &mut Patterns) -> Result<Vec<Rule>, SelectionError> {
    at_most(&features, "matchFeatures", limits::EXPRESSIONS)?;
    features
        .into_iter()
        .map(|t| {
            if t.match_expressions.len() > limits::EXPRESSIONS {
                return Err(SelectionError::TooMany {
                    what: "expressions in a term",
                    limit: limits::EXPRESSIONS,
                });
            }
            let feature = bounded(t.feature, "feature", limits::KEY_CHARS)?.to_lowercase();
            let expressions = t
                .match_expressions
                .into_iter()
                .map(|(el, e)| {
                    Ok((
                        bounded(el, "element", limits::KEY_CHARS)?,
                        expr(e, patterns)?,
                    ))
                })
                .collect::<Result<Vec<_>, SelectionError>>()?;
            let name = t.match_name.map(|e| expr(e, patterns)).transpose()?;
            let mut term = FeatureTerm {
                feature,
                expressions,
                name,
                labels: None,
            };
            term.labels = translate(&term, patterns)?;
            Ok(Rule::Feature(Box::new(term)))
        })
        .collect()
}
