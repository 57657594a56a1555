//! The one rule form both artifact formats compile to: ANDs and ORs of node label requirements
//! (Kubernetes' semantics, what a node selector term can say) and NFD feature terms (NFD's
//! semantics, exact against a node's `NodeFeature`, else through their label translation, else
//! unknown). Evaluation is three-valued; the translation into node selector terms (disjunctive
//! normal form) is sized before it is built.

use std::collections::{BTreeMap, BTreeSet};

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use regex_automata::meta;
use regex_automata::nfa::thompson::WhichCaptures;
use serde_json::{json, Value};

use super::features::{attribute, Feature, NodeFeatures};
use super::limits;
use super::nodes::{integer, NodeFacts};
use super::SelectionError;

/// A three-valued answer: whether a rule holds on a node, or whether that cannot be known from
/// what we see of it (a feature that is no label, on a node without its `NodeFeature`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tri {
    /// Holds.
    True,
    /// Does not hold.
    False,
    /// Cannot be told.
    Unknown,
}

impl Tri {
    fn from_bool(b: bool) -> Self {
        if b {
            Self::True
        } else {
            Self::False
        }
    }

    /// `rules` joined on `node` by the connective that `decides` settles (`False` for AND,
    /// `True` for OR): `decides` at the first rule that is it, else `Unknown` when a rule is,
    /// else the other answer. Rules after the deciding one are not evaluated.
    fn combine(rules: &[Rule], node: &NodeFacts, decides: Tri) -> Tri {
        let mut out = match decides {
            Self::False => Self::True,
            _ => Self::False,
        };
        for rule in rules {
            match rule.eval(node) {
                Self::Unknown => out = Self::Unknown,
                answer if answer == decides => return decides,
                _ => {}
            }
        }
        out
    }
}

/// A rule.
#[derive(Clone, Debug)]
pub enum Rule {
    /// Every rule holds (empty: true).
    All(Vec<Rule>),
    /// Some rule holds (empty: false).
    Any(Vec<Rule>),
    /// A node label requirement.
    Label(LabelReq),
    /// An NFD feature term.
    Feature(Box<FeatureTerm>),
}

/// The operators of a node label requirement: Kubernetes' six, plus ocifit-k8s's `Gte`/`Lte`
/// and `InRegexp` (Go's unanchored match), which the translation rewrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelOp {
    /// The label's value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label's integer value is greater than the one value.
    Gt,
    /// Less than.
    Lt,
    /// Greater than or equal.
    Ge,
    /// Less than or equal.
    Le,
    /// Some value (a regular expression) matches somewhere in the label's value.
    InRegexp,
}

/// A node label requirement.
#[derive(Clone, Debug)]
pub struct LabelReq {
    /// The label key.
    pub key: String,
    /// The operator.
    pub op: LabelOp,
    /// The values (one integer for `Gt`/`Lt`/`Ge`/`Le`, checked when built).
    pub values: Vec<String>,
    regexes: Vec<Arc<Pattern>>,
    number: i64,
}

/// Bytes of compiled regular expressions alive in this process (every spec's): held by each
/// [`Pattern`] until it is dropped.
static PROCESS_REGEX_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Bytes of compiled regular expressions alive in this process, against
/// [`limits::PROCESS_REGEX_BYTES`].
pub fn process_regex_bytes() -> usize {
    PROCESS_REGEX_BYTES.load(Ordering::Acquire)
}

/// Bytes a compiled regular expression holds beyond what it reports.
const PATTERN_OVERHEAD: usize = 8 * 1024;

/// A compiled regular expression (unanchored, as Go's `MatchString`), its compiled bytes counted
/// in the process's budget until it is dropped.
#[derive(Debug)]
pub struct Pattern {
    regex: meta::Regex,
    bytes: usize,
}

impl Pattern {
    /// Whether it matches somewhere in `text`.
    pub fn is_match(&self, text: &str) -> bool {
        self.regex.is_match(text)
    }

