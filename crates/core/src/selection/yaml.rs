//! YAML from a registry read into JSON, bounded while it is read: nesting at most
//! [`limits::DEPTH`] levels, at most [`limits::NODES`] nodes (an alias counts the nodes it
//! repeats), one document. The document is read as parser events (saphyr-parser), so a spec
//! nested deeper than the bound fails at that depth, after as many events, whatever follows.
//!
//! Scalars stay text (a spec's values are compared as text; `null`, `~` and an empty plain
//! scalar are null); tags are ignored; a mapping key is a scalar, given once.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_json::{Map, Value};

use super::{limits, SelectionError};

/// A collection being read.
enum Open {
    Sequence {
        items: Vec<Value>,
        anchor: usize,
        nodes: usize,
        depth: usize,
    },
    Mapping {
        entries: Map<String, Value>,
        key: Option<String>,
        anchor: usize,
        nodes: usize,
        depth: usize,
    },
}

/// A node read whole: its value, how many nodes it holds, how deep it is.
struct Read {
    value: Value,
    nodes: usize,
    depth: usize,
}

struct Reader {
    stack: Vec<Open>,
    anchors: HashMap<usize, Read>,
    nodes: usize,
    root: Option<Value>,
}

fn parse_error(why: impl std::fmt::Display) -> SelectionError {
    SelectionError::Parse(why.to_string())
}

fn nesting() -> SelectionError {
    SelectionError::TooMany {
        what: "levels of nesting",
        limit: limits::DEPTH,
    }
}

impl Reader {
    fn count(&mut self, nodes: usize) -> Result<(), SelectionError> {
        self.nodes = self.nodes.saturating_add(nodes);
        if self.nodes > limits::NODES {
            return Err(SelectionError::TooMany {
                what: "YAML nodes (aliases count what they repeat)",
                limit: limits::NODES,
            });
        }
        Ok(())
    }

    fn open(&mut self, mapping: bool, anchor: usize) -> Result<(), SelectionError> {
        if self.stack.len() >= limits::DEPTH {
            return Err(nesting());
        }
        self.count(1)?;
        self.stack.push(if mapping {
            Open::Mapping {
                entries: Map::new(),
                key: None,
                anchor,
                nodes: 1,
                depth: 1,
            }
        } else {
            Open::Sequence {
                items: Vec::new(),
                anchor,
                nodes: 1,
                depth: 1,
            }
        });
        Ok(())
    }

    fn close(&mut self) -> Result<(), SelectionError> {
        let (value, anchor, nodes, depth) = match self.stack.pop() {
            Some(Open::Sequence {
                items,
                anchor,
                nodes,
                depth,
            }) => (Value::Array(items), anchor, nodes, depth),
            Some(Open::Mapping {
                entries,
                key: None,
                anchor,
                nodes,
                depth,
            }) => (Value::Object(entries), anchor, nodes, depth),
            Some(Open::Mapping { key: Some(_), .. }) | None => {
                return Err(parse_error("unbalanced YAML events"))
            }
        };
        self.place(
            Read {
                value,
                nodes,
                depth,
            },
            anchor,
        )
    }

    /// Puts a node read whole into its parent (or makes it the document), remembering it under
    /// its anchor.
    fn place(&mut self, read: Read, anchor: usize) -> Result<(), SelectionError> {
        if anchor != 0 {
            self.anchors.insert(
                anchor,
                Read {
                    value: read.value.clone(),
                    ..read
                },
            );
        }
        match self.stack.last_mut() {
            None => {
                if self.root.is_some() {
                    return Err(parse_error("more than one YAML document"));
                }
                self.root = Some(read.value);
            }
            Some(Open::Sequence {
                items,
                nodes,
                depth,
                ..
            }) => {
                items.push(read.value);
                *nodes = nodes.saturating_add(read.nodes);
                *depth = (*depth).max(read.depth.saturating_add(1));
            }
            Some(Open::Mapping {
                entries,
                key,
                nodes,
                depth,
                ..
            }) => {
                *nodes = nodes.saturating_add(read.nodes);
                *depth = (*depth).max(read.depth.saturating_add(1));
                match key.take() {
                    Some(k) => {
                        if entries.insert(k.clone(), read.value).is_some() {
                            return Err(parse_error(format!("the key {k:?} is given twice")));
                        }
                    }
                    None => match read.value {
                        Value::String(k) => *key = Some(k),
                        Value::Null => *key = Some(String::new()),
                        _ => return Err(parse_error("a mapping key is not a scalar")),
                    },
                }
            }
        }
        Ok(())
    }

    fn scalar(
        &mut self,
        text: &str,
        style: ScalarStyle,
        anchor: usize,
    ) -> Result<(), SelectionError> {
        self.count(1)?;
        let value =
            if style == ScalarStyle::Plain && matches!(text, "" | "~" | "null" | "Null" | "NULL") {
                Value::Null
            } else {
                Value::String(text.to_owned())
            };
        self.place(
            Read {
                value,
                nodes: 1,
                depth: 0,
            },
            anchor,
        )
    }

