//! Strings from a cluster, a file or a registry are hostile in every rendering: each has its
//! own escape here, table-tested with the same hostile names.
//!
//! - [`printable`]: a terminal (control characters escaped, so no escape sequence runs).
//! - [`csv_field`]: a spreadsheet (RFC 4180 quoting, and a cell that a spreadsheet would read
//!   as a formula — starting with `=`, `+`, `-`, `@`, a tab or a carriage return — gets a
//!   leading `'`, as OWASP's CSV injection guidance says).
//! - [`markdown`]: a Markdown table cell or list line (HTML and the punctuation Markdown
//!   acts on inline escaped, `|` included, so a name adds neither a column, nor markup, nor a
//!   link).
//! - [`html`]: HTML text and attribute values (`&`, `<`, `>`, `"`, `'`).

use std::fmt::Write as _;

/// `text` with control characters escaped, so a cluster's strings cannot write to a terminal.
pub fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len().saturating_add(8));
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The characters that make a spreadsheet read a cell as a formula when they start it.
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// One CSV field: a leading `'` when a spreadsheet would read it as a formula, then quoted
/// (doubled quotes) when it holds a separator, a quote or a line break.
pub fn csv_field(out: &mut String, cell: &str) {
    let formula = cell.starts_with(FORMULA_STARTS);
    if formula || cell.contains([',', '"', '\n', '\r']) {
        out.push('"');
        if formula {
            out.push('\'');
        }
        for c in cell.chars() {
            if c == '"' {
                out.push('"');
            }
            out.push(c);
        }
        out.push('"');
    } else {
        out.push_str(cell);
    }
}

/// `text` for Markdown: control characters escaped ([`printable`]), `&`, `<` and `>` as HTML
/// entities (no tag reaches the renderer), and the punctuation Markdown acts on inline
/// (emphasis, code, links, images, strikethrough, table cells) behind a backslash.
pub fn markdown(text: &str) -> String {
    let text = printable(text);
    let mut out = String::with_capacity(text.len().saturating_add(8));
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// `text` for HTML text or a quoted attribute value.
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len().saturating_add(8));
    push_html(&mut out, text);
    out
}

/// Appends [`html`]`(text)` to `out`.
pub fn push_html(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // A control character would be shown as nothing: shown as its code instead.
            c if c.is_control() && c != '\n' && c != '\t' => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests;