    /// Its compiled bytes (the automata and one search cache).
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Pattern {
    fn drop(&mut self) {
        PROCESS_REGEX_BYTES.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// The regular expressions of one spec: each distinct pattern compiled once, their compiled
/// bytes at most [`limits::SPEC_REGEX_BYTES`], and with every other spec's alive in the process
/// at most [`limits::PROCESS_REGEX_BYTES`].
#[derive(Debug, Default)]
pub struct Patterns {
    compiled: HashMap<String, Arc<Pattern>>,
    bytes: usize,
}

impl Patterns {
    /// The compiled bytes of the spec's patterns.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// `pattern` compiled (once per spec), under the limits.
    pub fn compile(&mut self, pattern: &str) -> Result<Arc<Pattern>, SelectionError> {
        if let Some(compiled) = self.compiled.get(pattern) {
            return Ok(compiled.clone());
        }
        if pattern.chars().count() > limits::REGEX_CHARS {
            return Err(SelectionError::Invalid(format!(
                "a regular expression is longer than {} characters",
                limits::REGEX_CHARS
            )));
        }
        let spec_left = limits::SPEC_REGEX_BYTES.saturating_sub(self.bytes);
        let process_left = limits::PROCESS_REGEX_BYTES.saturating_sub(process_regex_bytes());
        let over_spec = || SelectionError::TooMany {
            what: "bytes of compiled regular expressions",
            limit: limits::SPEC_REGEX_BYTES,
        };
        let over_process = || {
            SelectionError::Busy(format!(
                "the process's regular expressions hold their budget ({} bytes)",
                limits::PROCESS_REGEX_BYTES
            ))
        };
        let size = limits::REGEX_BYTES.min(spec_left).min(process_left);
        let regex = meta::Regex::builder()
            .configure(
                meta::Config::new()
                    .which_captures(WhichCaptures::None)
                    .nfa_size_limit(Some(size))
                    .onepass_size_limit(Some(size))
                    .dfa_size_limit(Some(size))
                    .hybrid_cache_capacity(limits::REGEX_CACHE_BYTES),
            )
            .build(pattern)
            .map_err(|e| {
                if e.syntax_error().is_some() {
                    return SelectionError::Invalid(format!(
                        "invalid regular expression {pattern:?}"
                    ));
                }
                match size {
                    s if s < limits::REGEX_BYTES && s == spec_left => over_spec(),
                    s if s < limits::REGEX_BYTES && s == process_left => over_process(),
                    _ => SelectionError::Invalid(format!(
                        "the regular expression {pattern:?} compiles to more than {} bytes",
                        limits::REGEX_BYTES
                    )),
                }
            })?;
        // What a compiled expression holds, as resident memory shows it: regex-automata's
        // `memory_usage` counts about half of its automata and search cache, and each holds
        // about 5 KiB besides.
        let bytes = regex
            .memory_usage()
            .saturating_add(regex.create_cache().memory_usage())
            .saturating_mul(2)
            .saturating_add(PATTERN_OVERHEAD)
            .saturating_add(pattern.len());
        if bytes > spec_left {
            return Err(over_spec());
        }
        PROCESS_REGEX_BYTES
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |in_use| {
                in_use
                    .checked_add(bytes)
                    .filter(|total| *total <= limits::PROCESS_REGEX_BYTES)
            })
            .map_err(|_| over_process())?;
        let compiled = Arc::new(Pattern { regex, bytes });
        self.bytes = self.bytes.saturating_add(bytes);
        self.compiled.insert(pattern.to_owned(), compiled.clone());
        Ok(compiled)
    }
}

impl LabelReq {
    /// A requirement, checked: value counts, integers, regular expressions (compiled into the
    /// spec's `patterns`).
    pub fn new(
        key: &str,
        op: LabelOp,
        values: Vec<String>,
        patterns: &mut Patterns,
    ) -> Result<Self, SelectionError> {
        let invalid = |why: &str| Err(SelectionError::Invalid(format!("{key}: {why}")));
        let mut number = 0;
        let mut regexes = Vec::new();
        match op {
            LabelOp::In | LabelOp::NotIn if values.is_empty() => {
                return invalid("In and NotIn need at least one value")
            }
            LabelOp::Exists | LabelOp::DoesNotExist => {}
            LabelOp::Gt | LabelOp::Lt | LabelOp::Ge | LabelOp::Le => {
                match values.first().map(String::as_str).and_then(integer) {
                    Some(n) => number = n,
                    None => return invalid("a comparison needs an integer value"),
                }
            }
            LabelOp::InRegexp => {
                if values.is_empty() {
                    return invalid("InRegexp needs at least one pattern");
                }
                regexes = values
                    .iter()
                    .map(|v| patterns.compile(v))
                    .collect::<Result<_, _>>()?;
            }
            LabelOp::In | LabelOp::NotIn => {}
        }
        Ok(Self {
            key: key.to_owned(),
            op,
            values,
            regexes,
            number,
        })
    }

    /// Whether a node with these labels satisfies it.
    pub fn holds(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key).map(String::as_str);
        match (self.op, value) {
            (LabelOp::Exists, v) => v.is_some(),
            (LabelOp::DoesNotExist, v) => v.is_none(),
            (LabelOp::NotIn, None) => true,
            (_, None) => false,
            (LabelOp::In, Some(v)) => self.values.iter().any(|x| x == v),
            (LabelOp::NotIn, Some(v)) => !self.values.iter().any(|x| x == v),
            (LabelOp::InRegexp, Some(v)) => self.regexes.iter().any(|r| r.is_match(v)),
            (op, Some(v)) => integer(v).is_some_and(|n| match op {
                LabelOp::Gt => n > self.number,
                LabelOp::Lt => n < self.number,
                LabelOp::Ge => n >= self.number,
                _ => n <= self.number,
            }),
        }
    }

    /// The node selector requirement(s) saying the same, or `None` when none can: `Ge`/`Le`
    /// become `Gt`/`Lt` of the neighbouring integer; `InRegexp` becomes `In` over the values
    /// `observed` on the nodes (none observed: `None`).
    fn requirements(&self, observed: &BTreeMap<String, BTreeSet<String>>) -> Option<Value> {
        let (op, values): (&str, Vec<String>) = match self.op {
            LabelOp::In => ("In", self.values.clone()),
            LabelOp::NotIn => ("NotIn", self.values.clone()),
            LabelOp::Exists => ("Exists", Vec::new()),
            LabelOp::DoesNotExist => ("DoesNotExist", Vec::new()),
            LabelOp::Gt => ("Gt", vec![self.number.to_string()]),
            LabelOp::Lt => ("Lt", vec![self.number.to_string()]),
            LabelOp::Ge => ("Gt", vec![self.number.checked_sub(1)?.to_string()]),
            LabelOp::Le => ("Lt", vec![self.number.checked_add(1)?.to_string()]),
            LabelOp::InRegexp => {
                let values: Vec<String> = observed
                    .get(&self.key)?
                    .iter()
                    .filter(|v| self.regexes.iter().any(|r| r.is_match(v)))
                    .take(limits::VALUES)
                    .cloned()
                    .collect();
                if values.is_empty() {
                    return None;
                }
                ("In", values)
            }
        };
        Some(if values.is_empty() {
            json!({"key": self.key, "operator": op})
        } else {
            json!({"key": self.key, "operator": op, "values": values})
        })
    }
}

/// NFD's operators (`MatchOp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NfdOp {
    /// `In`.
    In,
    /// `NotIn` (false on a missing element: NFD, not Kubernetes).
    NotIn,
    /// `InRegexp`.
    InRegexp,
    /// `Exists`.
    Exists,
    /// `DoesNotExist`.
    DoesNotExist,
    /// `Gt`.
    Gt,
    /// `Ge`.
    Ge,
    /// `Lt`.
    Lt,
    /// `Le`.
    Le,
    /// `GtLt` (two values, exclusive).
    GtLt,
    /// `GeLe` (two values, inclusive).
    GeLe,
    /// `IsTrue`.
    IsTrue,
    /// `IsFalse`.
    IsFalse,
}

