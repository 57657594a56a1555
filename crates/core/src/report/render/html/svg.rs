//! The report's pictures as inline SVG (no script, no network): a stacked bar of ready,
//! blocked and unknown, and the readiness of each namespace as a chart. Every picture has a
//! text equivalent beside it (the figures, a table), and every colour a word.

use std::fmt::Write as _;

use super::super::escape::push_html;
use crate::report::{Counts, Tally};

/// Namespaces drawn in the chart; the others are summed in one last row (every namespace is in
/// the table below the chart).
pub const MAX_CHART_NAMESPACES: usize = 25;
/// Characters of a namespace shown in the chart (the whole name is its title and in the table).
const LABEL_CHARS: usize = 30;

/// `parts` as widths out of `scale` that add up to `scale` (largest remainders, a part that is
/// not zero at least 1), all zero when the parts are.
pub fn widths(parts: [u128; 3], scale: u32) -> [u32; 3] {
    // Far below u128::MAX / scale, so nothing below saturates.
    let parts = if parts.iter().any(|p| *p > 1 << 96) {
        parts.map(|p| p >> 32)
    } else {
        parts
    };
    let total: u128 = parts.iter().fold(0u128, |a, b| a.saturating_add(*b));
    if total == 0 {
        return [0; 3];
    }
    let scale128 = u128::from(scale);
    let mut out = [0u32; 3];
    let mut remainders = [(0u128, 0usize); 3];
    let mut used = 0u32;
    for (i, part) in parts.iter().enumerate() {
        let scaled = part.saturating_mul(scale128);
        let whole = u32::try_from(scaled / total).unwrap_or(scale);
        out[i] = whole;
        used = used.saturating_add(whole);
        remainders[i] = (scaled % total, i);
    }
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, i) in remainders {
        if used >= scale {
            break;
        }
        if parts[i] > 0 {
            out[i] = out[i].saturating_add(1);
            used = used.saturating_add(1);
        }
    }
    // A part that is not zero stays visible: one unit, taken from the widest.
    for i in 0..3 {
        if parts[i] > 0 && out[i] == 0 {
            let widest = (0..3).max_by_key(|&j| out[j]).unwrap_or(0);
            if out[widest] > 1 {
                out[widest] -= 1;
                out[i] = 1;
            }
        }
    }
    out
}

/// A stacked bar of `parts` (ready, blocked, unknown), `label` its accessible name.
pub fn bar(out: &mut String, parts: [u128; 3], label: &str) {
    let [ready, blocked, unknown] = widths(parts, 1000);
    out.push_str(
        "<svg class=\"bar\" viewBox=\"0 0 1000 10\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"",
    );
    push_html(out, label);
    out.push_str("\">");
    let mut x = 0u32;
    for (class, width) in [("ready", ready), ("blocked", blocked), ("unknown", unknown)] {
        if width > 0 {
            let _ = write!(
                out,
                "<rect class=\"{class}-fill\" x=\"{x}\" y=\"0\" width=\"{width}\" height=\"10\"/>"
            );
            x = x.saturating_add(width);
        }
    }
    out.push_str("</svg>");
}

fn counts(counts: &Counts) -> [u128; 3] {
    [
        u128::from(counts.ready),
        u128::from(counts.blocked),
        u128::from(counts.unknown),
    ]
}

