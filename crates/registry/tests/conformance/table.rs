//! What a table replay reports, and helpers shared by the tables.

use std::path::Path;

use noe_credentials::{Credential, CredentialCandidate};
use serde_json::Value;

/// The outcome of one table.
#[derive(Debug)]
pub struct Tally {
    pub table: &'static str,
    pub passed: usize,
    /// `(case id, what differed)`.
    pub failed: Vec<(String, String)>,
}

impl Tally {
    pub fn new(table: &'static str) -> Self {
        Self {
            table,
            passed: 0,
            failed: Vec::new(),
        }
    }

    pub fn total(&self) -> usize {
        self.passed + self.failed.len()
    }

    /// Records one case: `Ok` passes, `Err(detail)` differs.
    pub fn check(&mut self, id: String, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => self.passed += 1,
            Err(detail) => self.failed.push((id, detail)),
        }
    }
}

/// The JSON document `registry/NAME`.
pub fn load(dir: &Path, name: &str) -> Value {
    let path = dir.join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The array `value[key]` (empty when absent).
pub fn cases<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value[key].as_array().map_or(&[], Vec::as_slice)
}

/// `value[key]` as a string (empty when absent).
pub fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key].as_str().unwrap_or_default()
}

/// A short, stable case id: `Test: input` (long inputs cut).
pub fn id(test: &str, input: &str) -> String {
    let shown: String = input.chars().take(60).collect();
    if shown.len() < input.len() {
        format!("{test}: {shown}... ({} chars)", input.chars().count())
    } else {
        format!("{test}: {shown}")
    }
}

/// `[{username, password}, ...]` of an expectation.
pub fn expected_basics(expect: &Value) -> Vec<(String, String)> {
    expect
        .as_array()
        .map(|list| {
            list.iter()
                .map(|e| {
                    (
                        text(e, "username").to_owned(),
                        text(e, "password").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The candidates as `(username, password)`; other credential kinds show as `<token>`.
pub fn basics(candidates: &[CredentialCandidate]) -> Vec<(String, String)> {
    candidates
        .iter()
        .map(|c| match &c.credential {
            Credential::Basic { username, password } => (username.clone(), password.clone()),
            _ => ("<token>".to_owned(), String::new()),
        })
        .collect()
}

/// Compares two values, describing the difference without secrets' context.
pub fn same<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, want {want:?}"))
    }
}