impl NfdOp {
    /// The operator named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "In" => Self::In,
            "NotIn" => Self::NotIn,
            "InRegexp" => Self::InRegexp,
            "Exists" => Self::Exists,
            "DoesNotExist" => Self::DoesNotExist,
            "Gt" => Self::Gt,
            "Ge" => Self::Ge,
            "Lt" => Self::Lt,
            "Le" => Self::Le,
            "GtLt" => Self::GtLt,
            "GeLe" => Self::GeLe,
            "IsTrue" => Self::IsTrue,
            "IsFalse" => Self::IsFalse,
            _ => return None,
        })
    }
}

/// A number NFD compares: an integer, or with `type: version` a `major[.minor[.patch]]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Num(i64, i64, i64);

fn version(s: &str) -> Option<Num> {
    let s = s.strip_prefix('v').unwrap_or(s);
    let mut parts = [0i64; 3];
    let mut count = 0;
    for (i, part) in s.splitn(3, '.').enumerate() {
        // The last part may carry a suffix (`6.1.0-13-amd64`): its leading digits count.
        let digits: &str = &part[..part
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(part.len())];
        if digits.is_empty() {
            return None;
        }
        parts[i] = digits.parse().ok()?;
        count = i + 1;
        if digits.len() != part.len() {
            break;
        }
    }
    (count > 0).then_some(Num(parts[0], parts[1], parts[2]))
}

