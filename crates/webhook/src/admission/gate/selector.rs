//! Kubernetes label selectors in their string form (`kubectl -l`, apimachinery's
//! `labels.Parse`), for `--gate-namespace-selector` and `--gate-object-selector`: requirements
//! separated by commas, all ANDed; `key`, `!key`, `key=value` (or `==`), `key!=value`,
//! `key in (a,b)`, `key notin (a,b)`. As in Kubernetes, `!=` and `notin` also match objects
//! without the key, and the empty selector matches everything. The chart writes its
//! `matchLabels`/`matchExpressions` values in this form.

use noe_core::names::is_qualified_name;

/// The longest selector accepted.
pub const MAX_CHARS: usize = 4096;
/// Requirements in one selector at most.
pub const MAX_REQUIREMENTS: usize = 64;
/// Values of one `in`/`notin` requirement at most.
pub const MAX_VALUES: usize = 64;

/// A selector that cannot be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectorError {
    #[error("the selector is longer than {MAX_CHARS} characters")]
    TooLong,
    #[error("more than {MAX_REQUIREMENTS} requirements")]
    TooManyRequirements,
    #[error("more than {MAX_VALUES} values in the requirement on {0:?}")]
    TooManyValues(String),
    #[error("{0:?} is not a label key")]
    Key(String),
    #[error("{0:?} is not a label value")]
    Value(String),
    #[error("cannot read the requirement {0:?}")]
    Requirement(String),
}

/// How a requirement compares a label.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Operator {
    Exists,
    DoesNotExist,
    In(Vec<String>),
    NotIn(Vec<String>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Requirement {
    key: String,
    operator: Operator,
}

/// A parsed label selector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl std::str::FromStr for Selector {
    type Err = SelectorError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse(text)
    }
}

impl Selector {
    /// Whether it matches everything (no requirement).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether the labels `get` answers meet every requirement.
    pub fn matches<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| {
            let value = get(&r.key);
            match &r.operator {
                Operator::Exists => value.is_some(),
                Operator::DoesNotExist => value.is_none(),
                Operator::In(values) => value.is_some_and(|v| values.iter().any(|w| w == v)),
                Operator::NotIn(values) => !value.is_some_and(|v| values.iter().any(|w| w == v)),
            }
        })
    }

    /// Whether a JSON `metadata.labels` object (absent or null: no labels) matches.
    pub fn matches_json(&self, labels: &serde_json::Value) -> bool {
        self.matches(|key| labels.get(key).and_then(serde_json::Value::as_str))
    }
}

/// Splits on the commas outside parentheses.
fn split(text: &str) -> Result<Vec<&str>, SelectorError> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0u8, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' if depth == 0 => depth = 1,
            ')' if depth == 1 => depth = 0,
            '(' | ')' => return Err(SelectorError::Requirement(text.to_owned())),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i.saturating_add(1);
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorError::Requirement(text.to_owned()));
    }
    parts.push(&text[start..]);
    Ok(parts)
}

/// Parses a selector (see the module's documentation).
pub fn parse(text: &str) -> Result<Selector, SelectorError> {
    if text.len() > MAX_CHARS {
        return Err(SelectorError::TooLong);
    }
    let text = text.trim();
    if text.is_empty() {
        return Ok(Selector::default());
    }
    let parts = split(text)?;
    if parts.len() > MAX_REQUIREMENTS {
        return Err(SelectorError::TooManyRequirements);
    }
    let requirements = parts
        .into_iter()
        .map(requirement)
        .collect::<Result<_, _>>()?;
    Ok(Selector { requirements })
}

fn requirement(part: &str) -> Result<Requirement, SelectorError> {
    let part = part.trim();
    let bad = || SelectorError::Requirement(part.to_owned());
    let (key, operator) = if let Some(key) = part.strip_prefix('!') {
        (key.trim(), Operator::DoesNotExist)
    } else if let Some((key, value)) = part.split_once("!=") {
        (key.trim(), Operator::NotIn(vec![value_of(value)?]))
    } else if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
        (key.trim(), Operator::In(vec![value_of(value)?]))
    } else if let Some(open) = part.find('(') {
        let head = part.get(..open).ok_or_else(bad)?.trim_end();
        let list = part
            .get(open.saturating_add(1)..)
            .and_then(|rest| rest.strip_suffix(')'))
            .ok_or_else(bad)?;
        let (key, word) = head.rsplit_once(char::is_whitespace).ok_or_else(bad)?;
        let values: Vec<String> = list.split(',').map(value_of).collect::<Result<_, _>>()?;
        if values.len() > MAX_VALUES {
            return Err(SelectorError::TooManyValues(key.trim().to_owned()));
        }
        match word {
            "in" => (key.trim(), Operator::In(values)),
            "notin" => (key.trim(), Operator::NotIn(values)),
            _ => return Err(bad()),
        }
    } else {
        (part, Operator::Exists)
    };
    if !is_label_key(key) {
        return Err(SelectorError::Key(key.to_owned()));
    }
    Ok(Requirement {
        key: key.to_owned(),
        operator,
    })
}

fn value_of(text: &str) -> Result<String, SelectorError> {
    let value = text.trim();
    if value.is_empty() || is_qualified_name(value, 63) {
        Ok(value.to_owned())
    } else {
        Err(SelectorError::Value(value.to_owned()))
    }
}

/// `[prefix/]name`: a DNS subdomain prefix (at most 253) and a name (at most 63).
fn is_label_key(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => {
            is_qualified_name(name, 63)
                && prefix.len() <= 253
                && prefix.split('.').all(|label| {
                    is_qualified_name(label, 63)
                        && !label.bytes().any(|b| b == b'_' || b.is_ascii_uppercase())
                })
        }
        None => is_qualified_name(key, 63),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_match_as_kubernetes_matches_them() {
        let labels = json!({"team": "shop", "tier": "web", "example.com/gated": "yes"});
        // (selector, matches the labels above, matches no labels)
        let table = [
            ("", true, true),
            ("team", true, false),
            ("!team", false, true),
            ("!absent", true, true),
            ("team=shop", true, false),
            ("team==shop", true, false),
            ("team=other", false, false),
            ("team!=other", true, true),
            ("team!=shop", false, true),
            ("team in (shop,bank)", true, false),
            ("team in (bank)", false, false),
            ("team notin (bank, ops)", true, true),
            ("team notin (shop)", false, true),
            ("example.com/gated=yes", true, false),
            ("team=shop, tier in (web), !absent", true, false),
            ("team=shop,tier=db", false, false),
            ("empty=", false, false),
        ];
        for (text, with, without) in table {
            let selector: Selector = text.parse().unwrap();
            assert_eq!(selector.matches_json(&labels), with, "{text}");
            assert_eq!(
                selector.matches_json(&serde_json::Value::Null),
                without,
                "{text}"
            );
        }
    }

    #[test]
    fn what_is_not_a_selector_is_refused() {
        let table = [
            "team in (a",
            "team in a)",
            "team between (a,b)",
            "-team",
            "team=a b",
            "Example.com/x=y",
            "a/b/c",
            "team in ((a))",
            ",",
        ];
        for text in table {
            assert!(parse(text).is_err(), "{text}");
        }
        assert_eq!(
            parse(&"a=b,".repeat(MAX_REQUIREMENTS.saturating_add(1))),
            Err(SelectorError::TooManyRequirements)
        );
        assert_eq!(parse(&"a".repeat(5000)), Err(SelectorError::TooLong));
    }
}