    fn alias(&mut self, anchor: usize) -> Result<(), SelectionError> {
        let Some((nodes, depth)) = self.anchors.get(&anchor).map(|r| (r.nodes, r.depth)) else {
            return Err(parse_error("an alias names no anchor"));
        };
        if self.stack.len().saturating_add(depth) > limits::DEPTH {
            return Err(nesting());
        }
        self.count(nodes)?;
        let value = self
            .anchors
            .get(&anchor)
            .map(|r| r.value.clone())
            .unwrap_or_default();
        self.place(
            Read {
                value,
                nodes,
                depth,
            },
            0,
        )
    }
}

/// The one YAML (or JSON) document of `bytes` as JSON, bounded while it is read.
pub fn read(bytes: &[u8]) -> Result<Value, SelectionError> {
    let text = std::str::from_utf8(bytes).map_err(|_| parse_error("the YAML is not UTF-8"))?;
    let mut reader = Reader {
        stack: Vec::new(),
        anchors: HashMap::new(),
        nodes: 0,
        root: None,
    };
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| {
            // The scanner's own bound on flow nesting (255 levels), met while it reads ahead.
            if e.info() == "recursion limit exceeded" {
                nesting()
            } else {
                parse_error(e)
            }
        })?;
        let at = |e: SelectionError| match e {
            SelectionError::Parse(why) => SelectionError::Parse(format!(
                "{why} at line {} column {}",
                span.start.line(),
                span.start.col().saturating_add(1)
            )),
            other => other,
        };
        match event {
            Event::Scalar(text, style, anchor, _) => reader.scalar(&text, style, anchor),
            Event::SequenceStart(anchor, _) => reader.open(false, anchor),
            Event::MappingStart(anchor, _) => reader.open(true, anchor),
            Event::SequenceEnd | Event::MappingEnd => reader.close(),
            Event::Alias(anchor) => reader.alias(anchor),
            Event::DocumentStart(_) if reader.root.is_some() => {
                Err(parse_error("more than one YAML document"))
            }
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart(_)
            | Event::DocumentEnd => Ok(()),
        }
        .map_err(at)?;
    }
    reader
        .root
        .ok_or_else(|| parse_error("the YAML holds no document"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn yaml_and_json_read_as_text() {
        let doc = "a: 1\nb: [x, 'y', \"z\", true, ~, 2.50]\nc: {d: null}\n\"e\": |\n  block\n";
        assert_eq!(
            read(doc.as_bytes()).unwrap(),
            json!({"a": "1", "b": ["x", "y", "z", "true", null, "2.50"], "c": {"d": null}, "e": "block\n"})
        );
        assert_eq!(
            read(br#"{"a": [1, {"b": "c"}]}"#).unwrap(),
            json!({"a": ["1", {"b": "c"}]})
        );
    }

    #[test]
    fn depth_nodes_aliases_and_documents_are_bounded() {
        let deep = |n: usize| format!("a: {}{}", "[".repeat(n), "]".repeat(n));
        assert!(read(deep(limits::DEPTH - 1).as_bytes()).is_ok());
        assert!(matches!(
            read(deep(limits::DEPTH).as_bytes()),
            Err(SelectionError::TooMany {
                limit: limits::DEPTH,
                ..
            })
        ));
        let block: String = (0..=limits::DEPTH)
            .map(|i| format!("{}- \n", "  ".repeat(i)))
            .collect();
        assert!(matches!(
            read(block.as_bytes()),
            Err(SelectionError::TooMany {
                limit: limits::DEPTH,
                ..
            })
        ));
        // An alias repeats what it names: counted, and its depth added where it is used.
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            let prev = format!("*a{}", i - 1);
            bomb.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; 8].join(", ")));
        }
        assert!(matches!(
            read(bomb.as_bytes()),
            Err(SelectionError::TooMany {
                limit: limits::NODES,
                ..
            })
        ));
        assert_eq!(
            read(b"a: &x {b: [c]}\nd: *x\n").unwrap(),
            json!({"a": {"b": ["c"]}, "d": {"b": ["c"]}})
        );
        let nested = format!(
            "a: &x {}{}\nb: {}*x{}",
            "[".repeat(40),
            "]".repeat(40),
            "[".repeat(30),
            "]".repeat(30)
        );
        assert!(matches!(
            read(nested.as_bytes()),
            Err(SelectionError::TooMany {
                limit: limits::DEPTH,
                ..
            })
        ));
        assert!(read(b"a: 1\n---\nb: 2\n").is_err());
        assert!(read(b"a: 1\na: 2\n").is_err());
        assert!(read(b"[a]: 1\n").is_err());
        assert!(read(b"\xff").is_err());
        assert!(read(b"").is_err());
    }
}