/// One NFD match expression.
#[derive(Clone, Debug)]
pub struct NfdExpr {
    /// The operator.
    pub op: NfdOp,
    /// The values.
    pub values: Vec<String>,
    /// `type: version`.
    pub version: bool,
    regexes: Vec<Arc<Pattern>>,
    numbers: Vec<Num>,
}

impl NfdExpr {
    /// An expression, checked as NFD checks it (value counts, integers, `GtLt` order), its
    /// regular expressions compiled into the spec's `patterns`.
    pub fn new(
        op: NfdOp,
        values: Vec<String>,
        version_type: bool,
        patterns: &mut Patterns,
    ) -> Result<Self, SelectionError> {
        let invalid = |why: &str| Err(SelectionError::Invalid(format!("{op:?}: {why}")));
        let count = match op {
            NfdOp::Exists | NfdOp::DoesNotExist | NfdOp::IsTrue | NfdOp::IsFalse => Some(0),
            NfdOp::Gt | NfdOp::Ge | NfdOp::Lt | NfdOp::Le => Some(1),
            NfdOp::GtLt | NfdOp::GeLe => Some(2),
            NfdOp::In | NfdOp::NotIn | NfdOp::InRegexp => None,
        };
        match count {
            Some(n) if values.len() != n => return invalid(&format!("needs {n} value(s)")),
            None if values.is_empty() => return invalid("needs at least one value"),
            _ => {}
        }
        if version_type && count.is_none_or(|n| n == 0) {
            return invalid("type: version is only for comparisons");
        }
        let numbers = if count.is_some_and(|n| n > 0) {
            let parse = |v: &String| {
                if version_type {
                    version(v)
                } else {
                    integer(v).map(|n| Num(n, 0, 0))
                }
            };
            match values.iter().map(parse).collect::<Option<Vec<_>>>() {
                Some(n) => n,
                None => return invalid("needs numbers"),
            }
        } else {
            Vec::new()
        };
        if let [a, b] = numbers.as_slice() {
            if a >= b {
                return invalid("the first value must be less than the second");
            }
        }
        let regexes = if op == NfdOp::InRegexp {
            values
                .iter()
                .map(|v| patterns.compile(v))
                .collect::<Result<_, _>>()?
        } else {
            Vec::new()
        };
        Ok(Self {
            op,
            values,
            version: version_type,
            regexes,
            numbers,
        })
    }