/// The readiness of each namespace (its workloads ready, blocked, unknown) as horizontal
/// stacked bars, the namespaces with the most workloads first; `id` names its title.
pub fn namespaces<'a>(
    out: &mut String,
    id: &str,
    arch: &str,
    namespaces: impl Iterator<Item = (&'a String, &'a Tally)>,
) {
    let mut rows: Vec<(String, Counts)> = namespaces
        .map(|(name, tally)| (name.clone(), tally.workloads))
        .collect();
    rows.sort_by(|a, b| b.1.all().cmp(&a.1.all()).then_with(|| a.0.cmp(&b.0)));
    if rows.len() > MAX_CHART_NAMESPACES {
        let rest = rows.split_off(MAX_CHART_NAMESPACES.saturating_sub(1));
        let mut sum = Counts::default();
        for (_, c) in &rest {
            sum.ready = sum.ready.saturating_add(c.ready);
            sum.blocked = sum.blocked.saturating_add(c.blocked);
            sum.unknown = sum.unknown.saturating_add(c.unknown);
        }
        rows.push((format!("{} other namespaces", rest.len()), sum));
    }
    const ROW: u32 = 26;
    const LABEL: u32 = 230;
    const BAR: u32 = 520;
    const WIDTH: u32 = LABEL + BAR + 270;
    let count = u32::try_from(rows.len()).unwrap_or(u32::MAX);
    let height = count.saturating_mul(ROW).saturating_add(6);
    let _ = write!(
        out,
        "<svg class=\"chart\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-labelledby=\"{id}\"><title id=\"{id}\">"
    );
    push_html(
        out,
        &format!("Workloads ready, blocked and unknown for {arch}, per namespace"),
    );
    out.push_str("</title>");
    for (i, (name, c)) in rows.iter().enumerate() {
        let y = u32::try_from(i)
            .unwrap_or(u32::MAX)
            .saturating_mul(ROW)
            .saturating_add(3);
        let shown: String = if name.chars().count() > LABEL_CHARS {
            let head: String = name.chars().take(LABEL_CHARS.saturating_sub(1)).collect();
            format!("{head}…")
        } else {
            name.clone()
        };
        let _ = write!(out, "<g><title>");
        push_html(
            out,
            &format!(
                "{name}: {} ready, {} blocked, {} unknown",
                c.ready, c.blocked, c.unknown
            ),
        );
        let _ = write!(
            out,
            "</title><text x=\"{}\" y=\"{}\" text-anchor=\"end\">",
            LABEL - 10,
            y + 15
        );
        push_html(out, &shown);
        out.push_str("</text>");
        let [ready, blocked, unknown] = widths(counts(c), BAR);
        let mut x = LABEL;
        let _ = write!(
            out,
            "<rect x=\"{LABEL}\" y=\"{}\" width=\"{BAR}\" height=\"18\" rx=\"3\" fill=\"#f6f8fa\"/>",
            y + 2
        );
        for (class, width) in [("ready", ready), ("blocked", blocked), ("unknown", unknown)] {
            if width > 0 {
                let _ = write!(
                    out,
                    "<rect class=\"{class}-fill\" x=\"{x}\" y=\"{}\" width=\"{width}\" height=\"18\"/>",
                    y + 2
                );
                x = x.saturating_add(width);
            }
        }
        let _ = write!(
            out,
            "<text class=\"dim\" x=\"{}\" y=\"{}\">{} of {} ready",
            LABEL + BAR + 10,
            y + 15,
            c.ready,
            c.all()
        );
        if c.blocked > 0 {
            let _ = write!(out, ", {} blocked", c.blocked);
        }
        if c.unknown > 0 {
            let _ = write!(out, ", {} unknown", c.unknown);
        }
        out.push_str("</text></g>");
    }
    out.push_str("</svg>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_add_up_to_the_scale() {
        assert_eq!(widths([0, 0, 0], 1000), [0, 0, 0]);
        assert_eq!(widths([1, 1, 1], 1000), [334, 333, 333]);
        assert_eq!(widths([1, 0, 0], 1000), [1000, 0, 0]);
        assert_eq!(widths([2, 1, 0], 3), [2, 1, 0]);
        assert_eq!(widths([999_999, 1, 0], 1000), [999, 1, 0]);
        assert_eq!(
            widths([u128::MAX, u128::MAX, 0], 1000).iter().sum::<u32>(),
            1000
        );
    }

    #[test]
    fn a_hostile_namespace_is_text_in_the_chart() {
        let tally = Tally::default();
        let name = "<script>alert(1)</script>".to_owned();
        let mut out = String::new();
        namespaces(&mut out, "t", "arm64", [(&name, &tally)].into_iter());
        assert!(!out.contains("<script>"), "{out}");
        assert!(out.contains("&lt;script&gt;"), "{out}");
    }
}
