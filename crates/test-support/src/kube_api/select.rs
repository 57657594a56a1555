//! Field and label selectors of lists and watches, as the apiserver reads them: comma-separated
//! requirements, all of which must hold.
//!
//! - fields: `metadata.name`, `metadata.namespace`, `spec.nodeName`, `status.phase` with `=`,
//!   `==` or `!=` (anything else is a `400`, like the apiserver's "field label not supported");
//! - labels: `key=value`, `key==value`, `key!=value`, `key`, `!key`, `key in (a,b)`,
//!   `key notin (a,b)`.

use super::store::{Key, Stored};

/// A field the scripted server can select on.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Field {
    Name,
    Namespace,
    NodeName,
    Phase,
}

#[derive(Clone, Debug, PartialEq)]
enum Op {
    Equals(String),
    NotEquals(String),
    Exists,
    NotExists,
    In(Vec<String>),
    NotIn(Vec<String>),
}

impl Op {
    fn admits(&self, value: Option<&str>) -> bool {
        match self {
            Self::Equals(wanted) => value == Some(wanted.as_str()),
            Self::NotEquals(unwanted) => value != Some(unwanted.as_str()),
            Self::Exists => value.is_some(),
            Self::NotExists => value.is_none(),
            Self::In(values) => value.is_some_and(|v| values.iter().any(|w| w == v)),
            Self::NotIn(values) => value.is_none_or(|v| values.iter().all(|w| w != v)),
        }
    }
}

/// What a list or watch selects.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Selection {
    fields: Vec<(Field, Op)>,
    labels: Vec<(String, Op)>,
}

impl Selection {
    /// From the `fieldSelector` and `labelSelector` query parameters; `Err` for a `400`.
    pub(crate) fn parse(fields: Option<&str>, labels: Option<&str>) -> Result<Self, String> {
        let mut selection = Self::default();
        for requirement in split(fields.unwrap_or_default()) {
            selection.fields.push(field(requirement)?);
        }
        for requirement in split(labels.unwrap_or_default()) {
            selection.labels.push(label(requirement)?);
        }
        Ok(selection)
    }

    pub(crate) fn matches(&self, key: &Key, stored: &Stored) -> bool {
        self.fields.iter().all(|(field, op)| {
            let value = match field {
                Field::Name => key.1.as_str(),
                Field::Namespace => key.0.as_str(),
                Field::NodeName => stored.node_name.as_str(),
                Field::Phase => stored.phase.as_str(),
            };
            op.admits(Some(value))
        }) && self
            .labels
            .iter()
            .all(|(key, op)| op.admits(stored.labels.get(key).map(String::as_str)))
    }
}

/// Splits at the commas outside parentheses.
fn split(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth = depth.saturating_add(1),
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(text.get(start..i).unwrap_or_default());
                start = i.saturating_add(1);
            }
            _ => {}
        }
    }
    parts.push(text.get(start..).unwrap_or_default());
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

fn equality(requirement: &str) -> Option<(&str, Op)> {
    if let Some((key, value)) = requirement.split_once("!=") {
        return Some((key.trim(), Op::NotEquals(value.trim().to_owned())));
    }
    if let Some((key, value)) = requirement.split_once("==") {
        return Some((key.trim(), Op::Equals(value.trim().to_owned())));
    }
    let (key, value) = requirement.split_once('=')?;
    Some((key.trim(), Op::Equals(value.trim().to_owned())))
}

fn field(requirement: &str) -> Result<(Field, Op), String> {
    let (key, op) = equality(requirement)
        .ok_or_else(|| format!("invalid field selector requirement {requirement:?}"))?;
    let field = match key {
        "metadata.name" => Field::Name,
        "metadata.namespace" => Field::Namespace,
        "spec.nodeName" => Field::NodeName,
        "status.phase" => Field::Phase,
        other => return Err(format!("field label not supported: {other}")),
    };
    Ok((field, op))
}

fn set(key: &str, values: &str) -> Result<Vec<String>, String> {
    let values = values
        .trim()
        .strip_prefix('(')
        .and_then(|v| v.strip_suffix(')'))
        .ok_or_else(|| format!("invalid label selector: {key} needs a (list)"))?;
    Ok(values
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect())
}

fn label(requirement: &str) -> Result<(String, Op), String> {
    if let Some(key) = requirement.strip_prefix('!') {
        return Ok((key.trim().to_owned(), Op::NotExists));
    }
    if let Some((key, values)) = requirement.split_once(" notin ") {
        return Ok((key.trim().to_owned(), Op::NotIn(set(key, values)?)));
    }
    if let Some((key, values)) = requirement.split_once(" in ") {
        return Ok((key.trim().to_owned(), Op::In(set(key, values)?)));
    }
    match equality(requirement) {
        Some((key, op)) => Ok((key.to_owned(), op)),
        None if !requirement.contains([' ', '(', ')']) => Ok((requirement.to_owned(), Op::Exists)),
        None => Err(format!("invalid label selector {requirement:?}")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn stored(labels: &[(&str, &str)], phase: &str, node: &str) -> Stored {
        Stored {
            json: bytes::Bytes::new(),
            node_name: node.to_owned(),
            phase: phase.to_owned(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn selects_like_the_apiserver() {
        let key = ("shop".to_owned(), "web".to_owned());
        let gated = stored(&[("gate", "gated"), ("app", "web")], "Pending", "");
        let running = stored(&[("app", "web")], "Running", "n1");
        let table: &[(&str, &str, bool, bool)] = &[
            ("", "", true, true),
            ("status.phase=Pending", "", true, false),
            ("status.phase!=Pending", "", false, true),
            ("status.phase=Pending,spec.nodeName=", "", true, false),
            ("spec.nodeName!=", "", false, true),
            ("metadata.namespace=shop,metadata.name==web", "", true, true),
            ("", "gate=gated", true, false),
            ("", "gate", true, false),
            ("", "!gate", false, true),
            ("", "gate!=gated", false, true),
            ("", "app in (api, web),gate notin (x)", true, true),
            ("status.phase=Pending", "gate=gated,app=web", true, false),
        ];
        for (fields, labels, on_gated, on_running) in table {
            let selection = Selection::parse(Some(fields), Some(labels)).unwrap();
            assert_eq!(
                selection.matches(&key, &gated),
                *on_gated,
                "{fields} {labels}"
            );
            assert_eq!(
                selection.matches(&key, &running),
                *on_running,
                "{fields} {labels}"
            );
        }
    }

    #[test]
    fn refuses_what_it_does_not_know() {
        assert!(Selection::parse(Some("spec.schedulerName=x"), None).is_err());
        assert!(Selection::parse(Some("status.phase"), None).is_err());
        assert!(Selection::parse(None, Some("app in x")).is_err());
    }
}