    /// NFD's evaluation on an element's value (`None`: the element is missing).
    pub fn holds(&self, value: Option<&str>) -> bool {
        let Some(v) = value else {
            return self.op == NfdOp::DoesNotExist;
        };
        let number = || {
            if self.version {
                version(v)
            } else {
                integer(v).map(|n| Num(n, 0, 0))
            }
        };
        let n = |i: usize| self.numbers.get(i).copied();
        match self.op {
            NfdOp::In => self.values.iter().any(|x| x == v),
            NfdOp::NotIn => !self.values.iter().any(|x| x == v),
            NfdOp::InRegexp => self.regexes.iter().any(|r| r.is_match(v)),
            NfdOp::Exists => true,
            NfdOp::DoesNotExist => false,
            NfdOp::IsTrue => v == "true",
            NfdOp::IsFalse => v == "false",
            NfdOp::Gt => number().zip(n(0)).is_some_and(|(x, a)| x > a),
            NfdOp::Ge => number().zip(n(0)).is_some_and(|(x, a)| x >= a),
            NfdOp::Lt => number().zip(n(0)).is_some_and(|(x, a)| x < a),
            NfdOp::Le => number().zip(n(0)).is_some_and(|(x, a)| x <= a),
            NfdOp::GtLt => number()
                .zip(n(0).zip(n(1)))
                .is_some_and(|(x, (a, b))| a < x && x < b),
            NfdOp::GeLe => number()
                .zip(n(0).zip(n(1)))
                .is_some_and(|(x, (a, b))| a <= x && x <= b),
        }
    }
}

/// An NFD `matchFeatures` term: one feature, expressions on its elements, optionally a
/// `matchName`; with its label translation when it has one.
#[derive(Clone, Debug)]
pub struct FeatureTerm {
    /// `<domain>.<feature>`, lowercased.
    pub feature: String,
    /// Element name → expression.
    pub expressions: Vec<(String, NfdExpr)>,
    /// `matchName`.
    pub name: Option<NfdExpr>,
    /// The same term as label requirements (`None`: no label says it).
    pub labels: Option<Rule>,
}

impl FeatureTerm {
    /// NFD's evaluation against a node's features: a missing feature fails every expression;
    /// flags answer only `Exists`/`DoesNotExist`; an instance feature holds when one instance
    /// satisfies every expression.
    pub fn holds(&self, features: &NodeFeatures) -> bool {
        let Some(feature) = features.get(&self.feature) else {
            return false;
        };
        fn all<'v>(
            expressions: &[(String, NfdExpr)],
            value: impl Fn(&str) -> Option<&'v str>,
        ) -> bool {
            expressions
                .iter()
                .all(|(el, e)| e.holds(value(el.as_str())))
        }
        match feature {
            Feature::Flags(names) => {
                let key_ok = |e: &NfdExpr, present: bool| match e.op {
                    NfdOp::Exists => present,
                    NfdOp::DoesNotExist => !present,
                    _ => false,
                };
                self.expressions
                    .iter()
                    .all(|(el, e)| key_ok(e, feature.has_flag(el)))
                    && self
                        .name
                        .as_ref()
                        .is_none_or(|e| names.iter().any(|f| e.holds(Some(f))))
            }
            Feature::Attributes(elements) => {
                all(&self.expressions, |el| feature.attribute(el))
                    && self
                        .name
                        .as_ref()
                        .is_none_or(|e| elements.iter().any(|(k, _)| e.holds(Some(k))))
            }
            Feature::Instances(instances) => {
                self.name.is_none()
                    && instances
                        .iter()
                        .any(|instance| all(&self.expressions, |el| attribute(instance, el)))
            }
        }
    }
}

/// A disjunctive normal form's size: (terms, most expressions in one term), saturating.
type Size = (usize, usize);

impl Rule {
    /// Whether the rule holds on `node`.
    pub fn eval(&self, node: &NodeFacts) -> Tri {
        match self {
            Self::All(rules) => Tri::combine(rules, node, Tri::False),
            Self::Any(rules) => Tri::combine(rules, node, Tri::True),
            Self::Label(req) => Tri::from_bool(req.holds(&node.labels)),
            Self::Feature(term) => {
                let features = node
                    .features
                    .as_deref()
                    .filter(|f| !f.is_truncated(&term.feature));
                match (features, &term.labels) {
                    (Some(features), _) => Tri::from_bool(term.holds(features)),
                    (None, Some(labels)) => labels.eval(node),
                    (None, None) => Tri::Unknown,
                }
            }
        }
    }

    /// The comparisons one evaluation on a node may make: every value and pattern of every
    /// requirement and expression (at least one each), saturating. A spec's cost times its
    /// candidate nodes is bounded ([`limits::EVALUATIONS`]).
    pub fn cost(&self) -> usize {
        fn values(n: usize) -> usize {
            n.max(1)
        }
        match self {
            Self::All(rules) | Self::Any(rules) => rules
                .iter()
                .fold(1usize, |sum, r| sum.saturating_add(r.cost())),
            Self::Label(req) => values(req.values.len()),
            Self::Feature(term) => term
                .expressions
                .iter()
                .map(|(_, e)| values(e.values.len()))
                .chain(term.name.iter().map(|e| values(e.values.len())))
                .fold(1usize, usize::saturating_add)
                .saturating_add(term.labels.as_ref().map_or(0, Rule::cost)),
        }
    }

    /// The label keys of its `InRegexp` requirements.
    fn regexp_keys<'r>(&'r self, keys: &mut BTreeSet<&'r str>) {
        match self {
            Self::All(rules) | Self::Any(rules) => {
                rules.iter().for_each(|r| r.regexp_keys(keys));
            }
            Self::Label(req) if req.op == LabelOp::InRegexp => {
                keys.insert(req.key.as_str());
            }
            Self::Label(_) => {}
            Self::Feature(term) => {
                if let Some(labels) = &term.labels {
                    labels.regexp_keys(keys);
                }
            }
        }
    }

    /// The size of the rule's DNF, or `None` when a part has no label form.
    fn size(&self) -> Option<Size> {
        match self {
            Self::All(rules) => rules.iter().try_fold((1usize, 0usize), |(t, e), r| {
                let (rt, re) = r.size()?;
                Some((t.saturating_mul(rt), e.saturating_add(re)))
            }),
            Self::Any(rules) => rules.iter().try_fold((0usize, 0usize), |(t, e), r| {
                let (rt, re) = r.size()?;
                Some((t.saturating_add(rt), e.max(re)))
            }),
            Self::Label(_) => Some((1, 1)),
            Self::Feature(term) => term.labels.as_ref()?.size(),
        }
    }

    /// The rule as node selector terms (ORed lists of ANDed requirements), or `None` when it has
    /// no label form or its form would exceed [`limits::TERMS`] terms or
    /// [`limits::TERM_EXPRESSIONS`] expressions per term (checked before anything is built).
    /// `nodes` give the values `InRegexp` may expand to.
    pub fn terms(&self, nodes: &[&NodeFacts]) -> Option<Vec<Vec<Value>>> {
        let (terms, expressions) = self.size()?;
        if terms == 0 || terms > limits::TERMS || expressions > limits::TERM_EXPRESSIONS {
            return None;
        }
        // The values of the labels an `InRegexp` may expand to, and no others.
        let mut keys = BTreeSet::new();
        self.regexp_keys(&mut keys);
        let mut observed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for key in keys {
            let values = nodes
                .iter()
                .filter_map(|n| n.labels.get(key))
                .cloned()
                .collect();
            observed.insert(key.to_owned(), values);
        }
        let out = self.dnf(&observed)?;
        (!out.is_empty()).then_some(out)
    }

    fn dnf(&self, observed: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<Vec<Value>>> {
        match self {
            Self::All(rules) => {
                let mut acc: Vec<Vec<Value>> = vec![Vec::new()];
                for rule in rules {
                    let part = rule.dnf(observed)?;
                    acc = acc
                        .iter()
                        .flat_map(|left| {
                            part.iter().map(move |right| {
                                let mut term = left.clone();
                                for e in right {
                                    if !term.contains(e) {
                                        term.push(e.clone());
                                    }
                                }
                                term
                            })
                        })
                        .collect();
                }
                Some(acc)
            }
            Self::Any(rules) => {
                let mut acc = Vec::new();
                for rule in rules {
                    for term in rule.dnf(observed)? {
                        if !acc.contains(&term) {
                            acc.push(term);
                        }
                    }
                }
                Some(acc)
            }
            Self::Label(req) => Some(vec![vec![req.requirements(observed)?]]),
            Self::Feature(term) => term.labels.as_ref()?.dnf(observed),
        }
    }
}
